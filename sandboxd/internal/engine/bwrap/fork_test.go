package bwrap

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/codeexec/codeexec/sandboxd/internal/agent"
	"github.com/codeexec/codeexec/sandboxd/internal/engine"
	"github.com/codeexec/codeexec/sandboxd/internal/engine/enginetest"
	"github.com/codeexec/codeexec/sandboxd/internal/engine/forkserver"
)

// sibling is a sandbox that reports on itself, then serves commands, one
// per line: "write", "read ADDR N", "ping", "attack PID".
const sibling = `
import ctypes, errno, json, os, random, signal, sys
import codeexec_forkroot
libc = ctypes.CDLL(None, use_errno=True)
libc.ptrace.restype = ctypes.c_long
libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p]
probe = codeexec_forkroot.NEWROOT  # a bytes object the server made
offset = sys.getsizeof(b"") - 1  # where a bytes object's data starts
shared_writable = [l.split()[0] for l in open("/proc/self/maps") if l.split()[1][1] == "w" and l.split()[1][3] == "s"]
report = {
    "ns": {n: os.readlink("/proc/self/ns/" + n) for n in ("pid", "mnt", "net", "ipc", "uts", "user", "cgroup")},
    "pids": sorted(int(p) for p in os.listdir("/proc") if p.isdigit()),
    "random": random.random(),
    "probe": id(probe) + offset,
    "shared_writable": shared_writable,
}
print(json.dumps(report), flush=True)
for line in sys.stdin:
    cmd = line.split()
    if cmd[0] == "write":
        ctypes.memmove(id(probe) + offset, b"XXXXXXXX", len(probe))
        codeexec_forkroot.MARK = "written"
        print(ctypes.string_at(id(probe) + offset, len(probe)).decode(), flush=True)
    elif cmd[0] == "read":
        print(ctypes.string_at(int(cmd[1]), int(cmd[2])).decode(), getattr(codeexec_forkroot, "MARK", "unmarked"), flush=True)
    elif cmd[0] == "ping":
        print("pong", flush=True)
    elif cmd[0] == "attack":
        pid = int(cmd[1])
        got = {}
        for name, call in (("kill", lambda: os.kill(pid, signal.SIGKILL)), ("kill all", lambda: os.kill(-1, signal.SIGKILL))):
            try:
                call()
                got[name] = "sent"
            except OSError as e:
                got[name] = errno.errorcode[e.errno]
        rc = libc.ptrace(16, pid, None, None)  # PTRACE_ATTACH
        got["ptrace"] = "attached" if rc == 0 else errno.errorcode[ctypes.get_errno()]
        got["proc"] = os.path.exists("/proc/%d" % pid)
        print(json.dumps(got), flush=True)
`

// liveSibling is a started sibling sandbox and the report it gave.
type liveSibling struct {
	p      engine.Process
	out    *bufio.Reader
	report struct {
		NS             map[string]string `json:"ns"`
		Pids           []int             `json:"pids"`
		Random         float64           `json:"random"`
		Probe          int64             `json:"probe"`
		SharedWritable []string          `json:"shared_writable"`
	}
}

func startSibling(t *testing.T, e *Engine) *liveSibling {
	t.Helper()
	p, err := e.Start(t.Context(), enginetest.Spec(t, sibling))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Kill(); _ = p.Wait() })
	go func() { _, _ = io.Copy(os.Stderr, p.Stderr()) }()
	s := &liveSibling{p: p, out: bufio.NewReader(p.Stdout())}
	if err := json.Unmarshal([]byte(s.line(t)), &s.report); err != nil {
		t.Fatal(err)
	}
	return s
}

func (s *liveSibling) send(t *testing.T, cmd string) string {
	t.Helper()
	if _, err := io.WriteString(s.p.Stdin(), cmd+"\n"); err != nil {
		t.Fatalf("%s: %v", cmd, err)
	}
	return s.line(t)
}

func (s *liveSibling) line(t *testing.T) string {
	t.Helper()
	l, err := s.out.ReadString('\n')
	if err != nil {
		t.Fatalf("sibling said %q: %v", l, err)
	}
	return strings.TrimSpace(l)
}

