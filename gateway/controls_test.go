package gateway

import (
	"strings"
	"testing"
)

// TestRunControls: each run_python call tells sandboxd its tenant's tool
// call limit (--max-tool-calls, or the tenant's own) and that the gateway
// answers approval questions.
func TestRunControls(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		cfg    Config
		tenant string
		want   int32
	}{
		{"none", Config{}, "default", 0},
		{"everyone", Config{MaxToolCalls: 5}, "default", 5},
		{"this tenant", Config{MaxToolCalls: 5, TenantMaxToolCalls: map[string]int{"alice": 50}}, "alice", 50},
		{"another tenant", Config{MaxToolCalls: 5, TenantMaxToolCalls: map[string]int{"bob": 50}}, "alice", 5},
		{"unlimited for one", Config{MaxToolCalls: 5, TenantMaxToolCalls: map[string]int{"alice": 0}}, "alice", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.cfg.Tenant = tc.tenant
			g, f := newTestGateway(t, tc.cfg)
			call(t, connect(t, g), ToolName, map[string]any{"code": "x"})
			_, _, execs := f.snapshot()
			if len(execs) != 1 || execs[0].GetMaxToolCalls() != tc.want || !execs[0].GetAskApprovals() {
				t.Fatalf("Execute requests %v; want one with max_tool_calls %d and ask_approvals", execs, tc.want)
			}
		})
	}
	if err := (Config{MaxToolCalls: -1, TenantMaxToolCalls: map[string]int{"bob": -2}}).Validate(); err == nil ||
		!strings.Contains(err.Error(), "max tool calls is -1") || !strings.Contains(err.Error(), `max tool calls of tenant "bob" is -2`) {
		t.Errorf("negative limits: %v, want both named", err)
	}
}
