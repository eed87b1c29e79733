package harness

import (
	"testing"

	"github.com/codeexec/codeexec/services/testport"
)

// FreeAddr returns a loopback address for a server the test starts, kept
// for this test until it ends (see services/testport for why it is not a
// port the kernel picks).
func FreeAddr(t testing.TB) string {
	t.Helper()
	return testport.Addr(t)
}
