package notfound

import (
	"bytes"
	"io"
	"sync"
)

const (
	// maxRequest is the longest line read as a possible resources/read
	// request; a longer one is a tool call, and is not copied. A read of a
	// longer URI is answered without the data.
	maxRequest = 64 << 10
	// maxPending bounds the reads awaiting their answer; past it, new ones
	// are answered without the data.
	maxPending = 1024
)

// Stdio wraps the two ends of a newline-delimited JSON-RPC stream (the
// stdio transport): reads of resources/read requests from in are noted,
// and mcp-go's not-found answers to them written to out get the URI.
// mcp-go writes each message to out in one Write call, a newline at its
// end; a Write of any other shape passes through as it is.
func Stdio(in io.Reader, out io.Writer) (io.Reader, io.Writer) {
	p := &pending{reads: map[string]string{}}
	return &requests{r: in, p: p}, &answers{w: out, p: p}
}

// pending maps the id of each resources/read not yet answered to its URI.
type pending struct {
	mu    sync.Mutex
	reads map[string]string
}

func (p *pending) add(id, uri string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.reads) < maxPending {
		p.reads[id] = uri
	}
}

func (p *pending) empty() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.reads) == 0
}

func (p *pending) take(id string) (string, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	uri, ok := p.reads[id]
	delete(p.reads, id)
	return uri, ok
}

// requests notes the resources/read requests in what is read through it.
type requests struct {
	r    io.Reader
	p    *pending
	line []byte // the start of a line whose end has not been read yet
	long bool   // that line is longer than maxRequest
}

func (q *requests) Read(b []byte) (int, error) {
	n, err := q.r.Read(b)
	q.scan(b[:n])
	return n, err
}

func (q *requests) scan(b []byte) {
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
		if !q.long {
			if id, uri, ok := parseRead(line); ok {
				q.p.add(id, uri)
			}
		}
		q.line, q.long = q.line[:0], false
		b = b[i+1:]
	}
}

// keep adds part of a line to q.line, unless the line is too long to be a
// resources/read request.
func (q *requests) keep(part []byte) {
	if q.long {
		return
	}
	if len(q.line)+len(part) > maxRequest {
		q.line, q.long = q.line[:0], true
		return
	}
	q.line = append(q.line, part...)
}

// answers adds the URI to the not-found answers of the noted requests.
type answers struct {
	w io.Writer
	p *pending
}

func (a *answers) Write(b []byte) (int, error) {
	msg, ok := bytes.CutSuffix(b, []byte("\n"))
	if !ok || bytes.IndexByte(msg, '\n') >= 0 || a.p.empty() {
		return a.w.Write(b)
	}
	id, ok := responseID(msg)
	if !ok {
		return a.w.Write(b)
	}
	uri, ok := a.p.take(id)
	if !ok {
		return a.w.Write(b)
	}
	out, changed := withURI(msg, uri)
	if !changed {
		return a.w.Write(b)
	}
	if _, err := a.w.Write(append(out, '\n')); err != nil {
		return 0, err
	}
	return len(b), nil
}
