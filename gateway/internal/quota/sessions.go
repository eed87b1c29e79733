package quota

import (
	"context"
	"sync"
	"time"
)

// Sessions admits a tenant's new sandbox sessions against Limits.Sessions
// in both protocol eras: an MCP session's (one sandbox session each) and
// those a 2026-07-28 call without a session starts, which last until they
// are ended (runtime.end_session()) or expire unused. Both are counted
// where they live, by asking sandboxd for the tenant's sessions, so that
// sessions this gateway did not make (through another gateway, or before
// a restart) count too. Where sandboxd cannot say, the gateway's own count
// of its MCP sessions' sandbox sessions is used.
type Sessions struct {
	max   int
	count func(ctx context.Context, tenant string) (int, error)
	retry string

	mu    sync.Mutex
	turns map[string]*sync.Mutex
}

// NewSessions returns the admission of sessions for limit (0: no cap);
// count asks sandboxd how many sessions a tenant has; idle, the idle
// timeout of MCP sessions over HTTP, is quoted in the refusal.
func NewSessions(limit int, count func(ctx context.Context, tenant string) (int, error), idle time.Duration) *Sessions {
	retry := "end one first: an MCP session with an HTTP DELETE, a session of a handle with runtime.end_session() in a call of it" +
		IdleRetry(idle) + "; a session of a handle expires once unused for the session TTL (--session-ttl)"
	return &Sessions{max: limit, count: count, retry: retry, turns: map[string]*sync.Mutex{}}
}

// Admit runs create, which makes one sandbox session of tenant's, unless
// the tenant holds max sessions already (by sandboxd's count, else held,
// the gateway's own); then it returns an *Error. One tenant's admissions
// take turns, so that each counts the sessions the one before made.
func (s *Sessions) Admit(ctx context.Context, tenant string, held int, create func() error) error {
	if s == nil || s.max <= 0 {
		return create()
	}
	turn := s.turn(tenant)
	turn.Lock()
	defer turn.Unlock()
	n, err := s.count(ctx, tenant)
	if err != nil {
		n = held
	}
	if n >= s.max {
		return &Error{Limit: LimitSessions, Max: s.max, Retry: s.retry}
	}
	return create()
}

func (s *Sessions) turn(tenant string) *sync.Mutex {
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.turns[tenant]
	if t == nil {
		t = &sync.Mutex{}
		s.turns[tenant] = t
	}
	return t
}
