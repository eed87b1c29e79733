package notfound

import (
	"io"
	"sync"

	"github.com/codeexec/codeexec/gateway/internal/jsonl"
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
	note := func(line []byte) {
		if id, uri, ok := parseRead(line); ok {
			p.add(id, uri)
		}
	}
	return jsonl.Lines(in, maxRequest, note), &answers{w: out, p: p}
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

// answers adds the URI to the not-found answers of the noted requests.
type answers struct {
	w io.Writer
	p *pending
}

func (a *answers) Write(b []byte) (int, error) {
	msg, ok := jsonl.Message(b)
	if !ok || a.p.empty() {
		return a.w.Write(b)
	}
	id, ok := jsonl.ResponseID(msg)
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
