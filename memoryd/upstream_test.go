package memoryd_test

import (
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

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
				{Path: filepath.Join(mem, "toolong.json"), Item: strings.Repeat("k", 2100), Reason: "invalid argument: key is 2100 bytes long; at most 2048 bytes are allowed"},
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
		// Upstream's created_at and updated_at (epoch seconds) are kept.
		for key, want := range map[string][2]time.Time{
			"project notes": {time.Unix(1700000000, 5e8), time.Unix(1700000100, 25e7)},
			"ключ":          {time.Unix(1, 0), time.Unix(2, 0)},
		} {
			rec := e.get(t, "imported", key)
			if got := [2]time.Time{rec.GetCreateTime().AsTime(), rec.GetUpdateTime().AsTime()}; !got[0].Equal(want[0]) || !got[1].Equal(want[1]) {
				t.Errorf("%q created, updated = %v, want %v", key, got, want)
			}
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

// TestUpstreamRecords covers the record fields that need care: times and
// keys with surrounding white space.
func TestUpstreamRecords(t *testing.T) {
	t.Parallel()
	e := start(t, memoryd.Config{})
	dir := t.TempDir()
	memDir := filepath.Join(dir, "user_tools", "memory")
	if err := os.MkdirAll(memDir, 0o755); err != nil {
		t.Fatal(err)
	}
	files := map[string]string{
		"missing": `{"key": "missing", "value": 1}`,
		"strings": `{"key": "strings", "value": 1, "created_at": "yesterday", "updated_at": null}`,
		"skewed":  `{"key": "skewed", "value": 1, "created_at": 100.75, "updated_at": 50}`,
		"rounded": `{"key": "rounded", "value": 1, "created_at": 1.9999999999, "updated_at": 1e3}`,
		"spaced":  `{"key": "  spaced key\n\u001f", "value": "s"}`,
		"blank":   `{"key": " \t ", "value": "b"}`,
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(memDir, name+".json"), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	before := time.Now().Add(-time.Second)
	rep, err := memoryd.ImportUpstream(t.Context(), e.mem, e.tools, dir, "")
	if err != nil {
		t.Fatal(err)
	}
	wantSkipped := []memoryd.Skipped{{Path: filepath.Join(memDir, "blank.json"), Item: " \t ", Reason: `"key" is blank`}}
	if diff := cmp.Diff(wantSkipped, rep.Skipped); diff != "" {
		t.Errorf("skipped (-want +got):\n%s", diff)
	}
	if got := e.get(t, "", "spaced key").GetValueJson(); got != `"s"` {
		t.Errorf(`"spaced key" = %s, want the stripped key to hold "s"`, got)
	}
	for key, want := range map[string][2]time.Time{
		"skewed":  {time.Unix(100, 75e7), time.Unix(100, 75e7)}, // an update before the create is raised to it
		"rounded": {time.Unix(2, 0), time.Unix(1000, 0)},
	} {
		rec := e.get(t, "", key)
		if got := [2]time.Time{rec.GetCreateTime().AsTime(), rec.GetUpdateTime().AsTime()}; !got[0].Equal(want[0]) || !got[1].Equal(want[1]) {
			t.Errorf("%q created, updated = %v, want %v", key, got, want)
		}
	}
	// Without usable times the record gets the time of the import.
	for _, key := range []string{"missing", "strings"} {
		if rec := e.get(t, "", key); rec.GetCreateTime().AsTime().Before(before) {
			t.Errorf("%q created %v, want the time of the import", key, rec.GetCreateTime().AsTime())
		}
	}
	// The upstream files are left as they were.
	for name, body := range files {
		if got, err := os.ReadFile(filepath.Join(memDir, name+".json")); err != nil || string(got) != body {
			t.Errorf("%s.json changed: %q, %v", name, got, err)
		}
	}
}

func TestImportUpstreamOnFirstStart(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "memory.db")
	e := start(t, memoryd.Config{Path: path})
	if !e.svc.NewDatabase() {
		t.Fatal("NewDatabase() = false for a database this start created")
	}
	dir := filepath.Join("testdata", "upstream")
	if !memoryd.HasUpstreamState(dir) || memoryd.HasUpstreamState(t.TempDir()) {
		t.Fatal("HasUpstreamState: want true for testdata/upstream only")
	}
	var logs strings.Builder
	logger := slog.New(slog.NewTextHandler(&logs, nil))
	if err := memoryd.ImportUpstreamOnFirstStart(t.Context(), e.mem, e.tools, dir, memoryd.DefaultTenant, logger); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		`level=INFO msg="imported upstream state on first start (its files are left unchanged)" dir=testdata/upstream tenant=default memories=4 tools=4 skipped=6`,
		`level=WARN msg="upstream state: item not imported" path=testdata/upstream/user_tools/memory/nokey.json item="" reason="missing \"key\""`,
	} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("log lacks %s:\n%s", want, logs.String())
		}
	}
	if got := e.get(t, "", "a b").GetValueJson(); got != `"the key upstream turned into a_b"` {
		t.Errorf(`"a b" = %s`, got)
	}
	if err := e.svc.Close(); err != nil {
		t.Fatal(err)
	}
	e.closed = true
	again := start(t, memoryd.Config{Path: path})
	if again.svc.NewDatabase() {
		t.Error("NewDatabase() = true on the second start")
	}
}
