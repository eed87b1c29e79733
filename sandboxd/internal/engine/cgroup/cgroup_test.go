package cgroup

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/codeexec/codeexec/sandboxd/internal/engine"
	"github.com/codeexec/codeexec/sandboxd/internal/engine/enginetest"
)

// fakeCgroup makes directories holding the given (empty or filled) files,
// standing in for a kernel cgroup; the kernel writes files, so setLimits
// can only write files that exist.
func fakeCgroup(t *testing.T, v2 bool, files map[string]map[string]string) *Group {
	t.Helper()
	g := &Group{v2: v2, dirs: map[string]string{}}
	for ctrl, fs := range files {
		d := filepath.Join(t.TempDir(), "cg")
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
		for name, content := range fs {
			if err := os.WriteFile(filepath.Join(d, name), []byte(content), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		g.dirs[ctrl] = d
	}
	return g
}

func TestCgroupLimitsAndUsage(t *testing.T) {
	t.Parallel()
	lim := engine.Limits{MemoryBytes: 128 << 20, Pids: 32, CPUs: 0.5}
	tests := []struct {
		name      string
		v2        bool
		files     map[string]map[string]string
		wantFiles map[string]string // controller/file -> content after setLimits
		wantUsage engine.Usage
	}{
		{
			name: "v1",
			files: map[string]map[string]string{
				"memory": {"memory.limit_in_bytes": "", "memory.memsw.limit_in_bytes": "", "memory.max_usage_in_bytes": "1234\n",
					"memory.oom_control": "oom_kill_disable 0\nunder_oom 0\noom_kill 2\n", "memory.kmem.tcp.limit_in_bytes": ""},
				"pids": {"pids.max": "", "pids.events": "max 5\n"},
				"cpu":  {"cpu.cfs_period_us": "", "cpu.cfs_quota_us": ""},
			},
			wantFiles: map[string]string{
				// An eighth of the memory limit for socket buffers, the rest
				// for everything else.
				"memory/memory.limit_in_bytes":          "117440512",
				"memory/memory.memsw.limit_in_bytes":    "117440512",
				"memory/memory.kmem.tcp.limit_in_bytes": "16777216",
				"pids/pids.max":                         "32",
				"cpu/cpu.cfs_period_us":                 "100000",
				"cpu/cpu.cfs_quota_us":                  "50000",
			},
			wantUsage: engine.Usage{MemoryPeakBytes: 1234, OOMKilled: true, PidsLimitHit: true},
		},
		{
			name: "v1 without swap or TCP accounting, no events yet",
			files: map[string]map[string]string{
				"memory": {"memory.limit_in_bytes": "", "memory.oom_control": "oom_kill_disable 0\nunder_oom 0\noom_kill 0\n"},
				"pids":   {"pids.max": "", "pids.events": "max 0\n"},
				"cpu":    {"cpu.cfs_period_us": "", "cpu.cfs_quota_us": ""},
			},
			wantFiles: map[string]string{"memory/memory.limit_in_bytes": "134217728"},
		},
		{
			name: "v2",
			v2:   true,
			files: map[string]map[string]string{
				"": {"memory.max": "", "memory.swap.max": "", "pids.max": "", "cpu.max": "", "memory.peak": "99\n",
					"memory.events": "low 0\nhigh 0\nmax 3\noom 1\noom_kill 1\n", "pids.events": "max 0\n"},
			},
			wantFiles: map[string]string{
				"/memory.max": "134217728", "/memory.swap.max": "0", "/pids.max": "32", "/cpu.max": "50000 100000",
			},
			wantUsage: engine.Usage{MemoryPeakBytes: 99, OOMKilled: true},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			g := fakeCgroup(t, tc.v2, tc.files)
			if err := g.setLimits(lim); err != nil {
				t.Fatalf("setLimits: %v", err)
			}
			for key, want := range tc.wantFiles {
				ctrl, file, _ := strings.Cut(key, "/")
				b, err := os.ReadFile(filepath.Join(g.dirs[ctrl], file))
				if err != nil || string(b) != want {
					t.Errorf("%s = %q (%v), want %q", key, b, err, want)
				}
			}
			if got := g.Usage(); got != tc.wantUsage {
				t.Errorf("engine.Usage = %+v, want %+v", got, tc.wantUsage)
			}
			if got := g.PidsLimitHit(); got != tc.wantUsage.PidsLimitHit {
				t.Errorf("PidsLimitHit = %v, want %v", got, tc.wantUsage.PidsLimitHit)
			}
			if !g.HasMemory() || !g.HasPids() {
				t.Error("HasMemory/HasPids false")
			}
		})
	}
}

func TestReadSelfCgroups(t *testing.T) {
	t.Parallel()
	f := filepath.Join(t.TempDir(), "cgroup")
	content := "9:name=systemd:/\n8:pids:/a\n4:memory:/process_api/x\n1:cpu,cpuacct:/c\n0::/u\n"
	if err := os.WriteFile(f, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := readSelfCgroups(f)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"name=systemd": "/", "pids": "/a", "memory": "/process_api/x", "cpu": "/c", "cpuacct": "/c", "": "/u"}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%q = %q, want %q", k, got[k], v)
		}
	}
}

