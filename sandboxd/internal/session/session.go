package session

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/codeexec/codeexec/sandboxd/internal/channel"
	"github.com/codeexec/codeexec/sandboxd/internal/durable"
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

	// turn serialises execs; a waiting caller gives up when its context ends.
	turn chan struct{}

	mu         sync.Mutex
	sb         *sandbox
	busy       bool
	closed     bool
	lastUsed   time.Time
	execCount  uint64
	generation uint64
	// heldCh is open while a fence holds the session (fence.go);
	// pausedSB is its sandbox that the fence paused; starting is the
	// sandbox being started (restored) for it, not yet sb. holdMu orders
	// a hold's pause and its release's resume.
	heldCh   chan struct{}
	pausedSB *sandbox
	starting *sandbox
	holdMu   sync.Mutex

	// dmu guards d, the session's durable part (see durable.go).
	dmu sync.Mutex
	d   dstate
}

// newSession makes a session; held is its record when it is durable.
func (m *Manager) newSession(id, tenant string, labels map[string]string, held *durable.Held) *Session {
	s := &Session{id: id, tenant: tenant, labels: labels, created: time.Now(), m: m, turn: make(chan struct{}, 1)}
	s.lastUsed = s.created
	s.d.held = held
	s.d.idle = sync.NewCond(&s.dmu)
	if held != nil {
		s.created = held.State.Created
		s.execCount = held.State.Seq
		s.d.reason = durableReason(held)
	}
	return s
}

// isDurable reports whether the session is kept in the session store.
func (s *Session) isDurable() bool {
	s.dmu.Lock()
	defer s.dmu.Unlock()
	return s.d.held != nil
}

// Info returns a snapshot.
func (s *Session) Info() Info {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := StateIdle
	switch {
	case s.busy:
		st = StateBusy
	case s.sb == nil || !s.sb.alive():
		st = StateStopped
	}
	labels := make(map[string]string, len(s.labels))
	for k, v := range s.labels {
		labels[k] = v
	}
	return Info{
		ID: s.id, Tenant: s.tenant, State: st, Created: s.created, LastUsed: s.lastUsed,
		ExecCount: s.execCount, Generation: s.generation, Runtime: s.m.cfg.Engine.Name(), Labels: labels,
	}
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

// release gives the session's turn back. A makeRoom waiting for room may
// now stop this session's sandbox: it is told.
func (s *Session) release() {
	<-s.turn
	s.m.roomChanged()
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

// ensureSandbox returns the live sandbox, starting one if needed; a
// durable session's new sandbox gets the last checkpoint restored into it
// (env serves the restore's calls, until the call's deadline; saved is the
// exec's fetch of the saved tools), and the report says what came back.
func (s *Session) ensureSandbox(ctx context.Context, env *ExecEnv, saved *savedTools, deadline time.Time) (*sandbox, *RestoreReport, error) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil, nil, fmt.Errorf("%w: session %s was destroyed", ErrNotFound, s.id)
	}
	sb := s.sb
	s.mu.Unlock()
	if sb != nil && sb.alive() {
		return sb, nil, nil
	}
	if sb != nil {
		sb.kill()
	}
	if s.isDurable() && s.m.cfg.Durable.Replica.Fenced() {
		// No new sandbox while another replica may take the session.
		return nil, nil, fmt.Errorf("%w: this sandbox replica cannot reach the session store, so it starts no sandbox for the session until it does; retry the call", ErrPaused)
	}
	place, err := s.m.makeRoom(ctx, s)
	if err != nil {
		return nil, nil, err
	}
	sb, err = s.m.takeSandbox(ctx)
	if err != nil {
		place(nil)
		return nil, nil, err
	}
	place(sb)
	// A fence that comes during the restore pauses this sandbox too.
	s.setStarting(sb)
	defer s.setStarting(nil)
	var report *RestoreReport
	if s.isDurable() {
		go s.m.commitLoop(s, sb)
		if report, err = s.m.restore(ctx, s, sb, env, saved, deadline); errors.Is(err, errRestoreLater) {
			sb.kill()
			return nil, nil, fmt.Errorf("%w; its checkpoint is kept: retry the call", err)
		} else if err != nil && s.isHeld() {
			// A fence paused the restore: starting fresh would overwrite
			// the checkpoint with nothing.
			sb.kill()
			return nil, nil, fmt.Errorf("%w: this sandbox replica lost the session store while it restored the session (%w); its checkpoint is kept: retry the call", ErrPaused, err)
		} else if err != nil {
			// A namespace half restored would mislead: start clean, and
			// say what happened.
			s.logger().WarnContext(ctx, "could not restore the session; it starts fresh", logkeys.Error, err)
			report = &RestoreReport{Reason: err.Error() + "; the session started fresh"}
			sb.kill() // its place goes once it is reaped
			if place, err = s.m.makeRoom(ctx, s); err != nil {
				return nil, nil, err
			}
			if sb, err = s.m.takeSandbox(ctx); err != nil {
				place(nil)
				return nil, nil, err
			}
			place(sb)
			s.setStarting(sb)
			go s.m.commitLoop(s, sb)
		}
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		go sb.kill()
		return nil, nil, fmt.Errorf("%w: session %s was destroyed", ErrNotFound, s.id)
	}
	s.sb = sb
	s.generation++
	s.mu.Unlock()
	// A fence that came while the sandbox started holds it as the others:
	// the call waits in it for the store.
	if err := s.pauseIfHeld(sb); err != nil {
		s.stopSandbox()
		return nil, nil, fmt.Errorf("%w: the session's sandbox started as this replica lost the session store, and it could not be paused (%w); retry the call", ErrPaused, err)
	}
	return sb, report, nil
}

