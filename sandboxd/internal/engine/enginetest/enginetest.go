// Package enginetest holds what the tests of several engine packages
// share: a logger into the test's log, a Spec that runs a Python script,
// a way to run a sandbox to its end, and what the kernel says of this
// process's right to raise its limits.
package enginetest

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/codeexec/codeexec/sandboxd/internal/agent"
	"github.com/codeexec/codeexec/sandboxd/internal/engine"
)

// Python is the interpreter the tests' sandboxes run.
const Python = "/usr/bin/python3"

// Logger returns a logger that writes into t's log, debug level included.
func Logger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// tWriter writes into a test's log.
type tWriter struct{ t *testing.T }

// Write logs p, less its final newline, as one entry.
func (w tWriter) Write(p []byte) (int, error) {
	w.t.Helper()
	w.t.Log(string(bytes.TrimRight(p, "\n")))
	return len(p), nil
}

// AgentDir returns a directory uid 65534 can read, holding agent.txt.
func AgentDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for _, d := range []string{filepath.Dir(dir), dir} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "agent.txt"), []byte("agent"), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// Spec returns a sandbox, named after t, that runs script with args under
// Python, with an AgentDir and modest limits.
func Spec(t *testing.T, script string, args ...string) engine.Spec {
	return engine.Spec{
		ID:       t.Name(),
		AgentDir: AgentDir(t),
		Argv:     append([]string{Python, "-I", "-c", script}, args...),
		Env:      map[string]string{"HOME": "/workspace", "LANG": "C.UTF-8", "PYTHONUNBUFFERED": "1"},
		Limits: engine.Limits{
			MemoryBytes: 256 << 20, Pids: 64,
			TmpBytes: 16 << 20, WorkspaceBytes: 32 << 20,
		},
	}
}

// Result is what a finished sandbox produced.
type Result struct {
	// Stdout and Stderr are everything the sandbox wrote.
	Stdout, Stderr string
	// Err is what Wait returned.
	Err error
	// Usage is what the Process reported after exit.
	Usage engine.Usage
	// PID is the Process's PID.
	PID int
}

// Run starts spec, feeds it stdin, and collects everything until it
// exits (or fails the test after timeout).
func Run(t *testing.T, e engine.Engine, spec engine.Spec, stdin string, timeout time.Duration) Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), timeout)
	defer cancel()
	p, err := e.Start(ctx, spec)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	out := engine.Collect(ctx, p, stdin)
	if out.Killed {
		t.Fatalf("sandbox did not exit within %v (then killed: %v); stderr: %s", timeout, out.Err, out.Stderr)
	}
	return Result{Stdout: out.Stdout, Stderr: out.Stderr, Err: out.Err, Usage: p.Usage(), PID: p.PID()}
}

// CheckPrepare writes the agent into a new AgentDir, runs e.Prepare on it
// and checks that every module got bytecode that the sandbox user can read
// and that the sandbox's own interpreter would load. id names the sandbox
// that checks; "" names it after t.
func CheckPrepare(t *testing.T, e engine.Engine, id string) {
	t.Helper()
	spec := Spec(t, `
import glob, importlib.util, os
srcs = glob.glob("/opt/codeexec/*.py")
stale = [p for p in srcs if not os.path.exists(importlib.util.cache_from_source(p))]
print("ok" if srcs and not stale else "no bytecode for %s" % stale)`)
	if id != "" {
		spec.ID = id
	}
	if err := agent.WriteTo(spec.AgentDir); err != nil {
		t.Fatal(err)
	}
	if err := e.Prepare(t.Context(), spec.AgentDir, Python); err != nil {
		t.Fatalf("Prepare: %v", err)
	}
	pycs, err := filepath.Glob(filepath.Join(spec.AgentDir, "__pycache__", "*.pyc"))
	if err != nil || len(pycs) == 0 {
		t.Fatalf("no bytecode after Prepare: %v %v", pycs, err)
	}
	for _, p := range append(pycs, filepath.Dir(pycs[0])) {
		st, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		want := os.FileMode(0o644)
		if st.IsDir() {
			want = os.ModeDir | 0o755
		}
		if st.Mode() != want {
			t.Errorf("%s mode = %v, want %v", p, st.Mode(), want)
		}
	}
	r := Run(t, e, spec, "", time.Minute)
	if r.Err != nil || strings.TrimSpace(r.Stdout) != "ok" {
		t.Errorf("in the sandbox: stdout %q, err %v, stderr %q", r.Stdout, r.Err, r.Stderr)
	}
}

