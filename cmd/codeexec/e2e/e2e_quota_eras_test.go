package e2e

import (
	"strings"
	"testing"

	"github.com/codeexec/codeexec/cmd/codeexec/e2e/internal/harness"
)

// handleOf is the session handle a 2026-07-28 result's text names.
func handleOf(text string) string {
	_, rest, ok := strings.Cut(text, "session: ")
	if !ok {
		return ""
	}
	h, _, _ := strings.Cut(rest, " ")
	return h
}

// --quota-sessions counts a tenant's sessions in both protocol eras
// (issue 38, item 5): under 2026-07-28 a call without a session starts
// one, and one more than the quota is refused, saying which quota and how
// to free one; the session the tenant has goes on. Before, each such call
// got a new sandbox, whatever the quota.
func TestE2ESessionQuotaCountsModernSessions(t *testing.T) {
	t.Parallel()
	n := startNeighbours(t, nil, "--quota-sessions", "2")
	beta := newBystander(t, n.beta, "print('ok')")
	m := alphaModern(t, n.base)
	// alpha's MCP session (2025-06-18) holds one of its two.
	harness.Code(t, n.alpha, "x = 1")
	var first, refused string
	beta.alongside(t, "alpha's sessionless calls", func() {
		first = m.result(1, map[string]any{"code": "y = 2\nprint('first')"})
		for i := range 4 {
			refused = m.result(2+i, map[string]any{"code": "print('another')"})
		}
	})
	h := handleOf(first)
	if !strings.Contains(first, "first") || h == "" {
		t.Fatalf("alpha's first sessionless call: %q; want it run, with its session's handle", first)
	}
	if !strings.Contains(refused, "quota exceeded") || !strings.Contains(refused, "2 concurrent sessions") {
		t.Errorf("alpha's sessionless call past its quota of 2 sessions: %q; want it refused, naming the quota", harness.TailOf(refused, 600))
	}
	if got := m.result(9, map[string]any{"code": "print(y)", "session": h}); !strings.Contains(got, "2") || strings.Contains(got, "quota") {
		t.Errorf("continuing alpha's session by its handle: %q", got)
	}
	// Ending that session frees its place.
	m.result(10, map[string]any{"code": "runtime.end_session()", "session": h})
	if got := m.result(11, map[string]any{"code": "print('again')"}); !strings.Contains(got, "again") {
		t.Errorf("a sessionless call after alpha ended one of its sessions: %q", harness.TailOf(got, 600))
	}
}

