package e2e

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/codeexec/codeexec/cmd/codeexec/e2e/internal/harness"
)

// passthroughConfig writes a config with two reference memory servers:
// "memory", shared, and "notes", for tenant alice alone.
func passthroughConfig(t *testing.T) string {
	t.Helper()
	node := lookTool(t, "node", "install Node.js 18+ and run `npm ci`")
	entry := func(tenants ...any) map[string]any {
		e := map[string]any{"command": node, "args": []any{npmEntry(t, "server-memory")},
			"env": map[string]any{"MEMORY_FILE_PATH": filepath.Join(t.TempDir(), "graph.jsonl")}}
		if len(tenants) > 0 {
			e["tenants"] = tenants
		}
		return e
	}
	b, err := json.Marshal(map[string]any{"mcpServers": map[string]any{"memory": entry(), "notes": entry("alice")}})
	if err != nil {
		t.Fatal(err)
	}
	config := filepath.Join(t.TempDir(), "servers.json")
	if err := os.WriteFile(config, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return config
}

// textOfResult is a CallToolResult's text content, joined.
func textOfResult(res map[string]any) string {
	var parts []string
	content, _ := res["content"].([]any)
	for _, c := range content {
		if m, ok := c.(map[string]any); ok {
			if s, ok := m["text"].(string); ok {
				parts = append(parts, s)
			}
		}
	}
	return strings.Join(parts, "\n")
}

func toolNamesOf(tools []map[string]any) []string {
	var names []string
	for _, t := range tools {
		names = append(names, t["name"].(string))
	}
	slices.Sort(names)
	return names
}

// passCall is a call of a passthrough tool.
func passCall(name string, args map[string]any) map[string]any {
	return map[string]any{"name": name, "arguments": args}
}

// TestE2EPassthroughHTTP: with ?tools=passthrough the SDK v1 client is
// offered search_tools, describe_tool and call_tool; it finds, describes
// and calls a tool of the reference memory server; unknown names get the
// sandbox's did-you-mean errors; and each tenant sees its own servers.
func TestE2EPassthroughHTTP(t *testing.T) {
	t.Parallel()
	base := harness.StartAuthHTTP(t, map[string]string{
		"CODEEXEC_TOKENS_FILE": harness.TokensFile(t, map[string]string{"alice-token": "alice", "bob-token": "bob"}),
		"MCP_SERVERS_CONFIG":   passthroughConfig(t),
	})
	alice := map[string]any{"Authorization": "Bearer alice-token"}
	bob := map[string]any{"Authorization": "Bearer bob-token"}
	create := map[string]any{"entities": []any{map[string]any{"name": "x", "entityType": "t", "observations": []any{}}}}
	r := runSDKV1(t, map[string]any{"url": base + "/mcp?tools=passthrough", "headers": alice, "listTools": true, "calls": []any{
		passCall("search_tools", map[string]any{"query": "create entities in the knowledge graph", "limit": 3}),
		passCall("describe_tool", map[string]any{"server": "memory", "tool": "create_entities"}),
		passCall("call_tool", map[string]any{"server": "memory", "tool": "create_entities", "arguments": create}),
		passCall("call_tool", map[string]any{"server": "memory", "tool": "read_graph"}),
		passCall("describe_tool", map[string]any{"server": "memory", "tool": "create_entitys"}),
		passCall("call_tool", map[string]any{"server": "memroy", "tool": "read_graph"}),
		passCall("run_python", map[string]any{"code": "print(1)"}),
		passCall("search_tools", map[string]any{"query": "open nodes"}),
	}})
	if got := toolNamesOf(r.Tools); !slices.Equal(got, []string{"call_tool", "describe_tool", "search_tools"}) {
		t.Errorf("tools/list = %v, want the three passthrough tools", got)
	}
	sc, _ := r.Results[0]["structuredContent"].(map[string]any)
	hits, _ := sc["results"].([]any)
	if len(hits) == 0 || hits[0].(map[string]any)["tool"] != "create_entities" {
		t.Errorf("search_tools: %v, want create_entities first", r.Results[0])
	}
	if d := textOfResult(r.Results[1]); !strings.Contains(d, `"inputSchema"`) || !strings.Contains(d, `"entities"`) {
		t.Errorf("describe_tool: %s, want the input schema", d)
	}
	if r.Results[2]["isError"] == true || !strings.Contains(textOfResult(r.Results[3]), `"name": "x"`) {
		t.Errorf("call_tool: %v then %v, want the entity created and read back", r.Results[2], r.Results[3])
	}
	for i, want := range map[int]string{
		4: `unknown tool "create_entitys" on server "memory"; did you mean: create_entities`,
		5: `unknown MCP server "memroy"; configured servers: memory, notes`,
		6: "Unknown tool: run_python",
	} {
		if got := textOfResult(r.Results[i]); r.Results[i]["isError"] != true || !strings.Contains(got, want) {
			t.Errorf("call %d: %v %q, want an error saying %q", i+1, r.Results[i]["isError"], got, want)
		}
	}
	if got := textOfResult(r.Results[7]); !strings.Contains(got, "notes open_nodes") {
		t.Errorf("alice's search: %q, want her server notes among the hits", got)
	}

	// Bob does not see alice's server, whatever he asks.
	r = runSDKV1(t, map[string]any{"url": base + "/mcp?tools=both", "headers": bob, "listTools": true, "calls": []any{
		passCall("search_tools", map[string]any{"query": "open nodes", "limit": 10}),
		passCall("call_tool", map[string]any{"server": "notes", "tool": "read_graph"}),
		passCall("describe_tool", map[string]any{"server": "notes", "tool": "read_graph"}),
	}})
	if got := toolNamesOf(r.Tools); !slices.Equal(got, []string{"call_tool", "describe_tool", "run_python", "search_tools"}) {
		t.Errorf("?tools=both lists %v, want all four", got)
	}
	if got := textOfResult(r.Results[0]); strings.Contains(got, "notes") {
		t.Errorf("bob's search finds alice's server: %q", got)
	}
	for i := 1; i <= 2; i++ {
		if got := textOfResult(r.Results[i]); !strings.Contains(got, `unknown MCP server "notes"; configured servers: memory`) {
			t.Errorf("bob's call %d: %q, want notes unknown, with only his servers named", i+1, got)
		}
	}

	// The default URL offers run_python alone; a bad ?tools= is refused.
	r = runSDKV1(t, map[string]any{"url": base + "/mcp", "headers": alice, "listTools": true})
	if got := toolNamesOf(r.Tools); !slices.Equal(got, []string{"run_python"}) {
		t.Errorf("the default surface lists %v, want run_python", got)
	}
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, base+"/mcp?tools=everything", strings.NewReader(`{}`))
	req.Header.Set("Authorization", "Bearer alice-token")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Errorf("?tools=everything: HTTP %d, want 400", resp.StatusCode)
	}
}

