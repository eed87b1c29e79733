package bwrap

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/codeexec/codeexec/sandboxd/internal/engine"
	"github.com/codeexec/codeexec/sandboxd/internal/engine/cgroup"
	"github.com/codeexec/codeexec/sandboxd/internal/engine/enginetest"
)

// TestBwrapCgroupLimits runs real bombs against the cgroup caps.
func TestBwrapCgroupLimits(t *testing.T) { eachStartPath(t, true, testBwrapCgroupLimits) }

func testBwrapCgroupLimits(t *testing.T, path startPath) {
	e := newTestEngine(t, path.config(Config{}))
	if e.cgroups == nil {
		t.Fatal("cgroups are unavailable on this host; these tests need root and cgroup v1 or v2 with memory and pids")
	}

	t.Run("memory bomb is OOM-killed", func(t *testing.T) {
		t.Parallel()
		spec := enginetest.Spec(t, `
print("start", flush=True)
x = b"\x01" * (1 << 30)
print("survived")`)
		spec.Limits.MemoryBytes = 128 << 20
		r := enginetest.Run(t, e, spec, "", 60*time.Second)
		if r.Err == nil || strings.Contains(r.Stdout, "survived") {
			t.Errorf("bomb survived: stdout %q err %v", r.Stdout, r.Err)
		}
		if !r.Usage.OOMKilled {
			t.Errorf("Usage().OOMKilled = false; usage %+v, stderr %q", r.Usage, r.Stderr)
		}
		if r.Usage.MemoryPeakBytes <= 0 || r.Usage.MemoryPeakBytes > 128<<20 {
			t.Errorf("MemoryPeakBytes = %d, want in (0, 128MiB]", r.Usage.MemoryPeakBytes)
		}
		t.Logf("usage %+v, exit %v", r.Usage, r.Err)
	})

	t.Run("fork bomb is contained", func(t *testing.T) {
		t.Parallel()
		spec := enginetest.Spec(t, `
import os, errno, time
kids = []
try:
    for i in range(200):
        pid = os.fork()
        if pid == 0:
            time.sleep(60)
            os._exit(0)
        kids.append(pid)
    print("unbounded")
except BlockingIOError as e:
    print("blocked", len(kids), e.errno == errno.EAGAIN)
for k in kids:
    os.kill(k, 9)
    os.waitpid(k, 0)`)
		spec.Limits.Pids = 32
		r := enginetest.Run(t, e, spec, "", 60*time.Second)
		f := strings.Fields(r.Stdout)
		if len(f) != 3 || f[0] != "blocked" || f[2] != "True" {
			t.Fatalf("fork bomb: stdout %q err %v stderr %q", r.Stdout, r.Err, r.Stderr)
		}
		t.Logf("fork bomb: %s usage %+v", strings.TrimSpace(r.Stdout), r.Usage)
		if !r.Usage.PidsLimitHit {
			t.Errorf("Usage().PidsLimitHit = false")
		}
		// The host still forks and runs sandboxes.
		if err := exec.Command("/usr/bin/true").Run(); err != nil {
			t.Errorf("host cannot fork after the bomb: %v", err)
		}
		after := enginetest.Run(t, e, enginetest.Spec(t, `print("ok")`), "", 30*time.Second)
		if strings.TrimSpace(after.Stdout) != "ok" {
			t.Errorf("sandbox after the bomb: %q %v", after.Stdout, after.Err)
		}
	})

	// Issue 38: on cgroup v1 socket buffers were outside the memory limit
	// (a 512 MiB sandbox queued 922 MiB); v1 now gives them a share of it,
	// and v2 counts them in memory.max. Either way the sandbox queues no
	// more than its limit; it may be OOM-killed on the way.
	t.Run("socket buffers count against the memory limit", func(t *testing.T) {
		t.Parallel()
		spec := enginetest.Spec(t, `
import socket, time
srv = socket.socket()
srv.bind(("127.0.0.1", 0))
srv.listen(128)
held, total, chunk, start = [], 0, b"x" * 65536, time.monotonic()
for _ in range(60):
    a = socket.create_connection(srv.getsockname())
    b, _ = srv.accept()
    held += [a, b]
    for s in (a, b):
        s.setblocking(False)
        while total < 1 << 30 and time.monotonic() - start < 60:
            try:
                total += s.send(chunk)
            except OSError:
                break
    print(total, flush=True)
print("done")`)
		const limit = 128 << 20
		spec.Limits.MemoryBytes = limit
		r := enginetest.Run(t, e, spec, "", 120*time.Second)
		lines := strings.Fields(r.Stdout)
		if len(lines) < 2 {
			t.Fatalf("stdout %q err %v stderr %q", r.Stdout, r.Err, r.Stderr)
		}
		last := lines[len(lines)-1]
		if last == "done" {
			last = lines[len(lines)-2]
		} else if !r.Usage.OOMKilled {
			t.Fatalf("the filler neither ended nor was OOM-killed: stdout %q err %v stderr %q", r.Stdout, r.Err, r.Stderr)
		}
		queued, _ := strconv.Atoi(last)
		t.Logf("queued %d MiB in socket buffers with a limit of %d MiB (OOM-killed: %v)", queued>>20, limit>>20, r.Usage.OOMKilled)
		if queued == 0 || queued > limit {
			t.Errorf("queued %d MiB in socket buffers; want some, and at most the memory limit of %d MiB", queued>>20, limit>>20)
		}
	})

	t.Run("cpu quota", func(t *testing.T) {
		t.Parallel()
		spec := enginetest.Spec(t, `
import time
end = time.monotonic() + 1.5
while time.monotonic() < end:
    pass
print(time.process_time())`)
		spec.Limits.CPUs = 0.25
		r := enginetest.Run(t, e, spec, "", 30*time.Second)
		cpu, err := strconv.ParseFloat(strings.TrimSpace(r.Stdout), 64)
		if err != nil {
			t.Fatalf("stdout %q err %v stderr %q", r.Stdout, r.Err, r.Stderr)
		}
		// 1.5 s of wall time at a quarter core is about 0.375 s of CPU.
		if cpu > 0.7 {
			t.Errorf("used %.2fs CPU in 1.5s wall with CPUs=0.25", cpu)
		}
	})
}

