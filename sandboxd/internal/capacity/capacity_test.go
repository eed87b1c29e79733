package capacity_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/codeexec/codeexec/sandboxd/internal/capacity"
	"github.com/codeexec/codeexec/sandboxd/internal/engine/enginetest"
	"github.com/codeexec/codeexec/sandboxd/internal/metrics"
	"github.com/codeexec/codeexec/sandboxd/internal/sandbox"
)

// newPool is a pool of real agents in sandboxes of the Direct engine.
func newPool(t *testing.T, size int) *capacity.Pool {
	t.Helper()
	dir, argv, env := enginetest.Agent(t)
	p := capacity.NewPool(capacity.PoolConfig{
		Engine: enginetest.NewDirect(t), AgentDir: dir, Argv: argv, Env: env, Size: size, StartTimeout: 30 * time.Second,
	}, metrics.New(nil), enginetest.Logger(t))
	t.Cleanup(p.Close)
	return p
}

// session is a session as capacity sees it, with a sandbox of its own.
type session struct {
	id string
	mu sync.Mutex
	u  capacity.Usage
	sb *sandbox.Sandbox
	// evicted and dropped count what capacity did to it, and looked its
	// calls of Usage.
	evicted, dropped, looked int
}

func (s *session) ID() string { return s.id }

func (s *session) Usage() capacity.Usage {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.looked++
	u := s.u
	u.Live = s.sb != nil && s.sb.Alive()
	return u
}

func (s *session) Evict(context.Context, string) bool {
	s.mu.Lock()
	if s.u.Running || s.u.Held {
		s.mu.Unlock()
		return false
	}
	s.evicted++
	sb := s.sb
	s.sb = nil
	s.mu.Unlock()
	if sb != nil {
		sb.Kill()
	}
	return true
}

func (s *session) Drop(string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.dropped++
}

func (s *session) set(f func(*capacity.Usage)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f(&s.u)
}

func (s *session) counts() (evicted, dropped int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.evicted, s.dropped
}

// lookedAt is how many times capacity has looked at s.
func (s *session) lookedAt() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.looked
}

// sessions is the list of live sessions a Room or Reaper asks for.
type sessions struct {
	mu  sync.Mutex
	all []*session
}

func (ss *sessions) list() []capacity.Session {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	out := make([]capacity.Session, len(ss.all))
	for i, s := range ss.all {
		out[i] = s
	}
	return out
}

// live adds a session, used at used, whose sandbox takes a place of r.
func (ss *sessions) live(t *testing.T, r *capacity.Room, p *capacity.Pool, id string, used time.Time) *session {
	t.Helper()
	s := &session{id: id, u: capacity.Usage{Durable: true, LastUsed: used}}
	place, err := r.Make(t.Context(), s)
	if err != nil {
		t.Fatalf("Make for %s: %v", id, err)
	}
	sb, err := p.Take(t.Context(), "t")
	if err != nil {
		place(nil)
		t.Fatal(err)
	}
	place(sb)
	s.sb = sb
	ss.mu.Lock()
	ss.all = append(ss.all, s)
	ss.mu.Unlock()
	return s
}

func newRoom(t *testing.T, limit int, ss *sessions) *capacity.Room {
	return capacity.NewRoom(limit, true, ss.list, metrics.New(nil), enginetest.Logger(t))
}

// When every place is taken, the sandbox idle longest is stopped to make
// room; a session running a call, held by a fence, or that the store does
// not keep is never stopped for it.
func TestRoomStopsTheSandboxIdleLongest(t *testing.T) {
	t.Parallel()
	ss, p := &sessions{}, newPool(t, 0)
	r := newRoom(t, 4, ss)
	now := time.Now()
	oldest := ss.live(t, r, p, "oldest", now.Add(-time.Hour))
	running := ss.live(t, r, p, "running", now.Add(-2*time.Hour))
	held := ss.live(t, r, p, "held", now.Add(-3*time.Hour))
	unkept := ss.live(t, r, p, "unkept", now.Add(-4*time.Hour))
	running.set(func(u *capacity.Usage) { u.Running = true })
	held.set(func(u *capacity.Usage) { u.Held = true })
	unkept.set(func(u *capacity.Usage) { u.Durable = false })

	asker := &session{id: "asker"}
	place, err := r.Make(t.Context(), asker)
	if err != nil {
		t.Fatalf("Make: %v", err)
	}
	place(nil)
	for _, s := range []*session{oldest, running, held, unkept} {
		if evicted, _ := s.counts(); evicted != map[*session]int{oldest: 1}[s] {
			t.Errorf("%s evicted %d times", s.id, evicted)
		}
	}
}

