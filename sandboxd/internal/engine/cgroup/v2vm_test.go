package cgroup

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/codeexec/codeexec/sandboxd/internal/engine"
	"github.com/codeexec/codeexec/sandboxd/internal/engine/enginetest"
	"github.com/codeexec/codeexec/services/vmtest"
)

// The manager on a real cgroup v2 hierarchy, in a vmtest machine (this
// project's hosts run v1): started in a service's cgroup as systemd starts
// it, it moves itself into a leaf to hand controllers down, writes every
// limit, and the kernel enforces them on real processes, which it freezes,
// thaws and kills.
func TestManagerOnCgroupV2(t *testing.T) {
	if !vmtest.Inside() {
		t.Parallel()
		vmtest.RunSelf(t, vmtest.Tests{Names: []string{t.Name()}})
		return
	}
	m, err := NewManager("/sys/fs/cgroup", enginetest.Logger(t))
	if err != nil {
		t.Fatal(err)
	}
	if !m.v2 {
		t.Fatal("the manager chose cgroup v1 on a v2-only machine")
	}
	self, _ := os.ReadFile("/proc/self/cgroup")
	if want := "/job.service/codeexec-"; !strings.Contains(string(self), want) || !strings.HasSuffix(strings.TrimSpace(string(self)), "/"+SelfLeaf) {
		t.Errorf("/proc/self/cgroup: %q; want the process moved into %s…/%s", self, want, SelfLeaf)
	}
	g, err := m.Create("s1", engine.Limits{MemoryBytes: 64 << 20, Pids: 16, CPUs: 0.5})
	if err != nil {
		t.Fatal(err)
	}
	dir := g.Dirs()[""]
	for file, want := range map[string]string{"memory.max": "67108864", "memory.swap.max": "0", "pids.max": "16", "cpu.max": "50000 100000"} {
		if b, _ := os.ReadFile(filepath.Join(dir, file)); strings.TrimSpace(string(b)) != want {
			t.Errorf("%s: %q, want %q", file, b, want)
		}
	}

	// Over its memory limit a process is OOM-killed; forks past pids.max fail.
	if err := runIn(t, dir, "python3", "-c", "x = b'1' * (256 << 20)"); err == nil {
		t.Error("a process allocating 256 MiB in a 64 MiB group ended normally")
	}
	if u := g.Usage(); !u.OOMKilled || u.MemoryPeakBytes <= 0 || u.MemoryPeakBytes > 64<<20 {
		t.Errorf("after the memory hog: usage %+v; want OOM-killed, peak within 64 MiB", u)
	}
	_ = runIn(t, dir, "sh", "-c", "for i in $(seq 40); do sleep 2 & done; wait")
	if !g.PidsLimitHit() {
		t.Error("40 children in a group of 16 pids: PidsLimitHit is false")
	}

	// Freeze stops a process where it is; Thaw lets it go on; Remove ends it.
	sleeper := startIn(t, dir, "sleep", "600")
	if err := g.Freeze(); err != nil {
		t.Fatal(err)
	}
	if got := readKeyed(filepath.Join(dir, "cgroup.events"), "frozen"); got != 1 {
		t.Errorf("cgroup.events frozen = %d after Freeze", got)
	}
	if err := g.Thaw(); err != nil {
		t.Fatal(err)
	}
	if got := readKeyed(filepath.Join(dir, "cgroup.events"), "frozen"); got != 0 {
		t.Errorf("cgroup.events frozen = %d after Thaw", got)
	}
	if err := g.Remove(); err != nil {
		t.Fatal(err)
	}
	if err := sleeper.Wait(); err == nil {
		t.Error("the group's process survived Remove")
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("the group's directory is still there: %v", err)
	}
	if err := m.Close(); err != nil {
		t.Error(err)
	}
}

// startIn starts a command in the cgroup dir.
func startIn(t *testing.T, dir string, name string, args ...string) *exec.Cmd {
	t.Helper()
	f, err := os.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	cmd := exec.Command(name, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: int(f.Fd())}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	return cmd
}

// runIn runs a command in the cgroup dir and returns how it ended.
func runIn(t *testing.T, dir string, name string, args ...string) error {
	t.Helper()
	cmd := startIn(t, dir, name, args...)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		return err
	case <-time.After(2 * time.Minute):
		t.Fatalf("%s did not end", name)
		return nil
	}
}

// When other processes share sandboxd's cgroup (a client that started
// codeexec, a shell), the controllers cannot be handed down from it; the
// manager makes its parent beside it, and sandboxd stays where it was.
func TestManagerBesideABusyCgroupV2(t *testing.T) {
	if !vmtest.Inside() {
		t.Parallel()
		vmtest.RunSelf(t, vmtest.Tests{Names: []string{t.Name()}})
		return
	}
	startIn(t, "/sys/fs/cgroup/job.service", "sleep", "600")
	m, err := NewManager("/sys/fs/cgroup", enginetest.Logger(t))
	if err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("/sys/fs/cgroup/codeexec-%d", os.Getpid())
	if got := m.Parents(); len(got) != 1 || got[0] != want {
		t.Errorf("parents %v, want [%s]", got, want)
	}
	if self, _ := os.ReadFile("/proc/self/cgroup"); strings.TrimSpace(string(self)) != "0::/job.service" {
		t.Errorf("/proc/self/cgroup: %q; want sandboxd left in its own cgroup", self)
	}
	if _, err := os.Stat("/sys/fs/cgroup/job.service/" + filepath.Base(want)); !os.IsNotExist(err) {
		t.Errorf("the attempt below its own cgroup was left: %v", err)
	}
	g, err := m.Create("s1", engine.Limits{MemoryBytes: 64 << 20, Pids: 16})
	if err != nil {
		t.Fatal(err)
	}
	if err := runIn(t, g.Dirs()[""], "python3", "-c", "x = b'1' * (256 << 20)"); err == nil || !g.Usage().OOMKilled {
		t.Errorf("a 256 MiB allocation in a 64 MiB group: %v, usage %+v; want it OOM-killed", err, g.Usage())
	}
	if err := g.Remove(); err != nil {
		t.Fatal(err)
	}
	if err := m.Close(); err != nil {
		t.Error(err)
	}
	if _, err := os.Stat(want); !os.IsNotExist(err) {
		t.Errorf("the parent is still there after Close: %v", err)
	}
}
