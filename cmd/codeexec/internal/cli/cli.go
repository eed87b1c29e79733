// Package cli is what the commands of the codeexec binary share: the
// environment they run in, their flag parsing, and the flags and the
// connection of a command that calls a service.
package cli

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

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

// ErrUsage means the command line was wrong and what was wrong is already
// printed; the binary exits with status 2.
var ErrUsage = errors.New("usage")

// A Command is a command with flags, which it holds: Bind binds them, and
// Run runs the command once they are parsed. Run gets no arguments unless
// the command is a WithArgs.
type Command interface {
	Bind(fs *flagenv.Set, e Env)
	Run(ctx context.Context, args []string, e Env) error
}

// WithArgs is a Command that takes words after its flags (a FILE, an
// ADDR) and checks them in Run. Flagged refuses such words to any other
// command: Go's flag parsing stops at the first word that is not a flag,
// so the flags after a stray word would be dropped unseen.
type WithArgs interface {
	Command
	TakesArgs()
}

// Flagged runs a new Command for each command line, its flags on a set
// named name. The help that -h or --help asks for goes to stdout, and is
// no error. On ErrUsage the flag package has printed what was wrong, or
// Flagged what was left after the flags of a command that takes none.
func Flagged(name string, newCommand func() Command) func(context.Context, []string, Env) error {
	return func(ctx context.Context, args []string, e Env) error {
		c := newCommand()
		fs := flagenv.New(name, e.Getenv)
		c.Bind(fs, e)
		// The flag package writes help and errors to one output; which
		// it was is known only once Parse returns.
		var out bytes.Buffer
		fs.SetOutput(&out)
		err := fs.Parse(args)
		fs.SetOutput(e.Stderr)
		if errors.Is(err, flag.ErrHelp) {
			_, err = e.Stdout.Write(out.Bytes())
			return err
		}
		_, _ = e.Stderr.Write(out.Bytes())
		if err != nil {
			return ErrUsage
		}
		if _, ok := c.(WithArgs); !ok && fs.NArg() > 0 {
			fmt.Fprintf(e.Stderr, "codeexec %s: %s\n", name, strayArgs(fs, name, args))
			return ErrUsage
		}
		if err := fs.Err(); err != nil {
			return err
		}
		return c.Run(ctx, fs.Args(), e)
	}
}

// strayArgs says what is wrong with the words left after the flags of a
// command that takes none: the first one, the flags after it that went
// unread, and a bool flag before it given its value as a separate word.
func strayArgs(fs *flagenv.Set, name string, args []string) string {
	rest := fs.Args()
	msg := fmt.Sprintf("unexpected argument %q: %s takes flags only", rest[0], name)
	var unread []string
	for _, a := range rest[1:] {
		if len(a) > 1 && a[0] == '-' {
			flagName, _, _ := strings.Cut(a, "=")
			unread = append(unread, flagName)
		}
	}
	if len(unread) > 0 {
		msg += fmt.Sprintf(", and the flags after it (%s) were not read: flags go before any other word", strings.Join(unread, " "))
	}
	if i := len(args) - len(rest) - 1; i >= 0 && args[i] != "--" {
		if f := fs.Lookup(strings.TrimLeft(args[i], "-")); f != nil {
			if b, ok := f.Value.(interface{ IsBoolFlag() bool }); ok && b.IsBoolFlag() {
				msg += fmt.Sprintf("; a bool flag takes its value after \"=\": %s=%s", args[i], rest[0])
			}
		}
	}
	return msg + fmt.Sprintf(` (see "codeexec %s -h")`, name)
}

// BindGRPCTLS binds the mutual TLS files of the split services' gRPC.
func BindGRPCTLS(fs *flagenv.Set, c *grpctls.Config) {
	fs.Path(&c.CertFile, "grpc-tls-cert", "gRPC between services: this process's certificate (PEM), served and shown to peers", "CODEEXEC_GRPC_TLS_CERT")
	fs.Path(&c.KeyFile, "grpc-tls-key", "gRPC between services: the certificate's private key (PEM)", "CODEEXEC_GRPC_TLS_KEY")
	fs.Path(&c.CAFile, "grpc-tls-ca", "gRPC between services: the CA bundle (PEM) that peers' certificates must chain to", "CODEEXEC_GRPC_TLS_CA")
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
