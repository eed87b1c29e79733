package container

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/codeexec/codeexec/sandboxd/internal/engine"
	"github.com/codeexec/codeexec/sandboxd/internal/engine/cgroup"
)

// process is one sandbox container, attached through the CLI
// (`docker run -i` / `podman run -i`) that sandboxd started: the CLI's stdin
// and stdout are the channel, its stderr carries the container's stderr and
// the CLI's own errors.
//
// When the CLI exits (the container ended, or was removed), reap inspects
// the container for an OOM kill, removes it, and only then ends Wait.
type process struct {
	eng    *Engine
	name   string
	who    identity // given back once the container is gone
	cmd    *exec.Cmd
	logger *slog.Logger

	engine.Pipes

	killed   atomic.Bool  // Kill was called: an exit by SIGKILL is ours, not the OOM killer's
	meter    cgroup.Meter // watches the container's cgroup on this host once it is known
	memLimit bool
	// memBytes is the memory limit the runtime set, which findCgroup
	// shares with socket buffers when the engine caps them; cgDone closes
	// when findCgroup ends.
	memBytes int64
	cgDone   chan struct{}
}

// startProcess starts the CLI. The pipes are plain os.Pipe ends, as for
// bwrap: Wait must not close the read ends under a reader.
func (c *Engine) startProcess(spec engine.Spec) (*process, error) {
	inR, inW, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("pipe: %w", err)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		closeFiles(inR, inW)
		return nil, fmt.Errorf("pipe: %w", err)
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		closeFiles(inR, inW, outR, outW)
		return nil, fmt.Errorf("pipe: %w", err)
	}
	who, err := c.claim(spec.ID)
	if err != nil {
		closeFiles(inR, inW, outR, outW, errR, errW)
		return nil, err
	}
	args := append(c.globals(), c.runArgs(spec, who)...)
	cmd := &exec.Cmd{
		Path: c.bin, Args: append([]string{c.bin}, args...), Dir: c.workDir,
		// The CLI inherits sandboxd's environment (DOCKER_HOST,
		// XDG_RUNTIME_DIR …); the container gets only engine.Spec.Env.
		Stdin: inR, Stdout: outW, Stderr: errW,
	}
	// If sandboxd dies, so does the CLI; the container's stdin then
	// closes, the agent exits, and the next Check reaps the container.
	err = engine.StartChild(cmd)
	closeFiles(inR, outW, errW)
	if err != nil {
		closeFiles(inW, outR, errR)
		c.unclaim(who, false)
		return nil, fmt.Errorf("exec %s: %w", c.bin, err)
	}
	p := &process{
		eng: c, name: containerName(spec.ID), cmd: cmd, who: who,
		logger:   c.logger.With("sandbox.id", spec.ID),
		Pipes:    engine.NewPipes(inW, outR, errR),
		memLimit: spec.Limits.MemoryBytes > 0,
		memBytes: spec.Limits.MemoryBytes,
		cgDone:   make(chan struct{}),
	}
	go p.reap()
	go p.findCgroup()
	return p, nil
}

func closeFiles(fs ...*os.File) {
	for _, f := range fs {
		_ = f.Close()
	}
}

// findCgroup learns the container's cgroup from its PID, so that Usage can
// report pids-cap hits and peak memory while it runs, as the bwrap engine
// does. It is best effort: when sandboxd itself runs in a container it
// cannot see the host's /proc, and Usage falls back to `inspect` at exit.
func (p *process) findCgroup() {
	defer close(p.cgDone)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for delay := 20 * time.Millisecond; ; delay = min(delay*2, 500*time.Millisecond) {
		select {
		case <-p.Done():
			return
		case <-ctx.Done():
			return
		case <-time.After(delay):
		}
		out, err := p.eng.cli(ctx, "inspect", "--format", "{{.State.Pid}}", p.name)
		pid, _ := strconv.Atoi(strings.TrimSpace(out))
		if err != nil || pid <= 0 {
			continue
		}
		cg := cgroup.OfPID(pid)
		if cg == nil {
			// Not visible from here (sandboxd in a container without the
			// host's PIDs), or not set up yet: look again, within budget.
			continue
		}
		p.meter.Watch(cg)
		if p.eng.capSockets.Load() {
			// A cgroup that cannot be written (read-only, as sandboxd in a
			// container sees the host's) will not be later either: say so
			// once, and stop waiting for the next sandboxes' cgroups.
			if err := cg.ShareSockets(p.memBytes); err != nil && p.eng.capSockets.Swap(false) {
				p.eng.logger.Warn("socket buffers of container sandboxes are not capped: their cgroups cannot be written from here; cgroup v2 hosts count them in the memory limit", "error", err)
			}
		}
		p.logger.Debug("sandbox cgroup found", "pid", pid, "cgroups", fmt.Sprint(cg.Dirs()))
		return
	}
}

