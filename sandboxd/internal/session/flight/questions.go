package flight

import (
	"slices"
	"sync"
)

// Questions are the questions of a session's runs that wait for their
// answers, of type A, in the order they were asked. The zero value is
// ready for use.
type Questions[Q, A any] struct {
	mu      sync.Mutex
	waiting map[string]*waiter[Q, A]
	order   []string
}

// waiter is one question waiting, and where its answer goes.
type waiter[Q, A any] struct {
	q  Q
	ch chan A
}

// Ask adds the question q, named id, and returns where its answer will
// come; done takes it from those waiting, answered or not.
func (qs *Questions[Q, A]) Ask(id string, q Q) (answer <-chan A, done func()) {
	ch := make(chan A, 1)
	qs.mu.Lock()
	defer qs.mu.Unlock()
	if qs.waiting == nil {
		qs.waiting = map[string]*waiter[Q, A]{}
	}
	qs.waiting[id] = &waiter[Q, A]{q: q, ch: ch}
	qs.order = append(qs.order, id)
	return ch, func() { qs.take(id) }
}

// Answer gives the question id its answer; false when it does not wait
// (answered already, or never asked). Only the first answer counts.
func (qs *Questions[Q, A]) Answer(id string, a A) bool {
	w := qs.take(id)
	if w == nil {
		return false
	}
	w.ch <- a // buffered, and only one answer takes w from the map
	return true
}

// Has reports whether the question id waits for its answer.
func (qs *Questions[Q, A]) Has(id string) bool {
	qs.mu.Lock()
	defer qs.mu.Unlock()
	return qs.waiting[id] != nil
}

// Waiting lists the questions that wait for answers, oldest first.
func (qs *Questions[Q, A]) Waiting() []Q {
	qs.mu.Lock()
	defer qs.mu.Unlock()
	out := make([]Q, 0, len(qs.order))
	for _, id := range qs.order {
		out = append(out, qs.waiting[id].q)
	}
	return out
}

// take removes the question id from those waiting, and returns its
// waiter; nil when it does not wait.
func (qs *Questions[Q, A]) take(id string) *waiter[Q, A] {
	qs.mu.Lock()
	defer qs.mu.Unlock()
	w := qs.waiting[id]
	delete(qs.waiting, id)
	qs.order = slices.DeleteFunc(qs.order, func(o string) bool { return o == id })
	return w
}
