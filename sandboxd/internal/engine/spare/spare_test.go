package spare

import (
	"errors"
	"slices"
	"sync"
	"testing"
	"time"
)

// item is a spare that knows whether it was discarded.
type item struct {
	key       string
	discarded bool
}

// fakes makes items and records what a Pool does with them.
type fakes struct {
	mu      sync.Mutex
	made    []*item
	failed  []error
	failFor string // a key whose items cannot be made
}

func (f *fakes) pool(size int) *Pool[string, *item] {
	return New[string](Config[*item]{
		Size: size,
		Discard: func(it *item) {
			f.mu.Lock()
			defer f.mu.Unlock()
			it.discarded = true
		},
		Failed: func(err error) {
			f.mu.Lock()
			defer f.mu.Unlock()
			f.failed = append(f.failed, err)
		},
	})
}

func (f *fakes) maker(key string) func() (*item, error) {
	return func() (*item, error) {
		f.mu.Lock()
		defer f.mu.Unlock()
		if key == f.failFor {
			return nil, errors.New("cannot make " + key)
		}
		it := &item{key: key}
		f.made = append(f.made, it)
		return it, nil
	}
}

// waitHeld waits until p holds its 2 spares for key and returns them.
func waitHeld(t *testing.T, p *Pool[string, *item], key string) []*item {
	const n = 2
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		held := p.Held(key)
		if len(held) == n {
			return held
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d spares for %q, want %d", len(held), key, n)
		}
		time.Sleep(time.Millisecond)
	}
}

func TestPool(t *testing.T) {
	t.Parallel()
	f := &fakes{}
	p := f.pool(2)
	p.Refill("a", f.maker("a"))
	held := waitHeld(t, p, "a")

	if _, ok := p.Take("b", nil); ok {
		t.Error("Take gave a spare made for another key")
	}
	got, ok := p.Take("a", nil)
	if !ok || !slices.Contains(held, got) {
		t.Fatalf("Take = %v, %v; want one of %v", got, ok, held)
	}
	p.Refill("a", f.maker("a")) // makes up for the one taken
	waitHeld(t, p, "a")

	// A spare claim refuses is dropped; the next one is taken.
	refused := 0
	got, ok = p.Take("a", func(*item) bool { refused++; return refused > 1 })
	if !ok || refused != 2 || len(p.Held("a")) != 0 {
		t.Errorf("Take with a claim: %v, %v after %d claims, %d left", got, ok, refused, len(p.Held("a")))
	}

	// Another key discards the spares made for the old one.
	p.Refill("a", f.maker("a"))
	old := waitHeld(t, p, "a")
	p.Refill("b", f.maker("b"))
	waitHeld(t, p, "b")
	p.Remove(p.Held("b")[0])
	if n := len(p.Held("b")); n != 1 {
		t.Errorf("after Remove: %d spares, want 1", n)
	}

	left := p.Close()
	if len(left) != 1 || left[0].key != "b" {
		t.Errorf("Close returned %v, want the one spare for b", left)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, it := range old {
		if !it.discarded {
			t.Errorf("stale spare %v was not discarded", it)
		}
	}
	if left[0].discarded {
		t.Error("Close discarded a spare it returned")
	}
}

func TestPoolFailure(t *testing.T) {
	t.Parallel()
	f := &fakes{failFor: "bad"}
	p := f.pool(2)
	p.Refill("bad", f.maker("bad"))
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		f.mu.Lock()
		n := len(f.failed)
		f.mu.Unlock()
		if n > 0 || time.Now().After(deadline) {
			break
		}
	}
	if left := p.Close(); len(left) != 0 {
		t.Errorf("Close returned %v, want none", left)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.failed) != 1 || len(f.made) != 0 {
		t.Errorf("failed %v, made %v; want one failure and nothing made", f.failed, f.made)
	}
	p.Refill("good", f.maker("good"))
	if n := len(p.Held("good")); n != 0 {
		t.Errorf("a closed pool holds %d spares", n)
	}
}
