package durable

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/codeexec/codeexec/cmd/codeexec/e2e/internal/harness"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
)

// End-to-end tests of many codeexec processes on one state dir, as a user
// with several MCP clients has them: real processes, real MCP clients,
// real sandboxes and one real bbolt file.

// startStdioAt starts n `codeexec serve` processes on one home at the same
// moment and returns their clients and logs.
func startStdioAt(t *testing.T, n int, extra map[string]string) ([]*client.Client, []*harness.LockedBuffer) {
	t.Helper()
	clients := make([]*client.Client, n)
	logs := make([]*harness.LockedBuffer, n)
	errs := make([]error, n)
	env := harness.BaseEnv(t, extra)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			logs[i] = &harness.LockedBuffer{}
			c, err := client.NewStdioMCPClientWithOptions(harness.Binary, env, []string{"serve"}, transport.WithCommandStderrWriter(logs[i]))
			if err != nil {
				errs[i] = err
				return
			}
			clients[i] = c
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			errs[i] = harness.InitializeErr(ctx, c)
		}()
	}
	wg.Wait()
	for i := range n {
		if clients[i] != nil {
			c, l := clients[i], logs[i]
			t.Cleanup(func() {
				_ = c.Close()
				if t.Failed() {
					t.Logf("codeexec serve #%d stderr:\n%s", i, harness.TailOf(l.String(), 4000))
				}
			})
		}
		if errs[i] != nil {
			t.Fatalf("codeexec serve #%d: %v\nstderr:\n%s", i, errs[i], logs[i].String())
		}
	}
	return clients, logs
}

// sharedEnv is the environment of processes that share one state dir.
func sharedEnv(home string) map[string]string {
	env := harness.StateEnv(home)
	env["MCP_BRIDGE_PIDS"] = "256" // 100 threads in one sandbox
	return env
}

// incrementAll is run_python code that increments key "n" from threads
// threads at once and prints how many increments were acknowledged.
const incrementAll = `
from concurrent.futures import ThreadPoolExecutor
with ThreadPoolExecutor(max_workers=100) as pool:
    done = list(pool.map(lambda _: update_memory("n", lambda v: (v or 0) + 1), range(100)))
print(len(done))`

// Three processes started at the same moment on one state dir each run 100
// concurrent update_memory increments of one key: nothing is lost.
func TestE2EServeProcessesShareOneStateDir(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	clients, logs := startStdioAt(t, 3, sharedEnv(home))
	owners := 0
	for _, l := range logs {
		if strings.Contains(l.String(), "serving it to other codeexec processes") {
			owners++
		}
	}
	if owners != 1 {
		t.Errorf("%d of 3 processes say they own the database; want exactly 1", owners)
	}
	var wg sync.WaitGroup
	for _, c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			o, err := harness.CallRunPython(ctx, c, map[string]any{"code": incrementAll, "timeout": 120})
			if err != nil || o.IsError || harness.Joined(o.Stdout()) != "100" {
				t.Errorf("increments: %v %s", err, o.Text)
			}
		}()
	}
	wg.Wait()
	for i, c := range clients {
		if got := harness.Joined(harness.Code(t, c, `print(load_memory("n"))`).Stdout()); got != "300" {
			t.Errorf("process %d reads n = %s, want 300", i, got)
		}
	}
}

// appendIDs is run_python code whose 100 threads each append a unique ID
// to the list under "ids", spread over about four seconds, and which prints
// the IDs that were acknowledged, as JSON.
func appendIDs(prefix string) string {
	return fmt.Sprintf(`
import json, time
from concurrent.futures import ThreadPoolExecutor
def add(i):
    time.sleep(i * 0.04)
    me = "%s-%%d" %% i
    update_memory("ids", lambda v: (v or []) + [me])
    return me
with ThreadPoolExecutor(max_workers=100) as pool:
    print(json.dumps(list(pool.map(add, range(100)))))`, prefix)
}

