package session

import (
	"context"
	"time"

	"github.com/codeexec/codeexec/sandboxd/internal/channel"
	"github.com/codeexec/codeexec/services/logkeys"
)

// savedTools is a fetch of the tenant's saved tools, started as an exec
// that will be its session's first in a sandbox begins: it runs while the
// servers are resolved and a sandbox is readied, and the exec frame
// carries its result, which spares the agent a tool.list round trip
// through sandboxd to memoryd before the code can start.
type savedTools struct {
	done   chan struct{}
	cancel context.CancelFunc
	// execs is the session's count of finished execs when the fetch
	// started: an exec that ran since (this one waited its turn behind
	// it) may have saved or deleted tools, so the list is stale.
	execs uint64
	tools []channel.SavedTool
	err   error
	// waited and got are the outcome of the first wait, which a later
	// one returns (a restore and then the exec it precedes both send the
	// tools): no second wait for a fetch that did not answer.
	waited bool
	got    []channel.SavedTool
}

// fetchSavedTools starts the fetch when the session's next exec will be
// the first in its sandbox; otherwise it returns nil. The caller stops it
// once the exec is sent or has failed.
func (m *Manager) fetchSavedTools(ctx context.Context, s *Session) *savedTools {
	if !s.firstExecAhead() {
		return nil
	}
	ctx, cancel := context.WithCancel(ctx)
	f := &savedTools{done: make(chan struct{}), cancel: cancel, execs: s.Info().ExecCount}
	go func() {
		defer close(f.done)
		f.tools, f.err = m.cfg.Broker.SavedTools(ctx, s.tenant)
	}()
	return f
}

// stop cancels the fetch if it is still under way (its result is no
// longer wanted).
func (f *savedTools) stop() {
	if f != nil {
		f.cancel()
	}
}

// savedToolsWait bounds how long an exec waits for its fetch once the
// sandbox is ready. A memoryd slower than that is asked again by the
// agent, inside the exec, where the exec's own timeout bounds the wait as
// it always has.
const savedToolsWait = 2 * time.Second

// wait returns the fetched tools for s's first exec in a sandbox, or nil
// when the fetch failed, did not end within savedToolsWait, ctx ended
// first or another exec of s has run since the fetch began: the agent
// then asks for them itself, and the code sees a failure where it used
// to, in `import user_tools`. It is called from the exec's goroutine only.
func (f *savedTools) wait(ctx context.Context, s *Session) []channel.SavedTool {
	if f == nil {
		return nil
	}
	if !f.waited {
		f.waited = true
		f.got = f.await(ctx, s)
	}
	return f.got
}

func (f *savedTools) await(ctx context.Context, s *Session) []channel.SavedTool {
	if s.Info().ExecCount != f.execs {
		return nil
	}
	logger := s.logger()
	timer := time.NewTimer(savedToolsWait)
	defer timer.Stop()
	select {
	case <-f.done:
	case <-timer.C:
		logger.WarnContext(ctx, "memoryd did not return the saved tools in time for a first exec; the sandbox will ask for them", logkeys.Duration, savedToolsWait)
		return nil
	case <-ctx.Done():
		return nil
	}
	if f.err != nil {
		logger.DebugContext(ctx, "could not fetch the saved tools for a first exec; the sandbox will ask for them", logkeys.Error, f.err)
		return nil
	}
	return f.tools
}

// firstExecAhead reports whether the session's next exec will be the
// first in its sandbox: it has no live sandbox, or one that none of its
// execs has reached yet (a restore precedes the first exec).
func (s *Session) firstExecAhead() bool {
	s.mu.Lock()
	sb := s.sb
	s.mu.Unlock()
	if sb == nil || !sb.Alive() {
		return true
	}
	return !sb.SessionStarted()
}
