package bwrap

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/codeexec/codeexec/sandboxd/internal/engine"
	"github.com/codeexec/codeexec/sandboxd/internal/engine/enginetest"
)

func TestBwrapCheck(t *testing.T) {
	t.Parallel()
	requireHost(t)
	tests := []struct {
		name    string
		cfg     Config
		wantErr string // substring; "" means Check succeeds
	}{
		{"installed", Config{}, ""},
		{"absolute path", Config{Path: "/usr/bin/bwrap"}, ""},
		{"not on PATH", Config{Path: "bwrap-not-installed"},
			"bubblewrap (bwrap) is not installed: run `apt-get install bubblewrap` (Debian/Ubuntu) or `dnf install bubblewrap`"},
		{"missing path", Config{Path: "/nonexistent/bwrap"}, "bubblewrap (bwrap) is not installed"},
		{"not bwrap", Config{Path: "/usr/bin/false"}, "a trial bwrap sandbox failed"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e, err := New(tc.cfg, enginetest.Logger(t))
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = e.Close() }()
			if e.Name() != "bwrap" {
				t.Errorf("Name() = %q", e.Name())
			}
			for range 2 { // the second call hits the cache or fails the same way
				err = e.Check(t.Context())
				if tc.wantErr == "" {
					if err != nil {
						t.Fatalf("Check: %v", err)
					}
					if !e.checked {
						t.Error("Check succeeded but did not cache it")
					}
					continue
				}
				if !errors.Is(err, engine.ErrUnavailable) || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("Check = %v, want ErrUnavailable containing %q", err, tc.wantErr)
				}
			}
			if tc.wantErr != "" {
				if _, err := e.Start(t.Context(), engine.Spec{Argv: []string{"/usr/bin/true"}}); err == nil && strings.Contains(tc.wantErr, "installed") {
					t.Error("Start succeeded without bwrap")
				}
			}
		})
	}
}

func TestCheckFailureAdvice(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, stderr string
		want         []string
	}{
		{"debian sysctl off",
			"bwrap: No permissions to creating new namespace, likely because the kernel does not allow non-privileged user namespaces.",
			[]string{"kernel.unprivileged_userns_clone", "user.max_user_namespaces", "sysctl -w"}},
		{"max namespaces zero", "bwrap: Creating new namespace failed: No space left on device",
			[]string{"user.max_user_namespaces"}},
		{"uid map", "bwrap: setting up uid map: Permission denied", []string{"kernel.unprivileged_userns_clone"}},
		{"other", "bwrap: Can't mount proc on /newroot/proc: Operation not permitted",
			[]string{"a trial bwrap sandbox failed", "mount proc"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			err := checkFailure(tc.stderr, errors.New("exit status 1"))
			if !errors.Is(err, engine.ErrUnavailable) {
				t.Errorf("%v does not wrap ErrUnavailable", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("%q lacks %q", err, w)
				}
			}
		})
	}
}

