package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/codeexec/codeexec/cmd/codeexec/e2e/internal/harness"

	"github.com/mark3labs/mcp-go/mcp"
)

// End-to-end tests of issue 14: code written for upstream, run as an
// upstream user switching over would run it, through the real binary, a
// real MCP client and real sandboxes. Each expected value is upstream's,
// with a comment naming where upstream defines it: a line of
// mcp_server_code_execution_mode.py at 27d23b8 (v0.3.0), a section of
// reference/upstream-behaviour.md, or one of upstream's tests.

// dropinServers writes an MCP_SERVERS_CONFIG for the tests in this file:
// "empty", a real MCP server with no tools, "crashy", the same server with
// its echo tool, and the npm filesystem server on dir.
func dropinServers(t *testing.T, dir string) map[string]string {
	t.Helper()
	crash, err := filepath.Abs(filepath.Join("testdata", "crashserver.py"))
	if err != nil {
		t.Fatal(err)
	}
	python := lookTool(t, "python3", "python3 runs the test MCP server")
	node := lookTool(t, "node", "install Node.js 18+ and run `npm ci`")
	path := filepath.Join(t.TempDir(), "servers.json")
	writeServers(t, path, map[string]any{
		"empty":      map[string]any{"command": python, "args": []any{crash, "--no-tools"}, "description": "No tools at all"},
		"crashy":     map[string]any{"command": python, "args": []any{crash}},
		"filesystem": map[string]any{"command": node, "args": []any{npmEntry(t, "server-filesystem"), dir}, "description": "Files"},
	})
	return map[string]string{"MCP_SERVERS_CONFIG": path}
}

// Item 1: every helper answers an empty case with an empty value, never
// None or an exception.
func TestE2EDropInEmptyResults(t *testing.T) {
	t.Parallel()
	c, _ := harness.StartStdio(t, dropinServers(t, t.TempDir()))

	// No servers in the call, no memories, no saved tools. (Each line
	// has a label: a line reading "()" alone is dropped from the output,
	// as upstream drops it.)
	o := harness.Code(t, c, `
print("async", repr(await runtime.list_servers()))
print("sync", repr(runtime.list_servers_sync()))
print(repr(LOADED_MCP_SERVERS), repr(mcp_servers), repr(runtime.list_loaded_server_metadata()))
print(repr(list_memories()), repr(runtime.list_saved_tools()))
print(repr(await runtime.search_tool_docs("qqqqqqqqqqqqqqqq")))
print(repr(runtime.search_tool_docs_sync("qqqqqqqqqqqqqqqq")))`)
	want := []string{
		// mcp_server_code_execution_mode.py L2038-2042 (list_servers answers
		// sorted(allowed_servers)) and L1213-1217 (tuple(... "servers" ...)).
		"async ()",
		// L1219-1220: tuple of the loaded names.
		"sync ()",
		// L1440-1450: LOADED_MCP_SERVERS a tuple, mcp_servers a dict;
		// L1230-1231: list_loaded_server_metadata() is tuple(AVAILABLE_SERVERS).
		"() {} ()",
		// L1054-1055: list_memories() is [] with no memory dir. (Saved tools
		// have no list in upstream; codeexec's list_saved_tools() follows
		// list_memories.)
		"[] []",
		// L2529-2569: a search matching nothing is an empty list.
		"[]",
		"[]",
	}
	if got := o.Stdout(); harness.Joined(got) != harness.Joined(want) {
		t.Errorf("empty results without servers:\n%s\nwant:\n%s", harness.Joined(got), harness.Joined(want))
	}

	// A loaded server with no tools.
	o = harness.RunPython(t, c, map[string]any{"servers": []any{"empty"}, "code": `
print(repr(await runtime.list_servers()), repr(runtime.list_servers_sync()))
print(repr(runtime.list_tools_sync("empty")), repr(await runtime.list_tools("empty")))
print(repr(runtime.query_tool_docs_sync("empty")), repr(await runtime.query_tool_docs("empty")))
print(repr(runtime.describe_server("empty")["tools"]), repr(mcp_empty))`})
	want = []string{
		"('empty',) ('empty',)",
		// L1233-1238: list_tools_sync is tuple(tools); L1202-1211: list_tools
		// is response.get("tools", []).
		"() []",
		// L1265-1270: query_tool_docs_sync with no tool is a list of docs;
		// L1240-1252: so is query_tool_docs.
		"[] []",
		// L1227-1228 and L1165-1169: describe_server returns the metadata,
		// tools included.
		"[] <MCP server 'empty': 0 tools>",
	}
	if o.IsError || harness.Joined(o.Stdout()) != harness.Joined(want) {
		t.Errorf("a server with no tools:\n%s\nwant:\n%s", o.Text, harness.Joined(want))
	}

	// No servers configured at all.
	bare, _ := harness.StartStdio(t, nil)
	o = harness.Code(t, bare, `print(repr(runtime.discovered_servers()), repr(runtime.discovered_servers(detailed=True)))`)
	// L1222-1225: tuples over DISCOVERED_SERVERS, empty here.
	if got := harness.Joined(o.Stdout()); got != "() ()" {
		t.Errorf("discovered_servers() with no servers configured = %s, want () ()", got)
	}
}

