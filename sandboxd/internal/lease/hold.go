package lease

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// ErrPaused means that the session is held by a fence: nothing of it is
// lost, and retrying later may succeed, here or on another replica.
var ErrPaused = errors.New("session paused")

// hold marks l held and pauses its session's sandbox, live or starting.
// The engine's pause runs outside every lock but holdMu (a container
// runtime takes a while), and a sandbox that died meanwhile needs none.
func (l *Lease) hold() error {
	l.holdMu.Lock()
	defer l.holdMu.Unlock()
	l.hmu.Lock()
	if l.held == nil {
		l.held = make(chan struct{})
	}
	l.hmu.Unlock()
	return l.pauseLocked(l.owner.Sandbox())
}

// PauseIfHeld pauses sb, the session's sandbox just started, when a fence
// holds the session (it may have come while the sandbox started).
func (l *Lease) PauseIfHeld(sb Pausable) error {
	if l == nil {
		return nil
	}
	l.holdMu.Lock()
	defer l.holdMu.Unlock()
	if !l.Held() {
		return nil
	}
	return l.pauseLocked(sb)
}

// pauseLocked pauses sb unless it is paused already or gone. On holdMu.
func (l *Lease) pauseLocked(sb Pausable) error {
	l.hmu.Lock()
	done := sb == nil || !sb.Alive() || l.paused == sb
	l.hmu.Unlock()
	if done {
		return nil
	}
	if err := sb.Pause(); err != nil {
		if !sb.Alive() {
			return nil
		}
		return err
	}
	l.hmu.Lock()
	l.paused = sb
	l.hmu.Unlock()
	return nil
}

// Paused reports whether sb is the session's sandbox that a fence
// paused.
func (l *Lease) Paused(sb Pausable) bool {
	if l == nil {
		return false
	}
	l.hmu.Lock()
	defer l.hmu.Unlock()
	return l.paused == sb
}

// Stopped notes that sb, the session's sandbox, is being stopped: it is
// no longer paused. The hold stays, as the session is not settled.
func (l *Lease) Stopped(sb Pausable) {
	if l == nil {
		return
	}
	l.hmu.Lock()
	defer l.hmu.Unlock()
	if l.paused == sb {
		l.paused = nil
	}
}

// EndHold ends the hold of l: the waiting calls go on (and find the
// session settled, or gone).
func (l *Lease) EndHold() {
	if l == nil {
		return
	}
	l.hmu.Lock()
	defer l.hmu.Unlock()
	l.paused = nil
	if l.held != nil {
		close(l.held)
		l.held = nil
	}
}

// Held reports whether a fence holds the session. A nil lease (a session
// the store does not hold) is never held.
func (l *Lease) Held() bool {
	if l == nil {
		return false
	}
	l.hmu.Lock()
	defer l.hmu.Unlock()
	return l.held != nil
}

// WaitSettled waits, until deadline, for a held session to be settled.
func (l *Lease) WaitSettled(ctx context.Context, deadline time.Time) error {
	if l == nil {
		return nil
	}
	l.hmu.Lock()
	ch := l.held
	l.hmu.Unlock()
	if ch == nil {
		return nil
	}
	t := time.NewTimer(time.Until(deadline))
	defer t.Stop()
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("waiting for the session store: %w", ctx.Err())
	case <-t.C:
		return fmt.Errorf("%w: this sandbox replica has not reached the session store for %s, so the session is held, its sandbox paused with its state kept, "+
			"until the store answers or another replica takes the session over; retry the call",
			ErrPaused, l.store.replica.SinceRenewed().Round(time.Second))
	}
}
