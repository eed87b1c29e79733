// Package flight keeps a run that may outlive the call that started it:
// its events since the last result a call delivered, its result once it
// ends, and which call follows it now. A later call attaches to the run
// through it; the run goes on whether or not a call follows it, and each
// call that attaches takes what the run did since the last one.
package flight

import (
	"context"
	"sync"
	"time"
)

// Run is one run in flight, with events of type E and a result of type R.
type Run[E, R any] struct {
	// ID, Started and Timeout name the run to the calls that follow it.
	ID      uint64
	Started time.Time
	Timeout time.Duration
	// cancel stops the run, with the cause Cancel is given.
	cancel context.CancelCauseFunc
	// replaces says whether an event replaces the one before it when no
	// call has read that one yet (a progress report its successor).
	replaces func(prev, next E) bool

	mu sync.Mutex
	// events are the run's events from its start; delivered counts those
	// a call has delivered with a result (the next attach starts there).
	events    []E
	delivered int
	// read is the furthest any call has read events: those before it are
	// never changed.
	read int
	// changed is closed (and replaced) whenever events grow or the run
	// ends, to wake the call that follows it.
	changed chan struct{}
	// follower counts attaches: a call that finds it moved on was
	// superseded by a newer one, and yields.
	follower uint64
	// res and err are the run's end, once done is closed; taken says a
	// call delivered it.
	done  chan struct{}
	res   *R
	err   error
	taken bool
	// isMarked says the run is marked in the session store (a call
	// yielded on it).
	isMarked bool
	// yielded is closed the first time a call yields on the run: from
	// then on the run is a long one, and code on its session is refused.
	yielded     chan struct{}
	yieldedOnce sync.Once
}

// New returns a run started now. replaces may be nil: every event is kept.
func New[E, R any](id uint64, timeout time.Duration, cancel context.CancelCauseFunc, replaces func(prev, next E) bool) *Run[E, R] {
	return &Run[E, R]{ID: id, Started: time.Now(), Timeout: timeout, cancel: cancel, replaces: replaces,
		changed: make(chan struct{}), done: make(chan struct{}), yielded: make(chan struct{})}
}

// Cancel stops the run with cause.
func (f *Run[E, R]) Cancel(cause error) { f.cancel(cause) }

// WaitTurn waits, for a call with code on the run's session, until the
// run ends (true), as calls on one session run one after another; unless
// the run yields (it is a long one) or wait passes (zero: no bound), when
// it returns false. It returns ctx's error when ctx ends first.
func (f *Run[E, R]) WaitTurn(ctx context.Context, wait time.Duration) (bool, error) {
	var timeout <-chan time.Time
	if wait > 0 {
		t := time.NewTimer(wait)
		defer t.Stop()
		timeout = t.C
	}
	select {
	case <-f.done:
		return true, nil
	case <-f.yielded:
	case <-timeout:
	case <-ctx.Done():
		return false, ctx.Err()
	}
	return false, nil
}

// Mark reports whether the run is to be marked in the store now: true
// the first time only.
func (f *Run[E, R]) Mark() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	first := !f.isMarked
	f.isMarked = true
	return first
}

// Marked reports whether a call marked the run in the store.
func (f *Run[E, R]) Marked() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.isMarked
}

// ResultTaken reports whether a call delivered the run's end.
func (f *Run[E, R]) ResultTaken() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.taken
}

// Add buffers ev, in place of the event before it when replaces says so
// and no call has read that one yet: a run reporting progress often
// holds few reports, not thousands.
func (f *Run[E, R]) Add(ev E) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if n := len(f.events); f.replaces != nil && n > f.read && f.replaces(f.events[n-1], ev) {
		f.events[n-1] = ev
	} else {
		f.events = append(f.events, ev)
	}
	f.wake()
}

// wake tells the follower that something changed; f.mu is held.
func (f *Run[E, R]) wake() {
	close(f.changed)
	f.changed = make(chan struct{})
}

// End records the run's end and wakes its follower.
func (f *Run[E, R]) End(res *R, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.res, f.err = res, err
	close(f.done)
	f.wake()
}

// Ended reports whether the run has ended.
func (f *Run[E, R]) Ended() bool {
	select {
	case <-f.done:
		return true
	default:
		return false
	}
}
