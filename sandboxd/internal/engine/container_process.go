package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
)

// containerProcess is one sandbox container, attached through the CLI
// (`docker run -i` / `podman run -i`) that sandboxd started: the CLI's stdin
// and stdout are the channel, its stderr carries the container's stderr and
// the CLI's own errors.
//
// When the CLI exits (the container ended, or was removed), reap inspects
// the container for an OOM kill, removes it, and only then ends Wait.
type containerProcess struct {
	eng    *Container
	name   string
	cmd    *exec.Cmd
	logger *slog.Logger

	procPipes

	mu       sync.Mutex
	killed   bool    // Kill was called: an exit by SIGKILL is ours, not the OOM killer's
	cg       *cgroup // the container's cgroup on this host, once known; nil if unknown
	final    bool
	usage    Usage // valid when final
	memLimit bool
}

// startProcess starts the CLI. The pipes are plain os.Pipe ends, as for
// bwrap: Wait must not close the read ends under a reader.
func (c *Container) startProcess(spec Spec) (*containerProcess, error) {
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
	args := append(c.globals(), c.runArgs(spec)...)
	cmd := &exec.Cmd{
		Path: c.bin, Args: append([]string{c.bin}, args...), Dir: c.workDir,
		// The CLI inherits sandboxd's environment (DOCKER_HOST,
		// XDG_RUNTIME_DIR …); the container gets only Spec.Env.
		Stdin: inR, Stdout: outW, Stderr: errW,
		// If sandboxd dies, so does the CLI; the container's stdin then
		// closes, the agent exits, and the next Check reaps the container.
		SysProcAttr: sysProcAttr(),
	}
	err = startOnStarterThread(cmd)
	closeFiles(inR, outW, errW)
	if err != nil {
		closeFiles(inW, outR, errR)
		return nil, fmt.Errorf("exec %s: %w", c.bin, err)
	}
	p := &containerProcess{
		eng: c, name: containerName(spec.ID), cmd: cmd,
		logger:    c.logger.With("sandbox.id", spec.ID),
		procPipes: newProcPipes(inW, outR, errR),
		memLimit:  spec.Limits.MemoryBytes > 0,
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
func (p *containerProcess) findCgroup() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for delay := 20 * time.Millisecond; ; delay = min(delay*2, 500*time.Millisecond) {
		select {
		case <-p.done:
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
		cg := cgroupOfPid(pid)
		if cg == nil {
			// Not visible from here (sandboxd in a container without the
			// host's PIDs), or not set up yet: look again, within budget.
			continue
		}
		p.mu.Lock()
		p.cg = cg
		p.mu.Unlock()
		p.logger.Debug("sandbox cgroup found", "pid", pid, "cgroups", fmt.Sprint(cg.dirs))
		return
	}
}

// cgroupOfPid returns the memory and pids cgroups of a host PID, or nil.
func cgroupOfPid(pid int) *cgroup {
	own, err := readSelfCgroups(filepath.Join("/proc", strconv.Itoa(pid), "cgroup"))
	if err != nil {
		return nil
	}
	const root = "/sys/fs/cgroup"
	if dir, ok := unifiedMount(root); ok && own[""] != "" && dir == root {
		d := filepath.Join(dir, own[""])
		if _, err := os.Stat(d); err == nil {
			return &cgroup{v2: true, dirs: map[string]string{"": d}}
		}
		return nil
	}
	g := &cgroup{dirs: map[string]string{}}
	for _, ctrl := range []string{"memory", "pids"} {
		mnt, ok := v1Mount(root, ctrl)
		if !ok || own[ctrl] == "" {
			continue
		}
		d := filepath.Join(mnt, own[ctrl])
		if _, err := os.Stat(d); err == nil {
			g.dirs[ctrl] = d
		}
	}
	if len(g.dirs) == 0 {
		return nil
	}
	return g
}

// reap waits for the CLI, records the container's end and removes it.
func (p *containerProcess) reap() {
	err := p.cmd.Wait()
	_ = p.stdin.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	p.mu.Lock()
	u, killed := Usage{}, p.killed
	if p.cg != nil {
		u = p.cg.Usage()
	}
	p.mu.Unlock()
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
	if _, rerr := p.eng.cli(ctx, "rm", "-f", p.name); rerr != nil && !goneAlready(rerr) {
		p.logger.Warn("sandbox container not removed", "container", p.name, "error", rerr)
	}
	p.mu.Lock()
	p.usage, p.final = u, true
	p.mu.Unlock()
	if err != nil {
		err = fmt.Errorf("sandbox exited: %w", err)
	}
	p.waitErr = err
	close(p.done)
}

func (p *containerProcess) markKilled() {
	p.mu.Lock()
	p.killed = true
	p.mu.Unlock()
}

// Kill implements Process: it removes the container (which ends the CLI)
// and kills the CLI too, in case the container was never created.
func (p *containerProcess) Kill() error {
	select {
	case <-p.done:
		return nil
	default:
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

func (p *containerProcess) killCLI() error {
	if err := p.cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("kill sandbox: %w", err)
	}
	return nil
}

// Usage implements Process: live cgroup figures while running when the
// cgroup is visible, the final ones after exit.
func (p *containerProcess) Usage() Usage {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.final || p.cg == nil {
		return p.usage
	}
	return p.cg.Usage()
}

// PID implements Process: the CLI's PID.
func (p *containerProcess) PID() int { return p.cmd.Process.Pid }

// goneAlready reports whether a failed `rm -f` means that the container is
// gone or going anyway (Kill and reap may remove it at the same time).
func goneAlready(err error) bool {
	m := strings.ToLower(err.Error())
	return strings.Contains(m, "no such container") || strings.Contains(m, "no container with") ||
		strings.Contains(m, "already in progress")
}