// setStarting records sb as the sandbox being started for s (nil when
// done), for a fence to pause.
func (s *Session) setStarting(sb *sandbox) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.starting = sb
}

// stopSandbox kills the current sandbox, losing the interpreter state, and
// returns it (nil when there was none).
func (s *Session) stopSandbox() *sandbox {
	return s.takeSandbox(false)
}

// destroy stops the session for good and returns the sandbox it stopped.
func (s *Session) destroy() *sandbox {
	return s.takeSandbox(true)
}

func (s *Session) takeSandbox(closed bool) *sandbox {
	s.mu.Lock()
	s.closed = s.closed || closed
	sb := s.sb
	s.sb = nil
	if s.closed {
		s.releaseHoldLocked()
	} else if s.pausedSB == sb {
		s.pausedSB = nil // the hold stays: the session is not settled
	}
	s.mu.Unlock()
	if sb != nil {
		sb.kill()
	}
	return sb
}

func (s *Session) logger() *slog.Logger {
	return s.m.logger.With(logkeys.SessionID, s.id, logkeys.Tenant, s.tenant)
}

// sendExec writes an exec frame; a first exec carries the saved tools
// fetched for it (nil: none fetched), and a positive checkpoint asks for
// a checkpoint of at most that many bytes after it.
func sendExec(sb *sandbox, id int64, code string, env *ExecEnv, limit int64, first bool, tools []channel.SavedTool, checkpoint int64, results Results) error {
	// Never null: the agent reads an empty list as no servers.
	servers, discovered := env.Servers, env.Discovered
	if servers == nil {
		servers = []channel.Server{}
	}
	if discovered == nil {
		discovered = []channel.DiscoveredServer{}
	}
	msg := &channel.Exec{
		ID: id, Code: code, Servers: servers, Discovered: discovered, Unloaded: env.Unloaded, Limit: limit, First: first, SavedTools: tools, Checkpoint: checkpoint,
	}
	results.apply(msg)
	err := sb.conn.Write(msg)
	if errors.Is(err, channel.ErrFrameTooLarge) && msg.SavedTools != nil {
		// The code and the tools together are too large for one frame
		// (each alone fits): the agent asks for the tools in a frame of
		// their own, as it does when they were not fetched.
		msg.SavedTools = nil
		err = sb.conn.Write(msg)
	}
	return err
}