// agentOf returns the host PID of the sandbox's PID 2 (under its monitor
// and init).
func agentOf(t *testing.T, p engine.Process) int {
	t.Helper()
	for _, pid := range descendants(t, p.PID()) {
		if comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid)); strings.HasPrefix(string(comm), "python") {
			return pid
		}
	}
	t.Fatalf("no python below %d", p.PID())
	return 0
}

// TestForkSiblingsIsolated starts two sandboxes from one fork server and
// checks that neither can see, signal, trace or read the other: their
// namespaces differ, a write one makes to memory both inherited from the
// server stays its own, no mapping is shared and writable, and their
// random streams differ.
func TestForkSiblingsIsolated(t *testing.T) {
	t.Parallel()
	e := newTestEngine(t, Config{ForkServer: true, forkOnly: true})
	a, b := startSibling(t, e), startSibling(t, e)

	for name, nsA := range a.report.NS {
		if nsA == b.report.NS[name] {
			t.Errorf("both sandboxes are in %s", nsA)
		}
	}
	for _, s := range []*liveSibling{a, b} {
		if fmt.Sprint(s.report.Pids) != "[1 2]" {
			t.Errorf("a sandbox sees processes %v, want only its own [1 2]", s.report.Pids)
		}
		if len(s.report.SharedWritable) > 0 {
			t.Errorf("shared writable mappings: %v", s.report.SharedWritable)
		}
	}
	if a.report.Random == b.report.Random {
		t.Errorf("both sandboxes drew %v from random: the generator they inherited was not reseeded", a.report.Random)
	}

	// Memory: a's write to a page the server made is a's alone.
	if a.report.Probe != b.report.Probe {
		t.Fatalf("the server's bytes are at %#x in one sandbox and %#x in the other", a.report.Probe, b.report.Probe)
	}
	if got := a.send(t, "write"); got != "XXXXXXXX" {
		t.Fatalf("a could not write its own copy: %q", got)
	}
	if got := b.send(t, fmt.Sprintf("read %d 8", b.report.Probe)); got != "/newroot unmarked" {
		t.Errorf("b reads %q where a wrote, want the server's /newroot, unmarked", got)
	}

	// Signals and ptrace: b aims at a's host PID and at everything it can.
	var got map[string]any
	if err := json.Unmarshal([]byte(b.send(t, fmt.Sprintf("attack %d", agentOf(t, a.p)))), &got); err != nil {
		t.Fatal(err)
	}
	if got["kill"] != "ESRCH" || got["ptrace"] != "EPERM" || got["proc"] != false {
		t.Errorf("b at a's PID: %v, want kill ESRCH, ptrace EPERM and no /proc entry", got)
	}
	if got := a.send(t, "ping"); got != "pong" {
		t.Errorf("a after b's attack: %q", got)
	}

	// From the host: both run as the sandbox uid without groups or
	// capabilities.
	for _, s := range []*liveSibling{a, b} {
		st, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", agentOf(t, s.p)))
		if err != nil {
			t.Fatal(err)
		}
		u := engine.DefaultHostUID
		for _, want := range []string{fmt.Sprintf("Uid:\t%d\t%d\t%d\t%d", u, u, u, u), fmt.Sprintf("Gid:\t%d\t%d\t%d\t%d", u, u, u, u), "Groups:\t \n",
			"CapEff:\t0000000000000000", "CapBnd:\t0000000000000000", "NoNewPrivs:\t1", "Seccomp:\t2"} {
			if !strings.Contains(string(st), want) {
				t.Errorf("the host sees a sandbox without %q:\n%s", want, st)
			}
		}
	}
}

