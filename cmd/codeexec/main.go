// Command codeexec runs the codeexec suite: an MCP server whose one tool,
// run_python, executes code in persistent, locked-down Python sandboxes.
// One binary runs any set of services; see `codeexec help`.
package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/debug"
	"slices"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/codeexec/codeexec/cmd/codeexec/internal/cli"
	"github.com/codeexec/codeexec/cmd/codeexec/internal/health"
	"github.com/codeexec/codeexec/cmd/codeexec/internal/memdb"
)

// version is set at build time with -ldflags "-X main.version=…"; left
// empty, buildVersion reads the build info.
var version = ""

// buildVersion is version, or the module version and VCS revision that
// the Go toolchain recorded in the binary ("v1.2.0", "(devel) 3f2a9c1d0b7e
// modified"), or "dev" when the binary has no build info.
func buildVersion() string {
	if version != "" {
		return version
	}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "dev"
	}
	parts := []string{cmp.Or(bi.Main.Version, "(devel)")}
	for _, s := range bi.Settings {
		switch {
		case s.Key == "vcs.revision":
			parts = append(parts, s.Value)
		case s.Key == "vcs.modified" && s.Value == "true":
			parts = append(parts, "modified")
		}
	}
	return strings.Join(parts, " ")
}

func main() {
	// An MCP client may close our stderr (or stdout) when it goes away. A
	// log line written after that must fail quietly, not kill the process
	// with SIGPIPE before it has stopped its sandboxes and servers.
	signal.Ignore(syscall.SIGPIPE)
	outOfJobControl()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Getenv, os.Stdin, os.Stdout, os.Stderr)
	stop()
	switch {
	case errors.Is(err, cli.ErrUsage):
		// As the flag package and most tools do: a wrong command line is
		// status 2, a failure of the command status 1.
		os.Exit(2)
	case err != nil:
		fmt.Fprintln(os.Stderr, "codeexec:", err)
		os.Exit(1)
	}
}

// outOfJobControl keeps a terminal's job control from stopping codeexec
// when a client runs it over pipes. Ctrl-Z in a terminal sends SIGTSTP to
// the whole foreground process group: the client there and the codeexec
// it started. That client is meant to stop; this codeexec may own the
// database that every other client on the machine reaches through it, and
// stopped, it would leave them without memory and, once their leases
// lapse, without their live sandboxes. So SIGTSTP is caught and dropped
// (a caught signal, unlike an ignored one, is not inherited by the
// processes codeexec starts), and SIGTTOU is ignored, so that a log line
// written to a terminal from the background does not stop it either.
// With stdin a terminal, someone runs codeexec by hand, and Ctrl-Z is
// theirs to use.
func outOfJobControl() {
	if _, err := unix.IoctlGetTermios(int(os.Stdin.Fd()), unix.TCGETS); err == nil {
		return
	}
	signal.Notify(make(chan os.Signal, 1), syscall.SIGTSTP)
	signal.Ignore(syscall.SIGTTOU)
}

// A command is one word of the command line.
type command struct {
	names []string    // the first one is listed; the others are aliases
	usage [][2]string // lines of `codeexec help`: synopsis, what it does
	run   func(ctx context.Context, args []string, e cli.Env) error
}