// TestBwrapRlimits checks the limits that are always rlimits.
func TestBwrapRlimits(t *testing.T) { eachStartPath(t, true, testBwrapRlimits) }

func testBwrapRlimits(t *testing.T, path startPath) {
	e := newTestEngine(t, path.config(Config{}))
	tests := []struct {
		name   string
		limits func(*engine.Limits)
		script string
	}{
		{"no core dumps", func(*engine.Limits) {}, `
import resource
print("ok" if resource.getrlimit(resource.RLIMIT_CORE) == (0, 0) else resource.getrlimit(resource.RLIMIT_CORE))`},
		{"file size", func(l *engine.Limits) { l.FileBytes = 1 << 20 }, `
import errno
try:
    open("/tmp/f", "wb").write(b"x" * (2 << 20))
    print("wrote")
except OSError as e:
    print("ok" if e.errno == errno.EFBIG else e)`},
		{"open files", func(l *engine.Limits) { l.OpenFiles = 20 }, `
import errno
fs = []
try:
    for i in range(100):
        fs.append(open("/dev/null"))
    print("opened all")
except OSError as e:
    print("ok" if e.errno == errno.EMFILE and len(fs) < 20 else e)`},
		{"cpu time", func(l *engine.Limits) { l.CPUTime = time.Second }, `
import resource, signal
soft, hard = resource.getrlimit(resource.RLIMIT_CPU)
if soft != 1:
    print("RLIMIT_CPU", soft, hard)
else:
    print("ok", flush=True)
    while True:
        pass`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			spec := enginetest.Spec(t, tc.script)
			tc.limits(&spec.Limits)
			start := time.Now()
			r := enginetest.Run(t, e, spec, "", 30*time.Second)
			if strings.TrimSpace(r.Stdout) != "ok" {
				t.Errorf("stdout %q err %v stderr %q", r.Stdout, r.Err, r.Stderr)
			}
			if tc.name == "cpu time" && (r.Err == nil || time.Since(start) > 10*time.Second) {
				t.Errorf("CPU-bound sandbox not stopped by RLIMIT_CPU: err %v after %v", r.Err, time.Since(start))
			}
		})
	}
}

// TestBwrapRlimitFallback points the engine at a cgroup root with nothing
// in it, so memory and pids must fall back to RLIMIT_AS and RLIMIT_NPROC.
func TestBwrapRlimitFallback(t *testing.T) { eachStartPath(t, true, testBwrapRlimitFallback) }

func testBwrapRlimitFallback(t *testing.T, path startPath) {
	e := newTestEngine(t, path.config(Config{CgroupRoot: t.TempDir()}))
	if e.cgroups != nil {
		t.Fatal("expected no cgroups under an empty root")
	}
	spec := enginetest.Spec(t, `
import resource
ok = resource.getrlimit(resource.RLIMIT_AS) == (128 << 20, 128 << 20) and resource.getrlimit(resource.RLIMIT_NPROC) == (4096, 4096)
try:
    x = b"\x01" * (1 << 30)
    print("allocated")
except MemoryError:
    print("ok" if ok else "rlimits not set")`)
	spec.Limits.MemoryBytes = 128 << 20
	// RLIMIT_NPROC counts every task of the host uid 65534, including the
	// sandboxes of tests running alongside: a small value here would make
	// bwrap's own fork fail at random. The value shows the fallback applies.
	spec.Limits.Pids = 4096
	r := enginetest.Run(t, e, spec, "", 30*time.Second)
	if strings.TrimSpace(r.Stdout) != "ok" {
		t.Errorf("stdout %q err %v stderr %q", r.Stdout, r.Err, r.Stderr)
	}
}

