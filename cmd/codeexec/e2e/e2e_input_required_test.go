package e2e

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/codeexec/codeexec/cmd/codeexec/e2e/internal/harness"
)

// modernAnswer is one answer to a raw 2026-07-28 tools/call.
type modernAnswer struct {
	Result map[string]any
	Code   float64
	Error  string
}

// modernToolCall sends one tools/call under 2026-07-28 as raw JSON-RPC
// over HTTP, with the client's capabilities and, for a retry, extra
// params (inputResponses, requestState).
func modernToolCall(t *testing.T, url, name string, args, caps, extra map[string]any) modernAnswer {
	t.Helper()
	return modernToolCallAs(t, url, "", name, args, caps, extra)
}

// modernToolCallAs is modernToolCall with a bearer token, when not "".
func modernToolCallAs(t *testing.T, url, token, name string, args, caps, extra map[string]any) modernAnswer {
	t.Helper()
	params := map[string]any{"name": name, "arguments": args, "_meta": map[string]any{
		"io.modelcontextprotocol/protocolVersion":    "2026-07-28",
		"io.modelcontextprotocol/clientCapabilities": caps,
		"io.modelcontextprotocol/clientInfo":         map[string]any{"name": "e2e-raw", "version": "1"},
	}}
	for k, v := range extra {
		params[k] = v
	}
	body, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params})
	if err != nil {
		t.Fatal(err)
	}
	header := map[string]string{"Mcp-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": name}
	if token != "" {
		header["Authorization"] = "Bearer " + token
	}
	resp, text := rawRequest(t, http.MethodPost, url, string(body), header)
	var m struct {
		Result map[string]any `json:"result"`
		Error  *struct {
			Code    float64 `json:"code"`
			Message string  `json:"message"`
		} `json:"error"`
	}
	if resp.StatusCode != http.StatusOK || json.Unmarshal([]byte(text), &m) != nil {
		t.Fatalf("tools/call %s: HTTP %d %q", name, resp.StatusCode, text)
	}
	a := modernAnswer{Result: m.Result}
	if m.Error != nil {
		a.Code, a.Error = m.Error.Code, m.Error.Message
	}
	return a
}

// TestE2EApproveInputRequiredRules holds call_tool's question to the rules of
// the conformance suite's input-required-result-* scenarios (which call
// fixture tools codeexec does not have): the first call gets
// resultType input_required with one elicitation/create input request
// and a requestState; the retry that echoes the state with an accept
// completes; an altered state is a JSON-RPC error; a missing answer is
// asked again; a malformed one is an error; unknown extra answers are
// ignored; and a client that declared no elicitation is not asked.
func TestE2EApproveInputRequiredRules(t *testing.T) {
	t.Parallel()
	base := harness.StartHTTP(t, map[string]string{"MCP_SERVERS_CONFIG": memoryConfig(t), "CODEEXEC_APPROVE": "memory.create_*", "CODEEXEC_TOOLS": "passthrough"})
	url := base + "/mcp"
	elicit := map[string]any{"elicitation": map[string]any{"form": map[string]any{}}}
	call := func(name string, extra map[string]any, caps map[string]any) modernAnswer {
		args := map[string]any{"server": "memory", "tool": "create_entities", "arguments": map[string]any{
			"entities": []any{map[string]any{"name": name, "entityType": "t", "observations": []any{}}}}}
		return modernToolCall(t, url, "call_tool", args, caps, extra)
	}
	accept := map[string]any{"action": "accept", "content": map[string]any{}}

	first := call("a", nil, elicit)
	reqs, _ := first.Result["inputRequests"].(map[string]any)
	state, _ := first.Result["requestState"].(string)
	if first.Result["resultType"] != "input_required" || len(reqs) != 1 || state == "" {
		t.Fatalf("first call: %v %s, want resultType input_required, one input request and a requestState", first.Result, first.Error)
	}
	var key string
	for k, v := range reqs {
		key = k
		if m, _ := v.(map[string]any); m["method"] != "elicitation/create" {
			t.Errorf("input request %s = %v, want elicitation/create", k, v)
		}
	}

	checks := []struct {
		name  string
		extra map[string]any
		want  func(modernAnswer) bool
	}{
		{"tampered state", map[string]any{"inputResponses": map[string]any{key: accept}, "requestState": state + "-TAMPERED"},
			func(a modernAnswer) bool {
				return a.Code == -32602 && strings.Contains(a.Error, "requestState does not belong to this call_tool call")
			}},
		{"another call's state", map[string]any{"inputResponses": map[string]any{key: accept}, "requestState": call("z", nil, elicit).Result["requestState"]},
			func(a modernAnswer) bool { return a.Code == -32602 }},
		{"missing answer", map[string]any{"inputResponses": map[string]any{"wrong_key": accept}, "requestState": state},
			func(a modernAnswer) bool { return a.Result["resultType"] == "input_required" }},
		{"a number as the answer", map[string]any{"inputResponses": map[string]any{key: 42}, "requestState": state},
			func(a modernAnswer) bool {
				return a.Code == -32602 && strings.Contains(a.Error, "not an elicitation result")
			}},
		{"an unknown action", map[string]any{"inputResponses": map[string]any{key: map[string]any{"action": "maybe"}}, "requestState": state},
			func(a modernAnswer) bool { return a.Code == -32602 && strings.Contains(a.Error, `the action "maybe"`) }},
		{"accept with extra answers", map[string]any{"inputResponses": map[string]any{key: accept, "extra": accept}, "requestState": state},
			func(a modernAnswer) bool {
				return a.Error == "" && a.Result["resultType"] != "input_required" && a.Result["isError"] != true
			}},
	}
	for _, c := range checks {
		if a := call("a", c.extra, elicit); !c.want(a) {
			t.Errorf("%s: %v %v %q", c.name, a.Result, a.Code, a.Error)
		}
	}
	graph := modernToolCall(t, url, "call_tool", map[string]any{"server": "memory", "tool": "read_graph"}, elicit, nil)
	if g, _ := json.Marshal(graph.Result); !strings.Contains(string(g), `\"name\": \"a\"`) || strings.Contains(string(g), `\"name\": \"z\"`) {
		t.Errorf("graph %s, want a, created once accepted, and not z", g)
	}
	declined := call("d", map[string]any{"inputResponses": map[string]any{key: map[string]any{"action": "decline"}}, "requestState": call("d", nil, elicit).Result["requestState"]}, elicit)
	if declined.Result["isError"] != true {
		t.Errorf("declined: %v %q, want an error result", declined.Result, declined.Error)
	}
	sampling := call("s", nil, map[string]any{"sampling": map[string]any{}})
	if sampling.Result["resultType"] == "input_required" || sampling.Result["isError"] != true {
		t.Errorf("a client with sampling but no elicitation: %v, want the refusal, not a question", sampling.Result)
	}
}