// The owner is killed with SIGKILL in the middle of the other processes'
// writes: every write they had acknowledged is in the list exactly once,
// they carry on without an error, and a process started after the kill
// serves at once.
func TestE2EOwnerKilledWhileOthersWrite(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	clients, logs := startStdioAt(t, 3, sharedEnv(home))
	watcher, _ := harness.StartStdio(t, sharedEnv(home))
	owner := -1
	for i, l := range logs {
		if strings.Contains(l.String(), "serving it to other codeexec processes") {
			owner = i
		}
	}
	if owner < 0 {
		t.Fatal("no process says it owns the database")
	}
	pid := ownerFilePID(t, filepath.Join(home, "MCPs", "codeexec.db.owner"))
	// Every process has its sandbox up before the writes start, so that
	// the watcher's polls are warm calls: a first call that starts a
	// container took longer than the owner's writes did (docker, in CI).
	for i, c := range append([]*client.Client{watcher}, clients...) {
		if got := harness.Joined(harness.Code(t, c, `print("up")`).Stdout()); got != "up" {
			t.Fatalf("warming process %d: got %q", i, got)
		}
	}
	var (
		wg    sync.WaitGroup
		acked = make([][]string, 3)
	)
	for i, c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			res, err := harness.CallRunPython(ctx, c, map[string]any{"code": appendIDs(fmt.Sprintf("p%d", i)), "timeout": 120})
			if i == owner {
				if err == nil && !res.IsError {
					t.Errorf("the killed owner's call succeeded: %s", res.Text)
				}
				return
			}
			if err != nil || res.IsError {
				t.Errorf("process %d, a survivor, failed: %v %s", i, err, res.Text)
				return
			}
			if err := json.Unmarshal([]byte(harness.Joined(res.Stdout())), &acked[i]); err != nil || len(acked[i]) != 100 {
				t.Errorf("process %d acknowledged %d writes (%v): %s", i, len(acked[i]), err, res.Text)
			}
		}()
	}
	// Kill the owner once some of its own writes are in, however slow the
	// machine: a watcher process (idle otherwise) polls the list.
	watchPrefix := fmt.Sprintf("p%d-", owner)
	deadline := time.Now().Add(2 * time.Minute)
	for {
		o := harness.Code(t, watcher, fmt.Sprintf(`print(sum(1 for x in (load_memory("ids") or []) if x.startswith(%q)))`, watchPrefix))
		if n := harness.Joined(o.Stdout()); n != "0" && n != "1" && n != "2" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the owner's writes never started")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatalf("kill -9 the owner (pid %d): %v", pid, err)
	}
	killed := time.Now()
	wg.Wait()

	// A fourth process serves at once and sees every acknowledged write.
	late, _ := harness.StartStdio(t, sharedEnv(home))
	o := harness.Code(t, late, `import json; print(json.dumps(load_memory("ids")))`)
	t.Logf("survivors finished %v after the kill; the fourth process answered", time.Since(killed))
	var ids []string
	if err := json.Unmarshal([]byte(harness.Joined(o.Stdout())), &ids); err != nil {
		t.Fatalf("ids: %v: %s", err, o.Text)
	}
	seen := map[string]int{}
	for _, id := range ids {
		seen[id]++
	}
	for id, n := range seen {
		if n > 1 {
			t.Errorf("%s is in the list %d times: a write was applied twice", id, n)
		}
	}
	for i, list := range acked {
		for _, id := range list {
			if seen[id] != 1 {
				t.Errorf("process %d's acknowledged %s is missing", i, id)
			}
		}
	}
	fromOwner := 0
	for id := range seen {
		if strings.HasPrefix(id, fmt.Sprintf("p%d-", owner)) {
			fromOwner++
		}
	}
	if len(ids) != 200+fromOwner {
		t.Errorf("%d IDs, want the survivors' 200 plus the %d the owner got in", len(ids), fromOwner)
	}
	t.Logf("the owner got %d of 100 writes in before the kill", fromOwner)
	if fromOwner < 3 || fromOwner == 100 {
		t.Errorf("the owner got %d of 100 writes in before the kill; the kill did not land in the middle of the writes", fromOwner)
	}
}

// ownerFilePID reads the pid from a database's owner file.
func ownerFilePID(t *testing.T, path string) int {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("owner file: %v", err)
	}
	var info struct {
		PID int `json:"pid"`
	}
	if err := json.Unmarshal(b, &info); err != nil || info.PID <= 0 {
		t.Fatalf("owner file %s: %v", b, err)
	}
	return info.PID
}

