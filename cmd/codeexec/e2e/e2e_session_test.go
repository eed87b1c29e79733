package e2e

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/codeexec/codeexec/cmd/codeexec/e2e/internal/harness"
)

// End-to-end tests of session behaviour: the real binary over stdio, real
// bwrap sandboxes, the real agent.

func TestE2EStatePersistsAcrossCalls(t *testing.T) {
	t.Parallel()
	c, _ := harness.StartStdio(t, nil)
	harness.Code(t, c, "import math\nx = 41\ndef twice(v):\n    return 2 * v\n")
	o := harness.Code(t, c, "print(x + 1, twice(21), math.floor(2.5))")
	if got := harness.Joined(o.Stdout()); got != "42 42 2" {
		t.Fatalf("stdout = %q, want %q", got, "42 42 2")
	}
	if o.Text != "42 42 2" {
		t.Fatalf("compact text = %q, want %q", o.Text, "42 42 2")
	}
}

func TestE2ETopLevelAwait(t *testing.T) {
	t.Parallel()
	c, _ := harness.StartStdio(t, nil)
	harness.Code(t, c, "import asyncio\nasync def f():\n    await asyncio.sleep(0.01)\n    return 7\n")
	o := harness.Code(t, c, "v = await f()\nprint(v * 6)")
	if got := harness.Joined(o.Stdout()); got != "42" {
		t.Fatalf("stdout = %q, want 42", got)
	}
}

func TestE2EExceptionIsAnError(t *testing.T) {
	t.Parallel()
	c, _ := harness.StartStdio(t, nil)
	o := harness.RunPython(t, c, map[string]any{"code": "print('before')\ndef boom():\n    return 1 / 0\nboom()"})
	if !o.IsError {
		t.Fatalf("isError = false for an exception: %s", o.Text)
	}
	if o.Str("status") != "error" {
		t.Fatalf("status = %q, want error", o.Str("status"))
	}
	if !strings.Contains(o.Str("error"), "ZeroDivisionError: division by zero") {
		t.Fatalf("error = %q, want the exception", o.Str("error"))
	}
	stderr := harness.Joined(o.Stderr())
	for _, want := range []string{"Traceback", "return 1 / 0", "boom()", "ZeroDivisionError"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("traceback lacks %q:\n%s", want, stderr)
		}
	}
	if strings.Contains(stderr, "agent") {
		t.Errorf("traceback shows agent frames:\n%s", stderr)
	}
	if got := harness.Joined(o.Stdout()); got != "before" {
		t.Errorf("stdout = %q, want before", got)
	}
	// The session survives an exception.
	harness.Code(t, c, "y = 1")
	if got := harness.Joined(harness.Code(t, c, "print(y)").Stdout()); got != "1" {
		t.Fatalf("after an exception, stdout = %q", got)
	}
}

func TestE2EBlankLinesAreKept(t *testing.T) {
	t.Parallel()
	c, _ := harness.StartStdio(t, nil)
	o := harness.Code(t, c, `print("a\n\nb\n")`)
	want := []string{"a", "", "b", ""}
	if got := o.Stdout(); strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("stdout = %q, want %q", got, want)
	}
}

func TestE2EHugeOutputIsCutWithAMarker(t *testing.T) {
	t.Parallel()
	// The byte cap is the setting without an output budget.
	c, _ := harness.StartStdio(t, map[string]string{"CODEEXEC_OUTPUT_LIMIT": "64k", "CODEEXEC_OUTPUT_BUDGET": "0"})
	// One 20 MB line: neither breaks the channel nor hangs.
	o := harness.Code(t, c, `import sys; sys.stdout.write("x" * 20_000_000 + "\n"); print("tail")`)
	text := harness.Joined(o.Stdout())
	if !strings.Contains(text, "truncated") {
		t.Fatalf("no truncation marker in %d bytes of output: %q", len(text), harness.TailOf(text, 300))
	}
	if len(text) > 200<<10 {
		t.Fatalf("output is %d bytes, far above the 64 KiB cap", len(text))
	}
	// The marker says how much was dropped.
	if !strings.Contains(strings.ReplaceAll(text, ",", ""), "199") && !strings.Contains(text, "bytes") {
		t.Fatalf("marker does not say how much was dropped: %q", harness.TailOf(text, 300))
	}
	// The session is still healthy.
	if got := harness.Joined(harness.Code(t, c, "print('ok')").Stdout()); got != "ok" {
		t.Fatalf("after huge output, stdout = %q", got)
	}
}