// awaitSocketCap waits, when the engine caps socket buffers, until
// findCgroup has capped this container's: before its agent is handed any
// code. When the cgroups cannot be seen from here (sandboxd in a container
// of its own), it says so once and stops waiting for later containers.
func (p *process) awaitSocketCap(ctx context.Context) {
	if !p.eng.capSockets.Load() || p.memBytes <= 0 {
		return
	}
	t := time.NewTimer(socketCapWait)
	defer t.Stop()
	select {
	case <-p.cgDone:
	case <-p.Done():
	case <-ctx.Done():
	case <-t.C:
		if p.eng.capSockets.Swap(false) {
			p.eng.logger.Warn("socket buffers of container sandboxes are not capped: their cgroups cannot be seen from here; cgroup v2 hosts count them in the memory limit",
				"waited", socketCapWait)
		}
	}
}

// socketCapWait bounds awaitSocketCap: a container starts within it.
const socketCapWait = 15 * time.Second

// reap waits for the CLI, records the container's end and removes it.
func (p *process) reap() {
	err := p.cmd.Wait()
	_ = p.Stdin().Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	u, killed := p.meter.Usage(), p.killed.Load()
	// `run` exits with the container's exit code (125 and up for its own
	// failures); inspect is asked too, in case the CLI was killed.
	exitCode := -1
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		exitCode = ee.ExitCode()
	}
	if out, ierr := p.eng.cli(ctx, "inspect", "--format", "{{.State.OOMKilled}} {{.State.ExitCode}}", p.name); ierr == nil {
		f := strings.Fields(out)
		if len(f) == 2 {
			u.OOMKilled = u.OOMKilled || f[0] == "true"
			if c, cerr := strconv.Atoi(f[1]); cerr == nil && exitCode != 137 {
				exitCode = c
			}
		}
	}
	// podman on cgroup v1 does not record OOM kills (State.OOMKilled stays
	// false). A container that ended by SIGKILL (137) that sandboxd did not
	// send, under a memory cap, was killed by the kernel's OOM killer:
	// nothing else in the sandbox may SIGKILL its init.
	if !u.OOMKilled && !killed && p.memLimit && exitCode == 137 {
		u.OOMKilled = true
	}
	_, rerr := p.eng.cli(ctx, "rm", "-f", p.name)
	kept := rerr != nil && !goneAlready(rerr)
	if kept {
		p.logger.Warn("sandbox container not removed", "container", p.name, "error", rerr)
	}
	p.eng.unclaim(p.who, kept)
	p.meter.Stop(u)
	p.Exit(err)
}

func (p *process) markKilled() { p.killed.Store(true) }

// Kill implements engine.Process: it removes the container (which ends the CLI)
// and kills the CLI too, in case the container was never created.
func (p *process) Kill() error {
	if p.Exited() {
		return nil
	}
	p.markKilled()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, rmErr := p.eng.cli(ctx, "rm", "-f", p.name)
	if err := p.killCLI(); err != nil {
		return err
	}
	if rmErr != nil && !goneAlready(rmErr) {
		return fmt.Errorf("kill sandbox: remove container %s: %w", p.name, rmErr)
	}
	return nil
}

func (p *process) killCLI() error {
	if err := p.cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("kill sandbox: %w", err)
	}
	return nil
}

// Pause implements engine.Process: `docker pause` (or podman's), the
// runtime's cgroup freezer. Kill's `rm -f` ends a paused container as it
// is (docker 20.10 and podman 4.3 both), so it runs no code on the way.
func (p *process) Pause() error { return p.onContainer("pause") }

// Resume implements engine.Process.
func (p *process) Resume() error { return p.onContainer("unpause") }

// onContainer runs the runtime's command verb on the sandbox's container.
func (p *process) onContainer(verb string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := p.eng.cli(ctx, verb, p.name); err != nil {
		return fmt.Errorf("%s sandbox container %s: %w", verb, p.name, err)
	}
	return nil
}

// Usage implements engine.Process: live cgroup figures while running when the
// cgroup is visible, the final ones after exit.
func (p *process) Usage() engine.Usage { return p.meter.Usage() }

// PidsLimitHit implements engine.Process.
func (p *process) PidsLimitHit() bool { return p.meter.PidsLimitHit() }

// PID implements engine.Process: the CLI's PID.
func (p *process) PID() int { return p.cmd.Process.Pid }

// goneAlready reports whether a failed `rm -f` means that the container is
// gone or going anyway (Kill and reap may remove it at the same time).
func goneAlready(err error) bool {
	m := strings.ToLower(err.Error())
	return strings.Contains(m, "no such container") || strings.Contains(m, "no container with") ||
		strings.Contains(m, "already in progress")
}
