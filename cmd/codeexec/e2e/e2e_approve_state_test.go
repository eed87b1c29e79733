package e2e

import (
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

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

// sessionOfState is the session handle a run_python requestState names
// (its body is signed, not hidden).
func sessionOfState(t *testing.T, state string) string {
	t.Helper()
	body, _, _ := strings.Cut(strings.TrimPrefix(state, "rp1."), ".")
	raw, err := base64.RawURLEncoding.DecodeString(body)
	var st struct {
		Session string `json:"s"`
	}
	if err != nil || json.Unmarshal(raw, &st) != nil || st.Session == "" {
		t.Fatalf("the state %q names no session: %v", state, err)
	}
	return st.Session
}

// TestE2EApproveWaitIsALongRun: under 2026-07-28 the retry that accepts
// follows the run on as any long run does, yielding at --yield and
// continued with code=""; and a question nobody answers waits no longer
// than the run's timeout: the run times out, the call is not made, and
// the late answer is refused.
func TestE2EApproveWaitIsALongRun(t *testing.T) {
	t.Parallel()
	base := harness.StartHTTP(t, map[string]string{"MCP_SERVERS_CONFIG": memoryConfig(t), "CODEEXEC_APPROVE": "memory.create_*", "CODEEXEC_YIELD": "2s"})
	url := base + "/mcp"
	elicit := map[string]any{"elicitation": map[string]any{"form": map[string]any{}}}
	slow := createCode("a")
	slow["code"] = slow["code"].(string) + "import time\ntime.sleep(5)\nprint('after the wait')\n"
	first := modernToolCall(t, url, "run_python", slow, elicit, nil)
	state, _ := first.Result["requestState"].(string)
	reqs, _ := first.Result["inputRequests"].(map[string]any)
	var key string
	for k := range reqs {
		key = k
	}
	accept := map[string]any{key: map[string]any{"action": "accept", "content": map[string]any{}}}
	retry := modernToolCall(t, url, "run_python", slow, elicit, map[string]any{"inputResponses": accept, "requestState": state})
	sc, stdout, _ := structuredOf(t, retry.Result)
	if sc["status"] != "running" || !strings.Contains(stdout, "created a") {
		t.Fatalf("the retry: %v, want it to yield, running, after the call was made", retry.Result)
	}
	wait := map[string]any{"code": "", "session": sessionOfState(t, state)}
	var out []string
	var a modernAnswer
	for range 30 {
		a = modernToolCall(t, url, "run_python", wait, elicit, nil)
		sc, stdout, _ = structuredOf(t, a.Result)
		out = append(out, stdout)
		if sc["status"] != "running" {
			break
		}
	}
	// A run that ended well has no status in compact output.
	if sc["status"] != nil || a.Result["isError"] == true || !strings.Contains(strings.Join(out, "\n"), "after the wait") {
		t.Errorf("continuing the run: %v (output %q), want it to end with success", a.Result, out)
	}

	short := createCode("late")
	short["timeout"] = 3
	asked := modernToolCall(t, url, "run_python", short, elicit, nil)
	state, _ = asked.Result["requestState"].(string)
	wait = map[string]any{"code": "", "session": sessionOfState(t, state)}
	var last modernAnswer
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		// While the question waits, each wait is asked it again, at once.
		last = modernToolCall(t, url, "run_python", wait, elicit, nil)
		if last.Result["resultType"] != "input_required" {
			if sc, _, _ := structuredOf(t, last.Result); sc["status"] != "running" {
				break
			}
		}
	}
	if sc, _, _ := structuredOf(t, last.Result); sc["status"] != "timeout" {
		t.Errorf("a question nobody answered: %v, want the run timed out", last.Result)
	}
	for k := range asked.Result["inputRequests"].(map[string]any) {
		key = k
	}
	accept = map[string]any{key: map[string]any{"action": "accept", "content": map[string]any{}}}
	if late := modernToolCall(t, url, "run_python", short, elicit, map[string]any{"inputResponses": accept, "requestState": state}); late.Code != -32602 {
		t.Errorf("the answer after the timeout: %v %v %q, want -32602", late.Result, late.Code, late.Error)
	}
	graph := modernToolCall(t, url, "run_python", graphCode, elicit, nil)
	if _, stdout, _ := structuredOf(t, graph.Result); !strings.Contains(stdout, "graph ['a']") {
		t.Errorf("graph %q, want a alone", stdout)
	}
}

// TestE2EApproveRetryThroughAnotherProcess: two codeexec processes on one
// state dir share the key of the requestState (request-state.key, made
// by the first), so a question asked through one is answered through the
// other, which delivers the answer to the run in the first's sandbox.
func TestE2EApproveRetryThroughAnotherProcess(t *testing.T) {
	t.Parallel()
	extra := harness.StateEnv(t.TempDir())
	extra["MCP_SERVERS_CONFIG"], extra["CODEEXEC_APPROVE"] = memoryConfig(t), "memory.create_*"
	one, two := harness.StartHTTP(t, extra)+"/mcp", harness.StartHTTP(t, extra)+"/mcp"
	elicit := map[string]any{"elicitation": map[string]any{"form": map[string]any{}}}
	asked := modernToolCall(t, one, "run_python", createCode("a"), elicit, nil)
	state, _ := asked.Result["requestState"].(string)
	var key string
	for k := range asked.Result["inputRequests"].(map[string]any) {
		key = k
	}
	accept := map[string]any{key: map[string]any{"action": "accept", "content": map[string]any{}}}
	done := modernToolCall(t, two, "run_python", createCode("a"), elicit, map[string]any{"inputResponses": accept, "requestState": state})
	if _, stdout, _ := structuredOf(t, done.Result); !strings.Contains(stdout, "created a") {
		t.Errorf("the retry through the other process: %v %v %q, want the call made", done.Result, done.Code, done.Error)
	}
	if b, err := os.ReadFile(filepath.Join(extra["MCP_BRIDGE_STATE_DIR"], "request-state.key")); err != nil || len(strings.TrimSpace(string(b))) != 64 {
		t.Errorf("the state dir's key: %q, %v; want 64 hex digits", b, err)
	}
}
