package session

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/codeexec/codeexec/sandboxd/internal/channel"
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

func (s *Session) release() { <-s.turn }

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

// ensureSandbox returns the live sandbox, starting one if needed.
func (s *Session) ensureSandbox(ctx context.Context) (*sandbox, error) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil, fmt.Errorf("%w: session %s was destroyed", ErrNotFound, s.id)
	}
	sb := s.sb
	s.mu.Unlock()
	if sb != nil && sb.alive() {
		return sb, nil
	}
	if sb != nil {
		sb.kill()
	}
	sb, err := s.m.takeSandbox(ctx)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		go sb.kill()
		return nil, fmt.Errorf("%w: session %s was destroyed", ErrNotFound, s.id)
	}
	s.sb = sb
	s.generation++
	return sb, nil
}

// stopSandbox kills the current sandbox, losing the interpreter state.
func (s *Session) stopSandbox() {
	s.mu.Lock()
	sb := s.sb
	s.sb = nil
	s.mu.Unlock()
	if sb != nil {
		sb.kill()
	}
}

// destroy stops the session for good.
func (s *Session) destroy() {
	s.mu.Lock()
	s.closed = true
	sb := s.sb
	s.sb = nil
	s.mu.Unlock()
	if sb != nil {
		sb.kill()
	}
}

func (s *Session) logger() *slog.Logger {
	return s.m.logger.With(logkeys.SessionID, s.id, logkeys.Tenant, s.tenant)
}

// sendExec writes an exec frame.
func sendExec(sb *sandbox, id int64, code string, env *ExecEnv, limit int64, first bool) error {
	// Never null: the agent reads an empty list as no servers.
	servers, discovered := env.Servers, env.Discovered
	if servers == nil {
		servers = []channel.Server{}
	}
	if discovered == nil {
		discovered = []channel.DiscoveredServer{}
	}
	return sb.conn.Write(&channel.Exec{
		ID: id, Code: code, Servers: servers, Discovered: discovered, Limit: limit, First: first,
	})
}
