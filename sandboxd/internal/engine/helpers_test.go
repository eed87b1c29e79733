package engine

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"
)

const python = "/usr/bin/python3"

// requireHost fails the test when the machine lacks what real sandboxes
// need: root (for cgroups), bwrap and python3.
func requireHost(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Fatal("these tests need root: cgroups are created under /sys/fs/cgroup")
	}
	if _, err := exec.LookPath("bwrap"); err != nil {
		t.Fatal("bubblewrap (bwrap) is not installed: apt-get install bubblewrap")
	}
	if _, err := os.Stat(python); err != nil {
		t.Fatalf("%s is missing: apt-get install python3", python)
	}
}

func testLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type tWriter struct{ t *testing.T }

func (w tWriter) Write(p []byte) (int, error) {
	w.t.Helper()
	w.t.Log(string(bytes.TrimRight(p, "\n")))
	return len(p), nil
}

// newTestEngine returns a checked engine that is closed at the end of t.
func newTestEngine(t *testing.T, cfg BwrapConfig) *Bwrap {
	t.Helper()
	requireHost(t)
	b, err := NewBwrap(cfg, testLogger(t))
	if err != nil {
		t.Fatalf("NewBwrap: %v", err)
	}
	t.Cleanup(func() {
		if err := b.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	if err := b.Check(t.Context()); err != nil {
		t.Fatalf("Check: %v", err)
	}
	return b
}

// agentDir returns a directory uid 65534 can read, holding agent.txt.
func agentDir(t *testing.T) string {
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

func baseSpec(t *testing.T, script string, args ...string) Spec {
	return Spec{
		ID:       t.Name(),
		AgentDir: agentDir(t),
		Argv:     append([]string{python, "-I", "-c", script}, args...),
		Env:      map[string]string{"HOME": "/workspace", "LANG": "C.UTF-8", "PYTHONUNBUFFERED": "1"},
		Limits: Limits{
			MemoryBytes: 256 << 20, Pids: 64,
			TmpBytes: 16 << 20, WorkspaceBytes: 32 << 20,
		},
	}
}

// result is what a finished sandbox produced.
type result struct {
	stdout, stderr string
	err            error
	usage          Usage
	pid            int
}

// runSandbox starts spec, feeds it stdin, and collects everything until it
// exits (or fails the test after timeout).
func runSandbox(t *testing.T, e Engine, spec Spec, stdin string, timeout time.Duration) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), timeout)
	defer cancel()
	p, err := e.Start(ctx, spec)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	var out, errb bytes.Buffer
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); _, _ = io.Copy(&out, p.Stdout()) }()
	go func() { defer wg.Done(); _, _ = io.Copy(&errb, p.Stderr()) }()
	_, _ = io.WriteString(p.Stdin(), stdin)
	_ = p.Stdin().Close()
	waited := make(chan error, 1)
	go func() { waited <- p.Wait() }()
	var werr error
	select {
	case werr = <-waited:
	case <-ctx.Done():
		_ = p.Kill()
		<-waited
		t.Fatalf("sandbox did not exit within %v; stderr: %s", timeout, errb.String())
	}
	wg.Wait()
	_ = p.Stdout().Close()
	_ = p.Stderr().Close()
	return result{stdout: out.String(), stderr: errb.String(), err: werr, usage: p.Usage(), pid: p.PID()}
}

// processAlive reports whether pid exists and is not a zombie.
func processAlive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	i := bytes.LastIndexByte(b, ')')
	return i < 0 || i+2 >= len(b) || b[i+2] != 'Z'
}