// Item 2: query_tool_docs_sync(server, tool) is a list holding the one doc.
func TestE2EDropInQueryToolDocsSyncIsAList(t *testing.T) {
	t.Parallel()
	c, _ := harness.StartStdio(t, dropinServers(t, t.TempDir()))
	o := harness.RunPython(t, c, map[string]any{"servers": []any{"filesystem"}, "code": `
docs = runtime.query_tool_docs_sync("filesystem", "READ_TEXT_FILE", detail="full")
one = await runtime.query_tool_docs("filesystem", "read_text_file")
print(type(docs).__name__, len(docs), docs[0]["tool"], "path" in docs[0]["inputSchema"]["properties"])
print(type(one).__name__, one["tool"])
try:
    runtime.query_tool_docs_sync("filesystem", 7)
except runtime.MCPError as e:
    print("MCPError:", e)`})
	want := []string{
		// mcp_server_code_execution_mode.py L1265-1280: the sync form
		// returns [_format_tool_doc(...)] for the tool matched by alias or
		// name, case-insensitively.
		"list 1 read_text_file True",
		// L1240-1252: the async form returns docs[0] when exactly one doc
		// matches a given tool.
		"dict read_text_file",
		// L1272-1273: a tool that is not a string.
		"MCPError: 'tool' must be a string when provided, not int",
	}
	if o.IsError || harness.Joined(o.Stdout()) != harness.Joined(want) {
		t.Errorf("query_tool_docs_sync:\n%s\nwant:\n%s", o.Text, harness.Joined(want))
	}
}

// Item 3: a search spans every configured server; each hit says whether
// its server is loaded in this call and the servers=[...] that loads it,
// and the sync and async forms give the same answer.
func TestE2EDropInSearchSaysHowToLoad(t *testing.T) {
	t.Parallel()
	c, _ := harness.StartStdio(t, dropinServers(t, t.TempDir()))
	var got struct{ Async, Sync, Exact []map[string]any }
	pyJSON(t, c, []string{"filesystem"}, `import json
a = await runtime.search_tool_docs("echo", limit=10)
s = runtime.search_tool_docs_sync("echo", limit=10)
exact = runtime.search_tool_docs_sync("read_text_file")
print(json.dumps({"Async": a, "Sync": s, "Exact": exact}))`, &got)
	if mustJSON(got.Async) != mustJSON(got.Sync) {
		t.Errorf("sync and async searches differ:\nasync %s\nsync  %s", mustJSON(got.Async), mustJSON(got.Sync))
	}
	// Upstream searched the loaded servers only
	// (mcp_server_code_execution_mode.py L2549-2554: "if entry.get("server")
	// not in allowed: continue"), so every hit it returned was on a loaded
	// server: codeexec's hits on loaded servers say loaded, the others
	// say how to load them.
	var echo map[string]any
	for _, d := range got.Async {
		if d["server"] == "crashy" && d["tool"] == "echo" {
			echo = d
		}
		if (d["loaded"] == true) != (d["server"] == "filesystem") || d["loadWith"] != `servers=["`+d["server"].(string)+`"]` {
			t.Errorf("hit %v: want loaded only for filesystem, and loadWith servers=[its server]", d)
		}
	}
	if echo == nil || echo["loaded"] != false {
		t.Fatalf("search_tool_docs('echo') = %v, want crashy/echo, not loaded", docNames(got.Async))
	}
	if len(got.Exact) == 0 || got.Exact[0]["tool"] != "read_text_file" || got.Exact[0]["loaded"] != true {
		t.Errorf("search_tool_docs_sync('read_text_file') = %v, want filesystem/read_text_file first, loaded", got.Exact)
	}
	// The hit's loadWith is the argument that loads its server.
	var servers []any
	if err := json.Unmarshal([]byte(strings.TrimPrefix(echo["loadWith"].(string), "servers=")), &servers); err != nil {
		t.Fatal(err)
	}
	o := harness.RunPython(t, c, map[string]any{"servers": servers, "code": `print((await mcp_crashy.echo(text="loaded"))["content"][0]["text"].split(" (")[0])`})
	if o.IsError || harness.Joined(o.Stdout()) != "loaded" {
		t.Errorf("calling the hit with %s: %s", echo["loadWith"], o.Text)
	}
}

