// Command codeexec runs the codeexec suite: an MCP server whose one tool,
// run_python, executes code in persistent, locked-down Python sandboxes.
// One binary runs any set of services; see `codeexec help`.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

// version is set at build time with -ldflags "-X main.version=…".
var version = "dev"

func main() {
	// An MCP client may close our stderr (or stdout) when it goes away. A
	// log line written after that must fail quietly, not kill the process
	// with SIGPIPE before it has stopped its sandboxes and servers.
	signal.Ignore(syscall.SIGPIPE)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Getenv, os.Stdin, os.Stdout, os.Stderr)
	stop()
	if err != nil && !errors.Is(err, errUsage) {
		fmt.Fprintln(os.Stderr, "codeexec:", err)
	}
	if err != nil {
		os.Exit(1)
	}
}

// errUsage means the usage text was already printed.
var errUsage = errors.New("usage")

const usageText = `codeexec — MCP code execution mode: run_python in persistent, isolated sandboxes

Usage:
  codeexec serve [flags]         MCP server on stdio (or --http ADDR) with every service in-process
  codeexec gateway [flags]       the MCP gateway alone, using a remote sandboxd (--sandbox ADDR)
  codeexec sandboxd [flags]      the sandbox service alone, on gRPC (--listen ADDR)
  codeexec discoveryd [flags]    the MCP discovery service alone, on gRPC
  codeexec memoryd [flags]       the memory service alone, on gRPC, with a bbolt file or PostgreSQL (--store)
  codeexec memoryd backup FILE   copy the memory database (the local one, or --memory ADDR's) to FILE, a bbolt file
  codeexec memoryd copy --from SRC --to DST   copy every record between a bbolt file and PostgreSQL, keeping revisions
  codeexec import-upstream [DIR] import an upstream state dir (default ~/MCPs) into the memory database
  codeexec bench [flags]         measure latency and throughput; prints a table
  codeexec health ADDR           exit 0 when the gRPC service at ADDR is SERVING
  codeexec token add TENANT      make a bearer token for --tokens-file (hash on stdout)
  codeexec version               print the version

Run "codeexec <command> -h" for the flags of a command. Every flag can also be
set through the environment variable named in its help.
`

// run is main without the process: tests call it directly.
func run(ctx context.Context, args []string, getenv func(string) string, stdin io.Reader, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, usageText)
		return errUsage
	}
	cmd, rest := args[0], args[1:]
	switch cmd {
	case "serve", "run":
		// "run" is accepted because upstream's documented command line is
		// `mcp-server-code-execution-mode run`.
		return runServe(ctx, rest, getenv, stdin, stdout, stderr)
	case "gateway":
		return runGateway(ctx, rest, getenv, stdin, stdout, stderr)
	case "sandboxd":
		return runSandboxd(ctx, rest, getenv, stderr)
	case "discoveryd":
		return runDiscoveryd(ctx, rest, getenv, stderr)
	case "memoryd":
		return runMemoryd(ctx, rest, getenv, stdout, stderr)
	case "import-upstream":
		return runImportUpstream(ctx, rest, getenv, stdout, stderr)
	case "bench":
		return runBench(ctx, rest, getenv, stdout, stderr)
	case "health":
		return runHealth(ctx, rest, getenv, stdout, stderr)
	case "token":
		return runToken(rest, stdin, stdout, stderr)
	case "version", "--version":
		fmt.Fprintln(stdout, "codeexec", version)
		return nil
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usageText)
		return nil
	}
	fmt.Fprintf(stderr, "unknown command %q\n\n%s", cmd, usageText)
	return errUsage
}
