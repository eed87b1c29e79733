package main

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/codeexec/codeexec/memoryd"
	"github.com/codeexec/codeexec/services/flagenv"
)

// runMemorydCopy copies every record of one store into another: a bbolt
// file into PostgreSQL when moving past one machine, or back.
func runMemorydCopy(ctx context.Context, args []string, e env) error {
	fs := flagenv.New("memoryd copy", e.getenv)
	var opts memoryd.CopyOptions
	// The URLs come from flags (or the environment); like --store, one on
	// the command line must not carry a password.
	bindStoreURL(fs, &opts.From, "from", "source: a bbolt file (it may be in use) or a postgres:// URL", "CODEEXEC_COPY_FROM", e.getenv)
	bindStoreURL(fs, &opts.To, "to", "destination: a postgres:// URL or a bbolt file (not in use)", "CODEEXEC_COPY_TO", e.getenv)
	fs.String(&opts.PasswordFile, "store-password-file", "", "file holding the password of the PostgreSQL side; for two databases with different passwords use a PGPASSFILE", "CODEEXEC_STORE_PASSWORD_FILE")
	fs.Bool(&opts.Replace, "replace", false, "overwrite records that the destination holds with another content (default: keep them and list them)", "")
	fs.Duration(&opts.Wait, "store-wait", memoryd.DefaultStoreWait, "how long to wait for an unreachable database", "CODEEXEC_STORE_WAIT")
	if err := parse(fs, args, e); err != nil {
		return err
	}
	if fs.NArg() != 0 || opts.From == "" || opts.To == "" {
		fmt.Fprintln(e.stderr, "usage: codeexec memoryd copy --from FILE|postgres://… --to postgres://…|FILE [--replace]")
		return errUsage
	}
	opts.Version = version
	opts.Logger = slog.New(slog.NewTextHandler(e.stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	rep, err := memoryd.Copy(ctx, opts)
	fmt.Fprintf(e.stdout, "from %s to %s: %s", redactURL(opts.From), redactURL(opts.To), rep)
	return err
}
