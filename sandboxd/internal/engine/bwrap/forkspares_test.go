package bwrap

import (
	"fmt"
	"maps"
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

// forkSparesWanted is the spares the tests' engines keep (Config.Spares).
const forkSparesWanted = 2

// waitForkSpares returns the outer PIDs of the fork server's spare
// sandboxes once there are forkSparesWanted of them for spec.
func waitForkSpares(t *testing.T, e *Engine, spec engine.Spec) []int {
	const n = forkSparesWanted
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		var pids []int
		if srv := waitServer(t, e, nil); srv != nil {
			key, _ := forkSpareFor(srv, spec)
			for _, sp := range e.forkSpares.Held(key) {
				pids = append(pids, sp.f.child.Monitor.Pid)
			}
		}
		if len(pids) == n {
			return pids
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d spare sandboxes for this spec after 30s, want %d", len(pids), n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestForkSpares starts sandboxes from the fork server's spares and checks
// that they are the same sandboxes: every limit and option applies, a
// spare made for other limits is never used, a dead spare is skipped, and
// Close leaves nothing behind.
func TestForkSpares(t *testing.T) {
	t.Parallel()
	e := newTestEngine(t, Config{ForkServer: true, forkOnly: true, Spares: 2})
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
	spec.AgentDir = "" // spares have the server's agent directory, or none
	spec.Env["SPARE"] = "yes"
	spec.Limits = engine.Limits{MemoryBytes: 96 << 20, Pids: 24, OpenFiles: 77, TmpBytes: 8 << 20, WorkspaceBytes: 12 << 20}

	first := enginetest.Run(t, e, spec, "", 60*time.Second) // no spare yet: forked afresh
	spares := waitForkSpares(t, e, spec)
	if slices.Contains(spares, first.PID) {
		t.Fatalf("the first sandbox (pid %d) came from a spare", first.PID)
	}

	// A sandbox from a spare, with another ID and environment, is confined
	// like any other.
	spec.ID = "fork-from-a-spare"
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
	sleeper.ID = "fork-named-sleeper" // it waits on stdin
	spares = waitForkSpares(t, e, sleeper)
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
		if !strings.HasPrefix(filepath.Base(dir), "fork-named-sleeper-") && !e.cgroups.V2() {
			t.Errorf("%s cgroup %s is not named after the sandbox", c, dir)
		}
		if procs, _ := os.ReadFile(filepath.Join(dir, "cgroup.procs")); len(strings.Fields(string(procs))) == 0 {
			t.Errorf("%s cgroup %s has no processes", c, dir)
		}
	}
	_ = p.Kill()
	_ = p.Wait()

	// Other limits make other spares: the old ones are never used, and
	// they are ended.
	other := sleeper
	other.Limits.Pids = 30
	old := waitForkSpares(t, e, sleeper)
	p, err = e.Start(t.Context(), other)
	if err != nil {
		t.Fatal(err)
	}
	if slices.Contains(old, p.PID()) {
		t.Errorf("a spare made for pids=24 served a sandbox with pids=30")
	}
	_ = p.Kill()
	_ = p.Wait()
	fresh := waitForkSpares(t, e, other)
	for _, pid := range old {
		waitGone(t, pid)
	}

	// A spare that died while it waited is skipped, and the server lets go
	// of the socket it had kept for it.
	fdDir := fmt.Sprintf("/proc/%d/fd", waitServer(t, e, nil).PID())
	fds := func() int {
		entries, _ := os.ReadDir(fdDir)
		return len(entries)
	}
	// what lists the server's descriptors, for a failure's message.
	what := func() string {
		entries, _ := os.ReadDir(fdDir)
		var out []string
		for _, e := range entries {
			target, _ := os.Readlink(filepath.Join(fdDir, e.Name()))
			out = append(out, e.Name()+"→"+target)
		}
		return strings.Join(out, " ")
	}
	held, heldWhat := fds(), what()
	for _, pid := range fresh {
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
	}
	for _, pid := range fresh {
		waitGone(t, pid)
	}
	for deadline := time.Now().Add(10 * time.Second); fds() != held-2; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the server holds %d descriptors after its 2 spares died, had %d\nbefore: %s\nafter: %s", fds(), held, heldWhat, what())
		}
	}
	other.ID = "fork-after-dead-spares"
	after := enginetest.Run(t, e, other, "", 30*time.Second)
	if !strings.HasPrefix(after.Stdout, "/workspace still 12582912 77\nblocked True") || slices.Contains(fresh, after.PID) {
		t.Errorf("start with dead spares (%v): pid %d %q %v %q", fresh, after.PID, after.Stdout, after.Err, after.Stderr)
	}

	// Close ends the spares and removes every cgroup.
	spares = waitForkSpares(t, e, other)
	// The spares' cgroups by path: the parents are the test process's, and
	// other tests' engines keep spares of their own there, with the same
	// "forkspare-" names.
	var spareDirs []string
	if srv := waitServer(t, e, nil); srv != nil {
		key, _ := forkSpareFor(srv, other)
		for _, sp := range e.forkSpares.Held(key) {
			spareDirs = append(spareDirs, slices.Collect(maps.Values(sp.f.cg.Dirs()))...)
		}
	}
	if len(spareDirs) == 0 {
		t.Fatal("found no cgroups of the held spares")
	}
	for _, dir := range spareDirs {
		if _, err := os.Stat(dir); err != nil {
			t.Fatalf("a held spare's cgroup: %v", err)
		}
	}
	parents := e.cgroups.Parents()
	if err := e.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	for _, pid := range survivors(spares) {
		t.Errorf("spare %d survived Close", pid)
	}
	for _, dir := range spareDirs {
		if _, err := os.Stat(dir); !os.IsNotExist(err) {
			t.Errorf("spare cgroup %s left after Close (%v)", dir, err)
		}
	}
	ours := []string{t.Name(), "fork-from-a-spare", "fork-named-sleeper", "fork-after-dead-spares"}
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

// TestForkSpareForksAhead checks that a spare's own process (PID 2) is
// forked while the spare waits, with no capabilities and no seccomp filter
// yet, and that the sandbox taken from it runs in that very process once
// it has its filter.
func TestForkSpareForksAhead(t *testing.T) {
	t.Parallel()
	e := newTestEngine(t, Config{ForkServer: true, forkOnly: true, Spares: 2})
	if e.cgroups == nil {
		t.Fatal("cgroups are unavailable on this host; these tests need root and cgroup v1 or v2 with memory and pids")
	}
	spec := enginetest.Spec(t, `import sys; sys.stdin.read()`)
	spec.AgentDir = ""
	enginetest.Run(t, e, spec, "", 60*time.Second) // starts the server and its spares
	spares := waitForkSpares(t, e, spec)
	ahead := map[int]int{} // monitor -> PID 2
	for _, m := range spares {
		// The monitor reports before init has built the sandbox: wait
		// until its PID 2 is there and has dropped its capabilities.
		var pid2 int
		var st string
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
			if pid2, st = sandboxPID2(t, m); pid2 != 0 && strings.Contains(st, "CapEff:\t0000000000000000") {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("spare %d has no PID 2 without capabilities 10s on (pid %d, status %q)", m, pid2, st)
			}
		}
		for _, want := range []string{"CapPrm:\t0000000000000000", "NoNewPrivs:\t1", "Seccomp:\t0"} {
			if !strings.Contains(st, want) {
				t.Errorf("a waiting spare's PID 2 lacks %q (want no capabilities, no_new_privs and no filter yet):\n%s", want, st)
			}
		}
		ahead[m] = pid2
	}

	spec.ID = "fork-ahead-taken"
	p, err := e.Start(t.Context(), spec)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = p.Kill()
		_ = p.Wait()
	}()
	want, ok := ahead[p.PID()]
	if !ok {
		t.Fatalf("sandbox %d did not come from a spare %v", p.PID(), spares)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		pid2, st := sandboxPID2(t, p.PID())
		if pid2 != want {
			t.Fatalf("the taken spare's PID 2 is %d, want %d, the one forked ahead", pid2, want)
		}
		if strings.Contains(st, "Seccomp:\t2") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("PID 2 (%d) of the taken spare has no seccomp filter after 10s:\n%s", pid2, st)
		}
	}
}

// sandboxPID2 finds the process that is PID 2 in the sandbox below a
// monitor, and returns its host PID and /proc status; 0 when there is none.
func sandboxPID2(t *testing.T, monitor int) (int, string) {
	t.Helper()
	for _, pid := range descendants(t, monitor) {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
		if err != nil {
			continue // gone meanwhile
		}
		for _, line := range strings.Split(string(b), "\n") {
			if ns, ok := strings.CutPrefix(line, "NSpid:"); ok {
				if f := strings.Fields(ns); len(f) > 1 && f[len(f)-1] == "2" {
					return pid, string(b)
				}
			}
		}
	}
	return 0, ""
}