// An HTTP process and two stdio processes on one state dir share saved
// tools: each sees, imports and calls what another saved.
func TestE2EHTTPAndStdioShareSavedTools(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	base := harness.StartHTTP(t, harness.StateEnv(home))
	h := harness.HTTPClient(t, base)
	s1, _ := harness.StartStdio(t, harness.StateEnv(home))
	s2, _ := harness.StartStdio(t, harness.StateEnv(home))
	harness.Code(t, h, `
def shout(s):
    "Upper-case s with a bang."
    return s.upper() + "!"
save_tool(shout)`)
	for i, c := range []*client.Client{s1, s2} {
		if got := harness.Joined(harness.Code(t, c, "import user_tools\nprint(user_tools.shout('hi'))").Stdout()); got != "HI!" {
			t.Errorf("stdio process %d: %s", i, got)
		}
	}
	harness.Code(t, s2, `
def twice(x):
    return 2 * x
save_tool(twice)`)
	// s1's session began before twice was saved, so the bare name is
	// not bound there: the NameError says why and binds it.
	o := harness.RunPython(t, s1, map[string]any{"code": "print(twice(2))"})
	if !o.IsError || !strings.Contains(o.Text, "hint: twice is a tool saved after this session began") {
		t.Errorf("a bare name saved by another process, in a running session: %s", o.Text)
	}
	if got := harness.Joined(harness.Code(t, s1, "print(twice(2))").Stdout()); got != "4" {
		t.Errorf("run again after the hint: %q", got)
	}
	h2 := harness.HTTPClient(t, base) // a new session builds user_tools afresh
	if got := harness.Joined(harness.Code(t, h2, "import user_tools\nprint(user_tools.twice(21), sorted(t['name'] for t in runtime.list_saved_tools()))").Stdout()); got != "42 ['shout', 'twice']" {
		t.Errorf("the HTTP process after a stdio save: %s", got)
	}
}

// The official TypeScript SDK v2 client in auto mode probes with a
// short-lived sibling process before it starts the real one; both must
// come up while another codeexec holds the state dir.
func TestE2ESDKv2AutoModeWhileAnotherHoldsTheStateDir(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	holder, _ := harness.StartStdio(t, harness.StateEnv(home))
	harness.Code(t, holder, `save_memory("from-holder", 1)`)
	out := harness.SDKClient(t, map[string]any{
		"transport":   "stdio",
		"command":     harness.Binary,
		"args":        []string{"serve"},
		"env":         envMap(harness.BaseEnv(t, harness.StateEnv(home))),
		"negotiation": "auto",
		"calls": []map[string]any{
			{"name": "run_python", "arguments": map[string]any{"code": `save_memory("from-sdk", load_memory("from-holder") + 1); print(load_memory("from-sdk"))`}},
		},
	})
	if out.ProtocolVersion != "2026-07-28" {
		t.Errorf("auto mode negotiated %q over stdio, want 2026-07-28", out.ProtocolVersion)
	}
	if got := harness.ResultStdout(t, out, 0); got != "2" {
		t.Errorf("SDK v2 call: %s", got)
	}
	if got := harness.Joined(harness.Code(t, holder, `print(load_memory("from-sdk"))`).Stdout()); got != "2" {
		t.Errorf("the holder reads from-sdk = %s", got)
	}
}

func envMap(env []string) map[string]string {
	m := map[string]string{}
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		m[k] = v
	}
	return m
}

