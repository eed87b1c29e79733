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
	var fs shimFiles
	fail := func(err error) (*launcher, error) {
		fs.closeAll()
		_ = cg.Remove()
		return nil, err
	}
	l, extra, err := fs.open(seccomp)
	if err != nil {
		return fail(err)
	}
	cmd := &exec.Cmd{
		Path:       argv[0],
		Args:       argv,
		Env:        []string{}, // nil would mean "inherit sandboxd's environment"
		Dir:        "/",
		Stdin:      fs.child[0],
		Stdout:     fs.child[1],
		Stderr:     fs.child[2],
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
	closeFiles(fs.child)
	fs.child = nil
	if err != nil {
		return fail(fmt.Errorf("exec bwrap shim: %w", err))
	}
	if err := confine(cmd.Process.Pid, cg, limits); err != nil {
		_ = l.gateW.Close() // the shim exits without starting bwrap
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return fail(fmt.Errorf("confine the sandbox: %w", err))
	}
	l.cmd, l.cg = cmd, cg
	return l, nil
}

// shimFiles are the pipes of a launch: sandboxd's ends (parent) and the
// shim's (child), which are closed here once the shim has started. The
// shim's stdin, stdout and stderr are child[0:3].
type shimFiles struct {
	parent, child []*os.File
}

// open makes the shim's pipes. It returns the launcher's ends and the
// shim's extra files, fds 3 and up.
func (fs *shimFiles) open(seccomp []byte) (*launcher, []*os.File, error) {
	l := &launcher{}
	var err error
	if l.stdin, err = fs.pipe(false); err != nil {
		return nil, nil, err
	}
	if l.stdout, err = fs.pipe(true); err != nil {
		return nil, nil, err
	}
	if l.stderr, err = fs.pipe(true); err != nil {
		return nil, nil, err
	}
	var extra []*os.File
	for _, content := range []string{passwdData, groupData} {
		r, err := fs.filled([]byte(content))
		if err != nil {
			return nil, nil, err
		}
		extra = append(extra, r)
	}
	// The --args content may exceed a pipe buffer, so it is written after
	// release, while bwrap reads it.
	if l.argsW, err = fs.pipe(false); err != nil {
		return nil, nil, err
	}
	extra = append(extra, fs.child[len(fs.child)-1])
	// The gate holds the shim until it is inside its limits (gateShim).
	if l.gateW, err = fs.pipe(false); err != nil {
		return nil, nil, err
	}
	extra = append(extra, fs.child[len(fs.child)-1])
	if seccomp != nil {
		r, err := fs.filled(seccomp)
		if err != nil {
			return nil, nil, err
		}
		extra = append(extra, r)
	}
	return l, extra, nil
}

// pipe makes a pipe and returns sandboxd's end: the read end when
// parentReads, else the write end.
func (fs *shimFiles) pipe(parentReads bool) (*os.File, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("pipe: %w", err)
	}
	if parentReads {
		r, w = w, r
	}
	fs.parent, fs.child = append(fs.parent, w), append(fs.child, r)
	return w, nil
}

// filled returns the shim's end of a pipe that holds content to EOF. The
// synthetic files and the filter are far smaller than a pipe buffer:
// they are written whole, and the write end closed.
func (fs *shimFiles) filled(content []byte) (*os.File, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("pipe: %w", err)
	}
	fs.child = append(fs.child, r)
	_, werr := w.Write(content)
	_ = w.Close()
	if werr != nil {
		return nil, fmt.Errorf("write bwrap input: %w", werr)
	}
	return r, nil
}

func (fs *shimFiles) closeAll() {
	closeFiles(fs.parent)
	closeFiles(fs.child)
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