// A timeout kills the sandbox; the session comes back from the checkpoint
// taken after the last call that finished, without the timed-out call's
// effects, and the next result says so once.
func TestE2ETimeoutKillsAndRestoresTheCheckpoint(t *testing.T) {
	t.Parallel()
	c, _ := harness.StartStdio(t, nil)
	harness.Code(t, c, "kept = 1")
	o := harness.RunPython(t, c, map[string]any{"code": "import time\nkept = 2\nprint('partial', flush=True)\ntime.sleep(60)", "timeout": 1})
	if !o.IsError || o.Str("status") != "timeout" {
		t.Fatalf("status = %q isError=%v, want timeout: %s", o.Str("status"), o.IsError, o.Text)
	}
	if got := harness.Joined(o.Stdout()); got != "partial" {
		t.Errorf("partial stdout = %q, want partial", got)
	}
	if ts, _ := o.Structured["timeoutSeconds"].(float64); ts != 1 {
		t.Errorf("timeoutSeconds = %v, want 1", o.Structured["timeoutSeconds"])
	}
	o = harness.RunPython(t, c, map[string]any{"code": "print(kept)"})
	if o.IsError || harness.Joined(o.Stdout()) != "1" {
		t.Fatalf("after a timeout: %s, want kept = 1 from the checkpoint", o.Text)
	}
	for _, want := range []string{"restored", "kept", "rolled back"} {
		if !strings.Contains(o.Text, want) {
			t.Errorf("the result after the timeout does not say %q: %s", want, o.Text)
		}
	}
	if again := harness.Code(t, c, "print(kept)"); strings.Contains(again.Text, "restored") {
		t.Errorf("the restore is reported twice: %s", again.Text)
	}
}

func TestE2ECallsOnOneSessionAreSerialised(t *testing.T) {
	t.Parallel()
	c, _ := harness.StartStdio(t, nil)
	harness.Code(t, c, "import time")
	var (
		wg    sync.WaitGroup
		spans [2][2]float64
	)
	for i := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			o := harness.Code(t, c, "a = time.time(); time.sleep(0.3); print(a, time.time())")
			f := strings.Fields(harness.Joined(o.Stdout()))
			if len(f) != 2 {
				t.Errorf("stdout = %q", o.Stdout())
				return
			}
			spans[i][0], _ = strconv.ParseFloat(f[0], 64)
			spans[i][1], _ = strconv.ParseFloat(f[1], 64)
		}()
	}
	wg.Wait()
	a, b := spans[0], spans[1]
	if a[0] < b[1] && b[0] < a[1] {
		t.Fatalf("two calls on one session overlapped: %v and %v", a, b)
	}
}

