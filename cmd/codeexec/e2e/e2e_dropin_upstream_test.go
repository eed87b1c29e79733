package e2e

import (
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/codeexec/codeexec/cmd/codeexec/e2e/internal/harness"
)

// More end-to-end tests of issue 14 (see e2e_dropin_test.go): upstream's
// state on a first start, the servers' environment, argument errors and
// saved tools called by their bare names.

// copyTree copies the files under src into dst.
func copyTree(t *testing.T, src, dst string) {
	t.Helper()
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// snapshot maps each file under dir to its content and modification time.
func snapshot(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		out[p] = fmt.Sprintf("%s @ %s", b, fi.ModTime().Format(time.RFC3339Nano))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// Item 4: an upstream user's state dir (~/MCPs/user_tools) is imported on
// the first start with a new database, with its times, and is never
// changed; later starts do not import it again.
func TestE2EDropInUpstreamStateOnFirstStart(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	upstream := filepath.Join(home, "MCPs", "user_tools")
	copyTree(t, filepath.Join("..", "..", "..", "memoryd", "testdata", "upstream", "user_tools"), upstream)
	before := snapshot(t, upstream)

	c, logs := harness.StartStdio(t, harness.StateEnv(home))
	waitLog(t, "codeexec", logs, regexp.MustCompile(`msg="imported upstream state on first start \(its files are left unchanged\)".* memories=4 tools=4 skipped=\d+`))
	o := harness.Code(t, c, `
import user_tools
print(load_memory("project notes"))
info = get_memory_info("project notes")
print(info["key"], info["metadata"], info["created_at"], info["updated_at"])
print(user_tools.greet("Ada"), user_tools.add.__doc__)`)
	want := []string{
		// upstream-behaviour.md §4 and mcp_server_code_execution_mode.py
		// L838-839: memory lives in /projects/memory/<key>.json, which is
		// ~/MCPs/user_tools/memory on the host; L1001-1024: load_memory
		// returns the file's "value".
		"{'todo': ['a', 'b'], 'done': 2}",
		// L1106-1120: get_memory_info returns the file's record, whose
		// created_at and updated_at (L980-998) are notes.json's.
		"project notes {'source': 'chat'} 1700000000.5 1700000100.25",
		// L838 and L919-931: user_tools.py is loaded as the module
		// user_tools; the last definition of a name wins.
		"Hello, Ada! Add two numbers (second version).",
	}
	if harness.Joined(o.Stdout()) != harness.Joined(want) {
		t.Errorf("upstream state after the first start:\n%s\nwant:\n%s", o.Text, harness.Joined(want))
	}
	harness.Code(t, c, `delete_memory("project notes")`)
	_ = c.Close()

	// A later start finds the database and imports nothing: the deleted
	// memory stays deleted.
	c, logs = harness.StartStdio(t, harness.StateEnv(home))
	waitLog(t, "codeexec", logs, regexp.MustCompile(`msg="codeexec serving"`))
	if strings.Contains(logs.String(), "imported upstream state") {
		t.Errorf("the second start imported upstream state again:\n%s", logs.String())
	}
	if got := harness.Joined(harness.Code(t, c, `print(load_memory("project notes"), load_memory("a b"))`).Stdout()); got != "None the key upstream turned into a_b" {
		t.Errorf("after a restart: %s", got)
	}
	if after := snapshot(t, upstream); !maps.Equal(before, after) {
		t.Errorf("the upstream files changed:\nbefore %v\nafter  %v", before, after)
	}
}

// Item 5: MCP_AVAILABLE_SERVERS and MCP_DISCOVERED_SERVERS are set in the
// sandbox's environment, for the code and its subprocesses.
func TestE2EDropInServerEnvironment(t *testing.T) {
	t.Parallel()
	c, _ := harness.StartStdio(t, dropinServers(t, t.TempDir()))
	src := `import json, os, subprocess
available = json.loads(os.environ["MCP_AVAILABLE_SERVERS"])
print([(m["name"], m["alias"], m["cwd"], "read_text_file" in [t["name"] for t in m["tools"]]) for m in available])
print(sorted(set(k for m in available for t in m["tools"] for k in t)))
print(json.dumps(json.loads(os.environ["MCP_DISCOVERED_SERVERS"]), sort_keys=True))
child = subprocess.run(["/bin/sh", "-c", 'printf %s "$MCP_DISCOVERED_SERVERS"'], capture_output=True, text=True).stdout
print(json.loads(child) == json.loads(os.environ["MCP_DISCOVERED_SERVERS"]))`
	o := harness.RunPython(t, c, map[string]any{"servers": []any{"filesystem"}, "code": src})
	want := []string{
		// mcp_server_code_execution_mode.py L2022-2025: MCP_AVAILABLE_SERVERS
		// is json.dumps(self.server_metadata), the loaded servers'
		// metadata {name, alias, tools, cwd} (L1983-1987, upstream-behaviour.md
		// §2.2), each tool {name, alias, description, input_schema}.
		"[('filesystem', 'filesystem', None, True)]",
		"['alias', 'description', 'input_schema', 'name']",
		// L2026-2029 and L1993-1995: MCP_DISCOVERED_SERVERS is
		// json.dumps({name: description}) over every configured server.
		`{"crashy": "", "empty": "No tools at all", "filesystem": "Files"}`,
		// Set with --env on the container (upstream-behaviour.md §5), so
		// every process in the sandbox sees them.
		"True",
	}
	if o.IsError || harness.Joined(o.Stdout()) != harness.Joined(want) {
		t.Errorf("environment with servers=[filesystem]:\n%s\nwant:\n%s", o.Text, harness.Joined(want))
	}
	// The variables follow each call's servers.
	o = harness.Code(t, c, `import os; print(os.environ["MCP_AVAILABLE_SERVERS"])`)
	if got := harness.Joined(o.Stdout()); got != "[]" {
		t.Errorf("MCP_AVAILABLE_SERVERS in a call without servers = %s, want []", got)
	}
}

// Item 6: argument errors are upstream's, and keys longer than a person
// writes are kept.
func TestE2EDropInArgumentErrors(t *testing.T) {
	t.Parallel()
	c, _ := harness.StartStdio(t, nil)
	o := harness.Code(t, c, `
for case in (lambda: save_tool(42), lambda: save_memory("   ", 1), lambda: save_memory("k" * 2049, 1)):
    try:
        case()
        print("no error")
    except Exception as e:
        print(type(e).__name__ + ": " + str(e))
print(save_memory("  notes\n", 1), load_memory("notes"))
long = "k" * 1000
save_memory(long, "kept")
print(load_memory(long), [len(m["key"]) for m in list_memories()])`)
	got := o.Stdout()
	// mcp_server_code_execution_mode.py L937-938: save_tool raises
	// ValueError("save_tool expects a function"); L956-958: the key is
	// stripped and an empty one raises ValueError("Memory key cannot be
	// empty"). codeexec's advice follows upstream's words.
	wantPrefix := []string{"ValueError: save_tool expects a function", "ValueError: Memory key cannot be empty"}
	for i, w := range wantPrefix {
		if len(got) <= i || !strings.HasPrefix(got[i], w) {
			t.Errorf("line %d = %q, want it to start with upstream's %q", i+1, at(got, i), w)
		}
	}
	// Upstream keeps any key: L959-960 cuts only the file name, and
	// L983 keeps the whole key in the file. codeexec keeps keys of up
	// to 2,048 bytes and names the limit beyond.
	want := []string{
		"ValueError: memory key is 2049 UTF-8 bytes; the limit is 2048 (keep the data in the value)",
		"Memory 'notes' saved. 1",
		"kept [1000, 5]",
	}
	if len(got) != 5 || harness.Joined(got[2:]) != harness.Joined(want) {
		t.Errorf("output:\n%s\nwant lines 3-5:\n%s", o.Text, harness.Joined(want))
	}
}

func at(lines []string, i int) string {
	if i < len(lines) {
		return lines[i]
	}
	return ""
}

// Item 7: a saved tool is callable by its bare name in later sessions (and
// still importable); names a session defines win; tools saved or deleted
// elsewhere apply from the next session on.
func TestE2EDropInSavedToolsByBareName(t *testing.T) {
	t.Parallel()
	base := harness.StartHTTP(t, nil)
	a := harness.HTTPClient(t, base)
	harness.Code(t, a, `
def slug(text):
    return "-".join(text.lower().split())
def greet(name):
    return "hi " + name
save_tool(slug)
save_tool(greet)`)

	b := harness.HTTPClient(t, base)
	o := harness.Code(t, b, `
import user_tools
print(slug("Hello Big World"), greet("Ada"), slug is user_tools.slug)`)
	// GUIDE.md@27d23b8 line 564: saved tools are accessed by "`import` or
	// call directly"; mcp_server_code_execution_mode.py L919-931 loads
	// user_tools.py at the start and exports its public names.
	if got := harness.Joined(o.Stdout()); got != "hello-big-world hi Ada True" {
		t.Errorf("saved tools in a new session: %s", o.Text)
	}

	// A session's own names win over saved tools, at once and later.
	c := harness.HTTPClient(t, base)
	harness.Code(t, c, `slug = "my slug"
def greet(name):
    return "my greet"`)
	if got := harness.Joined(harness.Code(t, c, `print(slug, greet("x"))`).Stdout()); got != "my slug my greet" {
		t.Errorf("a session's own names: %s", got)
	}

	// Saved and deleted elsewhere: a session that is running keeps what
	// it started with (L947: a saved tool "will be available in future
	// sessions"), and the next session sees the change.
	harness.Code(t, a, `
def later():
    return "later"
save_tool(later)
print(runtime.delete_saved_tool("greet"))`)
	o = harness.Code(t, b, `print("later" in globals(), greet("still"))`)
	if got := harness.Joined(o.Stdout()); got != "False hi still" {
		t.Errorf("a running session after a save and a delete elsewhere: %s", o.Text)
	}
	d := harness.HTTPClient(t, base)
	o = harness.Code(t, d, `
import user_tools
print(later(), "greet" in globals(), hasattr(user_tools, "greet"))`)
	if got := harness.Joined(o.Stdout()); got != "later False False" {
		t.Errorf("a new session after a save and a delete elsewhere: %s", o.Text)
	}
}
