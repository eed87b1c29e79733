// Package testenv sorts the tests into tiers. The fast tier, `go test
// -short ./...`, runs on any machine with Go and python3: no bubblewrap,
// cgroups or root, no PostgreSQL, no container engine, no Node.js or npm
// packages, and nothing that takes minutes. A test that needs one of those
// calls the matching function first; under -short it is skipped, saying
// why, and otherwise it runs (and fails, naming what is missing, on a
// machine that lacks it).
package testenv

import (
	"flag"
	"fmt"
	"os"
	"testing"
)

// Sandboxes marks a test that starts real sandboxes (bubblewrap, the fork
// server, cgroups; usually as root).
func Sandboxes(tb testing.TB) { skipShort(tb, "real sandboxes (bubblewrap, cgroups, root)") }

// Postgres marks a test that starts a PostgreSQL server.
func Postgres(tb testing.TB) { skipShort(tb, "a PostgreSQL server") }

// Node marks a test that starts MCP servers from npm under Node.js.
func Node(tb testing.TB) { skipShort(tb, "Node.js and the npm MCP servers") }

// Slow marks a test that takes many seconds of CPU (an evaluation over a
// whole query set, a scale run).
func Slow(tb testing.TB) { skipShort(tb, "many seconds of CPU") }

func skipShort(tb testing.TB, what string) {
	tb.Helper()
	if testing.Short() {
		tb.Skipf("-short: this test needs %s; the full tier (go test ./...) runs it", what)
	}
}

// ShortMain is for a TestMain whose whole package needs what the fast
// tier leaves out (the end-to-end packages build the binary and start
// sandboxes before any test runs): under -short it says so and exits 0
// without running a test. Otherwise it returns, and TestMain goes on.
func ShortMain(what string) {
	if !flag.Parsed() {
		flag.Parse()
	}
	if testing.Short() {
		fmt.Fprintf(os.Stderr, "-short: skipping the package, which needs %s; the full tier (go test ./...) runs it\n", what)
		os.Exit(0)
	}
}