// commands is the binary: the targets alone, serve (every target in one
// process), and the tools around them.
var commands = []command{
	// "run" too: upstream's documented command line is
	// `mcp-server-code-execution-mode run`.
	flagCommand(func() cli.Command { return &serveCommand{} }, [2]string{"serve [flags]", "MCP server on stdio (or --http ADDR) with every service in-process"}).alias("run"),
	targetCommand(gatewayTarget, [2]string{"gateway [flags]", "the MCP gateway alone, using a remote sandboxd (--sandbox ADDR)"}),
	targetCommand(sandboxdTarget, [2]string{"sandboxd [flags]", "the sandbox service alone, on gRPC (--listen ADDR)"}),
	targetCommand(discoverydTarget, [2]string{"discoveryd [flags]", "the MCP discovery service alone, on gRPC"}),
	targetCommand(memorydTarget,
		[2]string{"memoryd [flags]", "the memory service alone, on gRPC, with a bbolt file or PostgreSQL (--store)"},
		[2]string{"memoryd backup FILE", "copy the memory database (the local one, or --memory ADDR's) to FILE, a bbolt file"},
		[2]string{"memoryd copy --from SRC --to DST", "copy every record between a bbolt file and PostgreSQL, keeping revisions"}),
	flagCommand(func() cli.Command { return &memdb.ImportUpstreamCommand{} }, [2]string{"import-upstream [DIR]", "import an upstream state dir (default ~/MCPs) into the memory database"}),
	newCommand(runEnv,
		[2]string{"env build [NAME]", "build a Python environment for the sandboxes (Debian trixie, Python 3.13, the data stack)"},
		[2]string{"env list", "list the environments built"},
		[2]string{"env rm NAME", "remove an environment"}),
	flagCommand(func() cli.Command { return &benchCommand{} }, [2]string{"bench [flags]", "measure latency and throughput; prints a table"}),
	flagCommand(func() cli.Command { return &health.Command{} }, [2]string{"health ADDR", "exit 0 when the gRPC service at ADDR is SERVING"}),
	newCommand(runToken, [2]string{"token add TENANT", "make a bearer token for --tokens-file (hash on stdout)"}),
	newCommand(runVersion, [2]string{"version", "print the version"}).alias("--version"),
}

// newCommand is a command named by the first word of its first usage line.
func newCommand(run func(context.Context, []string, cli.Env) error, usage ...[2]string) command {
	name, _, _ := strings.Cut(usage[0][0], " ")
	return command{names: []string{name}, usage: usage, run: run}
}

// flagCommand is newCommand for a command with flags, which a new
// cli.Command holds on every run.
func flagCommand(newRun func() cli.Command, usage ...[2]string) command {
	c := newCommand(nil, usage...)
	c.run = cli.Flagged(c.names[0], newRun)
	return c
}

// alias adds another name.
func (c command) alias(name string) command {
	c.names = append(c.names, name)
	return c
}

func runVersion(_ context.Context, args []string, e cli.Env) error {
	if len(args) > 0 {
		fmt.Fprintf(e.Stderr, "codeexec version: unexpected argument %q: version takes none\n", args[0])
		return cli.ErrUsage
	}
	fmt.Fprintln(e.Stdout, "codeexec", e.Version)
	return nil
}

// usage is `codeexec help`.
func usage() string {
	var b strings.Builder
	b.WriteString("codeexec — MCP code execution mode: run_python in persistent, isolated sandboxes\n\nUsage:\n")
	for _, c := range commands {
		for _, u := range c.usage {
			// A column at 22, and a longer synopsis three spaces from its text.
			w := 22
			if len(u[0]) >= w {
				w = len(u[0]) + 3
			}
			fmt.Fprintf(&b, "  codeexec %-*s%s\n", w, u[0], u[1])
		}
	}
	b.WriteString("\nRun \"codeexec <command> -h\" for the flags of a command. Every flag can also be\nset through the environment variable named in its help.\n")
	return b.String()
}

// run is main without the process: tests call it directly.
func run(ctx context.Context, args []string, getenv func(string) string, stdin io.Reader, stdout, stderr io.Writer) error {
	e := cli.Env{Getenv: getenv, Stdin: stdin, Stdout: stdout, Stderr: stderr, Version: buildVersion()}
	if len(args) == 0 {
		fmt.Fprint(stderr, usage())
		return cli.ErrUsage
	}
	name, rest := args[0], args[1:]
	for _, c := range commands {
		if slices.Contains(c.names, name) {
			return c.run(ctx, rest, e)
		}
	}
	if name == "help" || name == "-h" || name == "--help" {
		fmt.Fprint(stdout, usage())
		return nil
	}
	fmt.Fprintf(stderr, "unknown command %q\n\n%s", name, usage())
	return cli.ErrUsage
}
