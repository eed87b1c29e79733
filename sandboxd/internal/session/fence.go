package session

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/codeexec/codeexec/sandboxd/internal/durable"
	"github.com/codeexec/codeexec/services/logkeys"
)

// Fencing. A replica that has not renewed its lease for a while (see
// durable.Replica) must not run its sessions' code on: once the lease has
// lapsed, another replica may take them over. It pauses their sandboxes
// rather than stopping them. A store that no replica reaches (a database
// restarting or failing over) lets no replica take a session over, so when
// it answers again, each session whose record still names this replica at
// the epoch it took it resumes where it was, a call in flight included. A
// session that another replica took meanwhile has its paused sandbox
// stopped: it lives on there, from its checkpoint. A call for a paused
// session waits for the store until its timeout, then fails with
// ErrPaused, the session still paused.
//
// Sessions with no live sandbox, and sandboxes that cannot be paused (an
// engine without a freezer), are dropped as before: their next call takes
// the session from the store again.

// ErrPaused means that the session's sandbox is paused by a fence: nothing
// of it is lost, and retrying later may succeed, here or on another
// replica.
var ErrPaused = errors.New("session paused")

// fence pauses every live sandbox of a session. It runs on the heartbeat's
// goroutine, after renewed has returned, so the two never overlap.
func (m *Manager) fence() {
	m.fenceMu.Lock()
	defer m.fenceMu.Unlock()
	m.mu.Lock()
	m.fenced = true
	all := make([]*Session, 0, len(m.sessions))
	for _, s := range m.sessions {
		all = append(all, s)
	}
	m.mu.Unlock()
	var wg sync.WaitGroup
	for _, s := range all {
		wg.Go(func() {
			if err := s.pause(); err != nil {
				if !errors.Is(err, errNoSandbox) {
					s.logger().Warn("could not pause the session's sandbox; stopping it", logkeys.Error, err)
				}
				m.forget(s)
				s.destroy()
			}
		})
	}
	wg.Wait()
	m.logger.Error("the session store has not taken this replica's heartbeat for too long: its sandboxes are paused until it does, or another replica takes their sessions over",
		"paused", m.pausedCount())
}

// renewed runs after each heartbeat the store took. After a fence it
// resumes the paused sandboxes whose sessions this replica still holds and
// stops the others; a session the store could not tell about stays paused
// until the next heartbeat.
func (m *Manager) renewed() {
	m.mu.Lock()
	fenced := m.fenced
	m.mu.Unlock()
	if !fenced {
		return
	}
	m.fenceMu.Lock()
	defer m.fenceMu.Unlock()
	var paused []*Session
	m.mu.Lock()
	for _, s := range m.sessions {
		if s.isPaused() {
			paused = append(paused, s)
		}
	}
	m.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), resumeCheckTimeout)
	defer cancel()
	var (
		wg   sync.WaitGroup
		left sync.Map
	)
	for _, s := range paused {
		wg.Go(func() {
			held := s.heldRecord()
			still, err := m.cfg.Durable.Sessions.StillHeld(ctx, held)
			switch {
			case err != nil:
				left.Store(s, true)
				s.logger().Warn("could not tell whether this replica still holds a paused session; it stays paused", logkeys.Error, err)
			case !still:
				s.logger().Warn("a paused session was taken over by another replica meanwhile, or ended there; stopping its sandbox here")
				m.forget(s)
				s.destroy()
			case m.cfg.Durable.Replica.Fenced():
				// The lease went stale again while checking: resuming
				// now could overlap another replica's takeover.
				left.Store(s, true)
			default:
				if err := s.resume(); err != nil {
					s.logger().Warn("could not resume the session's sandbox; stopping it", logkeys.Error, err)
					s.lost("its sandbox could not be resumed after the session store came back", true)
					s.stopSandbox()
				}
			}
		})
	}
	wg.Wait()
	n := 0
	left.Range(func(any, any) bool { n++; return true })
	if n == 0 {
		m.mu.Lock()
		m.fenced = false
		m.mu.Unlock()
		m.logger.Info("the session store takes this replica's heartbeats again: its paused sandboxes run on", "resumed", len(paused))
	}
}

// resumeCheckTimeout bounds renewed's reads of the session records: less
// than the lease the heartbeat just renewed.
const resumeCheckTimeout = 2 * time.Second

// errNoSandbox is pause's answer for a session without a live sandbox.
var errNoSandbox = errors.New("no live sandbox")

// pause pauses the session's live sandbox.
func (s *Session) pause() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.paused != nil {
		return nil
	}
	if s.sb == nil || !s.sb.alive() {
		return errNoSandbox
	}
	if err := s.sb.proc.Pause(); err != nil {
		return err
	}
	s.paused, s.pausedAt = make(chan struct{}), time.Now()
	return nil
}

// resume lets the paused sandbox run on, and the calls waiting for it.
func (s *Session) resume() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.paused == nil {
		return nil
	}
	var err error
	if s.sb != nil {
		err = s.sb.proc.Resume()
	}
	close(s.paused)
	s.paused = nil
	return err
}

// unpausedLocked ends the pause of a session whose sandbox is going away: the
// calls waiting for it go on, and find it gone. On s.mu.
func (s *Session) unpausedLocked() {
	if s.paused != nil {
		close(s.paused)
		s.paused = nil
	}
}

func (s *Session) isPaused() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.paused != nil
}

// heldRecord is the session's record as this replica took it.
func (s *Session) heldRecord() *durable.Held {
	s.dmu.Lock()
	defer s.dmu.Unlock()
	return s.d.held
}

// waitUnpaused waits, until deadline, for a paused session's sandbox to be
// resumed (or stopped). A paused sandbox that died (a call in flight ran
// out of time) leaves a session with no live sandbox, which a fence drops:
// the caller then finds s is not current, and takes the session from the
// store again.
func (s *Session) waitUnpaused(ctx context.Context, deadline time.Time) error {
	s.mu.Lock()
	ch, since, sb := s.paused, s.pausedAt, s.sb
	s.mu.Unlock()
	if ch == nil {
		return nil
	}
	if sb == nil || !sb.alive() {
		s.m.forget(s)
		s.destroy()
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
		return fmt.Errorf("%w: this sandbox replica has not reached the session store for %s, so the session's sandbox is paused until it does "+
			"(its state is kept) or another replica takes the session over; retry the call",
			ErrPaused, time.Since(since).Round(time.Second))
	}
}

// pausedCount is how many sessions have a paused sandbox.
func (m *Manager) pausedCount() int {
	m.mu.Lock()
	all := make([]*Session, 0, len(m.sessions))
	for _, s := range m.sessions {
		all = append(all, s)
	}
	m.mu.Unlock()
	n := 0
	for _, s := range all {
		if s.isPaused() {
			n++
		}
	}
	return n
}
