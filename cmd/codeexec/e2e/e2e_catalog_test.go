package e2e

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/codeexec/codeexec/cmd/codeexec/e2e/internal/harness"
)

// searchModel is the search model scripts/search-model.sh installed for
// the user running the tests, found before the harness gives codeexec a
// home of its own; "" when there is none.
func searchModel() string {
	p := os.Getenv("CODEEXEC_SEARCH_MODEL")
	if p == "" {
		home, _ := os.UserHomeDir()
		p = filepath.Join(home, ".local", "share", "codeexec", "search-model-v2")
		if d := os.Getenv("XDG_DATA_HOME"); d != "" {
			p = filepath.Join(d, "codeexec", "search-model-v2")
		}
	}
	if _, err := os.Stat(filepath.Join(p, "model.onnx")); errors.Is(err, fs.ErrNotExist) {
		return ""
	}
	return p
}

// TestE2ESearchFromTheCatalogue: a second `codeexec serve` on the same
// state dir answers runtime.search_tool_docs, and query_tool_docs of a
// server the call did not load, from the catalogue the first one wrote,
// without starting the servers the first one listed; with the search
// model installed, both rank by meaning too: the first once the model has
// read the tools in the background, the second at once, from the vectors
// the first stored.
func TestE2ESearchFromTheCatalogue(t *testing.T) {
	t.Parallel()
	u := configureUpstreams(t)
	env := u.env()
	for k, v := range harness.StateEnv(t.TempDir()) {
		env[k] = v
	}
	model := searchModel()
	if model != "" {
		env["CODEEXEC_SEARCH_MODEL"] = model
	}
	search := `import json
hits = await runtime.search_tool_docs("put some text into a file on disk")
print(json.dumps({"Hits": hits, "Unindexed": list(hits.unindexed)}))`
	type found struct {
		Hits      []map[string]any
		Unindexed []string
	}

	first, logs := harness.StartStdio(t, env)
	var got found
	pyJSON(t, first, nil, search, &got)
	if !hasDoc(got.Hits, "filesystem", "write_file") {
		t.Fatalf("first process: %v, want filesystem/write_file", docNames(got.Hits))
	}
	if model != "" && !strings.Contains(logs.String(), "search model loaded") {
		t.Errorf("CODEEXEC_SEARCH_MODEL=%s, but the log does not say the model loaded:\n%s", model, harness.TailOf(logs.String(), 3000))
	}
	if model != "" {
		// Until the model has read every tool, hits say they rank by
		// words only; then they stop saying so.
		deadline := time.Now().Add(2 * time.Minute)
		for pending(got.Hits) && time.Now().Before(deadline) {
			time.Sleep(time.Second)
			pyJSON(t, first, nil, search, &got)
		}
		if pending(got.Hits) {
			t.Fatalf("after 2 minutes the hits still rank by words only: %v", got.Hits)
		}
	}
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	// The first process, and its servers, end.
	deadline := time.Now().Add(20 * time.Second)
	for len(markedProcesses(u.mark)) > 0 && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
	if left := markedProcesses(u.mark); len(left) > 0 {
		t.Fatalf("the first process or its servers still running: %v", left)
	}

	second, _ := harness.StartStdio(t, env)
	var again struct {
		found
		Docs     []map[string]any
		NotKnown string
	}
	pyJSON(t, second, nil, search[:strings.LastIndex(search, "\n")]+`
docs = await runtime.query_tool_docs("memory", "read_graph")
try:
    await runtime.query_tool_docs("dies")
    not_known = ""
except runtime.MCPError as e:
    not_known = str(e)
print(json.dumps({"Hits": hits, "Unindexed": list(hits.unindexed), "Docs": [docs], "NotKnown": not_known}))`, &again)
	if !hasDoc(again.Hits, "filesystem", "write_file") {
		t.Errorf("second process: %v, want filesystem/write_file from the catalogue", docNames(again.Hits))
	}
	for _, d := range again.Hits {
		if m, _ := d["match"].(string); m == "" {
			t.Errorf("hit %v says nothing of why it matched", d)
		}
	}
	if model != "" && pending(again.Hits) {
		t.Errorf("second process's first search ranks by words only, so it did not find the vectors the first stored: %v", again.Hits)
	}
	if len(again.Docs) != 1 || again.Docs[0]["tool"] != "read_graph" || again.Docs[0]["server"] != "memory" {
		t.Errorf("query_tool_docs('memory', 'read_graph') in a call that loaded nothing = %v, want its doc from the catalogue", again.Docs)
	}
	if !strings.Contains(again.NotKnown, "not available") {
		t.Errorf("query_tool_docs of a server that never listed its tools: %q, want the error that says how to load it", again.NotKnown)
	}
	// Only the servers that never listed their tools were started again:
	// the one that dies at start (it is tried on each search), none of
	// those the catalogue knows.
	for _, p := range markedProcesses(u.mark) {
		if !strings.Contains(p.cmdline, "--die-on-start") && !strings.HasSuffix(p.cmdline, "codeexec serve") {
			t.Errorf("the second process started %q to search servers whose tools the catalogue knows", p.cmdline)
		}
	}
}

// pending reports whether hits say the model has not read every tool yet.
func pending(hits []map[string]any) bool {
	for _, h := range hits {
		if m, _ := h["match"].(string); strings.Contains(m, "by words only") {
			return true
		}
	}
	return false
}
