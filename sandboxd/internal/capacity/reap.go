package capacity

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/codeexec/codeexec/sandboxd/internal/metrics"
	"github.com/codeexec/codeexec/services/logkeys"
	"github.com/codeexec/codeexec/services/tick"
)

// Reaper stops the sandboxes of sessions idle for longer than Idle: a
// session the store keeps stays, as a record and its checkpoint; any
// other is ended.
type Reaper struct {
	// Idle is how long a session may go unused.
	Idle time.Duration
	// Durable says whether a store keeps the sessions.
	Durable bool
	// Sessions lists the live sessions.
	Sessions func() []Session
	Metrics  *metrics.Metrics
	Logger   *slog.Logger
}

// Run reaps four times per Idle, and no more often than every 100ms,
// until ctx ends.
func (r *Reaper) Run(ctx context.Context) {
	tick.Every(ctx.Done(), max(r.Idle/4, 100*time.Millisecond), func() { r.reap(ctx) })
}

// reap stops the sandboxes of the sessions idle for longer than Idle.
func (r *Reaper) reap(ctx context.Context) {
	cutoff := time.Now().Add(-r.Idle)
	for _, s := range r.Sessions() {
		u := s.Usage()
		// A held session waits for the store (lease.Fence): stopping its
		// sandbox would lose what its checkpoint lacks.
		if u.Running || u.Held || !u.LastUsed.Before(cutoff) {
			continue
		}
		idleFor := time.Since(u.LastUsed).Round(time.Second)
		if !r.Durable {
			r.Logger.Info("reaping idle session", logkeys.SessionID, s.ID(), "idle_for", idleFor)
			s.Drop("")
			r.Metrics.Reaped()
			continue
		}
		// The session stays, as a record: only its sandbox goes.
		if s.Evict(ctx, fmt.Sprintf("the sandbox was stopped after being idle for %s", idleFor)) {
			r.Logger.Info("stopping an idle session's sandbox; its checkpoint is kept", logkeys.SessionID, s.ID(), "idle_for", idleFor)
			r.Metrics.Reaped()
		}
	}
}
