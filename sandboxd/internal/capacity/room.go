package capacity

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/codeexec/codeexec/sandboxd/internal/metrics"
	"github.com/codeexec/codeexec/sandboxd/internal/sandbox"
	"github.com/codeexec/codeexec/services/logkeys"
)

// ErrExhausted means that there is no room for another session or
// sandbox now.
var ErrExhausted = errors.New("resource exhausted")

// Session is a session as capacity sees it (a *session.Session).
type Session interface {
	// ID names the session in logs.
	ID() string
	// Usage is a snapshot of the session's use of its sandbox.
	Usage() Usage
	// Evict stops the session's sandbox and gives the session up, its
	// checkpoint kept (why is told on its next restore); it reports false,
	// and does nothing, when a call holds the session's turn or a fence
	// holds it.
	Evict(ctx context.Context, why string) bool
	// Drop ends a session that the store does not keep: its sandbox
	// stops, and it is forgotten.
	Drop(why string)
}

// Usage is what capacity weighs of a session.
type Usage struct {
	// Live is set when the session has a sandbox that is alive; Running
	// when a call is running on it.
	Live, Running bool
	// Held is set while a fence holds the session: it waits for the
	// store, and its checkpoint may lack what its sandbox holds.
	Held bool
	// Durable is set when the store keeps the session: stopping its
	// sandbox loses nothing.
	Durable  bool
	LastUsed time.Time
	// Tenant owns the session: a sandbox is stopped to make room from the
	// tenant that holds the most first.
	Tenant string
}

// With a session store and MaxSessions, at most MaxSessions sandboxes
// belong to sessions at once (the pool and its spares come on top). Each
// takes a place: reserved by Make before the sandbox starts, held until
// its process is reaped, so that two sessions starting at once never both
// take the last place, nor one whose sandbox is still dying. When every
// place is taken, a sandbox of the tenant that holds the most (counting
// the one about to start) is checkpointed and stopped, its idle longest:
// a tenant over its share makes room for others before anyone else does.

// Room counts the places of sandboxes that belong to sessions.
type Room struct {
	// max is --max-sessions (0: no cap); durable, whether sessions are
	// kept in a store, so that a sandbox can be stopped to make room.
	max     int
	durable bool
	// sessions lists the live sessions.
	sessions func() []Session
	metrics  *metrics.Metrics
	logger   *slog.Logger

	mu sync.Mutex
	// places are reserved or held by a sandbox not yet reaped; dying are
	// those of them held by a sandbox told to stop: free in a moment.
	places, dying int
	// wake is closed, and replaced, whenever room may have been made: a
	// place freed, or a session's turn given back (its sandbox may now be
	// stopped). waited says someone holds the current wake.
	wake   chan struct{}
	waited bool
}

// NewRoom returns the room of max sandboxes (0: no cap) among sessions;
// durable says whether a store keeps them.
func NewRoom(maxSessions int, durable bool, sessions func() []Session, m *metrics.Metrics, logger *slog.Logger) *Room {
	return &Room{max: maxSessions, durable: durable, sessions: sessions, metrics: m, logger: logger, wake: make(chan struct{})}
}

// placeWait bounds how long Make waits for room to change (a place
// freed, a call ended), when every sandbox is running a call or is
// starting or stopping.
const placeWait = 2 * time.Second

// capped reports whether places are counted: with a cap, and a store to
// stop sandboxes into.
func (r *Room) capped() bool { return r.durable && r.max > 0 }

// Admit refuses a new session, without a store, when live sessions are at
// the cap already; with a store sessions are records, and only their
// sandboxes are counted (Make).
func (r *Room) Admit(live int) error {
	if !r.durable && r.max > 0 && live >= r.max {
		return fmt.Errorf("%w: %d sessions are live, the maximum (raise CODEEXEC_MAX_SESSIONS or end idle sessions)", ErrExhausted, r.max)
	}
	return nil
}