// TestE2EPassthroughApproveStdio: `codeexec serve --tools passthrough`
// over stdio asks the SDK v1 client before call_tool runs a marked tool:
// accept runs it, decline leaves it undone with an error result; and
// --max-tool-calls does not apply, as there is no run.
func TestE2EPassthroughApproveStdio(t *testing.T) {
	t.Parallel()
	env := map[string]string{"MCP_SERVERS_CONFIG": memoryConfig(t), "CODEEXEC_APPROVE": "memory.create_*", "CODEEXEC_TOOLS": "passthrough"}
	ent := func(name string) map[string]any {
		return map[string]any{"server": "memory", "tool": "create_entities", "arguments": map[string]any{
			"entities": []any{map[string]any{"name": name, "entityType": "t", "observations": []any{"token=ghp_abcdefghijklmnopqrstuvwxyz0123"}}}}}
	}
	r := sdkV1(t, env, map[string]any{"elicit": []string{"accept", "decline"}, "listTools": true, "calls": []any{
		passCall("call_tool", ent("a")), passCall("call_tool", ent("b")),
		passCall("call_tool", map[string]any{"server": "memory", "tool": "read_graph"}),
	}})
	if got := toolNamesOf(r.Tools); !slices.Equal(got, []string{"call_tool", "describe_tool", "search_tools"}) {
		t.Errorf("--tools passthrough lists %v", got)
	}
	if r.Results[0]["isError"] == true {
		t.Errorf("accepted call: %v", r.Results[0])
	}
	if got := textOfResult(r.Results[1]); r.Results[1]["isError"] != true || !strings.Contains(got, `the user declined the call of tool "create_entities" of server "memory"`) {
		t.Errorf("declined call: %v %q", r.Results[1]["isError"], got)
	}
	if got := textOfResult(r.Results[2]); !strings.Contains(got, `"name": "a"`) || strings.Contains(got, `"name": "b"`) {
		t.Errorf("graph %q, want a and not b", got)
	}
	if len(r.Elicitations) != 2 {
		t.Fatalf("asked %d times, want 2", len(r.Elicitations))
	}
	msg, _ := r.Elicitations[0]["message"].(string)
	if !strings.Contains(msg, "Tool: create_entities") || !strings.Contains(msg, "[masked]") || strings.Contains(msg, "ghp_") {
		t.Errorf("the question %q should name the tool and mask the token", msg)
	}
}

