package enginetest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/codeexec/codeexec/sandboxd/internal/agent"
	"github.com/codeexec/codeexec/sandboxd/internal/engine"
)

// Direct is an engine for tests of the layers above the engines (the
// session, its lease, capacity): it runs a sandbox's Argv as a plain child
// process of the test, with no namespaces, no limits and no isolation at
// all, so that those tests need no bubblewrap, cgroups or container
// engine. The agent's mount point in Argv is rewritten to Spec.AgentDir,
// and the sandbox's working directory (its /workspace) is a fresh temp
// dir. Pause and Resume send SIGSTOP and SIGCONT to its process group.
// Never use it outside tests: the code it runs can do all the test can.
type Direct struct {
	root string
	live engine.Live[*direct]
}

var _ engine.Engine = (*Direct)(nil)

// NewDirect returns a Direct engine whose sandboxes' workspaces are in a
// temp dir of t; it is closed when t ends.
func NewDirect(t testing.TB) *Direct {
	t.Helper()
	e := &Direct{root: t.TempDir()}
	t.Cleanup(func() { _ = e.Close() })
	return e
}

// Name implements engine.Engine.
func (e *Direct) Name() string { return "direct" }

// Check implements engine.Engine: it needs only the tests' Python.
func (e *Direct) Check(context.Context) error {
	if _, err := os.Stat(Python); err != nil {
		return fmt.Errorf("%w: the direct engine runs %s: %w", engine.ErrUnavailable, Python, err)
	}
	return nil
}

// Prepare implements engine.Engine; the agent is compiled as it loads.
func (e *Direct) Prepare(context.Context, string, string) error { return nil }

// CheckLimits implements engine.Engine; no limit is applied.
func (e *Direct) CheckLimits(engine.Limits) error { return nil }

// Start implements engine.Engine.
func (e *Direct) Start(_ context.Context, spec engine.Spec) (engine.Process, error) {
	if err := engine.ValidateSpec(spec, "\x00", "NUL"); err != nil {
		return nil, err
	}
	if e.live.Closed() {
		return nil, engine.ErrClosed
	}
	workspace, err := os.MkdirTemp(e.root, "workspace-")
	if err != nil {
		return nil, fmt.Errorf("start sandbox: %w", err)
	}
	argv := make([]string, len(spec.Argv))
	for i, a := range spec.Argv {
		if rest, ok := strings.CutPrefix(a, engine.AgentMount); ok && (rest == "" || rest[0] == '/') {
			a = filepath.Join(spec.AgentDir, rest)
		}
		argv[i] = a
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = workspace
	for k, v := range spec.Env {
		if k == "HOME" || k == "PWD" || k == "TMPDIR" {
			v = workspace
		}
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	p, err := startDirect(cmd)
	if err != nil {
		return nil, err
	}
	if !e.live.Add(p) {
		_ = p.Kill()
		return nil, engine.ErrClosed
	}
	return p, nil
}

// startDirect starts cmd with pipes of its own, in a process group of its
// own, and reaps it.
func startDirect(cmd *exec.Cmd) (*direct, error) {
	var ours, theirs [3]*os.File // stdin, stdout, stderr
	for i := range 3 {
		r, w, err := os.Pipe()
		if err != nil {
			closeAll(ours[:])
			closeAll(theirs[:])
			return nil, fmt.Errorf("start sandbox: %w", err)
		}
		if i == 0 {
			ours[i], theirs[i] = w, r
		} else {
			ours[i], theirs[i] = r, w
		}
	}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = theirs[0], theirs[1], theirs[2]
	err := engine.StartChild(cmd)
	closeAll(theirs[:])
	if err != nil {
		closeAll(ours[:])
		return nil, fmt.Errorf("start sandbox: %w", err)
	}
	p := &direct{pid: cmd.Process.Pid, Pipes: engine.NewPipes(ours[0], ours[1], ours[2])}
	go func() {
		err := cmd.Wait()
		// The agent's children go with it, as they do with a sandbox's
		// PID namespace.
		_ = syscall.Kill(-p.pid, syscall.SIGKILL)
		_ = p.Stdin().Close()
		p.Exit(err)
	}()
	return p, nil
}

func closeAll(files []*os.File) {
	for _, f := range files {
		if f != nil {
			_ = f.Close()
		}
	}
}

// Close implements engine.Engine: it kills every sandbox still running.
func (e *Direct) Close() error {
	live, _ := e.live.Close()
	for _, p := range live {
		_ = p.Kill()
	}
	for _, p := range live {
		<-p.Done()
	}
	return nil
}

// direct is one sandbox of the Direct engine.
type direct struct {
	pid int
	engine.Pipes
}

// signal sends sig to p's process group, unless p has exited.
func (p *direct) signal(sig syscall.Signal) error {
	if p.Exited() {
		return nil
	}
	if err := syscall.Kill(-p.pid, sig); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("signal sandbox %d: %w", p.pid, err)
	}
	return nil
}

// Kill implements engine.Process.
func (p *direct) Kill() error { return p.signal(syscall.SIGKILL) }

// Pause implements engine.Process.
func (p *direct) Pause() error { return p.signal(syscall.SIGSTOP) }

// Resume implements engine.Process.
func (p *direct) Resume() error { return p.signal(syscall.SIGCONT) }

// Usage implements engine.Process: nothing is measured.
func (p *direct) Usage() engine.Usage { return engine.Usage{} }

// PidsLimitHit implements engine.Process: there is no limit to hit.
func (p *direct) PidsLimitHit() bool { return false }

// PID implements engine.Process.
func (p *direct) PID() int { return p.pid }

// Agent writes the real agent into a new directory of t and returns it,
// with the Argv and environment sandboxd runs it with: a sandbox of the
// Direct engine then runs the agent as sandboxd's sandboxes do.
func Agent(t testing.TB) (dir string, argv []string, env map[string]string) {
	t.Helper()
	dir = t.TempDir()
	if err := agent.WriteTo(dir); err != nil {
		t.Fatal(err)
	}
	argv = []string{Python, "-I", filepath.Join(engine.AgentMount, agent.Entry)}
	env = map[string]string{
		"HOME": "/workspace", "PWD": "/workspace", "PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8", "TMPDIR": "/tmp",
		"PYTHONUNBUFFERED": "1", "PYTHONIOENCODING": "utf-8", "PYTHONDONTWRITEBYTECODE": "1",
	}
	return dir, argv, env
}
