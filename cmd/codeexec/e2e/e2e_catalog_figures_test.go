package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/codeexec/codeexec/cmd/codeexec/e2e/internal/harness"
)

// TestE2EFirstSearchFigures measures, for docs/SEARCH.md, the first
// runtime.search_tool_docs of a new `codeexec serve` with 30 configured
// stdio servers (ten each of the npm filesystem, memory and everything
// servers, each entry different), first with an empty catalogue, then in
// a second process on the same state dir with the catalogue the first
// wrote, and how many server processes each search started. It asserts
// no timing; CODEEXEC_FIGURES=1 runs it.
//
//	CODEEXEC_FIGURES=1 go test -count=1 -run TestE2EFirstSearchFigures -v ./cmd/codeexec/e2e/
func TestE2EFirstSearchFigures(t *testing.T) {
	if os.Getenv("CODEEXEC_FIGURES") == "" {
		t.Skip("a measurement: set CODEEXEC_FIGURES=1")
	}
	node := lookTool(t, "node", "install Node.js 18+ and run `npm ci`")
	mark := "e2e-" + strings.ReplaceAll(t.TempDir(), "/", "_")
	servers := map[string]any{}
	for i := range 10 {
		env := map[string]any{"CODEEXEC_TEST_MARK": mark}
		servers[fmt.Sprintf("files-%d", i)] = map[string]any{"command": node, "args": []any{npmEntry(t, "server-filesystem"), t.TempDir()}, "env": env}
		servers[fmt.Sprintf("memory-%d", i)] = map[string]any{"command": node, "args": []any{npmEntry(t, "server-memory")},
			"env": map[string]any{"CODEEXEC_TEST_MARK": mark, fmt.Sprintf("MEMORY_FILE_PATH_%d", i): "x", "MEMORY_FILE_PATH": filepath.Join(t.TempDir(), "m.jsonl")}}
		servers[fmt.Sprintf("everything-%d", i)] = map[string]any{"command": node, "args": []any{npmEntry(t, "server-everything"), "stdio"},
			"env": map[string]any{"CODEEXEC_TEST_MARK": mark, fmt.Sprintf("EVERYTHING_%d", i): "x"}}
	}
	b, err := json.Marshal(map[string]any{"mcpServers": servers})
	if err != nil {
		t.Fatal(err)
	}
	config := filepath.Join(t.TempDir(), "servers.json")
	if err := os.WriteFile(config, b, 0o644); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"MCP_SERVERS_CONFIG": config, "CODEEXEC_TEST_MARK": mark, "CODEEXEC_SEARCH_INDEX_WAIT": "120s"}
	for k, v := range harness.StateEnv(t.TempDir()) {
		env[k] = v
	}
	if m := searchModel(); m != "" {
		env["CODEEXEC_SEARCH_MODEL"] = m
	}
	servers30 := func() int {
		n := 0
		for _, p := range markedProcesses(mark) {
			if !strings.HasSuffix(p.cmdline, "codeexec serve") {
				n++
			}
		}
		return n
	}
	search := `import json, time
t = time.monotonic()
hits = await runtime.search_tool_docs("store a note about a person in the knowledge graph")
print(json.dumps({"Took": time.monotonic() - t, "Hits": hits, "Unindexed": list(hits.unindexed)}))`
	for _, run := range []string{"empty catalogue", "known catalogue"} {
		c, _ := harness.StartStdio(t, env)
		var got struct {
			Took      float64
			Hits      []map[string]any
			Unindexed []string
		}
		start := time.Now()
		pyJSON(t, c, nil, search, &got)
		wall := time.Since(start)
		started := servers30()
		t.Logf("%s: first search %.2f s in the sandbox (%.2f s for the whole run_python call), %d server processes running after it, %d hits, unindexed %v",
			run, got.Took, wall.Seconds(), started, len(got.Hits), got.Unindexed)
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(30 * time.Second)
		for len(markedProcesses(mark)) > 0 && time.Now().Before(deadline) {
			time.Sleep(100 * time.Millisecond)
		}
	}
}
