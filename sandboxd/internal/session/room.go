package session

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/codeexec/codeexec/services/logkeys"
)

// With Durable and MaxSessions, at most MaxSessions sandboxes belong to
// sessions at once (the pool and its spares come on top). Each takes a
// place: reserved by makeRoom before the sandbox starts, held until its
// process is reaped, so that two sessions starting at once never both take
// the last place, nor one whose sandbox is still dying. When every place
// is taken, the sandbox idle longest is checkpointed and stopped.

// room is the manager's count of places, on Manager.mu.
type room struct {
	// places are reserved or held by a sandbox not yet reaped; dying are
	// those of them held by a sandbox told to stop: free in a moment.
	places, dying int
	// wake is closed, and replaced, whenever room may have been made: a
	// place freed, or a session's turn given back (its sandbox may now be
	// stopped). waited says someone holds the current wake.
	wake   chan struct{}
	waited bool
}

// placeWait bounds how long makeRoom waits for room to change (a place
// freed, a call ended), when every sandbox is running a call or is
// starting or stopping.
const placeWait = 2 * time.Second

// roomChanged wakes every makeRoom waiting for room. Without a cap on
// places nobody waits, and every call's end is spared the lock.
func (m *Manager) roomChanged() {
	if m.cfg.Durable == nil || m.cfg.MaxSessions <= 0 {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.roomChangedLocked()
}

func (m *Manager) roomChangedLocked() {
	if m.room.waited {
		close(m.room.wake)
		m.room.wake, m.room.waited = make(chan struct{}), false
	}
}

// makeRoom, for asker, a durable session about to start a sandbox, makes
// sure that no more than MaxSessions sandboxes belong to sessions. On
// success a place is reserved for asker's sandbox: pass the sandbox to
// place (which then holds the place until the sandbox's process is
// reaped), or nil to give the place back. Without Durable there is nothing
// to make room with: Create refused the session already.
func (m *Manager) makeRoom(ctx context.Context, asker *Session) (place func(sb *sandbox), err error) {
	if m.cfg.Durable == nil || m.cfg.MaxSessions <= 0 {
		return func(*sandbox) {}, nil
	}
	deadline := time.NewTimer(placeWait)
	defer deadline.Stop()
	// skip holds the sessions found with their turn taken since room last
	// changed: giving the turn back wakes this loop, to look again.
	skip := map[*Session]bool{}
	for {
		m.mu.Lock()
		if m.room.places < m.cfg.MaxSessions {
			m.room.places++
			m.mu.Unlock()
			var once sync.Once
			return func(sb *sandbox) { once.Do(func() { m.holdPlace(sb) }) }, nil
		}
		wake := m.room.wake
		m.room.waited = true
		var all []*Session
		// A place whose sandbox was told to stop is free once it is
		// reaped: wait for it rather than stop another sandbox, and
		// within the caller's time only, not placeWait: it is sure to
		// come, however long a loaded machine takes to reap the sandbox.
		reaping := m.room.places-m.room.dying < m.cfg.MaxSessions
		if !reaping {
			all = make([]*Session, 0, len(m.sessions))
			for _, s := range m.sessions {
				all = append(all, s)
			}
		}
		m.mu.Unlock()
		victim, busy := idleLongest(all, asker, skip)
		if victim == nil {
			expired := deadline.C
			if reaping {
				expired = nil
			}
			select {
			case <-wake:
				// Room changed: wait placeWait again from now, within
				// the caller's time (StartTimeout).
				clear(skip)
				deadline.Reset(placeWait)
				continue
			case <-expired:
				if busy > 0 {
					return nil, fmt.Errorf("%w: all %d sandboxes are running calls (raise CODEEXEC_MAX_SESSIONS, or retry when one finishes)", ErrExhausted, m.cfg.MaxSessions)
				}
				return nil, fmt.Errorf("%w: all %d sandboxes are starting or stopping (raise CODEEXEC_MAX_SESSIONS, or retry)", ErrExhausted, m.cfg.MaxSessions)
			case <-ctx.Done():
				return nil, fmt.Errorf("%w: all %d sandboxes are taken: %w", ErrExhausted, m.cfg.MaxSessions, ctx.Err())
			}
		}
		if !victim.tryAcquire() {
			skip[victim] = true // a call is about to run on it
			continue
		}
		if victim.isHeld() { // a fence came meanwhile: it waits for the store
			victim.release()
			skip[victim] = true
			continue
		}
		m.logger.InfoContext(ctx, "stopping the sandbox idle longest to make room; its checkpoint is kept", logkeys.SessionID, victim.id)
		// This returns once the sandbox is reaped: its place is free.
		m.release(ctx, victim, "its sandbox was stopped to make room for other sessions")
		victim.release()
		m.metrics.reaped()
	}
}

// idleLongest picks, of all but asker and skip, the durable session with a
// live sandbox and no call running that was used longest ago; busy counts
// the sessions running a call. A session the store could not record has
// no checkpoint to come back from: it keeps its sandbox (until it is idle
// for IdleTimeout).
func idleLongest(all []*Session, asker *Session, skip map[*Session]bool) (victim *Session, busy int) {
	var victimUsed time.Time
	for _, s := range all {
		s.mu.Lock()
		// A session held by a fence is not stopped: it waits for the
		// store, and its checkpoint may lack what its sandbox holds.
		live, running, used := s.sb != nil && s.sb.alive() && s.heldCh == nil, s.busy, s.lastUsed
		s.mu.Unlock()
		if live && running {
			busy++
		}
		if live && !running && s != asker && !skip[s] && s.isDurable() && (victim == nil || used.Before(victimUsed)) {
			victim, victimUsed = s, used
		}
	}
	return victim, busy
}

// holdPlace makes sb hold a place makeRoom reserved until its process is
// reaped; a nil sb gives the place back.
func (m *Manager) holdPlace(sb *sandbox) {
	if sb == nil {
		m.mu.Lock()
		defer m.mu.Unlock()
		m.room.places--
		m.roomChangedLocked()
		return
	}
	var dying, reaped bool // on m.mu
	sb.onStop(func() {
		m.mu.Lock()
		defer m.mu.Unlock()
		if !dying && !reaped {
			dying = true
			m.room.dying++
		}
	}, func() {
		m.mu.Lock()
		defer m.mu.Unlock()
		reaped = true
		m.room.places--
		if dying {
			m.room.dying--
		}
		m.roomChangedLocked()
	})
}
