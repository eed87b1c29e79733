// Package cli is what the commands of the codeexec binary share: the
// environment they run in, their flag parsing, and the flags and the
// connection of a command that calls a service.
package cli

import (
	"context"
	"errors"
	"io"

	"google.golang.org/grpc"

	"github.com/codeexec/codeexec/services/dial"
	"github.com/codeexec/codeexec/services/flagenv"
	"github.com/codeexec/codeexec/services/grpctls"
)

// Env is what a command runs with besides its arguments.
type Env struct {
	Getenv         func(string) string
	Stdin          io.Reader
	Stdout, Stderr io.Writer
	// Version is the binary's, for reports and the databases it writes.
	Version string
}

// ErrUsage means the usage text was already printed.
var ErrUsage = errors.New("usage")

// A Command is a command with flags, which it holds: Bind binds them, and
// Run runs the command once they are parsed, with the arguments after
// them.
type Command interface {
	Bind(fs *flagenv.Set, e Env)
	Run(ctx context.Context, args []string, e Env) error
}

// Flagged runs a new Command for each command line, its flags on a set
// named name. On ErrUsage the flag package has printed what was wrong, or
// the help that -h asked for.
func Flagged(name string, newCommand func() Command) func(context.Context, []string, Env) error {
	return func(ctx context.Context, args []string, e Env) error {
		c := newCommand()
		fs := flagenv.New(name, e.Getenv)
		c.Bind(fs, e)
		fs.SetOutput(e.Stderr)
		if err := fs.Parse(args); err != nil {
			return ErrUsage
		}
		if err := fs.Err(); err != nil {
			return err
		}
		return c.Run(ctx, fs.Args(), e)
	}
}

// BindGRPCTLS binds the mutual TLS files of the split services' gRPC.
func BindGRPCTLS(fs *flagenv.Set, c *grpctls.Config) {
	fs.String(&c.CertFile, "grpc-tls-cert", "", "gRPC between services: this process's certificate (PEM), served and shown to peers", "CODEEXEC_GRPC_TLS_CERT")
	fs.String(&c.KeyFile, "grpc-tls-key", "", "gRPC between services: the certificate's private key (PEM)", "CODEEXEC_GRPC_TLS_KEY")
	fs.String(&c.CAFile, "grpc-tls-ca", "", "gRPC between services: the CA bundle (PEM) that peers' certificates must chain to", "CODEEXEC_GRPC_TLS_CA")
}

// DialService connects a client command (health, backup, import) to a
// service, with TLS when tlsc names files.
func DialService(addr string, tlsc grpctls.Config) (*grpc.ClientConn, error) {
	creds, err := tlsc.Load()
	if err != nil {
		return nil, err
	}
	return dial.New(addr, nil, creds.DialOptions()...)
}
