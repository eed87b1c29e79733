package session

import (
	"context"
	"fmt"
	"time"

	"github.com/codeexec/codeexec/services/logkeys"
	"github.com/codeexec/codeexec/services/tick"
)

// expire asks the store to forget expired sessions, now and then.
func (m *Manager) expire(ctx context.Context) {
	defer m.loops.Done()
	tick.Every(ctx.Done(), expireEvery, func() {
		if n, err := m.cfg.Durable.Sessions.Expire(ctx); err != nil {
			m.logger.Warn("could not sweep expired sessions", logkeys.Error, err)
		} else if n > 0 {
			m.logger.Info("expired sessions forgotten", "sessions", n)
		}
	})
}

// reap runs reapIdle four times per IdleTimeout, and no more often than
// every 100ms.
func (m *Manager) reap(ctx context.Context) {
	defer m.loops.Done()
	tick.Every(ctx.Done(), max(m.cfg.IdleTimeout/4, 100*time.Millisecond), func() { m.reapIdle(ctx) })
}

// reapIdle stops the sandboxes of sessions idle for longer than
// IdleTimeout: a durable session keeps its record and checkpoint, any
// other is destroyed.
func (m *Manager) reapIdle(ctx context.Context) {
	cutoff := time.Now().Add(-m.cfg.IdleTimeout)
	m.mu.Lock()
	var idle []*Session
	for id, s := range m.sessions {
		s.mu.Lock()
		// A held session waits for the store (fence.go): stopping its
		// sandbox would lose what its checkpoint lacks.
		if !s.busy && s.heldCh == nil && s.lastUsed.Before(cutoff) {
			idle = append(idle, s)
			if m.cfg.Durable == nil {
				delete(m.sessions, id)
			}
		}
		s.mu.Unlock()
	}
	m.mu.Unlock()
	for _, s := range idle {
		idleFor := time.Since(s.Info().LastUsed).Round(time.Second)
		if m.cfg.Durable != nil {
			// The session stays, as a record: only its sandbox goes.
			if s.tryAcquire() {
				if s.isHeld() { // a fence came meanwhile
					s.release()
					continue
				}
				m.logger.Info("stopping an idle session's sandbox; its checkpoint is kept", logkeys.SessionID, s.id, "idle_for", idleFor)
				m.release(ctx, s, fmt.Sprintf("the sandbox was stopped after being idle for %s", idleFor))
				s.release()
				m.metrics.reaped()
			}
			continue
		}
		m.logger.Info("reaping idle session", logkeys.SessionID, s.id, "idle_for", idleFor)
		s.destroy()
		m.metrics.reaped()
	}
}
