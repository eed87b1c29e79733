package bwrap

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
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

// agentEntry is the agent's command line after the interpreter, inside a
// sandbox (sandboxd's Argv).
var agentEntry = filepath.Join(engine.AgentMount, agent.Entry)

// forkServer returns the running fork server, starting its supervision
// on the first call that names an interpreter. The server is made for
// the interpreter and agent Prepare was given (else spec's interpreter)
// and for spec's environment: sandboxd's sandboxes all share both.
func (b *Engine) forkServer(ctx context.Context, spec engine.Spec) (*forkserver.Server, error) {
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
				Passwd: passwdData, Group: groupData, Logger: b.logger,
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
	spec := plan.spec
	agentDir := ""
	if spec.AgentDir != "" {
		var err error
		if agentDir, err = filepath.EvalSymlinks(spec.AgentDir); err != nil {
			return nil, fmt.Errorf("start sandbox %s: agent dir: %w", spec.ID, err)
		}
	}
	var cg *cgroup.Group
	if b.cgroups != nil {
		var err error
		if cg, err = b.cgroups.Create(spec.ID, spec.Limits); err != nil {
			return nil, fmt.Errorf("start sandbox %s: %w", spec.ID, err)
		}
	}
	var parentEnds, childEnds []*os.File
	closeAll := func(fs []*os.File) {
		for _, f := range fs {
			_ = f.Close()
		}
	}
	fail := func(err error) (*process, error) {
		closeAll(parentEnds)
		closeAll(childEnds)
		_ = cg.Remove()
		return nil, fmt.Errorf("start sandbox %s: %w", spec.ID, err)
	}
	for i := range 3 {
		r, w, err := os.Pipe()
		if err != nil {
			return fail(err)
		}
		if i == 0 { // stdin: the sandbox reads
			parentEnds, childEnds = append(parentEnds, w), append(childEnds, r)
		} else {
			parentEnds, childEnds = append(parentEnds, r), append(childEnds, w)
		}
	}
	var joins []*os.File
	var tree *os.File
	if cg != nil {
		for _, name := range cg.SelfJoinFiles() {
			f, err := os.OpenFile(name, os.O_WRONLY, 0)
			if err != nil {
				return fail(fmt.Errorf("open %s: %w", name, err))
			}
			childEnds, joins = append(childEnds, f), append(joins, f)
		}
	}
	serverAgent := agentDir != "" && agentDir == srv.Config().AgentDir
	if agentDir != "" && !serverAgent {
		// Another directory than the server's: a copy of its mount tree,
		// which the sandbox's init attaches (the server sees no host paths).
		fd, err := unix.OpenTree(unix.AT_FDCWD, agentDir, unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC|unix.AT_RECURSIVE)
		if err != nil {
			return fail(fmt.Errorf("open_tree %s: %w", agentDir, err))
		}
		tree = os.NewFile(uintptr(fd), agentDir)
		childEnds = append(childEnds, tree)
	}
	var limits []forkserver.Rlimit
	for _, l := range rlimits(spec.Limits, cg.HasMemory(), cg.HasPids()) {
		limits = append(limits, forkserver.Rlimit{Resource: l.resource, Value: l.value})
	}
	outer, err := srv.Fork(ctx, &forkserver.Request{
		Mode: forkMode(spec, srv.Config(), agentDir), Argv: spec.Argv, Env: spec.Env, ServerAgent: serverAgent, AgentTree: tree,
		TmpBytes: spec.Limits.TmpBytes, WorkspaceBytes: spec.Limits.WorkspaceBytes, Rlimits: limits,
		Stdin: childEnds[0], Stdout: childEnds[1], Stderr: childEnds[2], Cgroups: joins,
	})
	if err != nil {
		return fail(err)
	}
	closeAll(childEnds)
	p := &process{outer: outer, wait: waitProcess(outer), cg: cg, logger: plan.logger,
		Pipes: engine.NewPipes(parentEnds[0], parentEnds[1], parentEnds[2])}
	p.meter.Watch(cg)
	go p.reap()
	if err := b.track(p); err != nil {
		return nil, err
	}
	return p, nil
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
	if stderr, err := runTrial(ctx, p); err != nil {
		return fmt.Errorf("a trial sandbox from the fork server failed: %w: %s", err, strings.TrimSpace(stderr))
	}
	return nil
}
