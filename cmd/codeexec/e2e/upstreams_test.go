package e2e

// The upstream MCP servers the end-to-end tests configure, and helpers to
// read what a sandbox reports about them.

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/codeexec/codeexec/cmd/codeexec/e2e/internal/harness"
)

// upstreams is a set of real MCP servers configured for one codeexec: the
// npm filesystem and memory servers over stdio, server-everything over
// streamable HTTP, a Python server that crashes on demand, the same server
// failing at start, and a server whose command does not exist.
type upstreams struct {
	// config is the MCP_SERVERS_CONFIG file.
	config string
	// dir is the only directory the filesystem server may read.
	dir string
	// mark is set in every stdio server's environment (and codeexec's), so
	// that leftover processes can be found.
	mark string
}

// env is the extra environment for startStdio.
func (u upstreams) env() map[string]string {
	// A short tool timeout lets a test see an upstream timeout (a 10 s
	// operation); the other calls take a second at most, but the first
	// call of a server includes its start, which a loaded CI machine made
	// take over 3 s for the npm servers. A first search waits for every
	// server to list its tools, longer than the default 5 s here: the
	// tests check what was found, not how long a start may take
	// (discoveryd's tests do that). They print whole tool listings, over
	// a model's output budget: the old byte cap keeps them whole.
	return map[string]string{"MCP_SERVERS_CONFIG": u.config, "CODEEXEC_TEST_MARK": u.mark, "CODEEXEC_TOOL_TIMEOUT": "8s", "CODEEXEC_SEARCH_INDEX_WAIT": "20s",
		"CODEEXEC_OUTPUT_BUDGET": "0"}
}

// repoRoot is the module root, two levels above this package.
func repoRoot(t testing.TB) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", "..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// npmEntry returns the entry script of an npm MCP server. The tests need
// the real servers, so a missing install fails with the fix.
func npmEntry(t testing.TB, pkg string) string {
	t.Helper()
	p := filepath.Join(repoRoot(t), "node_modules", "@modelcontextprotocol", pkg, "dist", "index.js")
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("%s is missing: run `npm ci` in %s to install the MCP servers that package.json pins", p, repoRoot(t))
	}
	return p
}

func lookTool(t testing.TB, name, why string) string {
	t.Helper()
	if name == "python3" {
		if _, err := os.Stat("/usr/bin/python3"); err == nil {
			return "/usr/bin/python3" // not a version-manager shim
		}
	}
	p, err := exec.LookPath(name)
	if err != nil {
		t.Fatalf("%s is not on PATH; %s: %v", name, why, err)
	}
	return p
}

// serveEverythingHTTP runs server-everything over streamable HTTP on a free
// port until the test ends and returns its /mcp URL.
func serveEverythingHTTP(t testing.TB) string {
	t.Helper()
	return serveEverything(t, "streamableHttp") + "/mcp"
}

// serveEverything runs server-everything in mode ("streamableHttp" or
// "sse") on a free port until the test ends and returns its base URL.
func serveEverything(t testing.TB, mode string) string {
	t.Helper()
	_, port, _ := net.SplitHostPort(harness.FreeAddr(t))
	cmd := exec.Command(lookTool(t, "node", "install Node.js 18+ and run `npm ci`"), npmEntry(t, "server-everything"), mode)
	cmd.Env = append(os.Environ(), "PORT="+port)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		_ = cmd.Wait()
	})
	addr := "127.0.0.1:" + port
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			c.Close()
			return "http://" + addr
		}
		if time.Now().After(deadline) {
			t.Fatalf("server-everything did not listen on %s: %v", addr, err)
		}
	}
}