// MayRaiseLimits reports what the kernel shows of this process: whether it
// has CAP_SYS_RESOURCE in its effective set and runs in the host's user
// namespace, which together let it set rlimits above its hard limits.
func MayRaiseLimits(t *testing.T) bool {
	t.Helper()
	status, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	uidMap, err := os.ReadFile("/proc/self/uid_map")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(status), "\n") {
		if v, ok := strings.CutPrefix(line, "CapEff:"); ok {
			eff, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
			if err != nil {
				t.Fatalf("CapEff %q: %v", v, err)
			}
			return eff&(1<<unix.CAP_SYS_RESOURCE) != 0 && strings.Join(strings.Fields(string(uidMap)), " ") == "0 0 4294967295"
		}
	}
	t.Fatal("/proc/self/status has no CapEff line")
	return false
}

// CheckPause starts a sandbox of e that echoes its input in capitals and
// has a child process, and checks Pause, Resume and Kill: a paused
// sandbox answers nothing (what it is sent waits), answers once resumed,
// and a sandbox paused again is still ended by Kill, its Wait returning.
func CheckPause(t *testing.T, e engine.Engine, spec engine.Spec) {
	t.Helper()
	p, err := e.Start(t.Context(), spec)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	defer func() { _ = p.Kill() }()
	ec := newEcho(t, p)
	ec.send("a")
	if got := ec.next("before the pause"); got != "A" {
		t.Fatalf("before the pause: %q, want A", got)
	}
	if err := p.Pause(); err != nil {
		t.Fatalf("Pause: %v", err)
	}
	ec.send("b")
	// Running, the sandbox answers in milliseconds; paused, never.
	select {
	case line := <-ec.lines:
		t.Fatalf("a paused sandbox answered %q", line)
	case <-time.After(time.Second):
	}
	if err := p.Resume(); err != nil {
		t.Fatalf("Resume: %v", err)
	}
	if got := ec.next("after Resume"); got != "B" {
		t.Fatalf("after Resume: %q, want B (the line sent while paused)", got)
	}
	if err := p.Pause(); err != nil {
		t.Fatalf("Pause again: %v", err)
	}
	if err := p.Kill(); err != nil {
		t.Fatalf("Kill of a paused sandbox: %v", err)
	}
	waited := make(chan error, 1)
	go func() { waited <- p.Wait() }()
	select {
	case err := <-waited:
		if err == nil {
			t.Error("Wait after killing a paused sandbox returned nil, want the kill reported")
		}
	case <-time.After(time.Minute):
		t.Fatal("a paused sandbox was not ended by Kill within a minute")
	}
}

// echo talks to a sandbox running PauseScript: lines it sends, lines it
// answers, and its stderr for when it ends.
type echo struct {
	t          *testing.T
	p          engine.Process
	lines      chan string
	stderr     strings.Builder
	stderrDone chan struct{}
}

// newEcho reads p's stdout by lines and its stderr whole.
func newEcho(t *testing.T, p engine.Process) *echo {
	e := &echo{t: t, p: p, lines: make(chan string, 4), stderrDone: make(chan struct{})}
	go func() {
		defer close(e.stderrDone)
		_, _ = io.Copy(&e.stderr, p.Stderr())
	}()
	go func() {
		defer close(e.lines)
		r := bufio.NewReader(p.Stdout())
		for {
			line, err := r.ReadString('\n')
			if err != nil {
				return
			}
			e.lines <- strings.TrimSpace(line)
		}
	}()
	return e
}

// next returns the sandbox's next line, failing the test when there is
// none within a minute.
func (e *echo) next(what string) string {
	e.t.Helper()
	select {
	case line, ok := <-e.lines:
		if !ok {
			select {
			case <-e.stderrDone:
			case <-time.After(5 * time.Second):
			}
			e.t.Fatalf("%s: the sandbox's stdout ended; stderr: %s", what, e.stderr.String())
		}
		return line
	case <-time.After(time.Minute):
		e.t.Fatalf("%s: no answer in a minute", what)
	}
	return ""
}

// send writes s and a newline to the sandbox.
func (e *echo) send(s string) {
	e.t.Helper()
	if _, err := io.WriteString(e.p.Stdin(), s+"\n"); err != nil {
		e.t.Fatalf("write %q: %v", s, err)
	}
}

// PauseScript is the sandbox CheckPause runs: it starts a child, so that
// a pause must stop more than one process, and echoes its input in
// capitals.
const PauseScript = `
import subprocess, sys
child = subprocess.Popen(["/usr/bin/sleep", "1000"])
for line in sys.stdin:
    print(line.strip().upper(), flush=True)
`
