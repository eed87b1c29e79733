package bwrap

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"syscall"

	"github.com/codeexec/codeexec/sandboxd/internal/engine"
	"github.com/codeexec/codeexec/sandboxd/internal/engine/cgroup"
)

// A launcher is a sandbox start cut in two. launch does everything that
// depends only on the command line and the limits: it starts the gate shim
// (gateShim) with its pipes, puts it into its cgroups and sets its rlimits,
// and leaves it waiting at the gate. release hands it the options that
// differ between sandboxes (bwrap's --args) and lets it go.
//
// Both halves run back to back for an ordinary start. The bwrap engine also
// keeps a few launchers waiting ahead of demand (Engine.spares), because on a
// cgroup v1 host the first half is slow for a reason that has nothing to do
// with the sandbox: moving a process into a cgroup takes the kernel's
// cgroup_threadgroup_rwsem for writing, which waits for an RCU grace period
// (4 to 12 ms here) unless another move happened moments before. A spare
// has paid that already; a session that takes one starts with bwrap.
type launcher struct {
	cmd *exec.Cmd
	cg  *cgroup.Group

	stdin, stdout, stderr *os.File // sandboxd's ends
	argsW, gateW          *os.File
}

// launchKey is what a launcher was made for: a spare serves only a start
// with the same command line and limits.
type launchKey struct {
	argv   string // NUL-joined
	limits engine.Limits
}

func newLaunchKey(argv []string, lim engine.Limits) launchKey {
	return launchKey{argv: strings.Join(argv, "\x00"), limits: lim}
}

// launch starts argv (the shim) with an empty environment, the synthetic
// passwd and group files on fds 3 and 4, the --args pipe on fd 5, the gate
// on fd 6 and the seccomp filter (if any) on fd 7, and confines it in cg
// and limits. privateMounts gives the shim a mount namespace of its own
// (noexecShim). It takes ownership of cg: on failure cg is removed.
func launch(argv []string, seccomp []byte, cg *cgroup.Group, limits []rlimit, privateMounts bool) (*launcher, error) {
	inheritedOnce.Do(closeInheritedOnExec)
	var parentEnds, childEnds []*os.File
	closeAll := func(fs []*os.File) {
		for _, f := range fs {
			_ = f.Close()
		}
	}
	fail := func(err error) (*launcher, error) {
		closeAll(parentEnds)
		closeAll(childEnds)
		_ = cg.Remove()
		return nil, err
	}
	pipe := func() (r, w *os.File, err error) {
		r, w, err = os.Pipe()
		if err != nil {
			return nil, nil, fmt.Errorf("pipe: %w", err)
		}
		return r, w, nil
	}

	inR, inW, err := pipe()
	if err != nil {
		return fail(err)
	}
	parentEnds, childEnds = append(parentEnds, inW), append(childEnds, inR)
	outR, outW, err := pipe()
	if err != nil {
		return fail(err)
	}
	parentEnds, childEnds = append(parentEnds, outR), append(childEnds, outW)
	errR, errW, err := pipe()
	if err != nil {
		return fail(err)
	}
	parentEnds, childEnds = append(parentEnds, errR), append(childEnds, errW)

	// The synthetic files and the filter are far smaller than a pipe
	// buffer: write them whole and close the write end so bwrap reads them
	// to EOF.
	filled := func(content []byte) (*os.File, error) {
		r, w, err := pipe()
		if err != nil {
			return nil, err
		}
		childEnds = append(childEnds, r)
		_, werr := w.Write(content)
		_ = w.Close()
		if werr != nil {
			return nil, fmt.Errorf("write bwrap input: %w", werr)
		}
		return r, nil
	}
	var extra []*os.File
	for _, content := range []string{passwdData, groupData} {
		r, err := filled([]byte(content))
		if err != nil {
			return fail(err)
		}
		extra = append(extra, r)
	}
	// The --args content may exceed a pipe buffer, so it is written after
	// release, while bwrap reads it.
	argsR, argsW, err := pipe()
	if err != nil {
		return fail(err)
	}
	parentEnds, childEnds = append(parentEnds, argsW), append(childEnds, argsR)
	extra = append(extra, argsR)
	// The gate holds the shim until it is inside its limits (gateShim).
	gateR, gateW, err := pipe()
	if err != nil {
		return fail(err)
	}
	parentEnds, childEnds = append(parentEnds, gateW), append(childEnds, gateR)
	extra = append(extra, gateR)
	if seccomp != nil {
		r, err := filled(seccomp)
		if err != nil {
			return fail(err)
		}
		extra = append(extra, r)
	}

	cmd := &exec.Cmd{
		Path:       argv[0],
		Args:       argv,
		Env:        []string{}, // nil would mean "inherit sandboxd's environment"
		Dir:        "/",
		Stdin:      inR,
		Stdout:     outW,
		Stderr:     errW,
		ExtraFiles: extra, // fds 3 (passwd), 4 (group), 5 (--args), 6 (gate), 7 (seccomp)
	}
	if privateMounts {
		// Go makes the new namespace's mounts private, so that nothing
		// the shim mounts reaches the host's.
		cmd.SysProcAttr = &syscall.SysProcAttr{Unshareflags: syscall.CLONE_NEWNS}
	}
	// The parent-death signal kills the shim (and so bwrap) if sandboxd
	// dies before bwrap sets its own --die-with-parent.
	err = engine.StartChild(cmd)
	closeAll(childEnds)
	childEnds = nil
	if err != nil {
		return fail(fmt.Errorf("exec bwrap shim: %w", err))
	}
	if err := confine(cmd.Process.Pid, cg, limits); err != nil {
		_ = gateW.Close() // the shim exits without starting bwrap
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return fail(fmt.Errorf("confine the sandbox: %w", err))
	}
	return &launcher{cmd: cmd, cg: cg, stdin: inW, stdout: outR, stderr: errR, argsW: argsW, gateW: gateW}, nil
}

