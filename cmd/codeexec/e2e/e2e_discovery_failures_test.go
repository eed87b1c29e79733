package e2e

import (
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/codeexec/codeexec/cmd/codeexec/e2e/internal/harness"
)

// discoveryFailures are TestE2EDiscovery's last subtests, in its session
// c: upstream servers that crash, time out or fail to start, servers taken
// per call, and no upstream process outliving codeexec.
func discoveryFailures(t *testing.T, c harness.MCPClient, u upstreams) {
	t.Run("server crashes mid-call", func(t *testing.T) {
		var got struct {
			Before, After, Error, Type string
		}
		pyJSON(t, c, []string{"crashy"}, `import json
before = (await mcp_crashy.echo(text="up"))["content"][0]["text"]
try:
    await mcp_crashy.crash()
    err, typ = "", "no exception"
except Exception as e:
    err, typ = str(e), "MCPError" if isinstance(e, runtime.MCPError) else type(e).__name__
print(json.dumps({"Before": before, "Error": err, "Type": typ}))`, &got)
		if got.Type != "MCPError" {
			t.Errorf("crash raised %s, want runtime.MCPError", got.Type)
		}
		for _, w := range []string{`server "crashy" died during tools/call "crash"`, "exit status 3", "crashserver: crashing on purpose", "restarts on the next call"} {
			if !strings.Contains(got.Error, w) {
				t.Errorf("crash MCPError %q lacks %q", got.Error, w)
			}
		}
		// The next call starts the server again: a new process answers.
		var after map[string]any
		pyJSON(t, c, []string{"crashy"}, `import json
print(json.dumps(await mcp_crashy.echo(text="back")))`, &after)
		if text := harness.ResultText(after); !strings.HasPrefix(text, "back (pid ") || text == strings.Replace(got.Before, "up", "back", 1) {
			t.Errorf("echo after the crash = %q (before: %q), want an answer from a new process", text, got.Before)
		}
	})

	t.Run("unknown tool and upstream timeout", func(t *testing.T) {
		var got struct{ Unknown, Timeout, After string }
		pyJSON(t, c, []string{"everything"}, `import json
out = {}
try:
    await mcp_everything.no_such_tool()
except runtime.MCPError as e:
    out["Unknown"] = str(e)
try:
    await mcp_everything.trigger_long_running_operation(duration=10, steps=2)
except runtime.MCPError as e:
    out["Timeout"] = str(e)
out["After"] = (await mcp_everything.echo(message="still here"))["content"][0]["text"]
print(json.dumps(out))`, &got)
		for _, w := range []string{`unknown tool "no_such_tool" on server "everything"`, "get-sum", "echo"} {
			if !strings.Contains(got.Unknown, w) {
				t.Errorf("unknown tool MCPError %q lacks %q", got.Unknown, w)
			}
		}
		// CODEEXEC_TOOL_TIMEOUT is 8s for these tests (upstreams.env).
		for _, w := range []string{"timed out", `server "everything" did not answer tools/call "trigger-long-running-operation" within 8s`} {
			if !strings.Contains(got.Timeout, w) {
				t.Errorf("timeout MCPError %q lacks %q", got.Timeout, w)
			}
		}
		if got.After != "Echo: still here" {
			t.Errorf("echo after a timeout = %q", got.After)
		}
	})

	// A server that cannot start does not stop the call: the code runs,
	// the other servers of the call work, and using the broken one raises
	// runtime.MCPError with the reason. The sync helpers raise what the
	// async ones do, and the proxy's repr says why it has no tools.
	t.Run("server fails to start", func(t *testing.T) {
		for _, tc := range []struct {
			server, alias string
			want          []string
		}{
			{"missing", "missing", []string{"failed to start", "no-such-mcp-server", "no such file or directory"}},
			{"dies", "dies", []string{"failed to start", "exit status 2", "crashserver: cannot open /nonexistent/state.db"}},
		} {
			src := `print('ran')
echo = await mcp_everything.echo(message="fine")
print(echo["content"][0]["text"])
try:
    await mcp_` + tc.alias + `.anything()
except runtime.MCPError as e:
    print("MCPError:", e)
def raised(f):
    try:
        f()
    except runtime.MCPError as e:
        return "%s: %s" % (type(e).__name__, e)
    return "nothing raised"
try:
    await runtime.query_tool_docs("` + tc.server + `")
except runtime.MCPError as e:
    want = "%s: %s" % (type(e).__name__, e)
for helper, f in (("query_tool_docs_sync", lambda: runtime.query_tool_docs_sync("` + tc.server + `")),
                  ("query_tool_docs_sync(tool)", lambda: runtime.query_tool_docs_sync("` + tc.server + `", "x")),
                  ("list_tools_sync", lambda: runtime.list_tools_sync("` + tc.server + `")),
                  ("describe_server", lambda: runtime.describe_server("` + tc.server + `"))):
    print(helper, "agrees" if raised(f) == want else "raised %s, async %s" % (raised(f), want))
print(repr(mcp_` + tc.alias + `))`
			o := harness.RunPython(t, c, map[string]any{"code": src, "servers": []any{"everything", tc.server}})
			out := harness.Joined(o.Stdout())
			if o.IsError || !strings.HasPrefix(out, "ran\nEcho: fine\nMCPError: ") {
				t.Errorf("run_python(servers=[everything, %s]) = %s, want the code to run and MCPError on use", tc.server, o.Text)
				continue
			}
			for _, w := range tc.want {
				if !strings.Contains(out, w) {
					t.Errorf("MCPError for %s %q lacks %q", tc.server, out, w)
				}
			}
			if want := "query_tool_docs_sync agrees\nquery_tool_docs_sync(tool) agrees\nlist_tools_sync agrees\ndescribe_server agrees\n<MCP server '" + tc.server + "': failed to load (UnavailableError: unavailable: "; !strings.Contains(out, want) {
				t.Errorf("sync helpers and repr of %s:\n%s\nwant them to raise the async error and the repr to say %q", tc.server, out, want)
			}
		}
	})

	t.Run("servers are taken per call", func(t *testing.T) {
		var one, two, three struct {
			Proxies []string
			Loaded  []string
			Error   string
		}
		const probe = `import json
err = ""
try:
    await keep.list_directory(path=` + `DIR` + `)
    await runtime.call_tool("filesystem", "list_directory", {"path": DIR})
except runtime.MCPError as e:
    err = str(e)
print(json.dumps({"Proxies": sorted(n for n in globals() if n.startswith("mcp_") and n != "mcp_servers" and type(globals()[n]).__name__ != "UnloadedServer"), "Loaded": list(LOADED_MCP_SERVERS), "Error": err}))`
		src := strings.ReplaceAll(probe, "DIR", strconv.Quote(u.dir))
		pyJSON(t, c, []string{"filesystem"}, "keep = mcp_filesystem\n"+src, &one)
		pyJSON(t, c, []string{"filesystem", "memory"}, src, &two)
		pyJSON(t, c, []string{"memory"}, src, &three)
		if strings.Join(one.Proxies, ",") != "mcp_filesystem" || one.Error != "" {
			t.Errorf("call 1 (filesystem): proxies %v, error %q", one.Proxies, one.Error)
		}
		if strings.Join(two.Proxies, ",") != "mcp_filesystem,mcp_memory" || two.Error != "" {
			t.Errorf("call 2 (filesystem, memory): proxies %v, error %q; want a new mcp_memory proxy", two.Proxies, two.Error)
		}
		if strings.Join(three.Proxies, ",") != "mcp_memory" || strings.Join(three.Loaded, ",") != "memory" {
			t.Errorf("call 3 (memory): proxies %v, loaded %v; want only mcp_memory", three.Proxies, three.Loaded)
		}
		// A proxy kept from call 1 is refused, naming the loaded servers.
		if !strings.Contains(three.Error, `Server 'filesystem' is not available: it is not loaded in this call (loaded: "memory"); pass servers=["memory", "filesystem"] to run_python`) {
			t.Errorf("call 3 with a kept filesystem proxy: MCPError %q", three.Error)
		}
	})

	// codeexec is stopped as a service manager stops it; every upstream
	// child must be gone by the time it has exited.
	t.Run("no upstream process outlives codeexec", func(t *testing.T) {
		before := markedProcesses(u.mark)
		var self []int
		for _, p := range before {
			if strings.HasPrefix(p.cmdline, harness.Binary+" serve") {
				self = append(self, p.pid)
			}
		}
		if len(self) != 1 || len(before) < 4 { // codeexec, filesystem, memory, crashy
			t.Fatalf("marked processes before exit: %v; want codeexec serve and its three stdio servers", before)
		}
		if err := syscall.Kill(self[0], harness.InterruptSignal); err != nil {
			t.Fatal(err)
		}
		var left []markedProcess
		for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
			if left = markedProcesses(u.mark); len(left) == 0 {
				return
			}
		}
		t.Errorf("processes left 20s after SIGTERM to codeexec (pid %d): %v", self[0], left)
	})
}
