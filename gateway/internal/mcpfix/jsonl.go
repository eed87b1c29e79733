// The stdio stream, as the stdio fixes read it: the newline-delimited
// JSON-RPC lines read from the client, the ids of the messages written to
// it, and the requests whose answers are still to come. NotFoundStdio and
// CancelledStdio are built on it; it goes with the last of them.

package mcpfix

import (
	"bytes"
	"encoding/json"
	"io"
	"maps"
	"sync"
)

// readLines returns a reader of r that passes each whole line read through it
// to each, without its newline, once its end is read. A line longer than
// limit bytes is neither copied nor passed; nor is a last line without its
// newline.
func readLines(r io.Reader, limit int, each func(line []byte)) io.Reader {
	return &lineReader{r: r, max: limit, each: each}
}

type lineReader struct {
	r    io.Reader
	max  int
	each func([]byte)
	line []byte // the start of a line whose end has not been read yet
	long bool   // that line is longer than max
}

func (q *lineReader) Read(b []byte) (int, error) {
	n, err := q.r.Read(b)
	q.scan(b[:n])
	return n, err
}

func (q *lineReader) scan(b []byte) {
	for len(b) > 0 {
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			q.keep(b)
			return
		}
		line := b[:i]
		if len(q.line) > 0 || q.long {
			q.keep(line)
			line = q.line
		}
		if !q.long && len(line) <= q.max {
			q.each(line)
		}
		q.line, q.long = q.line[:0], false
		b = b[i+1:]
	}
}

// keep adds part of a line to q.line, unless the line is longer than max.
func (q *lineReader) keep(part []byte) {
	if q.long {
		return
	}
	if len(q.line)+len(part) > q.max {
		q.line, q.long = q.line[:0], true
		return
	}
	q.line = append(q.line, part...)
}

// idKey is the form in which an id is compared: mcp-go decodes a request's
// id and encodes it again in the answer, so 1.0 comes back as 1.
func idKey(raw json.RawMessage) (string, bool) {
	var v any
	if json.Unmarshal(raw, &v) != nil || v == nil {
		return "", false
	}
	b, err := json.Marshal(v)
	if err != nil {
		return "", false
	}
	return string(b), true
}

// responseID returns the id of a response in idKey's form, and false for
// a request or a notification.
func responseID(msg []byte) (string, bool) {
	var a struct {
		Method string          `json:"method"`
		ID     json.RawMessage `json:"id"`
	}
	if json.Unmarshal(msg, &a) != nil || a.Method != "" || len(a.ID) == 0 {
		return "", false
	}
	return idKey(a.ID)
}

// oneMessage returns the message that b holds when b is one whole line, as
// mcp-go writes each message in one Write call, a newline at its end; it
// returns false for a Write of any other shape.
func oneMessage(b []byte) ([]byte, bool) {
	msg, ok := bytes.CutSuffix(b, []byte("\n"))
	return msg, ok && bytes.IndexByte(msg, '\n') < 0
}

const (
	// maxLine is the longest line a stdioFilter hands to its note: a longer
	// one is a tool call, whose code the filters do not read, so neither
	// its id nor anything else of it is noted.
	maxLine = 64 << 10
	// maxPending bounds the requests a stdioFilter holds awaiting their
	// answer: past it, a new one is not noted, and its answer passes as
	// it is.
	maxPending = 1024
)

// stdioFilter wraps the two ends of a stdio stream: note is handed each line
// read from in (of at most maxLine bytes, without its newline) and may
// note its request in the pending, which holds at most maxPending; the
// answers written to out to the requests noted are handed to edit (see
// editAnswers).
func stdioFilter[V any](in io.Reader, out io.Writer, note func(p *pending[V], line []byte), edit func(msg []byte, v V) ([]byte, bool)) (io.Reader, io.Writer, *pending[V]) {
	p := newPending[V](maxPending)
	return readLines(in, maxLine, func(line []byte) { note(p, line) }), editAnswers(out, p, edit), p
}

// pending holds requests seen on their way in whose answers have not gone
// out yet, by id (in idKey's form), each with what a filter noted of it.
// It holds at most a set number: past it, a new request is not noted, and
// its answer passes as it is.
type pending[V any] struct {
	mu    sync.Mutex
	limit int
	byID  map[string]V
}

// newPending returns an empty pending that holds at most limit requests.
func newPending[V any](limit int) *pending[V] {
	return &pending[V]{limit: limit, byID: map[string]V{}}
}

// Add notes the request id with v, unless p is full.
func (p *pending[V]) Add(id string, v V) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.byID) < p.limit {
		p.byID[id] = v
	}
}

// Forget drops the request id, if noted.
func (p *pending[V]) Forget(id string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.byID, id)
}

// Take returns what was noted of the request id and forgets it; false
// when it was not noted.
func (p *pending[V]) Take(id string) (V, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	v, ok := p.byID[id]
	delete(p.byID, id)
	return v, ok
}

// Len is the number of requests noted.
func (p *pending[V]) Len() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.byID)
}

// All returns a copy of what is noted, by id.
func (p *pending[V]) All() map[string]V {
	p.mu.Lock()
	defer p.mu.Unlock()
	return maps.Clone(p.byID)
}

// editAnswers returns a writer of w that hands the answer to each request in
// p to edit, with what was noted of the request, which is forgotten.
// edit returns what to write in the answer's place and true, or false to
// write the answer as it is; true with no bytes drops the answer. Every
// other Write passes through as it is: a request, a notification, the
// answer to a request not in p, a Write of any shape but one whole line
// (see oneMessage).
func editAnswers[V any](w io.Writer, p *pending[V], edit func(msg []byte, v V) ([]byte, bool)) io.Writer {
	return &answers[V]{w: w, p: p, edit: edit}
}

type answers[V any] struct {
	w    io.Writer
	p    *pending[V]
	edit func([]byte, V) ([]byte, bool)
}

func (a *answers[V]) Write(b []byte) (int, error) {
	msg, ok := oneMessage(b)
	if !ok || a.p.Len() == 0 {
		return a.w.Write(b)
	}
	id, ok := responseID(msg)
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
