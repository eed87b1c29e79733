package session

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/codeexec/codeexec/sandboxd/internal/durable"
	"github.com/codeexec/codeexec/services/logkeys"
)

// Fencing. A replica that has not renewed its lease for a while (see
// durable.Replica) must not run its sessions' code on: once the lease has
// lapsed, another replica may take them over. It pauses their sandboxes
// rather than stopping them, and holds every call for them until it knows
// whether it still holds the session. A store that no replica reaches (a
// database restarting or failing over) lets no replica take a session
// over, so once the store answers again, each session whose record this
// replica can rewrite unchanged, at the revision it last wrote, resumes
// where it was, a call in flight included. The rewrite makes a replica
// that read the record before, and judged this one's lease lapsed, fail
// its own compare-and-swap and look again. A session that another replica
// took meanwhile has its paused sandbox stopped: it lives on there, from
// its checkpoint. A call for a session not yet settled waits for the store
// until its timeout, then fails with ErrPaused.
//
// Sessions the store never recorded (they were made while it was down)
// are left running: no other replica can take them. A sandbox that cannot
// be paused (an engine without a freezer) is stopped, and its session
// dropped, as every session was before pausing existed: its next call
// takes it from the store again.
//
// Pausing runs on a goroutine of each fence, settling on the fence
// worker, and neither on the heartbeat's goroutine, whose next heartbeat
// must not wait for a container runtime; a session's hold and its release
// take turns (Session.holdMu), and a release checks that no fence came
// since its settling began (Manager.fenceGen).

// ErrPaused means that the session is held by a fence: nothing of it is
// lost, and retrying later may succeed, here or on another replica.
var ErrPaused = errors.New("session paused")

// fenceWorker settles the held sessions after a heartbeat the store took.
type fenceWorker struct {
	wake chan struct{}
}

// fenced is the replica's onFenced: every recorded session is held.
func (m *Manager) fenced() { go m.pauseAll() }

// renewed is the replica's onRenewed, after each heartbeat the store took.
func (m *Manager) renewed() {
	if m.isFenced() {
		select {
		case m.fence.wake <- struct{}{}:
		default:
		}
	}
}

func (m *Manager) isFenced() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.fencing
}

// runFenceWorker settles held sessions until ctx ends.
func (m *Manager) runFenceWorker(ctx context.Context) {
	defer m.loops.Done()
	for {
		select {
		case <-ctx.Done():
			return
		case <-m.fence.wake:
		}
		if m.isFenced() && !m.cfg.Durable.Replica.Fenced() {
			m.settleAll(ctx)
		}
	}
}

// pauseAll holds every session the store recorded: calls wait, and live
// sandboxes are paused.
func (m *Manager) pauseAll() {
	m.mu.Lock()
	m.fencing = true
	m.fenceGen++
	all := m.sessionsLocked()
	m.mu.Unlock()
	var wg sync.WaitGroup
	for _, s := range all {
		if s.heldRecord() == nil {
			continue
		}
		wg.Go(func() {
			if err := s.hold(); err != nil {
				s.logger().Warn("could not pause the session's sandbox; stopping it", logkeys.Error, err)
				m.forget(s)
				s.destroy()
			}
		})
	}
	wg.Wait()
}

// settleAll settles every held session; one the store could not answer
// for stays held until the next heartbeat.
func (m *Manager) settleAll(ctx context.Context) {
	m.mu.Lock()
	gen := m.fenceGen
	all := m.sessionsLocked()
	m.mu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, settleTimeout)
	defer cancel()
	var (
		wg         sync.WaitGroup
		left, done atomic.Int32
	)
	for _, s := range all {
		if !s.isHeld() {
			continue
		}
		wg.Go(func() {
			if m.settle(ctx, s, gen) {
				done.Add(1)
			} else {
				left.Add(1)
			}
		})
	}
	wg.Wait()
	m.mu.Lock()
	finished := left.Load() == 0 && m.fenceGen == gen
	if finished {
		m.fencing = false
	}
	m.mu.Unlock()
	if finished {
		m.logger.Info("the session store takes this replica's heartbeats again: its held sessions are settled", "settled", done.Load())
	}
}

// settleTimeout bounds settleAll's writes: less than the lease the
// heartbeat just renewed.
const settleTimeout = 2 * time.Second

