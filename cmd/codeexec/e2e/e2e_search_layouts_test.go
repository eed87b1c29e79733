package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/codeexec/codeexec/cmd/codeexec/e2e/internal/harness"
)

// TestE2EDiscoverySearchContract checks the search contract on the
// sandbox's public API: a result says how many tools matched and whether
// the list was cut, and an exact tool name ranks first in both variants.
// The channel reply carries total and truncated (TestE2EDiscovery checks
// it); what the agent's runtime returns from it is checked here.
func TestE2EDiscoverySearchContract(t *testing.T) {
	t.Parallel()
	u := configureUpstreams(t)
	c, _ := harness.StartStdio(t, u.env())

	t.Run("results say total and truncated", func(t *testing.T) {
		var got map[string]any
		pyJSON(t, c, []string{"filesystem"}, `import json
out = {}
for name, r in (("async", await runtime.search_tool_docs("read a file", limit=2)),
                ("sync", runtime.search_tool_docs_sync("file", limit=2))):
    out[name] = {"list": isinstance(r, list), "n": len(r),
                 "total": getattr(r, "total", None), "truncated": getattr(r, "truncated", None)}
print(json.dumps(out))`, &got)
		for _, v := range []string{"async", "sync"} {
			r, _ := got[v].(map[string]any)
			total, _ := r["total"].(float64)
			if r["list"] != true || r["n"] != 2.0 || total <= 2 || r["truncated"] != true {
				t.Errorf("%s search_tool_docs(limit=2) = %v; want a list of 2 docs (upstream's shape) whose .total (> 2) and .truncated (True) say that more tools matched", v, r)
			}
		}
	})

	t.Run("exact name first", func(t *testing.T) {
		// read_file's description says "Use read_text_file instead", and
		// read_file comes first in the server's list.
		var got map[string][]map[string]any
		pyJSON(t, c, []string{"filesystem"}, `import json
print(json.dumps({"async": await runtime.search_tool_docs("read_text_file"), "sync": runtime.search_tool_docs_sync("read_text_file")}))`, &got)
		for _, v := range []string{"async", "sync"} {
			if names := docNames(got[v]); len(names) == 0 || names[0] != "filesystem/read_text_file" {
				t.Errorf("%s search for the exact tool name read_text_file = %v, want filesystem/read_text_file first", v, names)
			}
		}
	})
}

// TestE2EClientConfigLayouts starts `codeexec serve` with nothing but the
// config files two clients write themselves, and calls a real server from
// each: OpenCode's global config (command as one list, "environment") and
// a server that `claude mcp add` put under this project in ~/.claude.json.
func TestE2EClientConfigLayouts(t *testing.T) {
	t.Parallel()
	node := lookTool(t, "node", "install Node.js 18+ and run `npm ci`")
	home, files := t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(files, "note.txt"), []byte("from a project server\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cwd, err := os.Getwd() // codeexec serve runs in the test's directory
	if err != nil {
		t.Fatal(err)
	}
	write := func(rel string, v any) {
		p := filepath.Join(home, rel)
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(".config/opencode/opencode.json", map[string]any{"mcp": map[string]any{
		"notes": map[string]any{"type": "local", "command": []any{node, npmEntry(t, "server-memory")},
			"environment": map[string]any{"MEMORY_FILE_PATH": filepath.Join(t.TempDir(), "memory.jsonl")}},
		"switched-off": map[string]any{"type": "local", "command": []any{node}, "enabled": false},
	}})
	write(".claude.json", map[string]any{
		"mcpServers": map[string]any{},
		"projects": map[string]any{
			cwd:               map[string]any{"mcpServers": map[string]any{"project-files": map[string]any{"command": node, "args": []any{npmEntry(t, "server-filesystem"), files}}}},
			"/somewhere/else": map[string]any{"mcpServers": map[string]any{"not-here": map[string]any{"command": node}}},
		},
	})
	c, _ := harness.StartStdio(t, map[string]string{"HOME": home, "MCP_BRIDGE_STATE_DIR": filepath.Join(home, "MCPs")})

	var got struct {
		Servers []string
		Note    string
		Created string
	}
	pyJSON(t, c, []string{"notes", "project-files"}, `import json
note = await mcp_project_files.read_text_file(path=`+strconv.Quote(filepath.Join(files, "note.txt"))+`)
made = await mcp_notes.create_entities(entities=[{"name": "codeexec", "entityType": "project", "observations": ["configured by OpenCode"]}])
print(json.dumps({"Servers": list(runtime.discovered_servers()), "Note": str(note), "Created": str(made)}))`, &got)
	if strings.Join(got.Servers, ",") != "notes,project-files" {
		t.Errorf("discovered_servers() = %v, want notes and project-files only", got.Servers)
	}
	if !strings.Contains(got.Note, "from a project server") {
		t.Errorf("read_text_file through the project server: %q", got.Note)
	}
	if !strings.Contains(got.Created, "configured by OpenCode") {
		t.Errorf("create_entities through the OpenCode server: %q", got.Created)
	}
}
