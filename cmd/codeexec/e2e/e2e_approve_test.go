package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/codeexec/codeexec/cmd/codeexec/e2e/internal/harness"
)

// The tests of issue 40: approvals and per-run limits, driven by the
// official SDK clients against the reference memory server, whose tools
// carry annotations (create_entities is not read-only, read_graph is).

// memoryConfig writes a config with the reference memory server, its
// graph in a temp file, and returns the config's path.
func memoryConfig(t *testing.T) string {
	t.Helper()
	node := lookTool(t, "node", "install Node.js 18+ and run `npm ci`")
	servers := map[string]any{"memory": map[string]any{
		"command": node, "args": []any{npmEntry(t, "server-memory")},
		"env": map[string]any{"MEMORY_FILE_PATH": filepath.Join(t.TempDir(), "graph.jsonl")},
	}}
	b, err := json.Marshal(map[string]any{"mcpServers": servers})
	if err != nil {
		t.Fatal(err)
	}
	config := filepath.Join(t.TempDir(), "servers.json")
	if err := os.WriteFile(config, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return config
}

// createCode creates entity name in the memory server, and says whether
// the call ran or how it was refused.
func createCode(name string) map[string]any {
	return map[string]any{"servers": []any{"memory"}, "code": "try:\n" +
		"    await mcp_memory.create_entities(entities=[{'name': '" + name + "', 'entityType': 't', 'observations': ['api_key=x']}])\n" +
		"    print('created " + name + "')\n" +
		"except runtime.ApprovalDeclinedError as e:\n" +
		"    print('declined', e.server, e.tool, isinstance(e, runtime.ApprovalError), '|', e)\n" +
		"except runtime.ApprovalUnavailableError as e:\n" +
		"    print('unavailable |', e)\n"}
}

// graphCode prints the names of the memory server's entities; read_graph
// is read-only, so it is never asked about.
var graphCode = map[string]any{"servers": []any{"memory"}, "code": "import json\n" +
	"g = await mcp_memory.read_graph()\n" +
	"print('graph', sorted(e['name'] for e in g['structuredContent']['entities']))\n"}

// checkApproveRun checks what the SDK v1 client got from createCode("a")
// accepted, createCode("b") declined, then graphCode.
func checkApproveRun(t *testing.T, r sdkV1Result) {
	t.Helper()
	want := []string{"created a", "declined memory create_entities True | the user declined the call of tool 'create_entities' of server 'memory'; it was not made", "graph ['a']"}
	for i, w := range want {
		if _, stdout, stderr := structuredOf(t, r.Results[i]); !strings.Contains(stdout, w) {
			t.Errorf("call %d printed %q (stderr %q), want %q", i+1, stdout, stderr, w)
		}
	}
	if len(r.Elicitations) != 2 {
		t.Fatalf("the client was asked %d times, want 2 (read_graph is read-only): %v", len(r.Elicitations), r.Elicitations)
	}
	msg, _ := r.Elicitations[0]["message"].(string)
	for _, w := range []string{"Server: memory", "Tool: create_entities", `"name":"a"`, "--approve destructive: readOnlyHint is false"} {
		if !strings.Contains(msg, w) {
			t.Errorf("the question %q does not say %q", msg, w)
		}
	}
}

// TestE2EApproveSDKv1Stdio: under --approve destructive, the SDK v1
// client over stdio is asked before each create_entities; accept runs the
// call, decline raises ApprovalDeclinedError in the code, and the graph
// holds only the accepted entity.
func TestE2EApproveSDKv1Stdio(t *testing.T) {
	t.Parallel()
	env := map[string]string{"MCP_SERVERS_CONFIG": memoryConfig(t), "CODEEXEC_APPROVE": "destructive"}
	r := sdkV1(t, env, map[string]any{"elicit": []string{"accept", "decline"}, "calls": runCalls(createCode("a"), createCode("b"), graphCode)})
	checkApproveRun(t, r)
}

// TestE2EApproveSDKv1HTTP is TestE2EApproveSDKv1Stdio over streamable HTTP.
func TestE2EApproveSDKv1HTTP(t *testing.T) {
	t.Parallel()
	base := harness.StartHTTP(t, map[string]string{"MCP_SERVERS_CONFIG": memoryConfig(t), "CODEEXEC_APPROVE": "destructive"})
	r := runSDKV1(t, map[string]any{"url": base + "/mcp", "elicit": []string{"accept", "decline"}, "calls": runCalls(createCode("a"), createCode("b"), graphCode)})
	checkApproveRun(t, r)
}

// TestE2EApproveWithoutElicitation: a client that did not declare
// elicitation is sent no question; the call is refused, and the code's
// error says why and how to allow it.
func TestE2EApproveWithoutElicitation(t *testing.T) {
	t.Parallel()
	env := map[string]string{"MCP_SERVERS_CONFIG": memoryConfig(t), "CODEEXEC_APPROVE": "memory.create_*"}
	r := sdkV1(t, env, map[string]any{"calls": runCalls(createCode("a"), graphCode)})
	_, stdout, _ := structuredOf(t, r.Results[0])
	for _, w := range []string{"unavailable | tool 'create_entities' of server 'memory' needs a person's approval (--approve memory.create_*)",
		"codeexec-e2e-sdk-v1 did not declare the elicitation capability", "use a client that supports elicitation", "remove the rule"} {
		if !strings.Contains(stdout, w) {
			t.Errorf("the refusal %q does not say %q", stdout, w)
		}
	}
	if _, stdout, _ := structuredOf(t, r.Results[1]); !strings.Contains(stdout, "graph []") {
		t.Errorf("the refused call ran: %q", stdout)
	}
	if len(r.Elicitations) != 0 {
		t.Errorf("a client without the capability was asked: %v", r.Elicitations)
	}
}

// TestE2EMaxToolCalls: with --max-tool-calls 5, the sixth call of a loop
// raises LimitExceededError naming the limit; the next run_python call
// may make five more.
func TestE2EMaxToolCalls(t *testing.T) {
	t.Parallel()
	env := map[string]string{"MCP_SERVERS_CONFIG": memoryConfig(t), "CODEEXEC_MAX_TOOL_CALLS": "5"}
	loop := map[string]any{"servers": []any{"memory"}, "code": "made = 0\n" +
		"try:\n" +
		"    for i in range(10):\n" +
		"        await mcp_memory.read_graph()\n" +
		"        made += 1\n" +
		"except runtime.LimitExceededError as e:\n" +
		"    print('stopped after', made, '|', e)\n"}
	r := sdkV1(t, env, map[string]any{"calls": runCalls(loop, loop)})
	for i := range 2 {
		_, stdout, _ := structuredOf(t, r.Results[i])
		if !strings.Contains(stdout, "stopped after 5 | this run_python call has made its 5 tool calls") || !strings.Contains(stdout, "--max-tool-calls") {
			t.Errorf("run %d printed %q, want it stopped after 5 calls with the limit named", i+1, stdout)
		}
	}
}

// TestE2EApproveSDKv2Modern: the SDK v2 client pinned to 2026-07-28 over
// HTTP gets a run's question as an input_required result; its driver asks
// the user and retries, and the retry, carrying the answer, follows the
// run on: accept runs the call, decline and cancel raise
// ApprovalDeclinedError in the code, which catches it.
func TestE2EApproveSDKv2Modern(t *testing.T) {
	t.Parallel()
	base := harness.StartHTTP(t, map[string]string{"MCP_SERVERS_CONFIG": memoryConfig(t), "CODEEXEC_APPROVE": "destructive"})
	r := harness.SDKClient(t, map[string]any{"transport": "http", "url": base + "/mcp", "negotiation": map[string]any{"pin": "2026-07-28"},
		"elicit": []string{"accept", "decline", "cancel"}, "calls": runCalls(createCode("a"), createCode("b"), createCode("c"), graphCode)})
	if r.ProtocolVersion != "2026-07-28" {
		t.Fatalf("negotiated %q, want 2026-07-28", r.ProtocolVersion)
	}
	want := []string{"created a",
		"declined memory create_entities True | the user declined the call of tool 'create_entities' of server 'memory'; it was not made",
		"declined memory create_entities True | the user dismissed the question whether to allow tool 'create_entities' of server 'memory'; the call was not made",
		"graph ['a']"}
	for i, w := range want {
		if _, stdout, stderr := structuredOf(t, r.Results[i]); !strings.Contains(stdout, w) {
			t.Errorf("call %d printed %q (stderr %q), want %q", i+1, stdout, stderr, w)
		}
	}
	if len(r.Elicitations) != 3 || !strings.Contains(r.Elicitations[0]["message"].(string), "Tool: create_entities") {
		t.Errorf("questions %v, want three about create_entities", r.Elicitations)
	}

	// Without the elicitation capability: the refusal, no question.
	r = harness.SDKClient(t, map[string]any{"transport": "http", "url": base + "/mcp", "negotiation": map[string]any{"pin": "2026-07-28"},
		"calls": runCalls(createCode("d"))})
	_, stdout, _ := structuredOf(t, r.Results[0])
	for _, w := range []string{"unavailable | tool 'create_entities' of server 'memory' needs a person's approval (--approve destructive",
		"codeexec-e2e-sdk-v2 did not declare the elicitation capability", "use a client that supports elicitation", "remove the rule"} {
		if !strings.Contains(stdout, w) {
			t.Errorf("the refusal %q does not say %q", stdout, w)
		}
	}
}
