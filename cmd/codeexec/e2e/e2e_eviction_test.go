package e2e

import (
	"fmt"
	"strings"
	"testing"

	"github.com/codeexec/codeexec/cmd/codeexec/e2e/internal/harness"
)

// When every place for a sandbox is taken, the one stopped to make room is
// of the tenant holding the most, over its share: beta's one live sandbox
// keeps its thread and socket while alpha starts session after session.
// Before, the sandbox idle longest went, whoever's it was.
func TestE2EEvictionTakesFromTheTenantOverItsShare(t *testing.T) {
	t.Parallel()
	n := startNeighbours(t, nil, "--max-sessions", "3")
	harness.Code(t, n.beta, `
import socket, threading
srv = socket.socket()
srv.bind(("127.0.0.1", 0))
srv.listen(1)
ticker = threading.Event()
threading.Thread(target=ticker.wait, daemon=True).start()
print("held")`)
	m := alphaModern(t, n.base)
	for i := range 5 {
		if got := m.result(i+1, map[string]any{"code": fmt.Sprintf("print('alpha %d')", i)}); !strings.Contains(got, fmt.Sprintf("alpha %d", i)) {
			t.Fatalf("alpha's session %d: %q", i, harness.TailOf(got, 600))
		}
	}
	o := harness.RunPython(t, n.beta, map[string]any{"code": "import threading\nprint(srv.fileno() >= 0 and threading.active_count() > 1)"})
	if got := harness.Joined(o.Stdout()); got != "True" || strings.Contains(o.Text, "restored") {
		t.Errorf("beta's session after alpha started 5 sessions in 3 places: %q (%s); want its sandbox kept, socket and thread alive", got, harness.TailOf(o.Text, 400))
	}
}
