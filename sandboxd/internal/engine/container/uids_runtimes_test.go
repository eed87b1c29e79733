package container

import (
	"bufio"
	"cmp"
	"context"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/codeexec/codeexec/sandboxd/internal/engine"
	"github.com/codeexec/codeexec/sandboxd/internal/engine/enginetest"
)

// fillSignals queues real-time signals to a child that blocks them until
// the kernel refuses (EAGAIN: the uid's RLIMIT_SIGPENDING count is full),
// prints how many and who it is, then holds them until stdin closes.
const fillSignals = `
import ctypes, errno, getpass, os, pwd, signal, sys, time
libc = ctypes.CDLL(None, use_errno=True)
r, w = os.pipe()
pid = os.fork()
if pid == 0:
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGRTMIN})
    os.write(w, b"x")
    time.sleep(600)
    os._exit(0)
os.read(r, 1)
n = 0
while n < 100000 and libc.sigqueue(pid, signal.SIGRTMIN, ctypes.c_void_p(0)) == 0:
    n += 1
err = errno.errorcode.get(ctypes.get_errno(), "none")
open("/workspace/mine", "w").write("x")
print(n, err, os.getuid(), os.getgid(), getpass.getuser(), pwd.getpwuid(os.getuid()).pw_dir, flush=True)
sys.stdin.read()`

// hostUIDOf is the real uid, on the host, of the container's first
// process and of its children (the agent under --init).
func hostUIDOf(t *testing.T, c *Engine, name string) []string {
	t.Helper()
	out, err := c.cli(t.Context(), "inspect", "--format", "{{.State.Pid}}", name)
	if err != nil {
		t.Fatalf("inspect %s: %v", name, err)
	}
	pid := strings.TrimSpace(out)
	pids := []string{pid}
	kids, _ := os.ReadFile("/proc/" + pid + "/task/" + pid + "/children")
	pids = append(pids, strings.Fields(string(kids))...)
	var uids []string
	for _, p := range pids {
		status, err := os.ReadFile("/proc/" + p + "/status")
		if err != nil {
			t.Fatalf("the container's process %s: %v", p, err)
		}
		_, rest, _ := strings.Cut(string(status), "\nUid:")
		line, _, _ := strings.Cut(rest, "\n")
		uids = append(uids, strings.Fields(line)[0])
	}
	return uids
}

// Two container sandboxes at once run as two host uids of the range, each
// named "sandbox" at home in /workspace, and one that fills its share of
// queued signals (RLIMIT_SIGPENDING, counted per host uid) leaves the
// other's whole. With an operator's --container-user they share one uid,
// and so one count: the first leaves the second less than its share (none
// when nothing else runs as 65534), which is what the per-sandbox uids
// are for.
func TestContainerSandboxesHaveHostUIDsOfTheirOwn(t *testing.T) {
	for _, rt := range testRuntimes(t) {
		t.Run(rt, func(t *testing.T) {
			t.Parallel()
			for _, user := range []string{"", "65534:65534"} {
				t.Run("user "+cmp.Or(user, "of its own"), func(t *testing.T) {
					t.Parallel()
					if user != "" {
						// One count for all: the runtimes take turns at it.
						nobodyTurn.Lock()
						defer nobodyTurn.Unlock()
					}
					c, err := New(Config{Runtime: rt, Image: testImage(), User: user, CheckArgv: []string{enginetest.Python, "-c", "pass"}}, enginetest.Logger(t))
					if err != nil {
						t.Fatal(err)
					}
					t.Cleanup(func() { _ = c.Close() })
					if err := c.Check(t.Context()); err != nil {
						t.Fatal(err)
					}
					checkSignalShares(t, c, user)
				})
			}
		})
	}
}

// nobodyTurn is held by a subtest whose sandboxes all run as 65534, which
// share one count of queued signals with any other such test's.
var nobodyTurn sync.Mutex