func TestSanitizeCgroupName(t *testing.T) {
	t.Parallel()
	tests := []struct{ in, want string }{
		{"sess-1", "sess-1"},
		{"TestX/sub case", "TestXsubcase"},
		{"../..", "sandbox"},
		{"", "sandbox"},
		{strings.Repeat("a", 100), strings.Repeat("a", 40)},
	}
	for _, tc := range tests {
		if got := sanitizeCgroupName(tc.in); got != tc.want {
			t.Errorf("sanitizeCgroupName(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestSetupV2Parent(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		prepare func(own, dir string) error
		wantErr string
	}{
		{"delegation works", func(own, dir string) error {
			if err := os.MkdirAll(dir, 0o755); err != nil {
				return err
			}
			for _, f := range []string{filepath.Join(own, "cgroup.subtree_control"), filepath.Join(dir, "cgroup.subtree_control")} {
				if err := os.WriteFile(f, nil, 0o644); err != nil {
					return err
				}
			}
			return nil
		}, ""},
		{"no controllers to delegate", func(_, _ string) error { return nil }, "systemd Delegate=yes"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			own := t.TempDir()
			name := "codeexec-test"
			if err := tc.prepare(own, filepath.Join(own, name)); err != nil {
				t.Fatal(err)
			}
			dir, err := setupV2Parent(own, name, enginetest.Logger(t))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = releaseParent(dir) }()
			for _, d := range []string{own, dir} {
				b, _ := os.ReadFile(filepath.Join(d, "cgroup.subtree_control"))
				if string(b) != v2Controllers {
					t.Errorf("%s/cgroup.subtree_control = %q", d, b)
				}
			}
		})
	}
}

func TestRemoveStaleParents(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	dead := "codeexec-" + strconv.Itoa(1<<30) // beyond pid_max: never alive
	keep := []string{"codeexec-1", "codeexec-" + strconv.Itoa(os.Getpid()), "other"}
	for _, d := range append([]string{filepath.Join(dead, "sb-1")}, keep...) {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	removeStaleParents(dir)
	if _, err := os.Stat(filepath.Join(dir, dead)); !os.IsNotExist(err) {
		t.Errorf("stale parent kept: %v", err)
	}
	for _, k := range keep {
		if _, err := os.Stat(filepath.Join(dir, k)); err != nil {
			t.Errorf("%s removed: %v", k, err)
		}
	}
}

func TestMeter(t *testing.T) {
	t.Parallel()
	var m Meter
	if got := m.Usage(); got != (engine.Usage{}) || m.PidsLimitHit() {
		t.Errorf("without a group: %+v, PidsLimitHit %v, want zero", got, m.PidsLimitHit())
	}
	g := fakeCgroup(t, true, map[string]map[string]string{"": {"memory.peak": "7\n", "pids.events": "max 1\n"}})
	m.Watch(g)
	if got, want := m.Usage(), (engine.Usage{MemoryPeakBytes: 7, PidsLimitHit: true}); got != want {
		t.Errorf("live: %+v, want %+v", got, want)
	}
	if !m.PidsLimitHit() {
		t.Error("live: PidsLimitHit false with max 1 in pids.events")
	}
	final := engine.Usage{MemoryPeakBytes: 9, OOMKilled: true}
	m.Stop(final)
	if err := os.WriteFile(filepath.Join(g.dirs[""], "memory.peak"), []byte("100\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := m.Usage(); got != final {
		t.Errorf("after Stop: %+v, want %+v", got, final)
	}
	if m.PidsLimitHit() {
		t.Error("after Stop: PidsLimitHit true; the final figures say false")
	}
}

// TestMeterPidsLimitHitKeepsTheFileOpen: PidsLimitHit reads pids.events
// through one open file, sees each new count, and closes it at Stop.
func TestMeterPidsLimitHitKeepsTheFileOpen(t *testing.T) {
	g := fakeCgroup(t, false, map[string]map[string]string{"pids": {"pids.events": "max 0\n"}})
	events := filepath.Join(g.dirs["pids"], "pids.events")
	openCount := func() int {
		n := 0
		fds, _ := os.ReadDir("/proc/self/fd")
		for _, fd := range fds {
			if target, _ := os.Readlink(filepath.Join("/proc/self/fd", fd.Name())); target == events {
				n++
			}
		}
		return n
	}
	var m Meter
	m.Watch(g)
	if m.PidsLimitHit() {
		t.Error("max 0: PidsLimitHit true")
	}
	if err := os.WriteFile(events, []byte("max 12\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if !m.PidsLimitHit() {
		t.Error("max 12: PidsLimitHit false; the open file was not read afresh")
	}
	if n := openCount(); n != 1 {
		t.Errorf("%d open files of pids.events while live, want 1", n)
	}
	m.Stop(engine.Usage{})
	if n := openCount(); n != 0 {
		t.Errorf("%d open files of pids.events after Stop, want 0", n)
	}
	if m.PidsLimitHit() {
		t.Error("after Stop: PidsLimitHit true; the final figures say false")
	}
	var bare Meter
	bare.Watch(fakeCgroup(t, false, map[string]map[string]string{"memory": {}}))
	if bare.PidsLimitHit() {
		t.Error("no pids controller: PidsLimitHit true")
	}
}

func TestSelfJoinFiles(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		v2   bool
		want string
	}{{"v1", false, "tasks"}, {"v2", true, "cgroup.procs"}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			g := fakeCgroup(t, tc.v2, map[string]map[string]string{"memory": {}})
			got := g.SelfJoinFiles()
			if len(got) != 1 || got[0] != filepath.Join(g.dirs["memory"], tc.want) {
				t.Errorf("SelfJoinFiles() = %v, want [%s]", got, filepath.Join(g.dirs["memory"], tc.want))
			}
		})
	}
}