func TestE2EClientIsolationAndSecrets(t *testing.T) {
	t.Parallel()
	c, _ := harness.StartStdio(t, map[string]string{"CODEEXEC_TEST_SECRET": "hunter2"})
	// bwrap's sandboxes are nobody in a user namespace of their own; a
	// container's is a host uid of its own (--container-uids) named
	// sandbox. Both are at home in /workspace.
	user := "True 65534 nobody /workspace"
	if harness.ContainerRuntime() != "" {
		user = "True own sandbox /workspace"
	}
	checks := []struct{ name, src, want string }{
		{"uid is not root", `
import getpass, os, pwd
u = os.getuid()
print(u != 0, "own" if 2000000000 <= u <= 2000065535 else u, getpass.getuser(), pwd.getpwuid(u).pw_dir)`, user},
		{"no host environment", "import os; print('CODEEXEC_TEST_SECRET' in os.environ, 'hunter2' in repr(dict(os.environ)))", "False False"},
		{"network connect fails", `
import socket
res = []
for host in ("127.0.0.1", "1.1.1.1"):
    s = socket.socket()
    s.settimeout(2)
    try:
        s.connect((host, 80)); res.append("connected")
    except OSError as e:
        res.append("blocked")
print(*res)`, "blocked blocked"},
		{"root is read-only", `
res = []
for p in ("/x", "/usr/x", "/etc/x"):
    try:
        open(p, "w"); res.append("wrote")
    except OSError:
        res.append("denied")
print(*res)`, "denied denied denied"},
		{"no capabilities and no_new_privs", `
st = dict(l.split(":\t", 1) for l in open("/proc/self/status").read().splitlines() if ":\t" in l)
print(st["CapEff"].strip(), st["NoNewPrivs"].strip())`, "0000000000000000 1"},
		{"kernel keyrings refused (seccomp)", `
import ctypes, errno, platform
nr = {"x86_64": 250, "aarch64": 219}[platform.machine()]  # keyctl
libc = ctypes.CDLL(None, use_errno=True)
rc = libc.syscall(nr, 0, -3, 1)  # KEYCTL_GET_KEYRING_ID of the session keyring, creating it
print(rc, errno.errorcode.get(ctypes.get_errno()))`, "-1 EPERM"},
		{"host home, state and other files invisible", `
import os
print([p for p in ("/root", "/home", "/work", "/var", "/etc/shadow", "/etc/passwd-", "/sys/fs/cgroup") if os.path.exists(p) and os.listdir(p) if os.path.isdir(p)])`, "[]"},
		{"tmp and workspace are writable", `
open("/tmp/a", "w").write("1"); open("/workspace/b", "w").write("2")
import os; print(os.getcwd(), open("/tmp/a").read() + open("/workspace/b").read())`, "/workspace 12"},
	}
	for _, tc := range checks {
		t.Run(tc.name, func(t *testing.T) {
			o := harness.RunPython(t, c, map[string]any{"code": tc.src})
			if o.IsError {
				t.Fatalf("failed: %s", o.Text)
			}
			if got := harness.Joined(o.Stdout()); got != tc.want {
				t.Fatalf("stdout = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestE2EChildProcessOutputAndChannelSafety(t *testing.T) {
	t.Parallel()
	c, _ := harness.StartStdio(t, nil)
	o := harness.Code(t, c, `
import os, subprocess, sys
os.system("echo from-system")
subprocess.run(["sh", "-c", "echo from-subprocess; echo to-stderr >&2"])
os.write(1, b"\x00\x00\x00\x05hello fake frame\n")
os.write(2, b"raw-fd2\n")
print("end")`)
	out := harness.Joined(o.Stdout())
	for _, want := range []string{"from-system", "from-subprocess", "hello fake frame", "end"} {
		if !strings.Contains(out, want) {
			t.Errorf("stdout lacks %q: %q", want, out)
		}
	}
	errText := harness.Joined(o.Stderr())
	for _, want := range []string{"to-stderr", "raw-fd2"} {
		if !strings.Contains(errText, want) {
			t.Errorf("stderr lacks %q: %q", want, errText)
		}
	}
	// The channel survived the fake frame.
	if got := harness.Joined(harness.Code(t, c, "print(6 * 7)").Stdout()); got != "42" {
		t.Fatalf("after writing a fake frame, stdout = %q", got)
	}
}

func TestE2EForkBombIsContained(t *testing.T) {
	t.Parallel()
	c, _ := harness.StartStdio(t, map[string]string{"MCP_BRIDGE_PIDS": "32"})
	o := harness.RunPython(t, c, map[string]any{"code": "import os\nwhile True:\n    os.fork()", "timeout": 20})
	if !o.IsError {
		t.Fatalf("a fork bomb succeeded: %s", o.Text)
	}
	if !strings.Contains(o.Text, "process limit (32;") {
		t.Errorf("the error does not name the process limit: %s", o.Text)
	}
	// The server and the session carry on.
	if got := harness.Joined(harness.Code(t, c, "print('alive')").Stdout()); got != "alive" {
		t.Fatalf("after a fork bomb, stdout = %q", got)
	}
}

func TestE2EMemoryBombIsContained(t *testing.T) {
	t.Parallel()
	c, _ := harness.StartStdio(t, map[string]string{"MCP_BRIDGE_MEMORY": "128m"})
	o := harness.RunPython(t, c, map[string]any{"code": "blocks = []\nwhile True:\n    blocks.append(bytearray(16 << 20))", "timeout": 30})
	if !o.IsError {
		t.Fatalf("a memory bomb succeeded: %s", o.Text)
	}
	if !strings.Contains(strings.ToLower(o.Text), "memory") {
		t.Errorf("the error does not mention memory: %s", o.Text)
	}
	if got := harness.Joined(harness.Code(t, c, "print('alive')").Stdout()); got != "alive" {
		t.Fatalf("after a memory bomb, stdout = %q", got)
	}
}

// The file-size and descriptor caps reach the sandbox from their
// environment variables: a file stops growing at the one (Python's write
// fails, a program it starts is killed by SIGXFSZ), open descriptors at
// the other, and the session carries on after both.
func TestE2EFileSizeAndOpenFilesCaps(t *testing.T) {
	t.Parallel()
	c, _ := harness.StartStdio(t, map[string]string{"CODEEXEC_FILE_SIZE": "1m", "CODEEXEC_OPEN_FILES": "64"})
	code := `import errno, os, resource
print(resource.getrlimit(resource.RLIMIT_FSIZE)[0], resource.getrlimit(resource.RLIMIT_NOFILE)[0])
try:
    with open("/tmp/big", "wb") as f:
        f.write(b"x" * (2 << 20))
except OSError as e:
    print("write:", errno.errorcode[e.errno])
print("kept:", os.path.getsize("/tmp/big"))
files = []
try:
    while True:
        files.append(open("/dev/null"))
except OSError as e:
    print("open:", errno.errorcode[e.errno], 32 < len(files) < 64)
for f in files:
    f.close()
import signal, subprocess
with open("/tmp/big2", "wb") as out:
    rc = subprocess.run(["head", "-c", str(2 << 20), "/dev/zero"], stdout=out).returncode
print("child:", signal.Signals(-rc).name if rc < 0 else rc)`
	o := harness.RunPython(t, c, map[string]any{"code": code})
	want := "1048576 64\nwrite: EFBIG\nkept: 1048576\nopen: EMFILE True\nchild: SIGXFSZ"
	if got := harness.Joined(o.Stdout()); o.IsError || got != want {
		t.Fatalf("under a 1m file cap and 64 descriptors: %q (%s), want %q", got, o.Text, want)
	}
	if got := harness.Joined(harness.Code(t, c, "print('alive')").Stdout()); got != "alive" {
		t.Fatalf("after both caps were hit, stdout = %q", got)
	}
}

// An idle session's sandbox is stopped; the session is kept as its
// checkpoint and comes back on the next call.
func TestE2EIdleSessionsAreReaped(t *testing.T) {
	t.Parallel()
	c, logs := harness.StartStdio(t, map[string]string{"CODEEXEC_IDLE_TIMEOUT": "1s"})
	harness.Code(t, c, "v = 5")
	if !logs.Await("stopping an idle session's sandbox", 20*time.Second) {
		t.Fatal("the idle session's sandbox was not stopped")
	}
	o := harness.RunPython(t, c, map[string]any{"code": "print(v)"})
	if o.IsError || harness.Joined(o.Stdout()) != "5" {
		t.Fatalf("the reaped session did not come back: %s", o.Text)
	}
	if !strings.Contains(o.Text, "restored") {
		t.Errorf("the result does not say the session was restored: %s", o.Text)
	}
}

func TestE2ELargeCodeAndOutputPassIntact(t *testing.T) {
	t.Parallel()
	c, _ := harness.StartStdio(t, map[string]string{"CODEEXEC_OUTPUT_LIMIT": "0", "CODEEXEC_OUTPUT_BUDGET": "0"})
	// 4 MB of code in one call, and 3 MB of output back.
	payload := strings.Repeat("a", 4<<20)
	src := fmt.Sprintf("s = %q\nimport hashlib\nprint(len(s), hashlib.sha256(s.encode()).hexdigest()[:12])\nprint('b' * (3 << 20))", payload)
	o := harness.Code(t, c, src)
	lines := o.Stdout()
	if len(lines) != 2 || lines[0] != fmt.Sprintf("%d 299285fc41a4", 4<<20) {
		t.Fatalf("first line = %q", lines[:min(1, len(lines))])
	}
	if len(lines[1]) != 3<<20 || strings.Trim(lines[1], "b") != "" {
		t.Fatalf("second line has %d bytes, want %d b's", len(lines[1]), 3<<20)
	}
}

// Nothing a session started outlives the server, not even a detached child.
func TestE2ENoSandboxProcessOutlivesTheServer(t *testing.T) {
	t.Parallel()
	marker := fmt.Sprintf("%d.%03d", time.Now().UnixNano()%100000, 7)
	c, _ := harness.StartStdio(t, nil)
	harness.Code(t, c, fmt.Sprintf(`
import subprocess
subprocess.Popen(["sleep", "%s"], start_new_session=True)`, marker))
	if pids := processesWithArg(marker); len(pids) == 0 {
		t.Fatal("the test's sleep is not running, so the check below proves nothing")
	}
	_ = c.Close() // ends stdin: codeexec serve shuts down
	deadline := time.Now().Add(15 * time.Second)
	for {
		pids := processesWithArg(marker)
		if len(pids) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("sandbox processes %v are still running after the server stopped", pids)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// processesWithArg lists PIDs whose command line has arg as an argument.
func processesWithArg(arg string) []int {
	var pids []int
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cmd, _ := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		for _, a := range strings.Split(string(cmd), "\x00") {
			if a == arg {
				pids = append(pids, pid)
			}
		}
	}
	return pids
}
