// Package spare keeps things made ahead of demand for the next sandbox
// starts: the bwrap engine's spare launchers and the fork server's spare
// sandboxes. A Pool holds up to its size of them for the key of the latest
// Refill, makes more in the background, and discards those made for a
// key no longer wanted.
package spare

import (
	"sync"
	"time"
)

// Config is what a Pool is made with.
type Config[T any] struct {
	// Size is how many spares to keep; 0 keeps none.
	Size int
	// Delay is how long a round of filling waits before it makes the
	// first spare, so that making it does not compete for the CPU with the
	// start that asked for the round.
	Delay time.Duration
	// Discard ends a spare that will not be used.
	Discard func(T)
	// Failed is told why a spare could not be made; that ends the round,
	// and the next Refill starts another.
	Failed func(error)
}

// Pool keeps spares of type T, each made for a key of type K.
type Pool[K, T comparable] struct {
	cfg Config[T]

	mu       sync.Mutex // guards the fields below
	held     []held[K, T]
	wanted   bool // key and newSpare are set
	key      K
	newSpare func() (T, error)
	filling  bool // fill runs
	closed   bool
	// work counts fill and the discards of stale spares, for Close.
	work sync.WaitGroup
}

type held[K, T any] struct {
	key  K
	item T
}

// New returns an empty pool.
func New[K, T comparable](cfg Config[T]) *Pool[K, T] {
	return &Pool[K, T]{cfg: cfg}
}

// Take removes the spares made for key, up to and including the first
// that claim accepts, and returns that one; false when none is. A nil
// claim accepts every spare; a spare it refuses is dropped without being
// discarded (claim says whether someone else has it already).
func (p *Pool[K, T]) Take(key K, claim func(T) bool) (T, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for i := 0; i < len(p.held); i++ {
		h := p.held[i]
		if h.key != key {
			continue
		}
		p.held = append(p.held[:i], p.held[i+1:]...)
		i--
		if claim == nil || claim(h.item) {
			return h.item, true
		}
	}
	var none T
	return none, false
}

// Remove drops item from the pool without discarding it (it has gone).
func (p *Pool[K, T]) Remove(item T) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for i, h := range p.held {
		if h.item == item {
			p.held = append(p.held[:i], p.held[i+1:]...)
			return
		}
	}
}

// Held returns the spares kept for key.
func (p *Pool[K, T]) Held(key K) []T {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []T
	for _, h := range p.held {
		if h.key == key {
			out = append(out, h.item)
		}
	}
	return out
}

// Refill makes key the one spares are kept for, made by newSpare (a key that
// is kept for already keeps its newSpare), discards the spares made for
// another key, and starts filling the pool in the background unless that
// runs already.
func (p *Pool[K, T]) Refill(key K, newSpare func() (T, error)) {
	p.mu.Lock()
	var stale []held[K, T]
	if !p.wanted || p.key != key {
		p.wanted, p.key, p.newSpare = true, key, newSpare
		stale, p.held = p.held, nil
	}
	start := !p.closed && !p.filling && len(p.held) < p.cfg.Size
	if start {
		p.filling = true
		p.work.Add(1)
	}
	p.work.Add(len(stale))
	p.mu.Unlock()
	for _, h := range stale {
		go func() { defer p.work.Done(); p.cfg.Discard(h.item) }()
	}
	if start {
		go p.fill()
	}
}

// fill makes spares for the wanted key until there are Size of them. A
// spare made for a key no longer wanted is discarded.
func (p *Pool[K, T]) fill() {
	defer p.work.Done()
	if p.cfg.Delay > 0 {
		time.Sleep(p.cfg.Delay)
	}
	for {
		p.mu.Lock()
		key, newSpare := p.key, p.newSpare
		if p.closed || len(p.held) >= p.cfg.Size {
			p.filling = false
			p.mu.Unlock()
			return
		}
		p.mu.Unlock()
		item, err := newSpare()
		p.mu.Lock()
		if err != nil {
			p.filling = false
			p.mu.Unlock()
			p.cfg.Failed(err)
			return
		}
		keep := !p.closed && p.key == key
		if keep {
			p.held = append(p.held, held[K, T]{key: key, item: item})
		}
		p.mu.Unlock()
		if !keep {
			p.cfg.Discard(item)
		}
	}
}

// Close stops the filling, waits for it and for the discards under way,
// and returns the spares held, for the caller to discard. A spare made
// meanwhile is discarded.
func (p *Pool[K, T]) Close() []T {
	p.mu.Lock()
	p.closed = true
	hs := p.held
	p.held = nil
	p.mu.Unlock()
	p.work.Wait()
	out := make([]T, 0, len(hs))
	for _, h := range hs {
		out = append(out, h.item)
	}
	return out
}