// configureUpstreams writes the MCP_SERVERS_CONFIG file for the servers.
func configureUpstreams(t testing.TB) upstreams {
	t.Helper()
	node := lookTool(t, "node", "install Node.js 18+ and run `npm ci`")
	// The temp dir's path is unique to this test in this run.
	u := upstreams{dir: t.TempDir(), mark: "e2e-" + strings.ReplaceAll(t.TempDir(), "/", "_")}
	crash, err := filepath.Abs(filepath.Join("testdata", "crashserver.py"))
	if err != nil {
		t.Fatal(err)
	}
	marked := func(env map[string]any) map[string]any {
		env["CODEEXEC_TEST_MARK"] = u.mark
		return env
	}
	servers := map[string]any{
		"filesystem": map[string]any{
			"command": node, "args": []any{npmEntry(t, "server-filesystem"), u.dir},
			"env": marked(map[string]any{}), "description": "Files in the test directory",
		},
		"memory": map[string]any{
			"command": node, "args": []any{npmEntry(t, "server-memory")},
			"env": marked(map[string]any{"MEMORY_FILE_PATH": filepath.Join(t.TempDir(), "memory.jsonl")}),
		},
		"everything": map[string]any{"type": "http", "url": serveEverythingHTTP(t), "description": "The MCP test server, over HTTP"},
		"crashy": map[string]any{
			"command": lookTool(t, "python3", "python3 runs the crashing test server"), "args": []any{crash},
			"env": marked(map[string]any{}),
		},
		"dies": map[string]any{
			"command": lookTool(t, "python3", "python3 runs the crashing test server"), "args": []any{crash, "--die-on-start"},
			"env": marked(map[string]any{}),
		},
		"missing": map[string]any{"command": filepath.Join(t.TempDir(), "no-such-mcp-server"), "args": []any{"--stdio"}},
	}
	b, err := json.MarshalIndent(map[string]any{"mcpServers": servers}, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	u.config = filepath.Join(t.TempDir(), "servers.json")
	if err := os.WriteFile(u.config, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return u
}

// markedProcess is a live process whose environment holds the test mark.
type markedProcess struct {
	pid     int
	cmdline string
}

// markedProcesses lists live processes whose environment holds mark.
func markedProcesses(mark string) []markedProcess {
	var out []markedProcess
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		env, err := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
		if err != nil || !slices.Contains(strings.Split(string(env), "\x00"), "CODEEXEC_TEST_MARK="+mark) {
			continue
		}
		st, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if strings.Contains(string(st), ") Z ") {
			continue // exited, not yet reaped
		}
		cmdline, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		out = append(out, markedProcess{pid, strings.TrimSpace(strings.ReplaceAll(string(cmdline), "\x00", " "))})
	}
	return out
}

// pyJSON runs src in the sandbox with servers and decodes the last line of
// stdout as JSON into v.
func pyJSON(t *testing.T, c harness.MCPClient, servers []string, src string, v any) harness.Outcome {
	t.Helper()
	o := harness.RunPython(t, c, map[string]any{"code": src, "servers": toAny(servers)})
	if o.IsError {
		t.Fatalf("run_python(servers=%v) failed:\n%s\ncode:\n%s", servers, o.Text, src)
	}
	lines := o.Stdout()
	if len(lines) == 0 {
		t.Fatalf("run_python(servers=%v) printed nothing:\n%s", servers, o.Text)
	}
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), v); err != nil {
		t.Fatalf("last stdout line is not JSON (%v):\n%s", err, harness.Joined(lines))
	}
	return o
}

func toAny(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}

func docNames(docs []map[string]any) []string {
	out := make([]string, len(docs))
	for i, d := range docs {
		out[i] = fmt.Sprint(d["server"], "/", d["tool"])
	}
	return out
}

func hasDoc(docs []map[string]any, server, tool string) bool {
	return slices.Contains(docNames(docs), server+"/"+tool)
}

func hasTool(tools []map[string]any, name, schemaKey string) bool {
	for _, t := range tools {
		if t["name"] == name && strings.Contains(mustJSON(t[schemaKey]), `"path"`) {
			return true
		}
	}
	return false
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