// Item 8: compact output drops "()" lines, a validation_error's text has
// its error line, and a server not allowed in the call is refused in
// upstream's words, followed by what to do.
func TestE2EDropInCompactOutputAndRefusals(t *testing.T) {
	t.Parallel()
	c, _ := harness.StartStdio(t, dropinServers(t, t.TempDir()))

	// tests/test_toon_responses.py test_compact_mode_drops_empty_tuple_output:
	// stdout "()\n" gives the text "Success (no output)" and structured
	// content {"summary": "Success (no output)"} (_NOISE_STREAM_TOKENS,
	// mcp_server_code_execution_mode.py L176 and L396-406).
	o := harness.Code(t, c, `print(runtime.list_servers_sync())`)
	if o.Text != "Success (no output)" || mustJSON(o.Structured) != `{"summary":"Success (no output)"}` {
		t.Errorf(`printing () gave text %q, structured %s; want upstream's "Success (no output)", {"summary":"Success (no output)"}`, o.Text, mustJSON(o.Structured))
	}
	// Only the "()" line goes: whitespace-only lines, which upstream also
	// drops, are kept (a deliberate difference; see the README).
	o = harness.Code(t, c, `print("a"); print(()); print("  "); print(" () "); print("b")`)
	if got := mustJSON(o.Stdout()); got != `["a","  ","b"]` {
		t.Errorf("stdout = %s, want [a, two spaces, b]", got)
	}

	// L431-473 (_render_compact_output): the summary, then "error: …"
	// because the status is not "error", then "status: …" in front; the
	// message is upstream's (L2712-2718).
	o = harness.RunPython(t, c, map[string]any{"code": "   "})
	if want := "status: validation_error\nMissing 'code' argument\nerror: Missing 'code' argument"; !o.IsError || o.Text != want {
		t.Errorf("blank code: %q, want %q", o.Text, want)
	}

	// L2044-2049 and L2094-2099: "Server {server!r} is not available".
	o = harness.Code(t, c, `
for use in (lambda: runtime.call_tool("filesystem", "list_allowed_directories", {}), lambda: runtime.list_tools("filesystem")):
    try:
        await use()
    except runtime.MCPError as e:
        print(e)`)
	want := `Server 'filesystem' is not available: no servers are loaded in this call; pass servers=["filesystem"] to run_python`
	if got := o.Stdout(); len(got) != 2 || got[0] != want || got[1] != want {
		t.Errorf("refusals:\n%s\nwant twice:\n%s", harness.Joined(got), want)
	}
	o = harness.RunPython(t, c, map[string]any{"servers": []any{"empty"}, "code": `
try:
    await runtime.call_tool("filesystem", "list_allowed_directories", {})
except runtime.MCPError as e:
    print(e)`})
	want = `Server 'filesystem' is not available: it is not loaded in this call (loaded: "empty"); pass servers=["empty", "filesystem"] to run_python`
	if got := harness.Joined(o.Stdout()); got != want {
		t.Errorf("refusal with a server loaded:\n%s\nwant:\n%s", got, want)
	}
}

