package session

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"sync"
	"time"

	"github.com/codeexec/codeexec/sandboxd/internal/capacity"
	"github.com/codeexec/codeexec/sandboxd/internal/lease"
	"github.com/codeexec/codeexec/sandboxd/internal/sandbox"
	flightpkg "github.com/codeexec/codeexec/sandboxd/internal/session/flight"
	"github.com/codeexec/codeexec/services/logkeys"
)

// State is a session's state.
type State int

// Session states.
const (
	StateIdle State = iota + 1
	StateBusy
	StateStopped
)

// Info is a snapshot of a session.
type Info struct {
	ID, Tenant string
	State      State
	Created    time.Time
	LastUsed   time.Time
	ExecCount  uint64
	Generation uint64
	Runtime    string
	Labels     map[string]string
}

// Session is one persistent interpreter, served by at most one sandbox at a
// time. Execs on it run one after another.
type Session struct {
	id, tenant string
	labels     map[string]string
	created    time.Time
	m          *Manager
	// lease is the session's hold on the session store; nil when the
	// store does not keep it (there is none, or it did not record the
	// session: unrecorded says why, once).
	lease      *lease.Lease
	unrecorded string

	// turn serialises execs; a waiting caller gives up when its context ends.
	turn chan struct{}

	mu         sync.Mutex
	sb         *sandbox.Sandbox
	busy       bool
	closed     bool
	lastUsed   time.Time
	execCount  uint64
	generation uint64
	// starting is the sandbox being started (restored) for the session,
	// not yet sb: a fence pauses it too.
	starting *sandbox.Sandbox
	// unrecordedSaid is set once a result said unrecorded.
	unrecordedSaid bool

	// questions are its run's questions that wait for answers.
	questions flightpkg.Questions[Question, sandbox.Answer]
	// flight is the session's last run that could outlive its call: in
	// flight, or ended with its result kept for the call that attaches.
	flight *flight
}

// setFlight makes f the session's run in flight.
func (s *Session) setFlight(f *flight) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.flight = f
}

// lastFlight returns the session's last run that could outlive its call,
// ended or not; nil when there was none.
func (s *Session) lastFlight() *flight {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.flight
}

// inFlight returns the session's run in flight, nil when none is.
func (s *Session) inFlight() *flight {
	if f := s.lastFlight(); f != nil && !f.Ended() {
		return f
	}
	return nil
}

var (
	_ capacity.Session = (*Session)(nil)
	_ lease.Owner      = (*Session)(nil)
)

// newSession makes a session; l is its lease when the store holds it.
func (m *Manager) newSession(id, tenant string, labels map[string]string, l *lease.Lease) *Session {
	s := &Session{id: id, tenant: tenant, labels: labels, created: time.Now(), m: m, turn: make(chan struct{}, 1), lease: l}
	s.lastUsed = s.created
	if l != nil {
		s.created = l.State.Created
		s.execCount = l.State.Seq
		l.SetOwner(s)
	}
	return s
}

// Info returns a snapshot.
func (s *Session) Info() Info {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := StateIdle
	switch {
	case s.busy:
		st = StateBusy
	case s.sb == nil || !s.sb.Alive():
		st = StateStopped
	}
	labels := make(map[string]string, len(s.labels))
	maps.Copy(labels, s.labels)
	return Info{
		ID: s.id, Tenant: s.tenant, State: st, Created: s.created, LastUsed: s.lastUsed,
		ExecCount: s.execCount, Generation: s.generation, Runtime: s.m.cfg.Engine.Name(), Labels: labels,
	}
}

// ID names the session (capacity.Session).
func (s *Session) ID() string { return s.id }

// Usage is a snapshot of the session's use of its sandbox
// (capacity.Session).
func (s *Session) Usage() capacity.Usage {
	s.mu.Lock()
	defer s.mu.Unlock()
	return capacity.Usage{
		Live: s.sb != nil && s.sb.Alive(), Running: s.busy, Held: s.lease.Held(),
		Durable: s.lease != nil, LastUsed: s.lastUsed, Tenant: s.tenant,
	}
}

// Evict stops the session's sandbox and gives it up, unless a call holds
// its turn or a fence holds it (capacity.Session).
func (s *Session) Evict(ctx context.Context, why string) bool {
	if !s.tryAcquire() {
		return false // a call is about to run on it
	}
	defer s.release()
	if s.lease.Held() { // a fence came meanwhile: it waits for the store
		return false
	}
	// This returns once the sandbox is reaped: its place is free.
	s.giveUp(ctx, why)
	return true
}

// Drop ends the session here: its sandbox stops (why, when set, is told
// to a call in flight), and the manager forgets it (capacity.Session,
// lease.Owner). Its record, if any, stays.
func (s *Session) Drop(why string) {
	if why != "" {
		s.mu.Lock()
		sb := s.sb
		s.mu.Unlock()
		if sb != nil {
			sb.SetStopReason(why)
		}
	}
	s.m.forget(s)
	s.destroy()
}

// Sandbox returns the session's sandbox, live or starting (lease.Owner).
func (s *Session) Sandbox() lease.Pausable {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.sb != nil:
		return s.sb
	case s.starting != nil:
		return s.starting
	}
	return nil
}

// StopSandbox stops the session's sandbox (lease.Owner).
func (s *Session) StopSandbox() { s.stopSandbox() }

// giveUp stops a durable session's sandbox and gives the session up, so
// that any replica may take it; why is told on its next restore.
func (s *Session) giveUp(ctx context.Context, why string) {
	if s.lease != nil {
		s.lease.WaitCommits(s.m.cfg.StartTimeout)
	}
	s.stopSandbox()
	if s.lease != nil {
		s.lease.Release(ctx, why)
	}
	s.m.forget(s)
}

// acquire takes the session's turn.
func (s *Session) acquire(ctx context.Context) error {
	select {
	case s.turn <- struct{}{}:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("waiting for the session's previous call: %w", ctx.Err())
	}
}

// release gives the session's turn back. A session waiting for room may
// now stop this session's sandbox: it is told.
func (s *Session) release() {
	<-s.turn
	s.m.room.Changed()
}

// tryAcquire takes the session's turn if no call holds it.
func (s *Session) tryAcquire() bool {
	select {
	case s.turn <- struct{}{}:
		return true
	default:
		return false
	}
}

// setBusy marks the session busy or idle; ran records a finished exec.
func (s *Session) setBusy(busy, ran bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.busy = busy
	if ran {
		s.lastUsed = time.Now()
		s.execCount++
	}
}

// stopSandbox kills the current sandbox, losing the interpreter state, and
// returns it (nil when there was none).
func (s *Session) stopSandbox() *sandbox.Sandbox {
	return s.takeSandbox(false)
}

// destroy stops the session for good and returns the sandbox it stopped.
func (s *Session) destroy() *sandbox.Sandbox {
	return s.takeSandbox(true)
}

func (s *Session) takeSandbox(closed bool) *sandbox.Sandbox {
	s.mu.Lock()
	s.closed = s.closed || closed
	sb := s.sb
	s.sb = nil
	if s.closed {
		s.lease.EndHold()
	} else if sb != nil {
		s.lease.Stopped(sb) // the hold stays: the session is not settled
	}
	s.mu.Unlock()
	if sb != nil {
		sb.Kill()
	}
	return sb
}

// setStarting records sb as the sandbox being started for s (nil when
// done), for a fence to pause.
func (s *Session) setStarting(sb *sandbox.Sandbox) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.starting = sb
}

func (s *Session) logger() *slog.Logger {
	return s.m.logger.With(logkeys.SessionID, s.id, logkeys.Tenant, s.tenant)
}