// TestForkServerRestart kills the fork server under a running sandbox:
// the sandbox carries on, the next start uses bwrap, and once the server
// is back, sandboxes come from it again.
func TestForkServerRestart(t *testing.T) {
	t.Parallel()
	e := newTestEngine(t, Config{ForkServer: true})
	spec := enginetest.Spec(t, `
import sys
for line in sys.stdin:
    print(line.strip(), flush=True)`)
	comm := func(p engine.Process) string {
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", p.PID()))
		return strings.TrimSpace(string(b))
	}
	start := func() engine.Process {
		p, err := e.Start(t.Context(), spec)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = p.Kill(); _ = p.Wait() })
		return p
	}
	echo := func(p engine.Process, r *bufio.Reader, msg string) {
		t.Helper()
		if _, err := io.WriteString(p.Stdin(), msg+"\n"); err != nil {
			t.Fatal(err)
		}
		if got, err := r.ReadString('\n'); err != nil || got != msg+"\n" {
			t.Fatalf("echo %q: %q, %v", msg, got, err)
		}
	}

	start() // the first start asks for the server, and uses bwrap
	srv := waitServer(t, e, nil)
	running := start()
	if comm(running) != "codeexec-sbx" {
		t.Fatalf("with the server up, a sandbox has outer process %q, want the server's codeexec-sbx", comm(running))
	}
	out := bufio.NewReader(running.Stdout())
	echo(running, out, "before")

	if err := syscall.Kill(srv.PID(), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-srv.Done()
	if p := start(); !slices.Contains([]string{"sh", "setpriv", "bwrap"}, comm(p)) {
		t.Errorf("without a server, a sandbox has outer process %q, want bwrap's (the shim that becomes it)", comm(p))
	}
	echo(running, out, "after")

	next := waitServer(t, e, srv)
	if p := start(); comm(p) != "codeexec-sbx" {
		t.Errorf("with server %d back, a sandbox has outer process %q", next.PID(), comm(p))
	}
	echo(running, out, "still")
}

// TestWarmStartWaitsForTheServer starts a warm sandbox (one for a pool)
// on a new engine: where a session's start would use bwrap while the fork
// server starts, a warm one waits for the server and comes from it.
func TestWarmStartWaitsForTheServer(t *testing.T) {
	t.Parallel()
	e := newTestEngine(t, Config{ForkServer: true})
	spec := enginetest.Spec(t, "print('warm')")
	spec.Warm = true
	p, err := e.Start(t.Context(), spec)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Kill(); _ = p.Wait() })
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", p.PID()))
	if comm := strings.TrimSpace(string(b)); comm != "codeexec-sbx" {
		t.Errorf("the first warm sandbox has outer process %q, want the fork server's codeexec-sbx", comm)
	}
	if out, err := io.ReadAll(p.Stdout()); err != nil || string(out) != "warm\n" {
		t.Errorf("stdout = %q, %v", out, err)
	}
}

// TestWarmStartGivesUpOnASlowServer bounds a warm start's wait for the
// fork server: past it, with the start's own context still alive, the
// sandbox starts with bwrap rather than not at all.
func TestWarmStartGivesUpOnASlowServer(t *testing.T) {
	t.Parallel()
	e := newTestEngine(t, Config{ForkServer: true, warmWait: time.Nanosecond})
	spec := enginetest.Spec(t, "print('warm')")
	spec.Warm = true
	p, err := e.Start(t.Context(), spec)
	if err != nil {
		t.Fatalf("a warm start that gave up waiting for the server failed: %v", err)
	}
	t.Cleanup(func() { _ = p.Kill(); _ = p.Wait() })
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", p.PID()))
	if comm := strings.TrimSpace(string(b)); !slices.Contains([]string{"sh", "setpriv", "bwrap"}, comm) {
		t.Errorf("the sandbox has outer process %q, want bwrap's (the shim that becomes it)", comm)
	}
	if out, err := io.ReadAll(p.Stdout()); err != nil || string(out) != "warm\n" {
		t.Errorf("stdout = %q, %v", out, err)
	}
}