// release lets the shim start bwrap with data on its --args descriptor and
// returns the running sandbox, which is reaped in the background. On error
// the launcher is discarded.
func (l *launcher) release(data []byte, logger *slog.Logger) (*process, error) {
	_, err := io.WriteString(l.gateW, "go\n")
	_ = l.gateW.Close()
	if err != nil {
		// The shim is gone (killed while it waited): EPIPE.
		l.discard()
		return nil, fmt.Errorf("release the sandbox shim: %w", err)
	}
	argsW := l.argsW
	go func() {
		// An early bwrap failure makes this EPIPE; the exit reports that.
		_, _ = argsW.Write(data)
		_ = argsW.Close()
	}()
	p := &process{outer: l.cmd.Process, wait: l.cmd.Wait, cg: l.cg, logger: logger, Pipes: engine.NewPipes(l.stdin, l.stdout, l.stderr)}
	p.meter.Watch(l.cg)
	go p.reap()
	return p, nil
}

// discard ends a launcher that will not be released: closing the gate
// without the go-ahead makes the shim exit; then its cgroup goes.
func (l *launcher) discard() {
	_ = l.gateW.Close()
	_ = l.argsW.Close()
	_ = l.cmd.Wait()
	for _, f := range []*os.File{l.stdin, l.stdout, l.stderr} {
		_ = f.Close()
	}
	_ = l.cg.Remove()
}

// startSpare starts plan's sandbox from a spare launcher, or returns nil
// when there is none or it cannot be used.
func (b *Engine) startSpare(plan *startPlan) *process {
	l, ok := b.spares.Take(plan.key, nil)
	if !ok {
		return nil
	}
	id := plan.spec.ID
	if err := l.cg.Rename(id); err != nil {
		b.logger.Debug("spare sandbox cgroup keeps its name", "sandbox.id", id, "error", err)
	}
	p, err := l.release(plan.data, plan.logger)
	if err == nil {
		err = b.track(p)
	}
	if err != nil {
		b.logger.Debug("spare launcher unusable; starting afresh", "sandbox.id", id, "error", err)
		return nil
	}
	return p
}

// refillSpares makes plan's command line and limits the ones spare
// launchers are kept for (discarding spares made for others) and starts
// making them unless that runs already.
func (b *Engine) refillSpares(plan *startPlan) {
	b.spares.Refill(plan.key, func() (*launcher, error) { return b.launch(plan, "spare") })
}
