package e2e

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/codeexec/codeexec/cmd/codeexec/e2e/internal/harness"
)

// TestE2EDiscovery drives `codeexec serve` with a real MCP client against
// real MCP servers, one feature per subtest, in one session, in order:
// discovery, search and calls here, then the upstreams' failures and ends
// (discoveryFailures).
func TestE2EDiscovery(t *testing.T) {
	t.Parallel()
	u := configureUpstreams(t)
	file := filepath.Join(u.dir, "hello.txt")
	if err := os.WriteFile(file, []byte("hello from the host\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	c, _ := harness.StartStdio(t, u.env())
	all := []string{"crashy", "dies", "everything", "filesystem", "memory", "missing"}

	t.Run("discovered servers", func(t *testing.T) {
		var got struct {
			Names    []string
			Detailed []map[string]string
		}
		pyJSON(t, c, nil, `import json
print(json.dumps({"Names": list(runtime.discovered_servers()), "Detailed": list(runtime.discovered_servers(detailed=True))}))`, &got)
		if strings.Join(got.Names, ",") != strings.Join(all, ",") {
			t.Errorf("discovered_servers() = %v, want %v", got.Names, all)
		}
		want := map[string]string{"everything": "The MCP test server, over HTTP", "filesystem": "Files in the test directory", "memory": "", "crashy": "", "dies": "", "missing": ""}
		if len(got.Detailed) != len(want) {
			t.Errorf("discovered_servers(detailed=True) = %v", got.Detailed)
		}
		for _, d := range got.Detailed {
			if desc, ok := want[d["name"]]; !ok || d["description"] != desc || len(d) != 2 {
				t.Errorf("discovered_servers(detailed=True) entry %v, want {name, description: %q}", d, desc)
			}
		}
	})

	// The first search of a session, with no server loaded, finds tools on
	// every configured server: discoveryd starts the ones never used.
	t.Run("first search spans every server", func(t *testing.T) {
		var got struct {
			Read, Echo    []map[string]any
			ReadUnindexed []string
			Raw           struct {
				Results   []map[string]any
				Total     int
				Truncated *bool
				Unindexed []string
			}
			Servers []string
		}
		pyJSON(t, c, nil, `import json
read = await runtime.search_tool_docs("read a file")
echo = await runtime.search_tool_docs("echo", limit=10)
few = await runtime.search_tool_docs("read a file", limit=3)
raw = {"Results": few, "Total": few.total, "Truncated": few.truncated, "Unindexed": list(few.unindexed)}
print(json.dumps({"Read": read, "ReadUnindexed": list(read.unindexed), "Echo": echo, "Raw": raw, "Servers": list(runtime.list_servers_sync())}))`, &got)
		if len(got.Servers) != 0 {
			t.Errorf("servers loaded in a call without servers: %v", got.Servers)
		}
		if len(got.Read) != 5 || !hasDoc(got.Read, "filesystem", "read_text_file") {
			t.Errorf("search_tool_docs('read a file') = %v (servers not searched: %v), want 5 docs with filesystem/read_text_file", docNames(got.Read), got.ReadUnindexed)
		}
		for _, d := range got.Read {
			if d["inputSchema"] != nil || d["serverAlias"] == nil || d["toolAlias"] == nil || d["description"] == nil {
				t.Errorf("summary doc %v: want server, serverAlias, tool, toolAlias, description and no inputSchema", d)
			}
			if m, _ := d["match"].(string); m == "" {
				t.Errorf("search hit %v: want a match that says why it was returned", d)
			}
		}
		// An exact tool name ranks first; the same name on another server
		// (crashy's echo, started only by this search) follows.
		if names := docNames(got.Echo); len(names) < 2 || names[0] != "everything/echo" || !hasDoc(got.Echo, "crashy", "echo") {
			t.Errorf("search_tool_docs('echo') = %v, want everything/echo first and crashy/echo among them", names)
		}
		// The result says the total, whether the list was cut, and which
		// servers could not be searched.
		r := got.Raw
		if len(r.Results) != 3 || r.Total <= 3 || r.Truncated == nil || !*r.Truncated || strings.Join(r.Unindexed, ",") != "dies,missing" {
			t.Errorf("channel reply: %d results, total %d, truncated %v, unindexed %v; want 3, >3, true, [dies missing]", len(r.Results), r.Total, r.Truncated, r.Unindexed)
		}
	})

	t.Run("loaded servers and docs", func(t *testing.T) {
		var got struct {
			Async, Sync, Loaded, Proxies []string
			Describe                     map[string]any
			Metadata                     []map[string]any
			Live                         []map[string]any
			Cached                       []map[string]any
			SummaryDocs                  []map[string]any
			FullDoc                      map[string]any
			SyncSummary                  []map[string]any
			SyncFull                     []map[string]any
			NoServer                     string
		}
		pyJSON(t, c, []string{"filesystem", "everything"}, `import json
try:
    runtime.list_tools_sync()
    no_server = ""
except runtime.MCPError as e:
    no_server = str(e)
print(json.dumps({
    "Async": list(await runtime.list_servers()),
    "Sync": list(runtime.list_servers_sync()),
    "Loaded": list(LOADED_MCP_SERVERS),
    "Proxies": [n for n in mcp_servers if mcp_servers[n] is globals()["mcp_" + n]],
    "Describe": runtime.describe_server("filesystem"),
    "Metadata": list(runtime.list_loaded_server_metadata()),
    "Live": await runtime.list_tools("filesystem"),
    "Cached": list(runtime.list_tools_sync("filesystem")),
    "SummaryDocs": await runtime.query_tool_docs("filesystem"),
    "FullDoc": await runtime.query_tool_docs("filesystem", "read_text_file", detail="full"),
    "SyncSummary": runtime.query_tool_docs_sync("everything"),
    "SyncFull": runtime.query_tool_docs_sync("everything", "GET_SUM", detail="full"),
    "NoServer": no_server,
}))`, &got)
		for name, l := range map[string][]string{"list_servers()": got.Async, "list_servers_sync()": got.Sync, "LOADED_MCP_SERVERS": got.Loaded, "mcp_servers": got.Proxies} {
			if strings.Join(l, ",") != "filesystem,everything" {
				t.Errorf("%s = %v, want [filesystem everything]", name, l)
			}
		}
		if got.Describe["name"] != "filesystem" || got.Describe["alias"] != "filesystem" || got.Describe["description"] != "Files in the test directory" {
			t.Errorf("describe_server('filesystem') = %v", got.Describe)
		}
		if tools, _ := got.Describe["tools"].([]any); len(tools) != len(got.Live) || len(tools) < 10 {
			t.Errorf("describe_server lists %d tools, list_tools %d", len(tools), len(got.Live))
		}
		if len(got.Metadata) != 2 || got.Metadata[0]["name"] != "filesystem" || got.Metadata[1]["name"] != "everything" {
			t.Errorf("list_loaded_server_metadata() names: %v", got.Metadata)
		}
		// list_tools is the server's own tools/list entry; the sync one is
		// upstream's {name, alias, description, input_schema}.
		if !hasTool(got.Live, "read_text_file", "inputSchema") || !hasTool(got.Cached, "read_text_file", "input_schema") {
			t.Errorf("list_tools / list_tools_sync lack read_text_file with its schema")
		}
		for _, d := range got.SummaryDocs {
			if d["inputSchema"] != nil || d["server"] != "filesystem" {
				t.Errorf("summary doc %v", d)
			}
		}
		if len(got.SummaryDocs) != len(got.Live) {
			t.Errorf("query_tool_docs('filesystem') gave %d docs for %d tools", len(got.SummaryDocs), len(got.Live))
		}
		if got.FullDoc["tool"] != "read_text_file" || !strings.Contains(mustJSON(got.FullDoc["inputSchema"]), `"path"`) {
			t.Errorf("query_tool_docs(filesystem, read_text_file, full) = %v", got.FullDoc)
		}
		if !hasDoc(got.SyncSummary, "everything", "get-sum") || got.SyncSummary[0]["inputSchema"] != nil {
			t.Errorf("query_tool_docs_sync('everything') = %v", docNames(got.SyncSummary))
		}
		if len(got.SyncFull) != 1 || got.SyncFull[0]["tool"] != "get-sum" || got.SyncFull[0]["toolAlias"] != "get_sum" || !strings.Contains(mustJSON(got.SyncFull[0]["inputSchema"]), `"a"`) {
			t.Errorf("query_tool_docs_sync(everything, GET_SUM, full) = %v, want a list of that one doc", got.SyncFull)
		}
		if !strings.Contains(got.NoServer, "filesystem, everything") {
			t.Errorf("list_tools_sync() without a server: MCPError %q, want it to name the loaded servers", got.NoServer)
		}
	})

	t.Run("calls with arguments", func(t *testing.T) {
		var got struct {
			Read, Echo, Sum, ByModule, Created, Graph, ViaRuntime map[string]any
			ModuleTools                                           []string
			MapHasSum                                             bool
		}
		src := `import json
from mcp.servers.everything import *  # one function per tool alias: echo, get_sum, ...
import mcp.servers.filesystem as fs
import mcp.servers.everything as ev
out = {
    "Read": await mcp_filesystem.read_text_file(path=` + strconv.Quote(file) + `),
    "Echo": await mcp_servers["everything"].echo(message="over HTTP"),
    "Sum": await get_sum(a=2, b=40),
    "ByModule": await fs.read_text_file(path=` + strconv.Quote(file) + `, head=1),
    "Created": await mcp_memory.create_entities(entities=[{"name": "codeexec", "entityType": "project", "observations": ["written in Go"]}]),
    "Graph": await mcp_memory.read_graph(),
    "ViaRuntime": await runtime.call_tool("everything", "echo", {"message": "by name"}),
    "ModuleTools": [t["name"] for t in fs.TOOLS],
    "MapHasSum": "get_sum" in ev.TOOL_MAP and echo is ev.echo,
}
print(json.dumps(out))`
		pyJSON(t, c, []string{"filesystem", "everything", "memory"}, src, &got)
		for name, tc := range map[string]struct {
			res  map[string]any
			want string
		}{
			"read_text_file":          {got.Read, "hello from the host"},
			"echo over HTTP":          {got.Echo, "Echo: over HTTP"},
			"get_sum from import *":   {got.Sum, "42"},
			"mcp.servers.filesystem":  {got.ByModule, "hello from the host"},
			"memory create_entities":  {got.Created, "codeexec"},
			"memory read_graph":       {got.Graph, "written in Go"},
			"runtime.call_tool(echo)": {got.ViaRuntime, "Echo: by name"},
		} {
			// The CallToolResult dict: content blocks, no isError on success.
			if text := harness.ResultText(tc.res); !strings.Contains(text, tc.want) || tc.res["isError"] == true {
				t.Errorf("%s = %v, want content text with %q and no isError", name, tc.res, tc.want)
			}
		}
		if !strings.Contains(mustJSON(got.Graph["structuredContent"]), "written in Go") {
			t.Errorf("read_graph structuredContent = %v", got.Graph["structuredContent"])
		}
		if len(got.ModuleTools) < 10 || !got.MapHasSum {
			t.Errorf("mcp.servers modules: filesystem TOOLS %v, everything TOOL_MAP has get_sum: %v", got.ModuleTools, got.MapHasSum)
		}
	})

	t.Run("tool error raises, or is a result when asked", func(t *testing.T) {
		var got map[string]any
		o := pyJSON(t, c, []string{"filesystem"}, `import json
try:
    await mcp_filesystem.read_text_file(path="/etc/passwd")
    raised = None
except runtime.ToolError as e:
    raised = e.message
res = await mcp_filesystem.read_text_file(path="/etc/passwd", raise_on_error=False)
print(json.dumps(dict(res, raised=raised)))`, &got)
		raised, _ := got["raised"].(string)
		if got["isError"] != true || !strings.Contains(harness.ResultText(got), "denied") || !strings.Contains(raised, "denied") || o.IsError {
			t.Errorf("reading outside the allowed dir = %v (run_python isError %v), want ToolError with 'denied', then with raise_on_error=False isError true", got, o.IsError)
		}
	})

	t.Run("parallel calls overlap", func(t *testing.T) {
		var got struct {
			Wall  float64
			Each  []float64
			Texts []string
		}
		pyJSON(t, c, []string{"everything"}, `import asyncio, json, time
async def timed():
    t0 = time.perf_counter()
    r = await mcp_everything.trigger_long_running_operation(duration=1, steps=2)
    return time.perf_counter() - t0, r
t0 = time.perf_counter()
res = await asyncio.gather(*(timed() for _ in range(4)))
wall = time.perf_counter() - t0
print(json.dumps({"Wall": wall, "Each": [d for d, _ in res], "Texts": [r["content"][0]["text"] for _, r in res]}))`, &got)
		sum := 0.0
		for _, d := range got.Each {
			sum += d
		}
		for _, s := range got.Texts {
			if !strings.Contains(s, "completed") {
				t.Errorf("long-running operation result %q", s)
			}
		}
		// Serialised calls would take the sum; concurrent ones about the
		// longest, i.e. a quarter of it here.
		if len(got.Each) != 4 || got.Wall >= 0.75*sum {
			t.Errorf("4 concurrent calls: wall %.3fs, each %v (sum %.3fs); want wall < 0.75 × sum", got.Wall, got.Each, sum)
		}
		t.Logf("4 concurrent calls: wall %.3fs, sum of calls %.3fs", got.Wall, sum)
	})

	discoveryFailures(t, c, u)
}
