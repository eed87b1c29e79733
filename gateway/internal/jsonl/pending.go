package jsonl

import (
	"io"
	"maps"
	"sync"
)

const (
	// MaxLine is the longest line a Filter hands to its note: a longer
	// one is a tool call, whose code the filters do not read, so neither
	// its id nor anything else of it is noted.
	MaxLine = 64 << 10
	// MaxPending bounds the requests a Filter holds awaiting their
	// answer: past it, a new one is not noted, and its answer passes as
	// it is.
	MaxPending = 1024
)

// Filter wraps the two ends of a stdio stream: note is handed each line
// read from in (of at most MaxLine bytes, without its newline) and may
// note its request in the Pending, which holds at most MaxPending; the
// answers written to out to the requests noted are handed to edit (see
// Answers).
func Filter[V any](in io.Reader, out io.Writer, note func(p *Pending[V], line []byte), edit func(msg []byte, v V) ([]byte, bool)) (io.Reader, io.Writer, *Pending[V]) {
	p := NewPending[V](MaxPending)
	return Lines(in, MaxLine, func(line []byte) { note(p, line) }), Answers(out, p, edit), p
}

// Pending holds requests seen on their way in whose answers have not gone
// out yet, by id (in IDKey's form), each with what a filter noted of it.
// It holds at most a set number: past it, a new request is not noted, and
// its answer passes as it is.
type Pending[V any] struct {
	mu    sync.Mutex
	limit int
	byID  map[string]V
}

// NewPending returns an empty Pending that holds at most limit requests.
func NewPending[V any](limit int) *Pending[V] {
	return &Pending[V]{limit: limit, byID: map[string]V{}}
}

// Add notes the request id with v, unless Pending is full.
func (p *Pending[V]) Add(id string, v V) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.byID) < p.limit {
		p.byID[id] = v
	}
}

// Forget drops the request id, if noted.
func (p *Pending[V]) Forget(id string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.byID, id)
}

// Take returns what was noted of the request id and forgets it; false
// when it was not noted.
func (p *Pending[V]) Take(id string) (V, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	v, ok := p.byID[id]
	delete(p.byID, id)
	return v, ok
}

// Len is the number of requests noted.
func (p *Pending[V]) Len() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.byID)
}

// All returns a copy of what is noted, by id.
func (p *Pending[V]) All() map[string]V {
	p.mu.Lock()
	defer p.mu.Unlock()
	return maps.Clone(p.byID)
}

// Answers returns a writer of w that hands the answer to each request in
// p to edit, with what was noted of the request, which is forgotten.
// edit returns what to write in the answer's place and true, or false to
// write the answer as it is; true with no bytes drops the answer. Every
// other Write passes through as it is: a request, a notification, the
// answer to a request not in p, a Write of any shape but one whole line
// (see Message).
func Answers[V any](w io.Writer, p *Pending[V], edit func(msg []byte, v V) ([]byte, bool)) io.Writer {
	return &answers[V]{w: w, p: p, edit: edit}
}

type answers[V any] struct {
	w    io.Writer
	p    *Pending[V]
	edit func([]byte, V) ([]byte, bool)
}

func (a *answers[V]) Write(b []byte) (int, error) {
	msg, ok := Message(b)
	if !ok || a.p.Len() == 0 {
		return a.w.Write(b)
	}
	id, ok := ResponseID(msg)
	if !ok {
		return a.w.Write(b)
	}
	v, ok := a.p.Take(id)
	if !ok {
		return a.w.Write(b)
	}
	out, replace := a.edit(msg, v)
	if !replace {
		return a.w.Write(b)
	}
	if len(out) > 0 {
		if _, err := a.w.Write(append(out, '\n')); err != nil {
			return 0, err
		}
	}
	return len(b), nil
}
