package engine

import (
	"errors"
	"sync"
)

// ErrClosed is the error of a Start after Close.
var ErrClosed = errors.New("start sandbox: engine is closed")

// Live is the set of an engine's running sandboxes, which Close must stop.
// Once closed it takes no more. The zero Live is ready to use.
type Live[P interface {
	comparable
	// Done is closed once the sandbox has exited (see Pipes).
	Done() <-chan struct{}
}] struct {
	mu     sync.Mutex
	closed bool
	procs  map[P]struct{}
}

// Closed reports whether Close has been called.
func (l *Live[P]) Closed() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.closed
}

// Add keeps p in the set until it exits. After Close it keeps nothing and
// returns false: Close has missed p, so the caller must stop it.
func (l *Live[P]) Add(p P) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return false
	}
	if l.procs == nil {
		l.procs = map[P]struct{}{}
	}
	l.procs[p] = struct{}{}
	go func() {
		<-p.Done()
		l.mu.Lock()
		defer l.mu.Unlock()
		delete(l.procs, p)
	}()
	return true
}

// Close closes the set and returns the sandboxes in it. first is false
// when the set was closed already.
func (l *Live[P]) Close() (live []P, first bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil, false
	}
	l.closed = true
	for p := range l.procs {
		live = append(live, p)
	}
	return live, true
}
