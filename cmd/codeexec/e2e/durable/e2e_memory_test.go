package durable

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/codeexec/codeexec/cmd/codeexec/e2e/internal/harness"

	memoryv1 "github.com/codeexec/codeexec/proto/gen/codeexec/memory/v1"
	"github.com/codeexec/codeexec/services/dial"
)

// End-to-end tests of memory and saved tools: the real binary, a real MCP
// client, real sandboxes and a real bbolt file.

func TestE2EMemorySurvivesARestart(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	c, _ := harness.StartStdio(t, harness.StateEnv(home))
	harness.Code(t, c, `save_memory("plan", {"step": 3, "todo": ["a", "b"]}, metadata={"owner": "me"})`)
	first := harness.Code(t, c, `print(get_memory_info("plan")["created_at"])`).Stdout()
	harness.Code(t, c, `save_memory("plan", {"step": 4, "todo": ["b"]}, metadata={"owner": "me"})`)
	_ = c.Close()

	c, _ = harness.StartStdio(t, harness.StateEnv(home))
	o := harness.Code(t, c, `
info = get_memory_info("plan")
print(load_memory("plan"))
print(info["metadata"], info["created_at"])
print(memory_exists("plan"), memory_exists("nope"), load_memory("nope", default="dflt"))
print([m["key"] for m in list_memories()])`)
	want := []string{"{'step': 4, 'todo': ['b']}", "{'owner': 'me'} " + harness.Joined(first), "True False dflt", "['plan']"}
	if got := o.Stdout(); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("after a restart:\n%s\nwant:\n%s", harness.Joined(got), strings.Join(want, "\n"))
	}
	o = harness.Code(t, c, `print(delete_memory("plan"), delete_memory("plan"), load_memory("plan"))`)
	if got := harness.Joined(o.Stdout()); got != "Memory 'plan' deleted. Memory 'plan' not found. None" {
		t.Fatalf("delete: %q", got)
	}
}

func TestE2EMemoryRejectsBadInput(t *testing.T) {
	t.Parallel()
	c, _ := harness.StartStdio(t, nil)
	for _, tc := range []struct{ src, want string }{
		{`save_memory("k", {1, 2})`, "TypeError: value of type set is not JSON serialisable"},
		{`save_memory("", 1)`, "key"},
		{`save_memory("x" * 2049, 1)`, "the limit is 2048"},
		{`save_memory("big", "x" * (2 << 20))`, "the limit is 1048576 bytes: keep less in one (split a large value over several keys), or raise the limit with CODEEXEC_MEMORY_MAX_VALUE (--max-value"},
	} {
		o := harness.RunPython(t, c, map[string]any{"code": tc.src})
		if !o.IsError || !strings.Contains(o.Text, tc.want) {
			t.Errorf("%s: %s; want an error containing %q", tc.src, o.Text, tc.want)
		}
	}
	// Distinct keys that upstream would have collapsed stay distinct.
	o := harness.Code(t, c, `save_memory("a b", 1); save_memory("a_b", 2); save_memory("ключ", 3)
print(load_memory("a b"), load_memory("a_b"), load_memory("ключ"))`)
	if got := harness.Joined(o.Stdout()); got != "1 2 3" {
		t.Fatalf("distinct keys: %q", got)
	}
}

// Two MCP sessions increment one key 200 times each, at the same time.
func TestE2EConcurrentUpdateMemoryLosesNothing(t *testing.T) {
	t.Parallel()
	base := harness.StartHTTP(t, nil)
	a, b := harness.HTTPClient(t, base), harness.HTTPClient(t, base)
	var wg sync.WaitGroup
	for _, c := range []any{a, b} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			harness.Code(t, c.(harness.MCPClient), `
for _ in range(200):
    update_memory("n", lambda v: (v or 0) + 1)`)
		}()
	}
	wg.Wait()
	if got := harness.Joined(harness.Code(t, a, `print(load_memory("n"))`).Stdout()); got != "400" {
		t.Fatalf("after 2 × 200 concurrent increments n = %s, want 400", got)
	}
	// The loops really raced: memoryd refused stale compare-and-swaps, and
	// update_memory retried them.
	if conflicts := harness.Metric(t, base, `codeexec_memoryd_op_duration_seconds_count{code="Aborted",op="memory.update"}`); conflicts == 0 {
		t.Fatal("memoryd saw no update conflicts, so the two sessions never raced")
	}
}