// TestBwrapCleanup checks that after Wait and Close no cgroup and no
// process is left. Not parallel: other tests' engines share the
// codeexec-<pid> parents, which only the last Close removes.
func TestBwrapCleanup(t *testing.T) { eachStartPath(t, false, testBwrapCleanup) }

func testBwrapCleanup(t *testing.T, path startPath) {
	requireHost(t)
	e, err := New(inTestEnv(path.config(Config{})), enginetest.Logger(t))
	if err != nil {
		t.Fatal(err)
	}
	if e.cgroups == nil {
		t.Fatal("cgroups unavailable: need root and cgroup v1 or v2 with memory and pids")
	}
	parents := e.cgroups.Parents()
	spec := enginetest.Spec(t, `print("ok")`)
	spec.Limits.CPUs = 1
	done := enginetest.Run(t, e, spec, "", 30*time.Second)
	if strings.TrimSpace(done.Stdout) != "ok" {
		t.Fatalf("sandbox: %q %v %q", done.Stdout, done.Err, done.Stderr)
	}
	for _, parent := range parents {
		if entries := subdirs(t, parent); len(entries) != 0 {
			t.Errorf("after Wait, %s still has %v", parent, entries)
		}
	}

	// A sandbox still running at Close must be killed and cleaned up.
	spec = enginetest.Spec(t, `import time; time.sleep(1000)`)
	spec.Limits.CPUs = 1
	live, err := e.Start(t.Context(), spec)
	if err != nil {
		t.Fatal(err)
	}
	for _, parent := range parents {
		if len(subdirs(t, parent)) != 1 {
			t.Errorf("running sandbox has no cgroup under %s", parent)
		}
	}
	pids := append(descendants(t, live.PID()), live.PID())
	if err := e.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := e.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	for _, pid := range survivors(pids) {
		t.Errorf("process %d survived Close", pid)
	}
	for _, parent := range parents {
		// On cgroup v2 the test process itself lives in the parent's
		// leaf (cgroup.SelfLeaf) and the parent stays with it alone.
		if _, leaf := os.Stat(filepath.Join(parent, cgroup.SelfLeaf)); leaf == nil && e.cgroups.V2() {
			if left := subdirs(t, parent); len(left) != 0 {
				t.Errorf("cgroup parent %s keeps %v", parent, left)
			}
		} else if _, err := os.Stat(parent); !os.IsNotExist(err) {
			t.Errorf("cgroup parent %s not removed: %v", parent, err)
		}
	}
	if _, err := e.Start(t.Context(), enginetest.Spec(t, `print(1)`)); err == nil {
		t.Error("Start after Close succeeded")
	}
}

func subdirs(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		// Other tests' engines share the parent cgroups, and the last of
		// them to close removes a parent, between a caller's Stat and here.
		return nil
	}
	if err != nil {
		t.Fatalf("read %s: %v", dir, err)
	}
	var out []string
	for _, e := range entries {
		// On cgroup v2 the test process's own leaf (see cgroup.SelfLeaf).
		if e.IsDir() && e.Name() != cgroup.SelfLeaf {
			out = append(out, e.Name())
		}
	}
	return out
}

