package bwrap

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/codeexec/codeexec/sandboxd/internal/agent"
	"github.com/codeexec/codeexec/sandboxd/internal/engine"
	"github.com/codeexec/codeexec/sandboxd/internal/engine/cgroup"
	"github.com/codeexec/codeexec/sandboxd/internal/engine/forkserver"
)

// errNoForkServer means no fork server is running: Start uses bwrap.
var errNoForkServer = errors.New("no fork server running")

// warmWait bounds how long a warm start waits for a fork server that is
// starting (it takes well under a second): one that hangs must not keep
// the pool empty, nor use up the start's own time.
const warmWait = 5 * time.Second

// agentEntry is the agent's command line after the interpreter, inside a
// sandbox (sandboxd's Argv).
var agentEntry = filepath.Join(engine.AgentMount, agent.Entry)

// forkServer returns the running fork server, starting its supervision
// on the first call that names an interpreter. The server is made for
// the interpreter and agent Prepare was given (else spec's interpreter)
// and for spec's environment: sandboxd's sandboxes all share both. For a
// warm spec it waits while a server is starting, so that the sandboxes a
// new sandboxd pools first come from the server too.
func (b *Engine) forkServer(ctx context.Context, spec engine.Spec) (*forkserver.Server, error) {
	srv, err := b.anyForkServer(ctx, spec)
	if srv != nil && !slices.Equal(srv.Config().Mounts, spec.Mounts) {
		// Its template has other mounts: this sandbox starts with bwrap.
		return nil, errNoForkServer
	}
	return srv, err
}

// anyForkServer is forkServer without the check of the mounts.
func (b *Engine) anyForkServer(ctx context.Context, spec engine.Spec) (*forkserver.Server, error) {
	if !b.dropRoot {
		// The server runs as Config.HostUID, which only root may make it;
		// as anyone else, sandboxes start with bwrap.
		b.noForkOnce.Do(func() { b.logger.Info("the fork server needs sandboxd to run as root; sandboxes start with bwrap") })
		return nil, errNoForkServer
	}
	b.mu.Lock()
	sup := b.forks
	if sup == nil && !b.live.Closed() {
		python := b.python
		if python == "" && len(spec.Argv) > 1 && spec.Argv[1] == "-I" && strings.HasPrefix(filepath.Base(spec.Argv[0]), "python") {
			python = spec.Argv[0]
		}
		if python != "" {
			sup = forkserver.Supervise(forkserver.Config{
				Python: python, AgentDir: b.agentDir, Env: maps.Clone(spec.Env), Seccomp: b.seccomp,
				Passwd: passwdData, Group: groupData, UID: b.cfg.HostUID, Logger: b.logger, Mounts: slices.Clone(spec.Mounts),
				Root: b.fs.root, Etc: b.fs.etc, Preload: b.cfg.Preload,
			}, b.forkTrial)
			b.forks = sup
		}
	}
	b.mu.Unlock()
	switch {
	case sup == nil:
		return nil, errNoForkServer
	case b.cfg.forkOnly:
		return sup.Wait(ctx)
	case spec.Warm:
		wait, cancel := context.WithTimeout(ctx, cmp.Or(b.cfg.warmWait, warmWait))
		defer cancel()
		srv, err := sup.Ready(wait)
		switch {
		case srv != nil:
			return srv, nil
		case ctx.Err() != nil:
			return nil, ctx.Err()
		case errors.Is(err, forkserver.ErrClosed):
			return nil, err
		}
		return nil, errNoForkServer
	}
	if srv := sup.Server(); srv != nil {
		return srv, nil
	}
	return nil, errNoForkServer
}

// forkMode says how srv can run spec: in the forked interpreter when spec
// runs that interpreter, with its environment (and for the agent, its
// agent directory), else by executing spec's command.
func forkMode(spec engine.Spec, cfg forkserver.Config, agentDir string) forkserver.Mode {
	a := spec.Argv
	if len(a) < 3 || a[0] != cfg.Python || a[1] != "-I" || !maps.Equal(spec.Env, cfg.Env) {
		return forkserver.ModeExec
	}
	switch {
	case a[2] == "-c" && len(a) >= 4:
		return forkserver.ModeScript
	case len(a) == 3 && a[2] == agentEntry && cfg.AgentDir != "" && agentDir == cfg.AgentDir:
		return forkserver.ModeAgent
	}
	return forkserver.ModeExec
}

// startForked starts plan's sandbox from srv: its cgroup and pipes are made
// here as for bwrap, and the server's monitor joins the cgroup itself.
func (b *Engine) startForked(ctx context.Context, srv *forkserver.Server, plan *startPlan) (*process, error) {
	f, err := b.fork(ctx, srv, plan, false)
	if err != nil {
		return nil, err
	}
	return b.forkedProcess(plan, f.child, waitProcess(f.child.Monitor), f.cg, f.stdio)
}

// forked is a sandbox, or a spare, the fork server has started.
type forked struct {
	child *forkserver.Child
	cg    *cgroup.Group
	stdio []*os.File // sandboxd's ends; none for a spare
}