// TestE2EPassthroughApproveModern: the SDK v2 client pinned to 2026-07-28
// over HTTP gets call_tool's question as an input_required result, which
// its driver answers and retries: accept runs the call, decline leaves it
// undone; a client without elicitation gets the refusal.
func TestE2EPassthroughApproveModern(t *testing.T) {
	t.Parallel()
	base := harness.StartHTTP(t, map[string]string{"MCP_SERVERS_CONFIG": memoryConfig(t), "CODEEXEC_APPROVE": "memory.create_*"})
	ent := func(name string) map[string]any {
		return passCall("call_tool", map[string]any{"server": "memory", "tool": "create_entities", "arguments": map[string]any{
			"entities": []any{map[string]any{"name": name, "entityType": "t", "observations": []any{}}}}})
	}
	graph := passCall("call_tool", map[string]any{"server": "memory", "tool": "read_graph"})
	r := harness.SDKClient(t, map[string]any{"transport": "http", "url": base + "/mcp?tools=passthrough", "negotiation": map[string]any{"pin": "2026-07-28"},
		"elicit": []string{"accept", "decline"}, "calls": []any{ent("a"), ent("b"), graph}})
	if r.ProtocolVersion != "2026-07-28" {
		t.Fatalf("negotiated %q, want 2026-07-28", r.ProtocolVersion)
	}
	if r.Results[0]["isError"] == true {
		t.Errorf("accepted call: %v", r.Results[0])
	}
	if got := textOfResult(r.Results[1]); r.Results[1]["isError"] != true || !strings.Contains(got, "the user declined") {
		t.Errorf("declined call: %v", r.Results[1])
	}
	if got := textOfResult(r.Results[2]); !strings.Contains(got, `"name": "a"`) || strings.Contains(got, `"name": "b"`) {
		t.Errorf("graph %q, want a and not b", got)
	}
	if len(r.Elicitations) != 2 || !strings.Contains(r.Elicitations[0]["message"].(string), "Tool: create_entities") {
		t.Errorf("questions %v, want two about create_entities", r.Elicitations)
	}

	r = harness.SDKClient(t, map[string]any{"transport": "http", "url": base + "/mcp?tools=passthrough", "negotiation": map[string]any{"pin": "2026-07-28"},
		"calls": []any{ent("c")}})
	if got := textOfResult(r.Results[0]); r.Results[0]["isError"] != true || !strings.Contains(got, "did not declare the elicitation capability") {
		t.Errorf("a client without elicitation: %v, want the refusal", r.Results[0])
	}
}
