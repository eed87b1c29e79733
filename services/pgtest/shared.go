package pgtest

import (
	"sync"
	"testing"

	"github.com/codeexec/codeexec/services/testenv"
)

// shared is the one server of a test binary that Shared hands out.
var shared struct {
	sync.Mutex
	main bool
	s    *Server
	err  error
}

// Main runs a package's tests (call it from TestMain) and stops the
// server that Shared started, if any.
func Main(m *testing.M) int {
	shared.Lock()
	shared.main = true
	shared.Unlock()
	code := m.Run()
	shared.Lock()
	defer shared.Unlock()
	if shared.s != nil {
		shared.s.remove()
	}
	return code
}

// Shared returns the test binary's one server, starting it on first use.
// Tests share it through databases of their own (NewDatabase); a test
// that kills or stops a server starts its own with Start.
func Shared(tb testing.TB) *Server {
	tb.Helper()
	testenv.Postgres(tb)
	shared.Lock()
	defer shared.Unlock()
	if !shared.main {
		tb.Fatal("pgtest: Shared needs the package's TestMain to call pgtest.Main, which stops the server at the end")
	}
	if shared.s == nil && shared.err == nil {
		shared.s, shared.err = start(Options{})
	}
	if shared.err != nil {
		tb.Fatal(shared.err)
	}
	return shared.s
}

// NewDatabase makes an empty database on the shared server and returns
// its URL.
func NewDatabase(tb testing.TB) string {
	tb.Helper()
	return Shared(tb).CreateDatabase(tb)
}