// A sandbox left frozen by a sandboxd that died while it was paused is
// thawed by the next one's clean-up, so that the kill its death signal
// sent it takes effect, and its cgroup goes. Against the kernel's v1
// freezer.
func TestStaleFrozenSandboxIsThawed(t *testing.T) {
	t.Parallel()
	self, err := readSelfCgroups("/proc/self/cgroup")
	if err != nil {
		t.Fatal(err)
	}
	mount, ok := v1Mount("/sys/fs/cgroup", "freezer")
	if !ok || self["freezer"] == "" {
		t.Skip("no cgroup v1 freezer on this host")
	}
	// The stale parent goes in a directory of this test's own: in this
	// process's cgroup, every sandboxd that starts on the machine (other
	// test binaries) would clean it up, thawing it under the test.
	dir := filepath.Join(mount, self["freezer"], "codeexec-test-"+strconv.Itoa(os.Getpid()))
	stale := filepath.Join(dir, "codeexec-"+strconv.Itoa(1<<30)) // beyond pid_max: never alive
	child := filepath.Join(stale, "sb-frozen")
	if err := os.MkdirAll(child, 0o755); err != nil {
		t.Skipf("cannot make a freezer cgroup here (not root?): %v", err)
	}
	t.Cleanup(func() {
		_ = writeFile(filepath.Join(child, "freezer.state"), "THAWED")
		_ = removeCgroupDir(child)
		_ = removeCgroupDir(stale)
		_ = removeCgroupDir(dir)
	})
	cmd := exec.Command("/usr/bin/sleep", "1000")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	if err := writeFile(filepath.Join(child, "cgroup.procs"), strconv.Itoa(cmd.Process.Pid)); err != nil {
		t.Fatal(err)
	}
	g := &Group{dirs: map[string]string{"freezer": child}}
	if err := g.Freeze(); err != nil {
		t.Fatalf("Freeze: %v", err)
	}
	// What a dead sandboxd leaves: a frozen sandbox whose SIGKILL waits.
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	select {
	case <-exited:
		t.Fatal("a frozen process acted on SIGKILL: the freezer did not hold it")
	case <-time.After(500 * time.Millisecond):
	}
	removeStaleParents(dir)
	select {
	case <-exited:
	case <-time.After(30 * time.Second):
		t.Fatal("the frozen sandbox of a dead sandboxd was not thawed: its SIGKILL never took effect")
	}
	if _, err := os.Stat(stale); !os.IsNotExist(err) {
		t.Errorf("the stale parent is still there: %v", err)
	}
}

// Freeze after Kill fails, and leaves the group thawed: frozen, the killed
// processes would never act on their SIGKILL (v1). Kill thaws a frozen
// group. On files standing in for the v1 freezer.
func TestFreezeAfterKillFails(t *testing.T) {
	t.Parallel()
	g := fakeCgroup(t, false, map[string]map[string]string{"freezer": {"freezer.state": "THAWED\n"}, "pids": {"cgroup.procs": ""}})
	state := func() string {
		b, err := os.ReadFile(filepath.Join(g.dirs["freezer"], "freezer.state"))
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(string(b))
	}
	if err := g.Freeze(); err != nil || state() != "FROZEN" {
		t.Fatalf("Freeze: %v, state %q", err, state())
	}
	g.Kill()
	if state() != "THAWED" {
		t.Errorf("after Kill of a frozen group: %q, want THAWED", state())
	}
	if err := g.Freeze(); err == nil || state() != "THAWED" {
		t.Errorf("Freeze after Kill: %v, state %q; want an error and the group left thawed", err, state())
	}
	if err := (&Group{dirs: map[string]string{}}).Freeze(); !errors.Is(err, ErrNoFreezer) {
		t.Errorf("Freeze without a freezer: %v, want ErrNoFreezer", err)
	}
}
