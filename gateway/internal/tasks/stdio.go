package tasks

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"sync"

	"github.com/mark3labs/mcp-go/mcp"
)

// Stdio wraps the two ends of the stdio transport for the extension:
// under 2026-07-28 (a request whose _meta names that protocol version) the
// extension's methods are taken out of what mcp-go reads and answered
// here, on out, through runs for tenant; and a tool result that marks a
// task is written as the task. ctx bounds the answers in flight.
func Stdio(ctx context.Context, in io.Reader, out io.Writer, runs Runs, tenant string) (io.Reader, io.Writer) {
	w := &stdioOut{w: out}
	h := &handler{runs: runs, tenant: func(context.Context) string { return tenant }}
	r := &stdioIn{r: bufio.NewReaderSize(in, 64<<10), take: func(line []byte) bool {
		req, ok := modernTaskRequest(line)
		if !ok {
			return false
		}
		go func() {
			b, err := json.Marshal(h.reply(ctx, req))
			if err == nil {
				_, _ = w.Write(append(b, '\n'))
			}
		}()
		return true
	}}
	return r, w
}

// modernTaskRequest reads line as one of the extension's methods under
// 2026-07-28.
func modernTaskRequest(line []byte) (request, bool) {
	if !bytes.Contains(line, []byte(`"tasks/`)) {
		return request{}, false
	}
	var req request
	if json.Unmarshal(line, &req) != nil || len(req.ID) == 0 {
		return request{}, false
	}
	switch req.Method {
	case "tasks/get", "tasks/update", "tasks/cancel":
	default:
		return request{}, false
	}
	v, _ := req.Params.Meta[mcp.MetaKeyProtocolVersion].(string)
	return req, mcp.IsModernProtocol(v)
}

// stdioIn passes the lines of r on, but those take takes.
type stdioIn struct {
	r       *bufio.Reader
	take    func(line []byte) bool
	pending []byte
	// err ends the stream once pending is read.
	err error
}

func (s *stdioIn) Read(p []byte) (int, error) {
	for len(s.pending) == 0 && s.err == nil {
		line, err := s.r.ReadBytes('\n')
		s.err = err
		// A last line without its newline is passed on as it is.
		if len(line) > 0 && (err != nil || !s.take(bytes.TrimSpace(line))) {
			s.pending = line
		}
	}
	if len(s.pending) == 0 {
		return 0, s.err
	}
	n := copy(p, s.pending)
	s.pending = s.pending[n:]
	return n, nil
}

// stdioOut writes one message at a time (mcp-go's and the answers here),
// each a line, rewriting a tool result that marks a task.
type stdioOut struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *stdioOut) Write(b []byte) (int, error) {
	out := b
	if bytes.Contains(b, marker) {
		out = rewrite(b)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, err := s.w.Write(out); err != nil {
		return 0, err
	}
	return len(b), nil
}