// fork asks srv for plan's sandbox, or with hold for a spare made for
// plan's limits and agent directory.
func (b *Engine) fork(ctx context.Context, srv *forkserver.Server, plan *startPlan, hold bool) (*forked, error) {
	spec := plan.spec
	agentDir, err := resolvedAgentDir(spec)
	if err != nil {
		return nil, err
	}
	var cg *cgroup.Group
	if b.cgroups != nil {
		if cg, err = b.cgroups.Create(spec.ID, spec.Limits); err != nil {
			return nil, fmt.Errorf("start sandbox %s: %w", spec.ID, err)
		}
	}
	var parentEnds, childEnds []*os.File
	fail := func(err error) (*forked, error) {
		closeFiles(parentEnds)
		closeFiles(childEnds)
		_ = cg.Remove()
		return nil, fmt.Errorf("start sandbox %s: %w", spec.ID, err)
	}
	req := &forkserver.Request{Hold: hold, Argv: spec.Argv, Env: spec.Env,
		TmpBytes: spec.Limits.TmpBytes, WorkspaceBytes: spec.Limits.WorkspaceBytes}
	if !hold {
		req.Mode = forkMode(spec, srv.Config(), agentDir)
		if parentEnds, childEnds, err = stdioPipes(); err != nil {
			return fail(err)
		}
		req.Stdin, req.Stdout, req.Stderr = childEnds[0], childEnds[1], childEnds[2]
	}
	if cg != nil {
		for _, name := range cg.SelfJoinFiles() {
			f, err := os.OpenFile(name, os.O_WRONLY, 0)
			if err != nil {
				return fail(fmt.Errorf("open %s: %w", name, err))
			}
			childEnds, req.Cgroups = append(childEnds, f), append(req.Cgroups, f)
		}
	}
	req.ServerAgent = agentDir != "" && agentDir == srv.Config().AgentDir
	if agentDir != "" && !req.ServerAgent {
		// Another directory than the server's: a copy of its mount tree,
		// which the sandbox's init attaches (the server sees no host paths).
		fd, err := unix.OpenTree(unix.AT_FDCWD, agentDir, unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC|unix.AT_RECURSIVE)
		if err != nil {
			return fail(fmt.Errorf("open_tree %s: %w", agentDir, err))
		}
		req.AgentTree = os.NewFile(uintptr(fd), agentDir)
		childEnds = append(childEnds, req.AgentTree)
	}
	for _, l := range rlimits(spec.Limits, cg.HasMemory(), cg.HasPids()) {
		req.Rlimits = append(req.Rlimits, forkserver.Rlimit{Resource: l.resource, Value: l.value})
	}
	for _, l := range nsRlimits(spec.Limits) {
		req.NsRlimits = append(req.NsRlimits, forkserver.Rlimit{Resource: l.resource, Value: l.value})
	}
	child, err := srv.Fork(ctx, req)
	if err != nil {
		return fail(err)
	}
	closeFiles(childEnds)
	return &forked{child: child, cg: cg, stdio: parentEnds}, nil
}

// forkedProcess makes the process of a forked sandbox and tracks it.
func (b *Engine) forkedProcess(plan *startPlan, child *forkserver.Child, wait func() error, cg *cgroup.Group, stdio []*os.File) (*process, error) {
	p := &process{outer: child.Monitor, init: child.Init, wait: wait, cg: cg, logger: plan.logger,
		Pipes: engine.NewPipes(stdio[0], stdio[1], stdio[2])}
	p.meter.Watch(cg)
	go p.reap()
	if err := b.track(p); err != nil {
		return nil, err
	}
	return p, nil
}

// resolvedAgentDir is spec's agent directory with symbolic links
// resolved, as the fork server compares and mounts it.
func resolvedAgentDir(spec engine.Spec) (string, error) {
	if spec.AgentDir == "" {
		return "", nil
	}
	dir, err := filepath.EvalSymlinks(spec.AgentDir)
	if err != nil {
		return "", fmt.Errorf("start sandbox %s: agent dir: %w", spec.ID, err)
	}
	return dir, nil
}

// stdioPipes returns sandboxd's and the sandbox's ends of three pipes:
// stdin, stdout, stderr.
func stdioPipes() (ours, theirs []*os.File, err error) {
	for i := range 3 {
		r, w, err := os.Pipe()
		if err != nil {
			closeFiles(ours)
			closeFiles(theirs)
			return nil, nil, err
		}
		if i == 0 { // stdin: the sandbox reads
			r, w = w, r
		}
		ours, theirs = append(ours, r), append(theirs, w)
	}
	return ours, theirs, nil
}

func closeFiles(fs []*os.File) {
	for _, f := range fs {
		_ = f.Close()
	}
}

// forkTrial starts one sandbox from a new server and checks that it ran,
// so that a server that cannot make sandboxes on this host is never used.
func (b *Engine) forkTrial(ctx context.Context, srv *forkserver.Server) error {
	cfg := srv.Config()
	plan, err := b.plan(ctx, engine.Spec{ID: "forkcheck", Argv: []string{cfg.Python, "-I", "-c", "pass"}, Env: cfg.Env})
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	p, err := b.startForked(ctx, srv, plan)
	if err != nil {
		return err
	}
	if out := engine.Collect(ctx, p, ""); out.Err != nil {
		return fmt.Errorf("a trial sandbox from the fork server failed: %w: %s", out.Err, strings.TrimSpace(out.Stderr))
	}
	return nil
}