func TestBwrapArgs(t *testing.T) {
	t.Parallel()
	spec := engine.Spec{
		AgentDir: "/srv/agent",
		Argv:     []string{"/usr/bin/python3", "-I"},
		Env:      map[string]string{"B": "2", "A": "secret"},
		Limits:   engine.Limits{TmpBytes: 1 << 20, WorkspaceBytes: 2 << 20, FileBytes: 5, OpenFiles: 7, CPUTime: 1500 * time.Millisecond, MemoryBytes: 9, Pids: 3},
	}
	a, data := bwrapArgs(rootFS{}, spec, true, "")
	idx := func(s string) int { return slices.Index(a, s) }
	if idx("--remount-ro") < idx("--ro-bind-data") || idx("--remount-ro") < idx("--args") {
		t.Errorf("--remount-ro / must follow every mount, including those in --args: %v", a)
	}
	if i := idx("--seccomp"); i < 0 || a[i+1] != "7" {
		t.Errorf("no --seccomp 7 in %v", a)
	}
	if noFilter, _ := bwrapArgs(rootFS{}, spec, false, ""); slices.Contains(noFilter, "--seccomp") {
		t.Errorf("--seccomp without a filter: %v", noFilter)
	}
	if strings.Contains(strings.Join(a, " "), "secret") || slices.Contains(a, "/srv/agent") {
		t.Error("the environment and per-sandbox mounts must not be on bwrap's command line")
	}
	if got := a[len(a)-6:]; !slices.Equal(got, []string{"/usr/bin/env", "-u", "PWD", "--", "/usr/bin/python3", "-I"}) {
		t.Errorf("command tail = %v", got)
	}
	wantData := "--ro-bind\x00/srv/agent\x00" + engine.AgentMount + "\x00" +
		"--size\x001048576\x00--tmpfs\x00/tmp\x00--size\x001048576\x00--tmpfs\x00/dev/shm\x00" +
		"--size\x002097152\x00--tmpfs\x00/workspace\x00--chdir\x00/workspace\x00" +
		"--clearenv\x00--setenv\x00A\x00secret\x00--setenv\x00B\x002\x00"
	if got := string(data); got != wantData {
		t.Errorf("--args data = %q, want %q", got, wantData)
	}
	// With PWD set to the working directory, bwrap's own PWD is right and
	// the command starts without a wrapper.
	withPWD := spec
	withPWD.Env = map[string]string{"PWD": "/workspace"}
	if got, _ := bwrapArgs(rootFS{}, withPWD, true, ""); !slices.Equal(got[len(got)-3:], []string{"--", "/usr/bin/python3", "-I"}) || slices.Contains(got, "/usr/bin/env") {
		t.Errorf("with PWD=/workspace the command tail = %v, want no env wrapper", got[len(got)-6:])
	}
	// Sandboxes that differ only in what --args carries share a command
	// line, so one spare launcher serves them all.
	other := spec
	other.ID, other.AgentDir, other.Env = "other", "/srv/elsewhere", map[string]string{"C": "3"}
	if got, _ := bwrapArgs(rootFS{}, other, true, ""); !slices.Equal(got, a) {
		t.Errorf("the command line depends on the ID, agent dir or environment:\n%v\n%v", got, a)
	}
	// As root, the tmpfs are the shim's, noexec, bound from scratch; the
	// queued-signals and locked-memory shares are set by prlimit inside
	// the sandbox.
	shared := spec
	shared.Limits.PendingSignals, shared.Limits.LockedBytes = 100, 4096
	a, data = bwrapArgs(rootFS{}, shared, true, "/scratch")
	wantData = "--ro-bind\x00/srv/agent\x00" + engine.AgentMount + "\x00" +
		"--bind\x00/scratch/tmp\x00/tmp\x00--bind\x00/scratch/shm\x00/dev/shm\x00--bind\x00/scratch/workspace\x00/workspace\x00" +
		"--chdir\x00/workspace\x00--clearenv\x00--setenv\x00A\x00secret\x00--setenv\x00B\x002\x00"
	if got := string(data); got != wantData {
		t.Errorf("--args data with scratch = %q, want %q", got, wantData)
	}
	wantTail := []string{"--", prlimitPath, "--sigpending=100", "--memlock=4096", "--", "/usr/bin/env", "-u", "PWD", "--", "/usr/bin/python3", "-I"}
	if got := a[len(a)-len(wantTail):]; !slices.Equal(got, wantTail) {
		t.Errorf("command tail with shares = %v, want %v", got, wantTail)
	}
	tests := []struct {
		name      string
		mem, pids bool
		want      []rlimit
	}{
		{"cgroups", true, true, []rlimit{{unix.RLIMIT_CORE, 0}, {unix.RLIMIT_CPU, 2}, {unix.RLIMIT_FSIZE, 5}, {unix.RLIMIT_NOFILE, 7}}},
		{"no cgroups", false, false, []rlimit{{unix.RLIMIT_CORE, 0}, {unix.RLIMIT_CPU, 2}, {unix.RLIMIT_FSIZE, 5}, {unix.RLIMIT_NOFILE, 7}, {unix.RLIMIT_AS, 9}, {unix.RLIMIT_NPROC, 3}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if got := rlimits(spec.Limits, tc.mem, tc.pids); !slices.Equal(got, tc.want) {
				t.Errorf("rlimits = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestBwrapPrepare checks that Prepare compiles the agent with the
// interpreter the sandboxes run.
func TestBwrapPrepare(t *testing.T) {
	t.Parallel()
	enginetest.CheckPrepare(t, newTestEngine(t, Config{}), "")
}

func TestBwrapStartErrors(t *testing.T) {
	t.Parallel()
	e := newTestEngine(t, Config{})
	tests := []struct {
		name    string
		spec    engine.Spec
		wantErr string
	}{
		{"empty argv", engine.Spec{}, "empty Argv"},
		{"bad env name", engine.Spec{Argv: []string{"/usr/bin/true"}, Env: map[string]string{"A=B": "x"}}, "invalid environment variable"},
		{"NUL in env", engine.Spec{Argv: []string{"/usr/bin/true"}, Env: map[string]string{"A": "x\x00y"}}, "invalid environment variable"},
		{"agent dir private", engine.Spec{Argv: []string{"/usr/bin/true"}, AgentDir: privateDir(t)}, "chmod o+rx"},
		{"agent dir missing", engine.Spec{Argv: []string{"/usr/bin/true"}, AgentDir: "/nonexistent/agent"}, "no such file"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p, err := e.Start(t.Context(), tc.spec)
			if err == nil {
				_ = p.Kill()
				t.Fatal("Start succeeded")
			}
			if !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("Start error %q lacks %q", err, tc.wantErr)
			}
		})
	}
}

// privateDir is a 0700 directory: uid 65534 cannot bind it.
func privateDir(t *testing.T) string {
	d := filepath.Join(t.TempDir(), "private")
	if err := os.Mkdir(d, 0o700); err != nil {
		t.Fatal(err)
	}
	return d
}

// TestBwrapChannel checks that stdin and stdout form a working duplex
// channel and that Stdout reaches EOF after exit.
func TestBwrapChannel(t *testing.T) { eachStartPath(t, true, testBwrapChannel) }

func testBwrapChannel(t *testing.T, path startPath) {
	e := newTestEngine(t, path.config(Config{}))
	p, err := e.Start(t.Context(), enginetest.Spec(t, `
import sys
for line in sys.stdin:
    sys.stdout.write(line.upper())
    sys.stdout.flush()`))
	if err != nil {
		t.Fatal(err)
	}
	r := bufio.NewReader(p.Stdout())
	for _, msg := range []string{"hello\n", "second line\n"} {
		if _, err := io.WriteString(p.Stdin(), msg); err != nil {
			t.Fatal(err)
		}
		got, err := r.ReadString('\n')
		if err != nil || got != strings.ToUpper(msg) {
			t.Fatalf("echo: got %q, %v", got, err)
		}
	}
	_ = p.Stdin().Close()
	if err := p.Wait(); err != nil {
		t.Errorf("Wait: %v", err)
	}
	if rest, err := io.ReadAll(r); err != nil || len(rest) != 0 {
		t.Errorf("after exit: %q, %v", rest, err)
	}
	if p.PID() <= 0 {
		t.Errorf("PID = %d", p.PID())
	}
	if p.Kill() != nil {
		t.Error("Kill after exit must be a no-op")
	}
}

// TestBwrapKill checks that Kill leaves no process behind, including a
// child the sandboxed code started.
// TestBwrapPause: the cgroup freezer stops a sandbox and its children
// and lets them go on; Kill ends a frozen one.
func TestBwrapPause(t *testing.T) { eachStartPath(t, true, testBwrapPause) }

func testBwrapPause(t *testing.T, path startPath) {
	e := newTestEngine(t, path.config(Config{}))
	enginetest.CheckPause(t, e, enginetest.Spec(t, enginetest.PauseScript))
}

func TestBwrapKill(t *testing.T) { eachStartPath(t, true, testBwrapKill) }

func testBwrapKill(t *testing.T, path startPath) {
	e := newTestEngine(t, path.config(Config{}))
	p, err := e.Start(t.Context(), enginetest.Spec(t, `
import subprocess, sys
c = subprocess.Popen(["/usr/bin/sleep", "1000"])
print(c.pid, flush=True)
sys.stdin.read()`))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := bufio.NewReader(p.Stdout()).ReadString('\n'); err != nil {
		t.Fatalf("sandbox did not start its child: %v", err)
	}
	// The child's PID printed above is in the sandbox's PID namespace; find
	// the host PIDs of everything under bwrap instead.
	pids := descendants(t, p.PID())
	if len(pids) < 3 {
		t.Fatalf("expected bwrap's init, python and sleep under %d, got %v", p.PID(), pids)
	}
	for range 2 { // Kill twice: it must be idempotent
		if err := p.Kill(); err != nil {
			t.Fatalf("Kill: %v", err)
		}
	}
	if err := p.Wait(); err == nil {
		t.Error("Wait after Kill returned nil, want the kill reported")
	}
	for _, pid := range survivors(append(pids, p.PID())) {
		t.Errorf("process %d survived Kill", pid)
	}
}

// descendants returns the host PIDs of every process below pid.
func descendants(t *testing.T, pid int) []int {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	parent := map[int]int{}
	for _, en := range entries {
		p, err := strconv.Atoi(en.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + en.Name() + "/stat")
		if err != nil {
			continue
		}
		f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+2:]))
		if pp, err := strconv.Atoi(f[1]); err == nil {
			parent[p] = pp
		}
	}
	var out []int
	for p := range parent {
		for q := parent[p]; q > 1; q = parent[q] {
			if q == pid {
				out = append(out, p)
				break
			}
		}
	}
	slices.Sort(out)
	return out
}
