package bwrap

import (
	"strings"
	"testing"
	"time"

	"github.com/codeexec/codeexec/sandboxd/internal/engine/enginetest"
)

// TestBwrapScratchIsNoexec checks that nothing written to /tmp, /dev/shm
// or /workspace can be executed, as in a container: the mounts are noexec,
// a script there cannot be run, and a library there cannot be mapped
// executable. Python and the host's programs still run.
func TestBwrapScratchIsNoexec(t *testing.T) { eachStartPath(t, true, testBwrapScratchIsNoexec) }

func testBwrapScratchIsNoexec(t *testing.T, path startPath) {
	e := newTestEngine(t, path.config(Config{}))
	script := `
import mmap, os, shutil, subprocess
opts = {l.split()[4]: l.split()[5] for l in open("/proc/self/mountinfo")}
bad = [m for m in ["/tmp", "/workspace", "/dev/shm"] if "noexec" not in opts[m].split(",")]
for d in ["/tmp", "/workspace", "/dev/shm"]:
    p = d + "/true"
    shutil.copy("/usr/bin/true", p)
    os.chmod(p, 0o755)
    try:
        subprocess.run([p])
        bad.append("ran " + p)
    except PermissionError:
        pass
    with open(p, "rb") as f:
        try:
            mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ | mmap.PROT_EXEC)
            bad.append("mapped " + p + " executable")
        except PermissionError:
            pass
if subprocess.run(["/usr/bin/true"]).returncode != 0:
    bad.append("/usr/bin/true failed")
print("ok" if not bad else bad)`
	r := enginetest.Run(t, e, enginetest.Spec(t, script), "", 30*time.Second)
	if r.Err != nil || strings.TrimSpace(r.Stdout) != "ok" {
		t.Errorf("got stdout %q, err %v, stderr %q", r.Stdout, r.Err, r.Stderr)
	}
}

// TestBwrapKernelObjectShares checks what a sandbox may make of the kernel
// objects counted per user: no inotify or fanotify instance and no message
// queue (seccomp), and its own share of queued signals and locked memory,
// set inside its user namespace.
func TestBwrapKernelObjectShares(t *testing.T) { eachStartPath(t, true, testBwrapKernelObjectShares) }

func testBwrapKernelObjectShares(t *testing.T, path startPath) {
	e := newTestEngine(t, path.config(Config{}))
	script := `
import ctypes, errno, os, resource
libc = ctypes.CDLL(None, use_errno=True)
got = {}
for name, call in [("inotify", lambda: libc.inotify_init1(0)), ("fanotify", lambda: libc.fanotify_init(0, 0)),
                   ("mq_open", lambda: libc.mq_open(b"/q", os.O_CREAT | os.O_RDWR, 0o600, None))]:
    got[name] = "EPERM" if call() < 0 and ctypes.get_errno() == errno.EPERM else "allowed"
got["sigpending"] = resource.getrlimit(resource.RLIMIT_SIGPENDING)
got["memlock"] = resource.getrlimit(resource.RLIMIT_MEMLOCK)
want = {"inotify": "EPERM", "fanotify": "EPERM", "mq_open": "EPERM", "sigpending": (50, 50), "memlock": (8192, 8192)}
print("ok" if got == want else got)`
	spec := enginetest.Spec(t, script)
	spec.Limits.PendingSignals, spec.Limits.LockedBytes = 50, 8192
	r := enginetest.Run(t, e, spec, "", 30*time.Second)
	if r.Err != nil || strings.TrimSpace(r.Stdout) != "ok" {
		t.Errorf("got stdout %q, err %v, stderr %q", r.Stdout, r.Err, r.Stderr)
	}
}
