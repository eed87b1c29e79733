package bwrap

import (
	"context"
	"sync"
	"time"

	"github.com/codeexec/codeexec/sandboxd/internal/engine"
	"github.com/codeexec/codeexec/sandboxd/internal/engine/forkserver"
)

// forkSpareDelay is how long after a start the filling of fork spares
// waits, so that making the next sandbox does not compete for the CPU with
// the start of the one just taken.
const forkSpareDelay = 50 * time.Millisecond

// A forkSpare is a sandbox the fork server set up ahead of demand, as
// Config.Spares launchers are for bwrap: its monitor is inside its
// cgroups and limits, its init has made its namespaces and root and has
// forked the sandbox's own process, which waits until Release gives it a
// command and stdio. Taking one skips everything but the last steps.
type forkSpare struct {
	f *forked

	exited chan struct{} // closed once the monitor has exited; err is set
	err    error

	mu    sync.Mutex
	taken bool // released as a sandbox, or being discarded
}

// forkSpareKey is what a spare was made for: a spare serves only a start
// from the same server, with the same limits and agent directory.
type forkSpareKey struct {
	srv      *forkserver.Server
	limits   engine.Limits
	agentDir string
}

// forkSpareFor returns the key spec's spare would have, and false when
// spec cannot be started from a spare (its agent directory is not the
// server's: that one travels as a mount tree at each start).
func forkSpareFor(srv *forkserver.Server, spec engine.Spec) (forkSpareKey, bool) {
	dir, err := resolvedAgentDir(spec)
	if err != nil || dir != "" && dir != srv.Config().AgentDir {
		return forkSpareKey{}, false
	}
	return forkSpareKey{srv: srv, limits: spec.Limits, agentDir: dir}, true
}

// startForkSpare starts plan's sandbox from a spare, or returns nil when
// there is none for it or it cannot be used.
func (b *Engine) startForkSpare(ctx context.Context, srv *forkserver.Server, plan *startPlan) *process {
	key, ok := forkSpareFor(srv, plan.spec)
	if !ok {
		return nil
	}
	sp, ok := b.forkSpares.Take(key, (*forkSpare).claim)
	if !ok {
		return nil
	}
	if err := sp.f.cg.Rename(plan.spec.ID); err != nil {
		plan.logger.Debug("spare sandbox cgroup keeps its name", "error", err)
	}
	ours, theirs, err := stdioPipes()
	if err == nil {
		err = srv.Release(ctx, sp.f.child, &forkserver.Request{
			Mode: forkMode(plan.spec, srv.Config(), key.agentDir), Argv: plan.spec.Argv, Env: plan.spec.Env,
			Stdin: theirs[0], Stdout: theirs[1], Stderr: theirs[2],
		})
		closeFiles(theirs)
	}
	if err != nil {
		plan.logger.Debug("spare sandbox unusable; forking afresh", "error", err)
		closeFiles(ours)
		sp.discard()
		return nil
	}
	p, err := b.forkedProcess(plan, sp.f.child, sp.wait, sp.f.cg, ours)
	if err != nil {
		return nil
	}
	return p
}

// wait waits for the spare's monitor, which its reaper goroutine waits for.
func (sp *forkSpare) wait() error {
	<-sp.exited
	return sp.err
}

// discard kills an unused spare and removes its cgroup once it is gone.
func (sp *forkSpare) discard() {
	sp.mu.Lock()
	sp.taken = true
	sp.mu.Unlock()
	killInit(sp.f.child.Init, sp.f.child.Monitor)
	<-sp.exited
	_ = sp.f.child.Init.Close()
	_ = sp.f.cg.Remove()
}

// claim marks the spare taken and reports whether it was free: false
// when a start, its reaper or a discard has it already.
func (sp *forkSpare) claim() bool {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	free := !sp.taken
	sp.taken = true
	return free
}

// refillForkSpares makes plan's the spares to keep (discarding others)
// and starts filling them unless that runs already.
func (b *Engine) refillForkSpares(srv *forkserver.Server, plan *startPlan) {
	key, ok := forkSpareFor(srv, plan.spec)
	if !ok || b.cfg.Spares == 0 {
		return
	}
	b.forkSpares.Refill(key, func() (*forkSpare, error) { return b.makeForkSpare(key, plan) })
}

// makeForkSpare asks key's server for a spare and reaps it whenever it
// exits; one that exits unused takes its cgroup with it.
func (b *Engine) makeForkSpare(key forkSpareKey, plan *startPlan) (*forkSpare, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	held := *plan
	held.spec.ID = "forkspare" // not "spare", the launchers' name
	f, err := b.fork(ctx, key.srv, &held, true)
	if err != nil {
		return nil, err
	}
	sp := &forkSpare{f: f, exited: make(chan struct{})}
	go func() {
		sp.err = waitProcess(f.child.Monitor)()
		close(sp.exited)
		if sp.claim() { // unused: the server that held it went away
			b.forkSpares.Remove(sp)
			_ = f.child.Init.Close()
			_ = f.cg.Remove()
		}
	}()
	return sp, nil
}

// discardForkSpares discards every spare (Close).
func discardForkSpares(spares []*forkSpare) {
	var wg sync.WaitGroup
	for _, sp := range spares {
		wg.Add(1)
		go func() { defer wg.Done(); sp.discard() }()
	}
	wg.Wait()
}
