package memoryd_test

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/codeexec/codeexec/memoryd"
	memoryv1 "github.com/codeexec/codeexec/proto/gen/codeexec/memory/v1"
)

func TestImportUpstream(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, cfg memoryd.Config) {
		e := start(t, cfg)
		dir := filepath.Join("testdata", "upstream")
		mem := filepath.Join(dir, "user_tools", "memory")
		py := filepath.Join(dir, "user_tools", "user_tools.py")

		rep, err := memoryd.ImportUpstream(t.Context(), e.mem, e.tools, dir, "imported")
		if err != nil {
			t.Fatal(err)
		}
		want := memoryd.Report{
			Memories: []string{"a b", "ключ", "project notes", "nothing"},
			Tools:    []string{"greet", "lookup", "add", "fetch"},
			Skipped: []memoryd.Skipped{
				{Path: filepath.Join(mem, "badmeta.json"), Item: "badmeta", Reason: `"metadata" is not a JSON object`},
				{Path: filepath.Join(mem, "broken.json"), Reason: "bad JSON: unexpected end of JSON input"},
				{Path: filepath.Join(mem, "nokey.json"), Reason: `missing "key"`},
				{Path: filepath.Join(mem, "toolong.json"), Item: strings.Repeat("k", 300), Reason: "invalid argument: key is 300 bytes long; at most 256 bytes are allowed"},
				{Path: py, Item: "line 29", Reason: `top-level statement that is not a function ("CONSTANT = 3"); saved tools are functions only`},
				{Path: py, Item: "add (line 10)", Reason: "replaced by a later definition at line 24"},
			},
		}
		if diff := cmp.Diff(want, rep); diff != "" {
			t.Errorf("report (-want +got):\n%s", diff)
		}
		t.Logf("report:\n%s", rep)

		for key, wantValue := range map[string]string{
			"project notes": `{"todo":["a","b"],"done":2}`,
			"a b":           `"the key upstream turned into a_b"`,
			"nothing":       `null`,
			"ключ":          `"значение"`,
		} {
			if got := e.get(t, "imported", key).GetValueJson(); got != wantValue {
				t.Errorf("%q = %s, want %s", key, got, wantValue)
			}
		}
		if got := e.get(t, "imported", "project notes").GetMetadataJson(); got != `{"source":"chat"}` {
			t.Errorf("metadata = %s", got)
		}
		if got := e.get(t, "imported", "nothing").GetMetadataJson(); got != `{}` {
			t.Errorf("null metadata became %s, want {}", got)
		}

		lookup, err := e.tools.GetTool(t.Context(), &memoryv1.GetToolRequest{Tenant: "imported", Name: "lookup"})
		if err != nil {
			t.Fatal(err)
		}
		wantSrc := "import json\nimport functools\n\n\n# Cached lookup.\n@functools.lru_cache(maxsize=None)\ndef lookup(key: str) -> str:\n    '''Look a key up.\n\n    Returns the JSON text.\n    '''\n    return json.dumps({\"key\": key})\n"
		if diff := cmp.Diff(wantSrc, lookup.GetTool().GetSource()); diff != "" {
			t.Errorf("lookup source (-want +got):\n%s", diff)
		}
		if got := lookup.GetTool().GetDocstring(); got != "Look a key up.\n\nReturns the JSON text." {
			t.Errorf("lookup docstring = %q", got)
		}
		add, err := e.tools.GetTool(t.Context(), &memoryv1.GetToolRequest{Tenant: "imported", Name: "add"})
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(add.GetTool().GetSource(), "second version") {
			t.Errorf("add is the first definition, want the last:\n%s", add.GetTool().GetSource())
		}

		// A second run imports nothing and overwrites nothing.
		again, err := memoryd.ImportUpstream(t.Context(), e.mem, e.tools, dir, "imported")
		if err != nil {
			t.Fatal(err)
		}
		if len(again.Memories) != 0 || len(again.Tools) != 0 || len(again.Skipped) != len(want.Skipped)+8 {
			t.Errorf("second import: %s", again)
		}
		// Nothing leaked into the default tenant.
		list, err := e.mem.ListMemories(t.Context(), &memoryv1.ListMemoriesRequest{})
		if err != nil || len(list.GetRecords()) != 0 {
			t.Errorf("default tenant has %v, %v", list.GetRecords(), err)
		}
	})
}

func TestImportUpstreamMissingDir(t *testing.T) {
	t.Parallel()
	e := start(t, memoryd.Config{})
	_, err := memoryd.ImportUpstream(t.Context(), e.mem, e.tools, t.TempDir(), "")
	if err == nil || !strings.Contains(err.Error(), "no upstream state in") {
		t.Errorf("err = %v, want one naming the missing state", err)
	}
}
