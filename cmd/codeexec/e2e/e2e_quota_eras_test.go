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

// A tenant's memory and checkpoints are capped (issue 38, item 5): a save
// past the memory quota fails in the sandbox naming the quota, a
// checkpoint past the checkpoint quota is not stored and the result says
// why, each is counted by its metric, and the other tenant saves and
// checkpoints as before. Before, one tenant could store without bound.
func TestE2EMemoryAndCheckpointQuotasPerTenant(t *testing.T) {
	t.Parallel()
	n := startNeighbours(t, nil, "--quota-memory-keys", "3", "--quota-checkpoint-bytes", "6m")
	beta := newBystander(t, n.beta, "save_memory('k', 1)\nbig = bytes(range(256)) * 8192\nprint('ok')")
	var keys harness.Outcome
	var second string
	beta.alongside(t, "alpha at its quotas", func() {
		keys = harness.Code(t, n.alpha, `
for k in "abc":
    save_memory(k, k)
try:
    save_memory("d", "d")
except Exception as e:
    print(type(e).__name__, e)
save_memory("a", "overwritten")
print("ok")`)
		// Two sessions of 4 MiB of random state: the second's
		// checkpoint would take alpha past 6 MiB.
		harness.Code(t, n.alpha, "import os\nblob = os.urandom(4 << 20)")
		other := tokenClient(t, n.base, "alpha-token")
		harness.Code(t, other, "import os\nblob = os.urandom(4 << 20)")
		// The checkpoint is taken after the result: the next call says
		// what became of it.
		second = harness.Code(t, other, "print(len(blob))").Text
	})
	if got := harness.Joined(keys.Stdout()); !strings.Contains(got, "FailedPreconditionError") || !strings.Contains(got, "holds 3 keys") || !strings.Contains(got, "--quota-memory-keys") || !strings.HasSuffix(got, "ok") {
		t.Errorf("alpha's fourth key: %q; want it refused naming the memory quota, and overwrites to work", got)
	}
	if !strings.Contains(second, "not durable") || !strings.Contains(second, "--quota-checkpoint-bytes") {
		t.Errorf("alpha's second 4 MiB session: %q; want its checkpoint refused, naming the checkpoint quota", harness.TailOf(second, 600))
	}
	for _, q := range []string{"memory_keys", "checkpoint_bytes"} {
		if v := harness.Metric(t, n.base, `codeexec_memoryd_quota_refusals_total{quota="`+q+`"}`); v < 1 {
			t.Errorf("codeexec_memoryd_quota_refusals_total{quota=%q} = %v; want the refusal counted", q, v)
		}
	}
}
