package engine

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// bwrapProcess is one running bwrap sandbox.
//
// Its pipes are plain os.Pipe ends, not exec.Cmd's StdoutPipe: Wait must not
// close the read ends under a reader that is still draining them. Stdout and
// Stderr reach EOF once every process of the sandbox is gone; the caller
// closes them. Wait closes Stdin.
type bwrapProcess struct {
	cmd    *exec.Cmd
	cg     *cgroup
	logger *slog.Logger

	procPipes

	mu    sync.Mutex
	final bool  // usage holds the figures read just before the cgroup went
	usage Usage // valid when final
}

// startProcess starts argv (the shim) with an empty environment, the
// synthetic passwd and group files on fds 3 and 4 and bwrap's --args
// (envArgs) on fd 5, and reaps it in the background.
func startProcess(argv []string, args []byte, cg *cgroup, limits []rlimit, logger *slog.Logger) (*bwrapProcess, error) {
	inheritedOnce.Do(closeInheritedOnExec)
	var parentEnds, childEnds []*os.File
	closeAll := func(fs []*os.File) {
		for _, f := range fs {
			_ = f.Close()
		}
	}
	pipe := func() (r, w *os.File, err error) {
		r, w, err = os.Pipe()
		if err != nil {
			closeAll(parentEnds)
			closeAll(childEnds)
			return nil, nil, fmt.Errorf("pipe: %w", err)
		}
		return r, w, nil
	}

	inR, inW, err := pipe()
	if err != nil {
		return nil, err
	}
	parentEnds, childEnds = append(parentEnds, inW), append(childEnds, inR)
	outR, outW, err := pipe()
	if err != nil {
		return nil, err
	}
	parentEnds, childEnds = append(parentEnds, outR), append(childEnds, outW)
	errR, errW, err := pipe()
	if err != nil {
		return nil, err
	}
	parentEnds, childEnds = append(parentEnds, errR), append(childEnds, errW)

	// The synthetic files are far smaller than a pipe buffer: write them
	// whole and close the write end so bwrap reads them to EOF.
	var data []*os.File
	for _, content := range []string{passwdData, groupData} {
		r, w, err := pipe()
		if err != nil {
			return nil, err
		}
		childEnds = append(childEnds, r)
		_, werr := io.WriteString(w, content)
		_ = w.Close()
		if werr != nil {
			closeAll(parentEnds)
			closeAll(childEnds)
			return nil, fmt.Errorf("write synthetic file: %w", werr)
		}
		data = append(data, r)
	}
	// The --args content (the environment) may exceed a pipe buffer, so it
	// is written after Start, while bwrap reads it.
	argsR, argsW, err := pipe()
	if err != nil {
		return nil, err
	}
	childEnds = append(childEnds, argsR)
	data = append(data, argsR)
	// The gate holds the shim until it is inside its limits (gateShim).
	gateR, gateW, err := pipe()
	if err != nil {
		return nil, err
	}
	childEnds = append(childEnds, gateR)
	data = append(data, gateR)

	cmd := &exec.Cmd{
		Path:        argv[0],
		Args:        argv,
		Env:         []string{}, // nil would mean "inherit sandboxd's environment"
		Dir:         "/",
		Stdin:       inR,
		Stdout:      outW,
		Stderr:      errW,
		ExtraFiles:  data, // fds 3 (passwd), 4 (group), 5 (--args), 6 (gate)
		SysProcAttr: sysProcAttr(),
	}
	err = startOnStarterThread(cmd)
	closeAll(childEnds)
	if err != nil {
		closeAll(parentEnds)
		_ = argsW.Close()
		_ = gateW.Close()
		return nil, fmt.Errorf("exec bwrap shim: %w", err)
	}
	if err := confine(cmd.Process.Pid, cg, limits); err != nil {
		_ = gateW.Close() // the shim exits without starting bwrap
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		closeAll(parentEnds)
		_ = argsW.Close()
		return nil, fmt.Errorf("confine the sandbox: %w", err)
	}
	_, err = io.WriteString(gateW, "go\n")
	_ = gateW.Close()
	if err != nil {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		closeAll(parentEnds)
		_ = argsW.Close()
		return nil, fmt.Errorf("release the sandbox shim: %w", err)
	}
	go func() {
		// An early bwrap failure makes this EPIPE; the exit reports that.
		_, _ = argsW.Write(args)
		_ = argsW.Close()
	}()
	p := &bwrapProcess{cmd: cmd, cg: cg, logger: logger, procPipes: newProcPipes(inW, outR, errR)}
	go p.reap()
	return p, nil
}

var inheritedOnce sync.Once

// closeInheritedOnExec marks every descriptor above 2 close-on-exec. Go opens
// all its own descriptors that way, but descriptors sandboxd inherited from
// its parent (a supervisor, a test harness) are not, and neither the shell
// shim nor bwrap closes them: without this a sandbox would inherit them.
func closeInheritedOnExec() {
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return
	}
	for _, e := range entries {
		if fd, err := strconv.Atoi(e.Name()); err == nil && fd > 2 {
			syscall.CloseOnExec(fd)
		}
	}
}

// reap waits for bwrap, records Usage from the cgroup while it still exists,
// then removes the cgroup.
func (p *bwrapProcess) reap() {
	err := p.cmd.Wait()
	_ = p.stdin.Close()
	if p.cg != nil {
		u := p.cg.Usage()
		p.mu.Lock()
		p.usage, p.final = u, true
		p.mu.Unlock()
		if rerr := p.cg.Remove(); rerr != nil {
			p.logger.Warn("sandbox cgroup not removed", "error", rerr)
		}
	}
	if err != nil {
		err = fmt.Errorf("sandbox exited: %w", err)
	}
	p.waitErr = err
	close(p.done)
}

// Kill implements Process. Killing bwrap is enough: --die-with-parent kills
// the sandbox's PID 1, and the kernel then kills every process in that PID
// namespace. The cgroup is swept as well, in case.
func (p *bwrapProcess) Kill() error {
	select {
	case <-p.done:
		return nil
	default:
	}
	err := p.cmd.Process.Kill()
	if p.cg != nil {
		p.cg.Kill()
	}
	if err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("kill sandbox: %w", err)
	}
	return nil
}

// Usage implements Process: live cgroup figures while running, the final
// ones after exit.
func (p *bwrapProcess) Usage() Usage {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.final || p.cg == nil {
		return p.usage
	}
	return p.cg.Usage()
}

// PID implements Process.
func (p *bwrapProcess) PID() int { return p.cmd.Process.Pid }

// confine puts the waiting shim into its cgroups and applies its rlimits.
// Both are inherited by everything it starts.
func confine(pid int, cg *cgroup, limits []rlimit) error {
	if cg != nil {
		for _, f := range cg.ProcsFiles() {
			if err := os.WriteFile(f, []byte(strconv.Itoa(pid)), 0); err != nil {
				return fmt.Errorf("join cgroup %s: %w", filepath.Dir(f), err)
			}
		}
	}
	for _, l := range limits {
		lim := unix.Rlimit{Cur: l.value, Max: l.value}
		if err := unix.Prlimit(pid, l.resource, &lim, nil); err != nil {
			return fmt.Errorf("set rlimit %d to %d: %w", l.resource, l.value, err)
		}
	}
	return nil
}