// TestWarmStartEndsWithItsContext ends a warm start's context while it
// waits for the fork server: the start fails with the context's error and
// starts no sandbox with bwrap instead, which nobody would take.
func TestWarmStartEndsWithItsContext(t *testing.T) {
	t.Parallel()
	e := newTestEngine(t, Config{ForkServer: true})
	spec := enginetest.Spec(t, "print('warm')")
	spec.Warm = true
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Millisecond)
	defer cancel()
	p, err := e.Start(ctx, spec)
	if err == nil {
		_ = p.Kill()
		_ = p.Wait()
		t.Fatalf("a warm start past its deadline started a sandbox (pid %d)", p.PID())
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Start = %v, want the context's deadline", err)
	}
}

// waitServer waits until the engine's fork server is running and is not
// old.
func waitServer(t *testing.T, e *Engine, old *forkserver.Server) *forkserver.Server {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		e.mu.Lock()
		sup := e.forks
		e.mu.Unlock()
		if sup != nil {
			if srv := sup.Server(); srv != nil && srv != old {
				return srv
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatal("no fork server within 30s")
	return nil
}

func TestForkMode(t *testing.T) {
	t.Parallel()
	cfg := forkserver.Config{Python: python, AgentDir: "/srv/agent", Env: map[string]string{"A": "1"}}
	env := map[string]string{"A": "1"}
	tests := []struct {
		name     string
		argv     []string
		env      map[string]string
		agentDir string
		want     forkserver.Mode
	}{
		{"agent", []string{python, "-I", agentEntry}, env, "/srv/agent", forkserver.ModeAgent},
		{"agent from another directory", []string{python, "-I", agentEntry}, env, "/srv/other", forkserver.ModeExec},
		{"script", []string{python, "-I", "-c", "pass", "x"}, env, "", forkserver.ModeScript},
		{"another environment", []string{python, "-I", "-c", "pass"}, map[string]string{"A": "2"}, "", forkserver.ModeExec},
		{"another interpreter", []string{"/usr/local/bin/python3", "-I", "-c", "pass"}, env, "", forkserver.ModeExec},
		{"not isolated", []string{python, "-c", "pass"}, env, "", forkserver.ModeExec},
		{"another program", []string{"/usr/bin/true"}, env, "", forkserver.ModeExec},
		{"a script file", []string{python, "-I", "/workspace/x.py"}, env, "", forkserver.ModeExec},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if got := forkMode(engine.Spec{Argv: tc.argv, Env: tc.env}, cfg, tc.agentDir); got != tc.want {
				t.Errorf("forkMode = %s, want %s", got, tc.want)
			}
		})
	}
}

// TestForkAgent starts sandboxd's agent from a fork server that imported
// it: the sandbox runs it in the forked interpreter (its command line is
// the server's), with what its first checkpoint needs already imported,
// and the agent speaks first on its channel.
func TestForkAgent(t *testing.T) {
	t.Parallel()
	e := newTestEngine(t, Config{ForkServer: true, forkOnly: true})
	spec := enginetest.Spec(t, "")
	if err := agent.WriteTo(spec.AgentDir); err != nil {
		t.Fatal(err)
	}
	if err := e.Prepare(t.Context(), spec.AgentDir, python); err != nil {
		t.Fatal(err)
	}
	spec.Argv = []string{python, "-I", agentEntry}
	p, err := e.Start(t.Context(), spec)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = p.Kill(); _ = p.Wait() }()
	var first [1]byte
	if _, err := io.ReadFull(p.Stdout(), first[:]); err != nil {
		b, _ := io.ReadAll(p.Stderr())
		t.Fatalf("the agent said nothing: %v; stderr %s", err, b)
	}
	pid := agentOf(t, p)
	cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil || !strings.Contains(string(cmdline), "codeexec_forkserver.py") {
		t.Errorf("the agent runs %q (%v), want the fork server's interpreter, not a new one", cmdline, err)
	}
	// What a session's first checkpoint imports came with the fork: before
	// any call, the agent has hashlib's OpenSSL module mapped.
	maps, err := os.ReadFile(fmt.Sprintf("/proc/%d/maps", pid))
	if err != nil || !strings.Contains(string(maps), "/_hashlib.") {
		t.Errorf("the forked agent has no _hashlib mapped (%v): the server did not import codeexec_checkpoint.SNAPSHOT_IMPORTS", err)
	}
}