// Changed wakes every Make waiting for room. Without a cap on places
// nobody waits, and every call's end is spared the lock.
func (r *Room) Changed() {
	if !r.capped() {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.changedLocked()
}

func (r *Room) changedLocked() {
	if r.waited {
		close(r.wake)
		r.wake, r.waited = make(chan struct{}), false
	}
}

// Make makes sure, for asker, a session about to start a sandbox, that no
// more than max sandboxes belong to sessions. On success a place is
// reserved for asker's sandbox: pass the sandbox to place (which then
// holds the place until the sandbox's process is reaped), or nil to give
// the place back. Without a store there is nothing to make room with:
// Admit refused the session already.
func (r *Room) Make(ctx context.Context, asker Session) (place func(sb *sandbox.Sandbox), err error) {
	if !r.capped() {
		return func(*sandbox.Sandbox) {}, nil
	}
	deadline := time.NewTimer(placeWait)
	defer deadline.Stop()
	// skip holds the sessions found with their turn taken since room last
	// changed: giving the turn back wakes this loop, to look again.
	skip := map[Session]bool{}
	for {
		wake, reaping, ok := r.reserve()
		if ok {
			var once sync.Once
			return func(sb *sandbox.Sandbox) { once.Do(func() { r.hold(sb) }) }, nil
		}
		var all []Session
		if !reaping {
			all = r.sessions()
		}
		victim, busy := idleLongest(all, asker, skip)
		if victim != nil {
			r.evict(ctx, victim, skip)
			continue
		}
		expired := deadline.C
		if reaping {
			expired = nil
		}
		select {
		case <-wake:
			// Room changed: wait placeWait again from now, within the
			// caller's time (StartTimeout).
			clear(skip)
			deadline.Reset(placeWait)
		case <-expired:
			if busy > 0 {
				return nil, fmt.Errorf("%w: all %d sandboxes are running calls (raise CODEEXEC_MAX_SESSIONS, or retry when one finishes)", ErrExhausted, r.max)
			}
			return nil, fmt.Errorf("%w: all %d sandboxes are starting or stopping (raise CODEEXEC_MAX_SESSIONS, or retry)", ErrExhausted, r.max)
		case <-ctx.Done():
			return nil, fmt.Errorf("%w: all %d sandboxes are taken: %w", ErrExhausted, r.max, ctx.Err())
		}
	}
}

// reserve takes a place when one is free (ok). Otherwise it returns the
// channel that tells when room changes, and whether a place is about to
// be freed by a sandbox told to stop (reaping): it is free once the
// sandbox is reaped, so wait for it rather than stop another sandbox,
// and within the caller's time only, not placeWait: it is sure to come,
// however long a loaded machine takes to reap the sandbox.
func (r *Room) reserve() (wake chan struct{}, reaping, ok bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.places < r.max {
		r.places++
		return nil, false, true
	}
	r.waited = true
	return r.wake, r.places-r.dying < r.max, false
}

// evict stops victim's sandbox to make room, or skips it until room
// changes when a call is about to run on it or a fence came meanwhile.
func (r *Room) evict(ctx context.Context, victim Session, skip map[Session]bool) {
	if !victim.Evict(ctx, "its sandbox was stopped to make room for other sessions") {
		skip[victim] = true
		return
	}
	r.logger.InfoContext(ctx, "stopping the sandbox idle longest to make room, of the tenant that holds the most; its checkpoint is kept", logkeys.SessionID, victim.ID())
	r.metrics.Reaped()
}

// idleLongest picks, of all but asker and skip, the durable session with a
// live sandbox and no call running of the tenant that holds the most live
// sandboxes (asker's to come counted), and of that tenant's, the one used
// longest ago; busy counts the sessions running a call. A session the
// store could not record has no checkpoint to come back from: it keeps
// its sandbox (until it is idle for IdleTimeout).
func idleLongest(all []Session, asker Session, skip map[Session]bool) (victim Session, busy int) {
	usage := make([]Usage, len(all))
	held := map[string]int{asker.Usage().Tenant: 1}
	for i, s := range all {
		usage[i] = s.Usage()
		if usage[i].Live {
			held[usage[i].Tenant]++
		}
	}
	var victimUsage Usage
	for i, s := range all {
		u := usage[i]
		// A session held by a fence is not stopped: it waits for the
		// store, and its checkpoint may lack what its sandbox holds.
		live := u.Live && !u.Held
		if live && u.Running {
			busy++
		}
		if !live || u.Running || s == asker || skip[s] || !u.Durable {
			continue
		}
		if victim == nil || held[u.Tenant] > held[victimUsage.Tenant] ||
			(held[u.Tenant] == held[victimUsage.Tenant] && u.LastUsed.Before(victimUsage.LastUsed)) {
			victim, victimUsage = s, u
		}
	}
	return victim, busy
}

// hold makes sb hold a place Make reserved until its process is reaped;
// a nil sb gives the place back.
func (r *Room) hold(sb *sandbox.Sandbox) {
	if sb == nil {
		r.mu.Lock()
		defer r.mu.Unlock()
		r.places--
		r.changedLocked()
		return
	}
	var dying, reaped bool // on r.mu
	sb.OnStop(func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		if !dying && !reaped {
			dying = true
			r.dying++
		}
	}, func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		reaped = true
		r.places--
		if dying {
			r.dying--
		}
		r.changedLocked()
	})
}