// Item 9: the tool schema has upstream's timeout default and a code
// description that names the helpers, and the definition stays under
// 1,200 characters (but for the title and hints, which a model does not
// read).
func TestE2EDropInToolSchema(t *testing.T) {
	t.Parallel()
	c, _ := harness.StartStdio(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	tools, err := c.ListTools(ctx, mcp.ListToolsRequest{})
	if err != nil || len(tools.Tools) != 1 {
		t.Fatalf("tools/list = %+v, %v", tools, err)
	}
	read := tools.Tools[0]
	read.Title, read.Annotations = "", mcp.ToolAnnotation{}
	def, _ := json.Marshal(read)
	var tool struct {
		InputSchema struct {
			Properties map[string]map[string]any `json:"properties"`
		} `json:"inputSchema"`
	}
	if err := json.Unmarshal(def, &tool); err != nil {
		t.Fatal(err)
	}
	timeout := tool.InputSchema.Properties["timeout"]
	// mcp_server_code_execution_mode.py L2671-2677: "minimum": 1,
	// "maximum": MAX_TIMEOUT (120), "default": DEFAULT_TIMEOUT (30).
	// The maximum is an hour here (a deliberate difference, issue 39:
	// a long call yields and goes on; --max-timeout 120s restores it).
	if timeout["default"] != 30.0 || timeout["minimum"] != 1.0 || timeout["maximum"] != 3600.0 {
		t.Errorf("timeout schema = %v, want upstream's minimum 1 and default 30, and a maximum of 3600", timeout)
	}
	// L2655-2662 embeds SANDBOX_HELPERS_SUMMARY (L166-174), which names
	// discovery, search, docs, memory and save_tool.
	desc, _ := tool.InputSchema.Properties["code"]["description"].(string)
	for _, want := range []string{"discovered_servers()", "search_tool_docs(", "query_tool_docs(", "save_memory(", "load_memory(", "save_tool("} {
		if !strings.Contains(desc, want) {
			t.Errorf("code description %q does not name %s", desc, want)
		}
	}
	// 1,200 until issue 39 added cancel (stopping a run in flight).
	if len(def) >= 1300 {
		t.Errorf("the run_python definition is %d characters, want < 1300:\n%s", len(def), def)
	}
}

// Item 10: code that is not a string says so, and an error about unknown
// servers stays short however many a client sends.
func TestE2EDropInCodeTypeAndUnknownServers(t *testing.T) {
	t.Parallel()
	c, _ := harness.StartStdio(t, dropinServers(t, t.TempDir()))
	// mcp_server_code_execution_mode.py L2713-2719 answers any code that
	// is not a non-blank string with "Missing 'code' argument"; codeexec
	// keeps that for missing and blank code and names the type otherwise.
	for _, tc := range []struct {
		code any
		want string
	}{
		{42, "'code' must be a string of Python source, not a number"},
		{[]any{"print(1)"}, "'code' must be a string of Python source, not an array"},
		{nil, "Missing 'code' argument"},
	} {
		o := harness.RunPython(t, c, map[string]any{"code": tc.code})
		if !o.IsError || o.Str("status") != "validation_error" || o.Str("error") != tc.want {
			t.Errorf("code %v: %s; want validation_error %q", tc.code, o.Text, tc.want)
		}
	}

	// L2298-2303 (load_server, called per name at L2581-2582) stops at the
	// first unknown name: "Unknown MCP server: x". codeexec checks them all
	// and names the first few, with the count.
	servers := []any{"filesystem"}
	for i := range 10000 {
		servers = append(servers, fmt.Sprintf("nope-%d", i))
	}
	o := harness.RunPython(t, c, map[string]any{"code": "pass", "servers": servers})
	want := `10000 unknown MCP servers: "nope-0", "nope-1", "nope-2", "nope-3", "nope-4" and 9995 more; configured servers: "crashy", "empty", "filesystem"`
	if !o.IsError || !strings.Contains(o.Str("error"), want) || len(o.Text) > 1000 {
		t.Errorf("10,000 unknown servers: %d characters:\n%s\nwant an error containing:\n%s", len(o.Text), harness.TailOf(o.Text, 2000), want)
	}
}