// The sandbox stopped to make room is of the tenant that holds the most
// (the asker's new one counted), its idle longest, whoever else's sandbox
// was used longer ago: a tenant over its share makes room first.
func TestRoomTakesFromTheTenantOverItsShare(t *testing.T) {
	t.Parallel()
	ss, p := &sessions{}, newPool(t, 0)
	r := newRoom(t, 4, ss)
	now := time.Now()
	other := ss.live(t, r, p, "beta's", now.Add(-4*time.Hour))
	alpha := []*session{
		ss.live(t, r, p, "alpha's newer", now.Add(-time.Hour)),
		ss.live(t, r, p, "alpha's older", now.Add(-2*time.Hour)),
		ss.live(t, r, p, "alpha's newest", now),
	}
	other.set(func(u *capacity.Usage) { u.Tenant = "beta" })
	for _, s := range alpha {
		s.set(func(u *capacity.Usage) { u.Tenant = "alpha" })
	}
	// Each keeps its place (no sandbox of its own comes), so that the
	// second finds every place taken too.
	for _, asker := range []*session{{id: "beta's second", u: capacity.Usage{Tenant: "beta"}}, {id: "alpha's fourth", u: capacity.Usage{Tenant: "alpha"}}} {
		place, err := r.Make(t.Context(), asker)
		if err != nil {
			t.Fatalf("Make for %s: %v", asker.id, err)
		}
		defer place(nil)
	}
	want := map[*session]int{alpha[1]: 1, alpha[0]: 1}
	for _, s := range append(alpha, other) {
		if evicted, _ := s.counts(); evicted != want[s] {
			t.Errorf("%s evicted %d times, want %d", s.id, evicted, want[s])
		}
	}
}

// A session that needs a sandbox while every sandbox runs a call waits
// for a call to end, and then takes that sandbox's place; with no call
// ending it gives up, saying why and what to do.
func TestRoomWaitsForACallToEnd(t *testing.T) {
	t.Parallel()
	ss, p := &sessions{}, newPool(t, 0)
	r := newRoom(t, 1, ss)
	busy := ss.live(t, r, p, "busy", time.Now())
	busy.set(func(u *capacity.Usage) { u.Running = true })

	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	_, err := r.Make(ctx, &session{id: "impatient"})
	if !errors.Is(err, capacity.ErrExhausted) || !strings.Contains(err.Error(), "all 1 sandboxes are running calls (raise CODEEXEC_MAX_SESSIONS") {
		t.Fatalf("Make while every sandbox runs a call and none ends: %v", err)
	}

	got, looked := make(chan error, 1), busy.lookedAt()
	go func() {
		place, err := r.Make(ctx, &session{id: "waiter"})
		if err == nil {
			place(nil)
		}
		got <- err
	}()
	// Once the waiter has found the sandbox running a call, the call ends
	// and its turn is given back: that wakes the waiter, well before the
	// 2 s it waits for room to change.
	for busy.lookedAt() == looked {
		time.Sleep(time.Millisecond)
	}
	busy.set(func(u *capacity.Usage) { u.Running = false })
	r.Changed()
	if err := <-got; err != nil {
		t.Fatalf("Make once the call ended: %v", err)
	}
	if evicted, _ := busy.counts(); evicted != 1 {
		t.Errorf("the session whose call ended was evicted %d times, want once", evicted)
	}
}

// A place is held until its sandbox's process is reaped, and then free
// at once: a session whose sandbox is dying waits for it rather than
// stopping another.
func TestRoomCountsAPlaceUntilItsSandboxIsReaped(t *testing.T) {
	t.Parallel()
	ss, p := &sessions{}, newPool(t, 0)
	r := newRoom(t, 1, ss)
	s := ss.live(t, r, p, "dying", time.Now())
	s.set(func(u *capacity.Usage) { u.Running = true }) // not to be evicted
	go s.sb.Kill()
	place, err := r.Make(t.Context(), &session{id: "next"})
	if err != nil {
		t.Fatalf("Make while the only sandbox dies: %v", err)
	}
	place(nil)
	if evicted, _ := s.counts(); evicted != 0 {
		t.Errorf("the dying session was evicted %d times, want none", evicted)
	}
}

// Without a store, the cap counts sessions, and a new one is refused.
func TestRoomAdmitsSessionsUnderTheCap(t *testing.T) {
	t.Parallel()
	r := capacity.NewRoom(2, false, func() []capacity.Session { return nil }, metrics.New(nil), enginetest.Logger(t))
	if err := r.Admit(1); err != nil {
		t.Errorf("Admit(1) of 2: %v", err)
	}
	if err := r.Admit(2); !errors.Is(err, capacity.ErrExhausted) || !strings.Contains(err.Error(), "2 sessions are live, the maximum") {
		t.Errorf("Admit(2) of 2: %v", err)
	}
	if err := capacity.NewRoom(2, true, nil, metrics.New(nil), enginetest.Logger(t)).Admit(100); err != nil {
		t.Errorf("with a store, sessions are records, and all are admitted: %v", err)
	}
}