func TestE2ESavedToolsCarryToNewSessions(t *testing.T) {
	t.Parallel()
	base := harness.StartHTTP(t, nil)
	a := harness.HTTPClient(t, base)
	harness.Code(t, a, `
def slugify(text):
    """Lower-case text and join its words with dashes."""
    return "-".join(text.lower().split())`)
	// save_tool works for a function defined in an earlier call.
	if got := harness.Joined(harness.Code(t, a, `print(save_tool(slugify))`).Stdout()); !strings.Contains(got, "Tool 'slugify' saved") {
		t.Fatalf("save_tool: %q", got)
	}
	// Saving again replaces it.
	harness.Code(t, a, `
def slugify(text):
    """Lower-case text and join its words with underscores."""
    return "_".join(text.lower().split())
save_tool(slugify)`)

	b := harness.HTTPClient(t, base)
	o := harness.Code(t, b, `
import user_tools
print(user_tools.slugify("Hello Big World"))
print([(t["name"], t["docstring"]) for t in runtime.list_saved_tools()])`)
	want := "hello_big_world\n[('slugify', 'Lower-case text and join its words with underscores.')]"
	if got := harness.Joined(o.Stdout()); got != want {
		t.Fatalf("new session:\n%s\nwant:\n%s", got, want)
	}
	harness.Code(t, b, `runtime.delete_saved_tool("slugify")`)
	c := harness.HTTPClient(t, base)
	o = harness.RunPython(t, c, map[string]any{"code": "import user_tools\nprint(hasattr(user_tools, 'slugify'))"})
	if got := harness.Joined(o.Stdout()); got != "False" {
		t.Fatalf("after delete: %s", o.Text)
	}
}

func TestE2EImportUpstream(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	// The state dir exists, as an upstream install's ~/MCPs does; the
	// import creates the database in it.
	if err := os.Mkdir(filepath.Join(home, "MCPs"), 0o700); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(harness.Binary, "import-upstream", filepath.Join(harness.Root, "memoryd", "testdata", "upstream"))
	cmd.Env = harness.BaseEnv(t, harness.StateEnv(home))
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "imported 4 memories and 4 tools") {
		t.Fatalf("import-upstream: %v\n%s", err, out)
	}
	c, _ := harness.StartStdio(t, harness.StateEnv(home))
	o := harness.Code(t, c, `
import user_tools
print(load_memory("a b"))
print(user_tools.greet("Ada"), user_tools.add(2, 3), user_tools.add.__doc__)
info = get_memory_info("project notes")
print(info["created_at"], info["updated_at"])`)
	// The times are notes.json's created_at and updated_at.
	want := "the key upstream turned into a_b\nHello, Ada! 5 Add two numbers (second version).\n1700000000.5 1700000100.25"
	if got := harness.Joined(o.Stdout()); got != want {
		t.Fatalf("after import:\n%s\nwant:\n%s", got, want)
	}
}