// A codeexec of another shared-state protocol holds the state dir: this
// one still serves, and its memory calls say which versions disagree.
// When the other exits, this one takes the database over.
func TestE2EAnotherVersionHoldsTheStateDir(t *testing.T) {
	t.Parallel()
	other := filepath.Join(t.TempDir(), "codeexec-other")
	build := exec.Command("go", "build", "-o", other, "-ldflags",
		"-X main.version=9.9.9 -X github.com/codeexec/codeexec/memoryd/internal/shared.Protocol=1", "./cmd/codeexec")
	build.Dir = harness.Root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build a codeexec of another protocol: %v\n%s", err, out)
	}
	home := t.TempDir()
	logs := &harness.LockedBuffer{}
	oc, err := client.NewStdioMCPClientWithOptions(other, harness.BaseEnv(t, harness.StateEnv(home)), []string{"serve"}, transport.WithCommandStderrWriter(logs))
	if err != nil {
		t.Fatal(err)
	}
	harness.Initialize(t, oc)
	harness.Code(t, oc, `save_memory("k", "from 9.9.9")`)

	c, _ := harness.StartStdio(t, harness.StateEnv(home))
	if got := harness.Joined(harness.Code(t, c, "print(6 * 7)").Stdout()); got != "42" {
		t.Fatalf("run_python beside another version: %s", got)
	}
	o := harness.RunPython(t, c, map[string]any{"code": `load_memory("k")`})
	for _, want := range []string{"codeexec 9.9.9", "protocol 1", "this codeexec dev speaks protocol 2"} {
		if !o.IsError || !strings.Contains(o.Text, want) {
			t.Errorf("memory beside another version: %s\nwant an error naming %q", o.Text, want)
		}
	}
	_ = oc.Close()
	// The other process is gone: this one takes the file over.
	deadline := time.Now().Add(30 * time.Second)
	for {
		o := harness.RunPython(t, c, map[string]any{"code": `print(load_memory("k"))`})
		if !o.IsError {
			if got := harness.Joined(o.Stdout()); got != "from 9.9.9" {
				t.Errorf("after the takeover: %s", got)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no takeover after the other version exited: %s", o.Text)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if t.Failed() {
		t.Logf("the other version's log:\n%s", harness.TailOf(logs.String(), 3000))
	}
}

// A terminal's Ctrl-Z sends SIGTSTP to its foreground process group, which
// holds an MCP client and the codeexec it started over pipes. The client
// stops; the codeexec that owns the database must not, or every other
// client on the machine loses its memory and, once its lease lapses, its
// live sandboxes. Here the owner's process group is stopped as a terminal
// stops it, and another process keeps both for longer than a lease.
func TestE2ECtrlZOnOneClientLeavesTheOthersServed(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	logs := &harness.LockedBuffer{}
	// Its own process group, as under a terminal (there with the client).
	ownGroup := func(ctx context.Context, command string, env []string, args []string) (*exec.Cmd, error) {
		cmd := exec.CommandContext(ctx, command, args...)
		cmd.Env = env
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		return cmd, nil
	}
	owner, err := client.NewStdioMCPClientWithOptions(harness.Binary, harness.BaseEnv(t, sharedEnv(home)), []string{"serve"},
		transport.WithCommandStderrWriter(logs), transport.WithCommandFunc(ownGroup))
	if err != nil {
		t.Fatalf("start the owner: %v", err)
	}
	t.Cleanup(func() {
		_ = owner.Close()
		if t.Failed() {
			t.Logf("owner stderr:\n%s", harness.TailOf(logs.String(), 4000))
		}
	})
	harness.Initialize(t, owner)
	harness.Code(t, owner, `save_memory("before", 1)`) // its sandbox and its group's processes are up
	pid := ownerFilePID(t, filepath.Join(home, "MCPs", "codeexec.db.owner"))
	if pgid, err := syscall.Getpgid(pid); err != nil || pgid != pid {
		t.Fatalf("the owner (pid %d) is not the codeexec this test started in a group of its own: pgid %d, %v", pid, pgid, err)
	}
	other, _ := harness.StartStdio(t, sharedEnv(home))
	harness.Code(t, other, `kept = "still here"`)

	if err := syscall.Kill(-pid, syscall.SIGTSTP); err != nil {
		t.Fatalf("SIGTSTP to the owner's process group: %v", err)
	}
	// Whatever happens, the group runs again before the cleanups close it.
	t.Cleanup(func() { _ = syscall.Kill(-pid, syscall.SIGCONT) })
	time.Sleep(500 * time.Millisecond) // a stop is delivered at once; give it time to show
	for _, p := range groupMembers(t, pid) {
		if p.state == "T" {
			t.Errorf("process %d (%s) of the owner's group stopped on SIGTSTP", p.pid, p.comm)
		}
	}
	// Longer than a lease (6 s): a stopped owner would have fenced the
	// other process by now, and its memory calls would hang.
	time.Sleep(7 * time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	o, err := harness.CallRunPython(ctx, other, map[string]any{"code": `save_memory("during", 2); print(kept, load_memory("before"), load_memory("during"))`, "timeout": 20})
	if err != nil || o.IsError || harness.Joined(o.Stdout()) != "still here 1 2" {
		t.Errorf("the other client while the owner's group had SIGTSTP: %v %s", err, o.Text)
	}
	if strings.Contains(o.Text, "restore") || strings.Contains(o.Text, "restarted") {
		t.Errorf("the other client's sandbox was stopped and brought back: %s", o.Text)
	}
	// The owner serves on too: a client stopped by Ctrl-Z finds it as it
	// left it when it runs again.
	if got := harness.Joined(harness.Code(t, owner, `print(load_memory("during"))`).Stdout()); got != "2" {
		t.Errorf("the owner after SIGTSTP reads %q, want 2", got)
	}
}

// groupMember is one process of a process group.
type groupMember struct {
	pid         int
	comm, state string
}

// groupMembers lists the processes whose process group is pgid, from /proc.
func groupMembers(t *testing.T, pgid int) []groupMember {
	t.Helper()
	dirs, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	var out []groupMember
	for _, d := range dirs {
		pid, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", d.Name(), "stat"))
		if err != nil {
			continue // gone meanwhile
		}
		// pid (comm) state ppid pgrp ...; comm may hold spaces and parentheses.
		s := string(b)
		end := strings.LastIndexByte(s, ')')
		if end < 0 {
			continue
		}
		f := strings.Fields(s[end+1:])
		if len(f) < 3 {
			continue
		}
		if g, err := strconv.Atoi(f[2]); err == nil && g == pgid {
			out = append(out, groupMember{pid: pid, comm: s[strings.IndexByte(s, '(')+1 : end], state: f[0]})
		}
	}
	if len(out) == 0 {
		t.Fatalf("no process is in group %d", pgid)
	}
	return out
}