// settle resumes s if this replica still holds it, or drops it; false
// leaves it held, to try again.
func (m *Manager) settle(ctx context.Context, s *Session, gen uint64) bool {
	still, err := m.cfg.Durable.Sessions.Reassert(ctx, s.heldRecord())
	switch {
	case err != nil:
		s.logger().Warn("could not tell whether this replica still holds a held session; it stays held", logkeys.Error, err)
		return false
	case !still:
		s.logger().Warn("a held session was taken over by another replica meanwhile, or ended there; stopping its sandbox here")
		s.stopReason("the session was taken over by another sandbox replica while this one could not reach the session store; retry the call, which goes there")
		m.forget(s)
		s.destroy()
		return true
	}
	return s.unhold(gen)
}

// hold marks s held and pauses its sandbox, live or starting. The engine's
// pause runs outside s.mu (a container runtime takes a while), and a
// sandbox that died meanwhile needs none.
func (s *Session) hold() error {
	s.holdMu.Lock()
	defer s.holdMu.Unlock()
	s.mu.Lock()
	if s.heldCh == nil {
		s.heldCh = make(chan struct{})
	}
	sb := cmp.Or(s.sb, s.starting)
	s.mu.Unlock()
	return s.pauseLocked(sb)
}

// pauseIfHeld pauses sb, the session's sandbox just started, when a fence
// holds the session (it may have come while the sandbox started).
func (s *Session) pauseIfHeld(sb *sandbox) error {
	s.holdMu.Lock()
	defer s.holdMu.Unlock()
	s.mu.Lock()
	held := s.heldCh != nil
	s.mu.Unlock()
	if !held {
		return nil
	}
	return s.pauseLocked(sb)
}

// pauseLocked pauses sb unless it is paused already or gone. On holdMu.
func (s *Session) pauseLocked(sb *sandbox) error {
	s.mu.Lock()
	done := sb == nil || !sb.alive() || s.pausedSB == sb
	s.mu.Unlock()
	if done {
		return nil
	}
	if err := sb.proc.Pause(); err != nil {
		if !sb.alive() {
			return nil
		}
		return err
	}
	s.mu.Lock()
	s.pausedSB = sb
	s.mu.Unlock()
	return nil
}

// unhold, unless a fence came since gen or the lease is stale again,
// resumes the paused sandbox and lets the waiting calls go on.
func (s *Session) unhold(gen uint64) bool {
	s.holdMu.Lock()
	defer s.holdMu.Unlock()
	s.m.mu.Lock()
	fencedSince := s.m.fenceGen != gen
	s.m.mu.Unlock()
	if fencedSince || s.m.cfg.Durable.Replica.Fenced() {
		// Running now could overlap another replica's takeover; the
		// next heartbeat the store takes settles it again.
		return false
	}
	s.mu.Lock()
	sb := s.pausedSB
	s.mu.Unlock()
	if sb != nil && sb.alive() {
		if err := sb.proc.Resume(); err != nil {
			s.logger().Warn("could not resume the session's sandbox; stopping it", logkeys.Error, err)
			s.lost("its sandbox could not be resumed after the session store came back", true)
			s.stopSandbox()
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.releaseHoldLocked()
	return true
}

// pausedNow reports whether sb is the session's sandbox that a fence
// paused.
func (s *Session) pausedNow(sb *sandbox) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.pausedSB == sb
}

// releaseHoldLocked ends the hold of s: the waiting calls go on (and
// find it settled, or gone). On s.mu.
func (s *Session) releaseHoldLocked() {
	s.pausedSB = nil
	if s.heldCh != nil {
		close(s.heldCh)
		s.heldCh = nil
	}
}

func (s *Session) isHeld() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.heldCh != nil
}

// stopReason tells a call in flight why its sandbox is about to stop.
func (s *Session) stopReason(why string) {
	s.mu.Lock()
	sb := s.sb
	s.mu.Unlock()
	if sb != nil {
		sb.setStopReason(why)
	}
}

// heldRecord is the session's record as this replica took it (nil for a
// session the store never recorded).
func (s *Session) heldRecord() *durable.Held {
	s.dmu.Lock()
	defer s.dmu.Unlock()
	return s.d.held
}

// waitSettled waits, until deadline, for a held session to be settled.
func (s *Session) waitSettled(ctx context.Context, deadline time.Time) error {
	s.mu.Lock()
	ch := s.heldCh
	s.mu.Unlock()
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
			ErrPaused, s.m.cfg.Durable.Replica.SinceRenewed().Round(time.Second))
	}
}

// sessionsLocked lists the sessions. On m.mu.
func (m *Manager) sessionsLocked() []*Session {
	all := make([]*Session, 0, len(m.sessions))
	for _, s := range m.sessions {
		all = append(all, s)
	}
	return all
}
