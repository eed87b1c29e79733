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
	conn, closeConn, err := c.db.connect(ctx, e)
	if err != nil {
		return err
	}
	defer closeConn()
	n, err := memoryd.BackupToFile(ctx, memoryv1.NewMemoryServiceClient(conn), args[0])
	if err != nil {
		return err
	}
	fmt.Fprintf(e.Stdout, "backed up %d bytes to %s\n", n, args[0])
	return nil
}