func checkSignalShares(t *testing.T, c *Engine, user string) {
	const share = 64
	var lines [2][]string
	var names [2]string
	var stdins [2]io.WriteCloser
	for i := range 2 {
		spec := containerSpec(t, fillSignals)
		spec.Limits.PendingSignals = share
		p, err := c.Start(t.Context(), spec)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = p.Kill(); _ = p.Wait() })
		names[i], stdins[i] = containerName(spec.ID), p.Stdin()
		line, err := readLine(p, time.Minute)
		if err != nil {
			t.Fatalf("sandbox %d: %v", i, err)
		}
		lines[i] = strings.Fields(line)
		if len(lines[i]) != 6 {
			t.Fatalf("sandbox %d printed %q", i, line)
		}
	}
	t.Logf("first: %q; second, while the first holds its signals: %q", lines[0], lines[1])
	hostA, hostB := hostUIDOf(t, c, names[0]), hostUIDOf(t, c, names[1])
	t.Logf("host uids of the first's processes %v, the second's %v", hostA, hostB)
	if user != "" {
		// Anything else running as 65534 (another test's sandboxes) may
		// hold some of the count too; the first holds what it got.
		if lines[1][0] == strconv.Itoa(share) || hostA[0] != "65534" || hostB[0] != "65534" {
			t.Errorf("with one user for all, the second sandbox queued %s signals after the first's %s (host uids %v %v); want fewer than %d, both 65534",
				lines[1][0], lines[0][0], hostA, hostB, share)
		}
		return
	}
	for i, l := range lines {
		if l[0] != strconv.Itoa(share) || l[1] != "EAGAIN" {
			t.Errorf("sandbox %d queued %s signals, then %s; want its whole share, %d, then EAGAIN", i, l[0], l[1], share)
		}
		uid, _ := strconv.Atoi(l[2])
		if uid < DefaultFirstUID || uid >= DefaultFirstUID+DefaultUIDCount || l[3] != l[2] || l[4] != "sandbox" || l[5] != "/workspace" {
			t.Errorf("sandbox %d runs as uid %s gid %s, user %s at home in %s; want a uid of the range, its gid, sandbox, /workspace", i, l[2], l[3], l[4], l[5])
		}
	}
	if lines[0][2] == lines[1][2] {
		t.Errorf("both sandboxes run as uid %s", lines[0][2])
	}
	for i, host := range [][]string{hostA, hostB} {
		for _, u := range host {
			if u != lines[i][2] {
				t.Errorf("sandbox %d: a process runs as host uid %s, not its uid %s (%v)", i, u, lines[i][2], host)
			}
		}
	}
	for _, w := range stdins {
		_ = w.Close()
	}
}

// readLine reads one line of p's stdout within d.
func readLine(p engine.Process, d time.Duration) (string, error) {
	got := make(chan string, 1)
	var err error
	go func() {
		var line string
		line, err = bufio.NewReader(p.Stdout()).ReadString('\n')
		got <- line
	}()
	select {
	case line := <-got:
		return line, err
	case <-time.After(d):
		return "", fmt.Errorf("no line within %s", d)
	}
}

// A sandboxd that starts (or restarts) learns the uid of a container it
// does not end (a live owner's elsewhere) from its label, and never hands
// it out: with a range of two uids, one on that container, every sandbox
// gets the other. The container is created, not started, so that no
// process shows the uid in /proc: only the listing knows it.
func TestContainerUIDOfAStayingContainerIsNotHandedOut(t *testing.T) {
	for _, rt := range testRuntimes(t) {
		t.Run(rt, func(t *testing.T) {
			t.Parallel()
			first := 2_100_000_000 + int(time.Now().UnixNano()%1000)*2
			if rt == "podman" {
				first += 5000
			}
			starter := newTestContainer(t, rt)
			name := "codeexec-other-" + strconv.Itoa(first)
			if _, err := starter.cli(t.Context(), "create", "--network", "none", "--name", name, "--user", strconv.Itoa(first),
				"--label", LabelOwner+"=elsewhere/1/live", "--label", LabelPIDSpace+"=another-boot/1", "--label", LabelUID+"="+strconv.Itoa(first),
				testImage(), enginetest.Python, "-c", "pass"); err != nil {
				t.Fatalf("%s create: %v", rt, err)
			}
			// t.Context() is done by the time cleanups run.
			t.Cleanup(func() { _, _ = starter.cli(context.Background(), "rm", "-f", name) })
			c, err := New(Config{Runtime: rt, Image: testImage(), FirstUID: first, UIDCount: 2, CheckArgv: []string{enginetest.Python, "-c", "pass"}}, enginetest.Logger(t))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = c.Close() })
			if err := c.Check(t.Context()); err != nil {
				t.Fatal(err)
			}
			for range 3 {
				r := enginetest.Run(t, c, containerSpec(t, "import os; print(os.getuid())"), "", time.Minute)
				if r.Err != nil || strings.TrimSpace(r.Stdout) != strconv.Itoa(first+1) {
					t.Fatalf("a sandbox ran as %q (%v, %s); want %d, the range's uid that no container has", r.Stdout, r.Err, r.Stderr, first+1)
				}
			}
		})
	}
}
