package session

import (
	"context"
	"log/slog"
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
	done  chan struct{}
	tools []channel.SavedTool
	err   error
}

// fetchSavedTools starts the fetch when the session's next exec will be
// the first in its sandbox; otherwise it returns nil.
func (m *Manager) fetchSavedTools(ctx context.Context, s *Session) *savedTools {
	if !s.firstExecAhead() {
		return nil
	}
	f := &savedTools{done: make(chan struct{})}
	go func() {
		defer close(f.done)
		f.tools, f.err = m.cfg.Broker.SavedTools(ctx, s.tenant)
	}()
	return f
}

// savedToolsWait bounds how long an exec waits for its fetch once the
// sandbox is ready. A memoryd slower than that is asked again by the
// agent, inside the exec, where the exec's own timeout bounds the wait as
// it always has.
const savedToolsWait = 2 * time.Second

// wait returns the fetched tools, or nil when the fetch failed, did not
// end within savedToolsWait or ctx ended first: the agent then asks for
// them itself, and the code sees a failure where it used to, in
// `import user_tools`.
func (f *savedTools) wait(ctx context.Context, logger *slog.Logger) []channel.SavedTool {
	if f == nil {
		return nil
	}
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
	if sb == nil || !sb.alive() {
		return true
	}
	sb.mu.Lock()
	defer sb.mu.Unlock()
	return !sb.sessionStarted
}