// import-upstream creates no directory: a state dir or a --db directory
// that does not exist (a typo) fails naming it, and leaves no files
// behind, where the import made the directory and a database that codeexec
// serve never reads, and reported success. Only the servers create a
// state dir.
func TestE2EImportUpstreamIntoAMissingPlaceCreatesNothing(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	if err := os.WriteFile(filepath.Join(root, "file"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	upstream := filepath.Join(harness.Root, "memoryd", "testdata", "upstream")
	for _, tc := range []struct {
		name string
		args []string // "ROOT" is root
		want string
	}{
		{"a mistyped state dir", []string{"--state-dir", "ROOT/stat"},
			"no memory database at ROOT/stat/codeexec.db: the state dir ROOT/stat (--state-dir, MCP_BRIDGE_STATE_DIR) does not exist; name the state dir that codeexec serve uses"},
		{"a state dir that is a file", []string{"--state-dir", "ROOT/file"},
			"the state dir ROOT/file (--state-dir, MCP_BRIDGE_STATE_DIR) is not a directory"},
		{"a --db in a missing directory", []string{"--db", "ROOT/nodir/x.db"},
			"cannot create the memory database ROOT/nodir/x.db (--db, CODEEXEC_DB): the directory ROOT/nodir does not exist; name a bbolt file in a directory that exists"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := listTree(t, root)
			args := []string{"import-upstream"}
			for _, a := range tc.args {
				args = append(args, strings.ReplaceAll(a, "ROOT", root))
			}
			cmd := exec.CommandContext(t.Context(), harness.Binary, append(args, upstream)...)
			cmd.Env = harness.BaseEnv(t, nil)
			var stdout, stderr strings.Builder
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			err := cmd.Run()
			want := strings.ReplaceAll(tc.want, "ROOT", root)
			if err == nil || stdout.String() != "" || !strings.Contains(stderr.String(), want) {
				t.Errorf("%v: %v, stdout %q, stderr:\n%s\nwant a failure saying %q", args, err, stdout.String(), stderr.String(), want)
			}
			if after := listTree(t, root); !slices.Equal(before, after) {
				t.Errorf("the failed import changed the files:\nbefore %v\nafter  %v", before, after)
			}
		})
	}
	// A state dir that exists gets a database, and the import says so.
	cmd := exec.CommandContext(t.Context(), harness.Binary, "import-upstream", "--state-dir", root, upstream)
	cmd.Env = harness.BaseEnv(t, nil)
	out, err := cmd.CombinedOutput()
	want := "the memory database " + filepath.Join(root, "codeexec.db") + " is new: there was none before this import"
	if err != nil || !strings.Contains(string(out), "imported 4 memories and 4 tools") || !strings.Contains(string(out), want) {
		t.Fatalf("import-upstream into an existing state dir: %v\n%s\nwant the import, and %q", err, out, want)
	}
}

// A backup taken from a running memoryd is a working database; a second
// memoryd on a file in use shares it; and backup and import-upstream work
// on a database that other processes hold.
func TestE2EMemorydBackupAndSharing(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	env := harness.BaseEnv(t, nil)
	sock := "unix:" + dir + "/memoryd.sock"
	harness.StartProcess(t, env, "memoryd", "--listen", sock, "--db", dir+"/live.db", "--metrics", "")
	harness.WaitHealth(t, sock)

	imp := exec.Command(harness.Binary, "import-upstream", "--memory", sock, filepath.Join(harness.Root, "memoryd", "testdata", "upstream"))
	imp.Env = env
	if out, err := imp.CombinedOutput(); err != nil || !strings.Contains(string(out), "imported 4 memories") {
		t.Fatalf("import into the running memoryd: %v\n%s", err, out)
	}
	backup := exec.Command(harness.Binary, "memoryd", "backup", "--memory", sock, dir+"/copy.db")
	backup.Env = env
	if out, err := backup.CombinedOutput(); err != nil || !strings.Contains(string(out), "backed up") {
		t.Fatalf("memoryd backup: %v\n%s", err, out)
	}

	// A second memoryd on the live file serves the same data.
	second := "unix:" + dir + "/second.sock"
	harness.StartProcess(t, env, "memoryd", "--listen", second, "--db", dir+"/live.db", "--metrics", "")
	harness.WaitHealth(t, second)
	conn2, err := dial.New(second, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer conn2.Close()
	if _, err := memoryv1.NewMemoryServiceClient(conn2).SaveMemory(t.Context(), &memoryv1.SaveMemoryRequest{Key: "via-second", ValueJson: "2"}); err != nil {
		t.Fatalf("save through the second memoryd: %v", err)
	}
	// Backup and import straight on the file, which both memoryds hold.
	local := exec.Command(harness.Binary, "memoryd", "backup", "--db", dir+"/live.db", dir+"/local.db")
	local.Env = env
	if out, err := local.CombinedOutput(); err != nil || !strings.Contains(string(out), "backed up") {
		t.Fatalf("memoryd backup --db of a held file: %v\n%s", err, out)
	}
	limp := exec.Command(harness.Binary, "import-upstream", "--db", dir+"/live.db", "--tenant", "other", filepath.Join(harness.Root, "memoryd", "testdata", "upstream"))
	limp.Env = env
	if out, err := limp.CombinedOutput(); err != nil || !strings.Contains(string(out), "imported 4 memories") {
		t.Fatalf("import-upstream --db of a held file: %v\n%s", err, out)
	}

	// Each copy serves the data.
	for _, name := range []string{"copy", "local"} {
		copySock := "unix:" + dir + "/" + name + ".sock"
		harness.StartProcess(t, env, "memoryd", "--listen", copySock, "--db", dir+"/"+name+".db", "--metrics", "")
		harness.WaitHealth(t, copySock)
		conn, err := dial.New(copySock, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		rec, err := memoryv1.NewMemoryServiceClient(conn).GetMemory(t.Context(), &memoryv1.GetMemoryRequest{Key: "a b"})
		if err != nil || rec.GetRecord().GetValueJson() != `"the key upstream turned into a_b"` {
			t.Fatalf("GetMemory from the %s backup = %v, %v", name, rec, err)
		}
		tools, err := memoryv1.NewToolServiceClient(conn).ListTools(t.Context(), &memoryv1.ListToolsRequest{})
		if err != nil || len(tools.GetTools()) != 4 {
			t.Fatalf("ListTools from the %s backup = %d tools, %v; want 4", name, len(tools.GetTools()), err)
		}
		_, err = memoryv1.NewMemoryServiceClient(conn).GetMemory(t.Context(), &memoryv1.GetMemoryRequest{Key: "via-second"})
		if name == "local" && err != nil {
			t.Errorf("the local backup lacks what the second memoryd saved: %v", err)
		}
	}
}
