package e2e

import (
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/codeexec/codeexec/cmd/codeexec/e2e/internal/harness"
)

// openEveryFile is issue 38's item 3: the sandbox forks 100 processes
// (its limit is 128; sandboxd stops a sandbox that reaches it) and each
// opens descriptors until the kernel refuses one; they stay open (the
// children sleep, and the session holds them). It prints the processes,
// the descriptors opened and the most one process opened. Bounded:
// 1 << 20 per process, 60 s in all.
const openEveryFile = `
import os, select, time
held = globals().setdefault("held", [])
r, w = os.pipe()
start = time.monotonic()
def hoard():
    n = 0
    try:
        while n < 1 << 20 and time.monotonic() - start < 60:
            os.open("/dev/null", os.O_RDONLY)
            n += 1
    except OSError:
        pass
    return n
children = 0
for _ in range(100):
    try:
        pid = os.fork()
    except OSError:
        break
    if pid == 0:
        os.write(w, b"%d\n" % hoard())
        time.sleep(600)
        os._exit(0)
    held.append(pid)
    children += 1
total, lines, buf = hoard(), 0, b""
while lines < children and time.monotonic() - start < 90:
    if select.select([r], [], [], 1)[0]:
        buf += os.read(r, 65536)
        lines = buf.count(b"\n")
counts = [total] + [int(x) for x in buf.split()]
print(children, sum(counts), max(counts))`

// fileMax is the host's fs.file-max.
func fileMax(t *testing.T) int {
	t.Helper()
	b, err := os.ReadFile("/proc/sys/fs/file-max")
	if err != nil {
		t.Fatal(err)
	}
	n, _ := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	return int(min(n, 1<<40))
}

// A sandbox that opens all the files it may holds few enough that
// --max-sessions sandboxes doing the same (with the warm pool's) fit in
// the host's file table, the other tenant's calls go on, and the host's
// count of open files is back to its baseline when the session ends.
// Before, one sandbox held 122,000 files, 5 % of this host's table: 21
// such sandboxes would have filled it, of 64 allowed.
func TestE2ESandboxOpenFilesFitTheHostTable(t *testing.T) {
	t.Parallel()
	const sessions, pool, pids = 64, 1, 128 // the defaults of --max-sessions and --pids; the tests' pool
	n := startNeighbours(t, nil)
	beta := newBystander(t, n.beta, "print('ok')")
	before := filesInUse(t)
	var children, opened, most, during int
	beta.alongside(t, "alpha opening every file it may", func() {
		o := harness.RunPython(t, n.alpha, map[string]any{"code": openEveryFile})
		if o.IsError {
			t.Fatalf("alpha's call failed: %s", harness.TailOf(o.Text, 1500))
		}
		out := strings.Fields(harness.Joined(o.Stdout()))
		if len(out) == 3 {
			children, _ = strconv.Atoi(out[0])
			opened, _ = strconv.Atoi(out[1])
			most, _ = strconv.Atoi(out[2])
		}
		during = filesInUse(t)
	})
	t.Logf("alpha's %d processes opened %d files, at most %d each; the host's open files went from %d to %d, of %d", children+1, opened, most, before, during, fileMax(t))
	if opened == 0 {
		t.Fatal("alpha opened no file")
	}
	// At its limit of 128 processes, a sandbox holds at most 128 times what
	// one of them could open.
	if all := (sessions + pool) * pids * most; all > fileMax(t) {
		t.Errorf("one of alpha's processes opened %d files: %d sandboxes of %d such processes would hold %d, more than the host's file table of %d",
			most, sessions+pool, pids, all, fileMax(t))
	}
	endSession(t, n.base, "alpha-token", n.alpha.GetSessionId())
	if !waitFor(30*time.Second, func() bool { return filesInUse(t) < before+opened/10 }) {
		t.Errorf("the host has %d files open after alpha's session ended, %d before", filesInUse(t), before)
	}
}

// An open-files cap with which --max-sessions sandboxes could not fit in
// the host's file table is refused at start, with what to change.
func TestE2EOpenFilesThatDoNotFitAreRefusedAtStart(t *testing.T) {
	t.Parallel()
	cmd := exec.CommandContext(t.Context(), harness.Binary, "serve", "--http", harness.FreeAddr(t), "--open-files", "1048576", "--pids", "1024")
	cmd.Env = harness.BaseEnv(t, nil)
	out, err := cmd.CombinedOutput()
	if fileMax(t) > 1<<40 {
		// systemd sets fs.file-max to LONG_MAX: the table has no
		// practical end, and nothing is refused for it.
		if strings.Contains(string(out), "host's file table") {
			t.Fatalf("codeexec refused a cap for a file table of %d: %s", fileMax(t), harness.TailOf(string(out), 600))
		}
		return
	}
	if err == nil || !strings.Contains(string(out), "host's file table") || !strings.Contains(string(out), "--open-files") {
		t.Fatalf("codeexec with 1048576 open files for 1024 processes: %v: %s; want it refused at start, naming the file table and --open-files", err, harness.TailOf(string(out), 600))
	}
}
