package memdb

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/codeexec/codeexec/cmd/codeexec/internal/cli"
	"github.com/codeexec/codeexec/memoryd"
	"github.com/codeexec/codeexec/services/flagenv"
)

// CopyCommand copies every record of one store into another: a
// bbolt file into PostgreSQL when moving past one machine, or back.
type CopyCommand struct{ opts memoryd.CopyOptions }

// Bind binds the flags of `codeexec memoryd copy`.
func (c *CopyCommand) Bind(fs *flagenv.Set, e cli.Env) {
	o := &c.opts
	// The URLs come from flags (or the environment); like --store, one on
	// the command line must not carry a password.
	bindStoreURL(fs, &o.From, "from", "source: a bbolt file (it may be in use) or a postgres:// URL", "CODEEXEC_COPY_FROM", e.Getenv)
	bindStoreURL(fs, &o.To, "to", "destination: a postgres:// URL or a bbolt file (not in use)", "CODEEXEC_COPY_TO", e.Getenv)
	fs.Path(&o.PasswordFile, "store-password-file", "file holding the password of the PostgreSQL side; for two databases with different passwords use a PGPASSFILE", "CODEEXEC_STORE_PASSWORD_FILE")
	fs.Bool(&o.Replace, "replace", false, "overwrite records that the destination holds with another content (default: keep them and list them)", "")
	fs.Duration(&o.Wait, "store-wait", memoryd.DefaultStoreWait, "how long to wait for an unreachable database", "CODEEXEC_STORE_WAIT")
}

// Run runs `codeexec memoryd copy` with the arguments after the flags.
func (c *CopyCommand) Run(ctx context.Context, args []string, e cli.Env) error {
	opts := c.opts
	if len(args) != 0 || opts.From == "" || opts.To == "" {
		fmt.Fprintln(e.Stderr, "usage: codeexec memoryd copy --from FILE|postgres://… --to postgres://…|FILE [--replace]")
		return cli.ErrUsage
	}
	// A bbolt file, unlike a URL, is a path: ~ is HOME, as for every
	// other path setting (flagenv.Path).
	for _, side := range []struct {
		loc       *string
		flag, env string
	}{{&opts.From, "from", "CODEEXEC_COPY_FROM"}, {&opts.To, "to", "CODEEXEC_COPY_TO"}} {
		if isStoreURL(*side.loc) {
			continue
		}
		abs, err := flagenv.AbsPath(*side.loc, e.Getenv("HOME"), "--"+side.flag,
			fmt.Sprintf("set --%s (%s) to an absolute path or a postgres:// URL", side.flag, side.env))
		if err != nil {
			return err
		}
		*side.loc = abs
	}
	opts.Version = e.Version
	opts.Logger = slog.New(slog.NewTextHandler(e.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	rep, err := memoryd.Copy(ctx, opts)
	if err != nil {
		// A count would read as success; the error says how far it got.
		return err
	}
	fmt.Fprintf(e.Stdout, "from %s to %s: %s", redactURL(opts.From), redactURL(opts.To), rep)
	return nil
}