// TestHostLimitsCheck checks the message for each cap the process could
// not set, and that one that may raise its limits passes them but for
// fs.nr_open, and a forked sandbox never does.
func TestHostLimitsCheck(t *testing.T) {
	t.Parallel()
	hard := func(resource int) (uint64, error) {
		return map[int]uint64{unix.RLIMIT_NOFILE: 256, unix.RLIMIT_FSIZE: unix.RLIM_INFINITY, unix.RLIMIT_CPU: 60}[resource], nil
	}
	plain := hostLimits{hard: hard, nrOpen: 4096}
	privileged := hostLimits{hard: hard, nrOpen: 4096, canRaise: true}
	const raise = ", which it may not raise without CAP_SYS_RESOURCE in the host's user namespace: "
	for _, tc := range []struct {
		name   string
		host   hostLimits
		limits []rlimit
		want   string
	}{
		{"at the hard limit", plain, []rlimit{{unix.RLIMIT_NOFILE, 256}, {unix.RLIMIT_CPU, 60}}, ""},
		{"under an unlimited one", plain, []rlimit{{unix.RLIMIT_FSIZE, 1 << 40}}, ""},
		{"open files above it", plain, []rlimit{{unix.RLIMIT_CORE, 0}, {unix.RLIMIT_NOFILE, 2048}},
			"the sandbox's open-files cap of 2048 is above this process's hard limit of 256" + raise +
				"lower it (--open-files, CODEEXEC_OPEN_FILES) or raise the hard limit where codeexec starts (ulimit -Hn, LimitNOFILE= under systemd, --ulimit nofile= for a container)"},
		{"CPU time above it", plain, []rlimit{{unix.RLIMIT_CPU, 61}},
			"the sandbox's CPU-time cap of 61 s is above this process's hard limit of 60" + raise +
				"lower it (--cpu-time, CODEEXEC_CPU_TIME) or raise the hard limit where codeexec starts (ulimit -Ht, LimitCPU= under systemd, --ulimit cpu= for a container)"},
		{"with CAP_SYS_RESOURCE", privileged, []rlimit{{unix.RLIMIT_NOFILE, 2048}, {unix.RLIMIT_CPU, 61}}, ""},
		{"forked, with CAP_SYS_RESOURCE in sandboxd", privileged.forked(), []rlimit{{unix.RLIMIT_NOFILE, 2048}},
			"the sandbox's open-files cap of 2048 is above this process's hard limit of 256" + raise +
				"lower it (--open-files, CODEEXEC_OPEN_FILES) or raise the hard limit where codeexec starts (ulimit -Hn, LimitNOFILE= under systemd, --ulimit nofile= for a container)"},
		{"above fs.nr_open, even with CAP_SYS_RESOURCE", privileged, []rlimit{{unix.RLIMIT_NOFILE, 4097}},
			"the sandbox's open-files cap of 4097 is above the kernel's fs.nr_open of 4096: lower it (--open-files, CODEEXEC_OPEN_FILES) or raise fs.nr_open (sysctl)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			err := tc.host.check(tc.limits)
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("check: %v", err)
			case tc.want != "" && (err == nil || err.Error() != tc.want):
				t.Errorf("check: %v, want %q", err, tc.want)
			}
		})
	}
}

// TestCanRaiseLimitsReadsTheEffectiveSet compares canRaiseLimits with the
// effective capabilities and the user namespace the kernel shows for this
// process.
func TestCanRaiseLimitsReadsTheEffectiveSet(t *testing.T) {
	t.Parallel()
	if got, want := canRaiseLimits(), enginetest.MayRaiseLimits(t); got != want {
		t.Errorf("canRaiseLimits() = %v, the kernel's view %v", got, want)
	}
}

// TestBwrapCapAboveTheHardLimit asks for one open file more than this
// process's hard limit. No sandbox can get that without CAP_SYS_RESOURCE
// in the host's user namespace (root on this host family lacks it), and
// none from the fork server even with it: New's CheckLimits and Start say
// what to change instead of failing in the middle of the start. With it,
// bwrap's path gives the sandbox the cap.
func TestBwrapCapAboveTheHardLimit(t *testing.T) {
	eachStartPath(t, true, testBwrapCapAboveTheHardLimit)
}

func testBwrapCapAboveTheHardLimit(t *testing.T, path startPath) {
	e := newTestEngine(t, path.config(Config{}))
	hard, err := hardLimit(unix.RLIMIT_NOFILE)
	if err != nil {
		t.Fatal(err)
	}
	spec := enginetest.Spec(t, "import resource\nprint(resource.getrlimit(resource.RLIMIT_NOFILE)[0])")
	spec.Limits.OpenFiles = int(hard) + 1
	overNrOpen := e.host.nrOpen > 0 && hard+1 > e.host.nrOpen
	if e.host.canRaise && !overNrOpen && !e.cfg.forkOnly {
		if err := e.CheckLimits(spec.Limits); err != nil {
			t.Fatalf("CheckLimits with CAP_SYS_RESOURCE: %v", err)
		}
		r := enginetest.Run(t, e, spec, "", 30*time.Second)
		if got := strings.TrimSpace(r.Stdout); got != strconv.FormatUint(hard+1, 10) {
			t.Fatalf("RLIMIT_NOFILE in the sandbox = %q (err %v, stderr %q), want %d", got, r.Err, r.Stderr, hard+1)
		}
		return
	}
	want := fmt.Sprintf("open-files cap of %d is above this process's hard limit of %d", hard+1, hard)
	if overNrOpen {
		want = fmt.Sprintf("open-files cap of %d is above the kernel's fs.nr_open of %d", hard+1, e.host.nrOpen)
	}
	if err := e.CheckLimits(spec.Limits); !e.host.canRaise || overNrOpen {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("CheckLimits: %v, want it to say %q", err, want)
		}
	}
	p, err := e.Start(t.Context(), spec)
	if err == nil {
		_ = p.Kill()
		t.Fatalf("Start with %d open files over a hard limit of %d succeeded", hard+1, hard)
	}
	if !strings.Contains(err.Error(), want) {
		t.Fatalf("Start: %v, want it to say %q", err, want)
	}
}
