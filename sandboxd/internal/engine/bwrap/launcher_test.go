package bwrap

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/codeexec/codeexec/sandboxd/internal/engine"
	"github.com/codeexec/codeexec/sandboxd/internal/engine/enginetest"
)

// waitSpares returns the PIDs of the spare launchers once there are as
// many as e keeps, made for spec's command line and limits.
func waitSpares(t *testing.T, e *Engine, spec engine.Spec) []int {
	t.Helper()
	argv, _ := shimArgv(e.shim(), spec)
	key := newLaunchKey(argv, spec.Limits)
	deadline := time.Now().Add(30 * time.Second)
	for {
		var pids []int
		for _, l := range e.spares.Held(key) {
			pids = append(pids, l.cmd.Process.Pid)
		}
		if len(pids) == e.cfg.Spares {
			return pids
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d spare launchers for this spec after 30s, want %d", len(pids), e.cfg.Spares)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestBwrapSpareLaunchers starts sandboxes from spare launchers and checks
// that they are the same sandboxes: every limit and option applies, a
// spare made for other limits is never used, a dead spare is skipped, and
// Close leaves nothing behind.
func TestBwrapSpareLaunchers(t *testing.T) {
	t.Parallel()
	e := newTestEngine(t, Config{Spares: 2})
	if e.cgroups == nil {
		t.Fatal("cgroups are unavailable on this host; these tests need root and cgroup v1 or v2 with memory and pids")
	}
	spec := enginetest.Spec(t, `
import os, resource, errno, time, sys
sys.stdin.read()
st = os.statvfs("/workspace")
print(os.getcwd(), os.environ["SPARE"], st.f_blocks * st.f_frsize, resource.getrlimit(resource.RLIMIT_NOFILE)[0], flush=True)
kids = []
try:
    for i in range(100):
        pid = os.fork()
        if pid == 0:
            time.sleep(60)
            os._exit(0)
        kids.append(pid)
    print("unbounded", flush=True)
except BlockingIOError as e:
    print("blocked", e.errno == errno.EAGAIN, flush=True)
for k in kids:
    os.kill(k, 9)
    os.waitpid(k, 0)
x = b"\x01" * (1 << 30)
print("survived")`)
	spec.Env["SPARE"] = "yes"
	spec.Limits = engine.Limits{MemoryBytes: 96 << 20, Pids: 24, OpenFiles: 77, TmpBytes: 8 << 20, WorkspaceBytes: 12 << 20}

	first := enginetest.Run(t, e, spec, "", 60*time.Second) // no spare yet: starts afresh
	spares := waitSpares(t, e, spec)
	if slices.Contains(spares, first.PID) {
		t.Fatalf("the first sandbox (pid %d) came from a spare", first.PID)
	}

	// A sandbox from a spare, with another ID, agent dir and environment
	// (they travel in --args), is confined like any other.
	spec.ID = "from-a-spare"
	spec.AgentDir = enginetest.AgentDir(t)
	spec.Env["SPARE"] = "still"
	r := enginetest.Run(t, e, spec, "", 60*time.Second)
	if !slices.Contains(spares, r.PID) {
		t.Errorf("sandbox pid %d is not one of the spares %v", r.PID, spares)
	}
	lines := strings.Split(strings.TrimSpace(r.Stdout), "\n")
	if len(lines) != 2 || lines[0] != "/workspace still 12582912 77" || lines[1] != "blocked True" {
		t.Errorf("stdout %q, want the spec's cwd, env, workspace size and open-files limit, then a blocked fork bomb; stderr %q", r.Stdout, r.Stderr)
	}
	if !r.Usage.OOMKilled || !r.Usage.PidsLimitHit {
		t.Errorf("usage %+v: the memory and pids caps did not apply", r.Usage)
	}
	if r.Usage.MemoryPeakBytes > 96<<20 {
		t.Errorf("MemoryPeakBytes = %d, above the 96 MiB cap", r.Usage.MemoryPeakBytes)
	}

	// The cgroup of a sandbox from a spare is named after the sandbox.
	sleeper := spec
	sleeper.ID = "named-sleeper" // it waits on stdin
	spares = waitSpares(t, e, sleeper)
	p, err := e.Start(t.Context(), sleeper)
	if err != nil {
		t.Fatal(err)
	}
	bp := p.(*process)
	if !slices.Contains(spares, bp.PID()) {
		t.Errorf("sleeper pid %d is not one of the spares %v", bp.PID(), spares)
	}
	for c, dir := range bp.cg.Dirs() {
		// cgroup v2 cannot rename a cgroup: the spare's name stays.
		if !strings.HasPrefix(filepath.Base(dir), "named-sleeper-") && !e.cgroups.V2() {
			t.Errorf("%s cgroup %s is not named after the sandbox", c, dir)
		}
		if procs, _ := os.ReadFile(filepath.Join(dir, "cgroup.procs")); len(strings.Fields(string(procs))) == 0 {
			t.Errorf("%s cgroup %s has no processes", c, dir)
		}
	}
	_ = p.Kill()
	_ = p.Wait()

	// Other limits make another command line's worth of spares: the old
	// ones are never used, and they are ended.
	other := sleeper
	other.Limits.Pids = 30
	old := waitSpares(t, e, sleeper)
	p, err = e.Start(t.Context(), other)
	if err != nil {
		t.Fatal(err)
	}
	if slices.Contains(old, p.PID()) {
		t.Errorf("a spare made for pids=24 served a sandbox with pids=30")
	}
	_ = p.Kill()
	_ = p.Wait()
	fresh := waitSpares(t, e, other)
	for _, pid := range old {
		waitGone(t, pid)
	}

	// A spare that died while it waited is skipped.
	if err := syscall.Kill(fresh[0], syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(fresh[1], syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitGone(t, fresh[0])
	waitGone(t, fresh[1])
	other.ID = "after-dead-spares"
	after := enginetest.Run(t, e, other, "", 30*time.Second)
	if !strings.HasPrefix(after.Stdout, "/workspace still 12582912 77\nblocked True") || slices.Contains(fresh, after.PID) {
		t.Errorf("start with dead spares (%v): pid %d %q %v %q", fresh, after.PID, after.Stdout, after.Err, after.Stderr)
	}

	// Close ends the spares and removes every cgroup.
	spares = waitSpares(t, e, other)
	parents := e.cgroups.Parents()
	if err := e.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	for _, pid := range survivors(spares) {
		t.Errorf("spare %d survived Close", pid)
	}
	// Other tests' engines share the parents: look only at this test's
	// (the test's name is a cgroup name as it is).
	ours := []string{t.Name(), "from-a-spare", "named-sleeper", "after-dead-spares", "spare"}
	for _, dir := range parents {
		if _, err := os.Stat(dir); os.IsNotExist(err) {
			continue // the last engine closed removes the parent too
		}
		for _, name := range subdirs(t, dir) {
			if slices.Contains(ours, name[:strings.LastIndexByte(name, '-')]) {
				t.Errorf("cgroup %s left after Close", filepath.Join(dir, name))
			}
		}
	}
}

// waitGone waits for pid to exit (the test fails after 10 s).
func waitGone(t *testing.T, pid int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for processAlive(pid) {
		if time.Now().After(deadline) {
			t.Fatalf("process %d still runs", pid)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
