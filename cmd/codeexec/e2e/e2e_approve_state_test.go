package e2e

import (
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"

	"github.com/codeexec/codeexec/cmd/codeexec/e2e/internal/harness"
)

// TestE2EApproveStateIsBound: run_python's requestState under 2026-07-28
// is signed for the tenant it was given to. Raw JSON-RPC over HTTP, two
// tenants: alice's run asks about create_entities; her state altered,
// made up from what she knows (the session and the question, unsigned),
// or carried by bob, is refused with -32602 and answers nothing; her own
// retry with the state as given runs the call. call_tool's state is
// bound the same way.
func TestE2EApproveStateIsBound(t *testing.T) {
	t.Parallel()
	base := harness.StartAuthHTTP(t, map[string]string{
		"CODEEXEC_TOKENS_FILE": harness.TokensFile(t, map[string]string{"alice-token": "alice", "bob-token": "bob"}),
		"MCP_SERVERS_CONFIG":   memoryConfig(t), "CODEEXEC_APPROVE": "memory.create_*",
	})
	url := base + "/mcp"
	elicit := map[string]any{"elicitation": map[string]any{"form": map[string]any{}}}
	first := modernToolCallAs(t, url, "alice-token", "run_python", createCode("a"), elicit, nil)
	reqs, _ := first.Result["inputRequests"].(map[string]any)
	state, _ := first.Result["requestState"].(string)
	if first.Result["resultType"] != "input_required" || len(reqs) != 1 || state == "" {
		t.Fatalf("alice's run: %v %q, want one question and a requestState", first.Result, first.Error)
	}
	var key string
	for k := range reqs {
		key = k
	}
	body, _, _ := strings.Cut(strings.TrimPrefix(state, "rp1."), ".")
	raw, err := base64.RawURLEncoding.DecodeString(body)
	var st struct {
		Session string `json:"s"`
	}
	if err != nil || json.Unmarshal(raw, &st) != nil || st.Session == "" {
		t.Fatalf("the state %q does not carry its session in the clear: %v", state, err)
	}
	madeUp, _ := json.Marshal(map[string]any{"s": st.Session, "q": []string{key}})
	accept := map[string]any{key: map[string]any{"action": "accept", "content": map[string]any{}}}
	for _, c := range []struct{ name, token, state string }{
		{"altered", "alice-token", state + "x"},
		{"made up, unsigned", "alice-token", "rp1." + base64.RawURLEncoding.EncodeToString(madeUp)},
		{"made up, signed by nobody", "alice-token", "rp1." + base64.RawURLEncoding.EncodeToString(madeUp) + "." + strings.Repeat("A", 43)},
		{"bob's use of alice's", "bob-token", state},
	} {
		a := modernToolCallAs(t, url, c.token, "run_python", createCode("a"), elicit, map[string]any{"inputResponses": accept, "requestState": c.state})
		if a.Code != -32602 || !strings.Contains(a.Error, "requestState is not one that run_python gave this caller") {
			t.Errorf("%s: %v %v %q, want -32602 refusing the state", c.name, a.Result, a.Code, a.Error)
		}
	}
	done := modernToolCallAs(t, url, "alice-token", "run_python", createCode("a"), elicit, map[string]any{"inputResponses": accept, "requestState": state})
	if _, stdout, stderr := structuredOf(t, done.Result); !strings.Contains(stdout, "created a") {
		t.Errorf("alice's retry printed %q (stderr %q; %v %q), want the call made", stdout, stderr, done.Result, done.Error)
	}

	args := map[string]any{"server": "memory", "tool": "create_entities", "arguments": map[string]any{
		"entities": []any{map[string]any{"name": "p", "entityType": "t", "observations": []any{}}}}}
	both := url + "?tools=both"
	asked := modernToolCallAs(t, both, "alice-token", "call_tool", args, elicit, nil)
	cstate, _ := asked.Result["requestState"].(string)
	answer := map[string]any{"approve": map[string]any{"action": "accept", "content": map[string]any{}}}
	if bob := modernToolCallAs(t, both, "bob-token", "call_tool", args, elicit, map[string]any{"inputResponses": answer, "requestState": cstate}); bob.Code != -32602 ||
		!strings.Contains(bob.Error, "requestState does not belong to this call_tool call") {
		t.Errorf("bob's use of alice's call_tool state: %v %v %q, want -32602", bob.Result, bob.Code, bob.Error)
	}
	if mine := modernToolCallAs(t, both, "alice-token", "call_tool", args, elicit, map[string]any{"inputResponses": answer, "requestState": cstate}); mine.Error != "" || mine.Result["isError"] == true {
		t.Errorf("alice's call_tool retry: %v %q, want the call made", mine.Result, mine.Error)
	}
}
