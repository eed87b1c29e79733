package memdb

import (
	"context"
	"fmt"

	"github.com/codeexec/codeexec/cmd/codeexec/internal/cli"
	"github.com/codeexec/codeexec/memoryd"
	memoryv1 "github.com/codeexec/codeexec/proto/gen/codeexec/memory/v1"
	"github.com/codeexec/codeexec/services/flagenv"
)

// BackupCommand copies a memoryd's database to a file: a remote one
// with --memory, else the local state dir's, while every codeexec that
// shares it keeps running.
type BackupCommand struct{ db database }

// Bind binds the flags of `codeexec memoryd backup`.
func (c *BackupCommand) Bind(fs *flagenv.Set, e cli.Env) {
	c.db.bind(fs, e.Getenv, "a memoryd's address (host:port or unix:/path); empty backs up the local database")
}

// TakesArgs says that backup takes its FILE after the flags.
func (c *BackupCommand) TakesArgs() {}

// Run runs `codeexec memoryd backup` with the arguments after the flags.
func (c *BackupCommand) Run(ctx context.Context, args []string, e cli.Env) error {
	if len(args) != 1 {
		fmt.Fprintln(e.Stderr, "usage: codeexec memoryd backup [--memory ADDR | --state-dir DIR | --db FILE | --store postgres://…] FILE")
		return cli.ErrUsage
	}
	// The target is checked before the database is opened, so that a
	// refused backup has opened, created and written nothing.
	live, err := c.db.existingFile()
	if err != nil {
		return err
	}
	target, err := memoryd.CheckBackupTarget(args[0], live)
	if err != nil {
		return err
	}
	conn, closeConn, err := c.db.connect(ctx, e)
	if err != nil {
		return err
	}
	defer closeConn()
	n, err := target.Write(ctx, memoryv1.NewMemoryServiceClient(conn))
	if err != nil {
		return err
	}
	out := e.Stdout
	if target.Streamed() {
		out = e.Stderr // the backup may be going to stdout
	}
	fmt.Fprintf(out, "backed up %d bytes to %s\n", n, args[0])
	return nil
}
