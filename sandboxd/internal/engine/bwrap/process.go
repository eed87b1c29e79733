package bwrap

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/codeexec/codeexec/sandboxd/internal/engine"
	"github.com/codeexec/codeexec/sandboxd/internal/engine/cgroup"
)

// process is one running sandbox, started by bwrap or by the fork server.
//
// Its pipes are plain os.Pipe ends, not exec.Cmd's StdoutPipe: Wait must not
// close the read ends under a reader that is still draining them. Stdout and
// Stderr reach EOF once every process of the sandbox is gone; the caller
// closes them. Wait closes Stdin.
type process struct {
	// outer is the sandbox's outermost process (the shim that became bwrap,
	// or the fork server's monitor), a child of sandboxd; wait waits for it.
	// init, for a sandbox from the fork server, is a pidfd of its PID 1,
	// through which Kill ends it (forkserver.Child).
	outer  *os.Process
	initMu sync.Mutex // guards init, which reap closes
	init   *os.File
	wait   func() error
	cg     *cgroup.Group
	logger *slog.Logger

	engine.Pipes
	meter cgroup.Meter // watches cg
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

// reap waits for the outer process, records Usage from the cgroup while it
// still exists, then removes the cgroup.
func (p *process) reap() {
	err := p.wait()
	_ = p.Stdin().Close()
	p.initMu.Lock()
	init := p.init
	p.initMu.Unlock()
	if init != nil {
		// The monitor can end before init has: the cgroup sweep in Kill
		// kills them at once, and init may still be exiting. Wait returns
		// only once init has exited too (its pidfd turns readable then).
		waitExit(init, initExitWait)
	}
	p.initMu.Lock()
	if p.init != nil {
		_ = p.init.Close()
		p.init = nil
	}
	p.initMu.Unlock()
	if p.cg != nil {
		p.meter.Stop(p.cg.Usage())
		if rerr := p.cg.Remove(); rerr != nil {
			p.logger.Warn("sandbox cgroup not removed", "error", rerr)
		}
	}
	p.Exit(err)
}

// Kill implements engine.Process. Killing the outer process is enough for
// bwrap: the sandbox's PID 1 has it as its death signal's parent
// (--die-with-parent), and the kernel then kills every process in that PID
// namespace. A sandbox from the fork server is killed through its PID 1
// itself, so that its monitor exits (and Wait returns) only once all of it
// is gone. The cgroup is swept as well, in case.
func (p *process) Kill() error {
	if p.Exited() {
		return nil
	}
	var err error
	p.initMu.Lock()
	if p.init != nil {
		killInit(p.init, p.outer)
	} else {
		err = p.outer.Kill()
	}
	p.initMu.Unlock()
	if p.cg != nil {
		p.cg.Kill()
	}
	if err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("kill sandbox: %w", err)
	}
	return nil
}

// Pause implements engine.Process with the sandbox's cgroup freezer.
func (p *process) Pause() error {
	if p.cg == nil {
		return fmt.Errorf("%w: the sandbox has no cgroup to freeze (cgroups are not usable here)", errors.ErrUnsupported)
	}
	if err := p.cg.Freeze(); errors.Is(err, cgroup.ErrNoFreezer) {
		return fmt.Errorf("%w: %w", errors.ErrUnsupported, err)
	} else if err != nil {
		return err
	}
	return nil
}

// Resume implements engine.Process.
func (p *process) Resume() error {
	if p.cg == nil {
		return fmt.Errorf("%w: the sandbox has no cgroup", errors.ErrUnsupported)
	}
	return p.cg.Thaw()
}

// Usage implements engine.Process: live cgroup figures while running, the final
// ones after exit.
func (p *process) Usage() engine.Usage { return p.meter.Usage() }

// PidsLimitHit implements engine.Process.
func (p *process) PidsLimitHit() bool { return p.meter.PidsLimitHit() }

// PID implements engine.Process.
func (p *process) PID() int { return p.outer.Pid }

// waitProcess waits for p, a child that is no exec.Cmd, and reports its
// end as exec.Cmd.Wait would.
func waitProcess(p *os.Process) func() error {
	return func() error {
		st, err := p.Wait()
		if err != nil {
			return err
		}
		if !st.Success() {
			return &exec.ExitError{ProcessState: st}
		}
		return nil
	}
}

// confine puts the waiting shim into its cgroups and applies its rlimits.
// Both are inherited by everything it starts.
func confine(pid int, cg *cgroup.Group, limits []rlimit) error {
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

// initExitWait bounds how long reap waits for init to exit after its
// monitor did; it takes microseconds, unless the kernel is slow to tear a
// large address space down.
const initExitWait = 5 * time.Second

// waitExit waits, at most d, for the process of pidfd f to exit.
func waitExit(f *os.File, d time.Duration) {
	fds := []unix.PollFd{{Fd: int32(f.Fd()), Events: unix.POLLIN}}
	deadline := time.Now().Add(d)
	for {
		left := time.Until(deadline)
		if left <= 0 {
			return
		}
		n, err := unix.Poll(fds, int(left/time.Millisecond)+1)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if n != 0 || err != nil {
			return
		}
	}
}

// killInit kills a forked sandbox through the pidfd of its PID 1, or its
// monitor if init is gone already (the monitor then exits on its own, or
// was never past its start).
func killInit(init *os.File, monitor *os.Process) {
	if err := unix.PidfdSendSignal(int(init.Fd()), unix.SIGKILL, nil, 0); err != nil {
		_ = monitor.Kill()
	}
}
