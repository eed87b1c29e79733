package e2e

import (
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/codeexec/codeexec/cmd/codeexec/e2e/internal/harness"
)

// hoardKernelObjects is a sandbox's attempt at the kernel objects the
// kernel counts per user (issue 38, item 1): inotify and fanotify
// instances, POSIX message queues, queued real-time signals and locked
// shared memory. It holds what it got (the session keeps it) and prints
// how many of each.
const hoardKernelObjects = `
import ctypes, os, signal, time
libc = ctypes.CDLL(None, use_errno=True)
held = globals().setdefault("held", [])
def many(make, n):
    got = 0
    for i in range(n):
        fd = make(i)
        if fd < 0:
            break
        held.append(fd)
        got += 1
    return got
inotify = many(lambda i: libc.inotify_init1(0), 200)
fanotify = many(lambda i: libc.fanotify_init(0, 0), 200)
mqueue = many(lambda i: libc.mq_open(b"/hoard%d" % i, os.O_CREAT | os.O_RDWR, 0o600, None), 64)
# Real-time signals queued to a child that blocks them: each stays queued.
r, w = os.pipe()
pid = os.fork()
if pid == 0:
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGRTMIN})
    os.write(w, b"x")
    time.sleep(600)
    os._exit(0)
os.read(r, 1)
held.append(pid)
queued = 0
for _ in range(200000):
    if libc.sigqueue(pid, signal.SIGRTMIN, ctypes.c_void_p(0)) != 0:
        break
    queued += 1
shm = libc.shmget(0, 8 << 20, 0o1600)
locked = libc.shmctl(shm, 11, None) == 0 if shm >= 0 else False  # SHM_LOCK
print(inotify, fanotify, mqueue, queued, locked)`

// hostKernelProbe is what a host process checks it can still do while a
// sandbox hoards: one inotify instance, one message queue, ten queued
// real-time signals, and locking 64 KiB of shared memory.
const hostKernelProbe = `
import ctypes, os, signal, time
libc = ctypes.CDLL(None, use_errno=True)
bad = []
if libc.inotify_init1(0) < 0:
    bad.append("inotify_init1: %s" % os.strerror(ctypes.get_errno()))
name = b"/codeexec-probe-%d" % os.getpid()
q = libc.mq_open(name, os.O_CREAT | os.O_RDWR, 0o600, None)
if q < 0:
    bad.append("mq_open: %s" % os.strerror(ctypes.get_errno()))
else:
    libc.mq_unlink(name)
r, w = os.pipe()
pid = os.fork()
if pid == 0:
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGRTMIN})
    os.write(w, b"x")
    time.sleep(30)
    os._exit(0)
os.read(r, 1)
for i in range(10):
    if libc.sigqueue(pid, signal.SIGRTMIN, ctypes.c_void_p(0)) != 0:
        bad.append("sigqueue #%d: %s" % (i, os.strerror(ctypes.get_errno())))
        break
os.kill(pid, signal.SIGKILL)
os.waitpid(pid, 0)
shm = libc.shmget(0, 64 << 10, 0o1600)
if shm < 0 or libc.shmctl(shm, 11, None) != 0:
    bad.append("SHM_LOCK: %s" % os.strerror(ctypes.get_errno()))
if shm >= 0:
    libc.shmctl(shm, 0, None)  # IPC_RMID
print("ok" if not bad else "; ".join(bad))`

// probeHost runs hostKernelProbe as host uid uid.
func probeHost(t *testing.T, uid uint32) string {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), "/usr/bin/python3", "-I", "-c", hostKernelProbe)
	cmd.Dir = "/"
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: uid, Groups: []uint32{}}}
	out, err := cmd.CombinedOutput()
	if err != nil {
		return "probe failed: " + err.Error() + ": " + string(out)
	}
	return strings.TrimSpace(string(out))
}

