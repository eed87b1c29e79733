// Package drain counts the tool calls in flight, so that a graceful
// shutdown can refuse new ones and wait for the running ones.
package drain

import (
	"errors"
	"sync"
)

// ErrDraining refuses a call that arrives once shutdown has begun.
var ErrDraining = errors.New("the gateway is shutting down; no new code can run")

// Tracker counts the calls in flight. The zero value is ready to use.
type Tracker struct {
	mu       sync.Mutex
	draining bool
	running  int
	idle     chan struct{} // closed when draining and nothing runs
}

// Begin admits a call, or returns ErrDraining once Drain was called. end
// must be called when the call is over.
func (t *Tracker) Begin() (end func(), err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.draining {
		return nil, ErrDraining
	}
	t.running++
	return func() {
		t.mu.Lock()
		defer t.mu.Unlock()
		t.running--
		if t.draining && t.running == 0 {
			close(t.idle)
		}
	}, nil
}

// Drain refuses new calls and returns a channel closed when none runs.
func (t *Tracker) Drain() <-chan struct{} {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.draining {
		t.draining = true
		t.idle = make(chan struct{})
		if t.running == 0 {
			close(t.idle)
		}
	}
	return t.idle
}

// Draining reports whether Drain was called.
func (t *Tracker) Draining() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.draining
}

// InFlight reports how many calls are running.
func (t *Tracker) InFlight() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.running
}