// A sandbox that takes every kernel object the kernel counts per user
// keeps them within its own small share, charged to no host user that
// anything else runs as: host processes of root and of nobody, and the
// other tenant's sandboxes, still get theirs, and root's count of queued
// signals is back to where it was once the session ends. Before, the fork
// server's user namespace belonged to root and bwrap's sandboxes ran as
// nobody, so 128 inotify instances in one sandbox made inotify_init1 fail
// for every root (or nobody) process on the host and every other sandbox;
// and every container sandbox ran as host uid 65534, so alpha's queued
// signals left beta none.
func TestE2ESandboxKernelObjectsStayInTheirShare(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Fatal("this test needs root: it checks what the sandboxes are charged to, which matters when sandboxd runs as root")
	}
	type runtimeCase struct {
		name string
		env  map[string]string
	}
	cases := []runtimeCase{{"fork server", nil}, {"bwrap", map[string]string{"CODEEXEC_FORK_SERVER": "false"}}}
	rt := harness.ContainerRuntime()
	if rt != "" {
		// A container has no user namespace of its own: its queued
		// signals count against its host uid, one per sandbox.
		cases = []runtimeCase{{rt, nil}}
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			n := startNeighbours(t, tc.env)
			beta := newBystander(t, n.beta, hostBetaProbe)
			if rt != "" {
				checkOwnHostUIDs(t, n)
			}
			rootSigQ := sigQueued(t)
			var got string
			beta.alongside(t, "alpha hoarding kernel objects", func() {
				got = harness.Joined(harness.Code(t, n.alpha, hoardKernelObjects).Stdout())
			})
			f := strings.Fields(got)
			if len(f) != 5 {
				t.Fatalf("alpha's hoard printed %q", got)
			}
			t.Logf("alpha got inotify %s, fanotify %s, message queues %s, queued signals %s, SHM_LOCK %s", f[0], f[1], f[2], f[3], f[4])
			if f[0] != "0" || f[1] != "0" || f[2] != "0" {
				t.Errorf("alpha holds %s inotify instances, %s fanotify groups and %s message queues; want none (seccomp refuses them)", f[0], f[1], f[2])
			}
			if q, _ := strconv.Atoi(f[3]); q == 0 || q > 1024 {
				t.Errorf("alpha queued %s real-time signals; want its own share, at most 1024", f[3])
			}
			if f[4] != "False" {
				t.Errorf("alpha locked 8 MiB of shared memory")
			}
			for _, uid := range []uint32{0, 65534} {
				if p := probeHost(t, uid); p != "ok" {
					t.Errorf("while alpha hoards, a host process of uid %d: %s", uid, p)
				}
			}
			if q := sigQueued(t); q > rootSigQ+32 {
				t.Errorf("root's queued signals went from %d to %d while alpha hoarded: the sandbox's are charged to root", rootSigQ, q)
			}
			_ = n.alpha.Close()
			if !waitFor(30*time.Second, func() bool { return sigQueued(t) <= rootSigQ+32 }) {
				t.Errorf("root's queued signals are %d after alpha's session ended, %d before", sigQueued(t), rootSigQ)
			}
		})
	}
}

// hostBetaProbe is the other tenant's call: it queues ten real-time
// signals, which must work whatever alpha holds, and prints "ok".
const hostBetaProbe = `
import ctypes, os, signal, time
libc = ctypes.CDLL(None, use_errno=True)
r, w = os.pipe()
pid = os.fork()
if pid == 0:
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGRTMIN})
    os.write(w, b"x")
    time.sleep(30)
    os._exit(0)
os.read(r, 1)
n = sum(libc.sigqueue(pid, signal.SIGRTMIN, ctypes.c_void_p(0)) == 0 for _ in range(10))
os.kill(pid, signal.SIGKILL)
os.waitpid(pid, 0)
print("ok" if n == 10 else "queued %d of 10 signals" % n)`

// checkOwnHostUIDs checks, under a container runtime, that alpha's and
// beta's sandboxes run as two host uids of the container range
// (--container-uids), neither nobody's.
func checkOwnHostUIDs(t *testing.T, n neighbours) {
	t.Helper()
	const uidOf = "import os; print(os.getuid(), os.getgid())"
	a := harness.Joined(harness.Code(t, n.alpha, uidOf).Stdout())
	b := harness.Joined(harness.Code(t, n.beta, uidOf).Stdout())
	t.Logf("alpha runs as uid and gid %s, beta as %s", a, b)
	for _, ids := range []string{a, b} {
		f := append(strings.Fields(ids), "", "")
		uid, err := strconv.Atoi(f[0])
		if err != nil || f[1] != f[0] || f[2] != "" || uid < 2_000_000_000 || uid > 2_000_065_535 {
			t.Errorf("a sandbox runs as uid and gid %q; want a uid of --container-uids (2000000000-2000065535), and its gid", ids)
		}
	}
	if a == b {
		t.Errorf("alpha and beta both run as %s", a)
	}
}
