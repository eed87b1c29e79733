// Batches. MCP 2025-03-26 allowed JSON-RPC batches (a JSON array of
// messages) and 2025-06-18 removed them; codeexec takes none, and mcp-go
// answers one with a parse error, though it is valid JSON. BatchHandler
// and BatchStdio refuse a batch with an Invalid Request error that says to
// send one message at a time.
//
// Delete when: TestE2EBatchIsRefusedSayingSo passes without them.

package mcpfix

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"sync"

	"github.com/mark3labs/mcp-go/mcp"
)

const (
	batchRefused = "JSON-RPC batches (a JSON array of messages) are not accepted: MCP 2025-06-18 removed them, " +
		"and this server does not take them under 2025-03-26 either"
	// batchPerPOST ends the answer to a batch over HTTP.
	batchPerPOST = "; send each request or notification in a POST of its own"
	// batchPerLine ends the answer to a batch over stdio.
	batchPerLine = "; send each request or notification as a line of its own"
)

// batchRefusal is the error that refuses a batch; its id is null, as a batch
// has no single id.
func batchRefusal(hint string) []byte {
	b, _ := json.Marshal(mcp.NewJSONRPCError(mcp.NewRequestId(nil), mcp.INVALID_REQUEST, batchRefused+hint, nil))
	return b
}

// jsonSpace reports whether c is JSON whitespace.
func jsonSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\r' || c == '\n' }

// BatchHandler answers a POST whose body is a JSON array with 400 and the
// Invalid Request error; other requests go to next, their bodies whole.
func BatchHandler(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.Body == nil {
			next.ServeHTTP(w, r)
			return
		}
		body := bufio.NewReader(r.Body)
		for {
			c, err := body.Peek(1)
			if err != nil || !jsonSpace(c[0]) {
				break
			}
			_, _ = body.Discard(1)
		}
		if c, err := body.Peek(1); err == nil && c[0] == '[' {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadRequest)
			_, _ = w.Write(batchRefusal(batchPerPOST))
			return
		}
		r.Body = struct {
			io.Reader
			io.Closer
		}{body, r.Body}
		next.ServeHTTP(w, r)
	})
}

// BatchStdio wraps the two ends of a newline-delimited JSON-RPC stream (the
// stdio transport): a line that is a JSON array is taken out of in, and
// the Invalid Request error is written to out in its place. out is
// locked, so that the error and the server's messages, each written in one
// Write call, do not interleave.
func BatchStdio(in io.Reader, out io.Writer) (io.Reader, io.Writer) {
	w := &locked{w: out}
	return &batchLines{r: in, out: w, start: true}, w
}

type locked struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *locked) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(b)
}

// batchLines passes the bytes of in on but those of batch lines.
type batchLines struct {
	r     io.Reader
	out   io.Writer
	start bool // the next byte begins a line, or follows only whitespace of its start
	batch bool // the bytes are those of a batch line, up to its newline
}

func (q *batchLines) Read(b []byte) (int, error) {
	for {
		n, err := q.r.Read(b)
		kept := q.filter(b[:n])
		if err != nil && q.batch {
			// A batch as the last line, without its newline.
			q.batch = false
			q.refuse()
		}
		if kept > 0 || err != nil {
			return kept, err
		}
	}
}

// filter keeps the bytes of b that are not a batch line's at its start,
// and returns how many.
func (q *batchLines) filter(b []byte) int {
	kept := 0
	for _, c := range b {
		switch {
		case q.batch:
			if c == '\n' {
				q.batch, q.start = false, true
				q.refuse()
			}
			continue
		case q.start && c == '[':
			q.batch, q.start = true, false
			continue
		case c == '\n':
			q.start = true
		case q.start && !jsonSpace(c):
			q.start = false
		}
		b[kept] = c
		kept++
	}
	return kept
}

func (q *batchLines) refuse() {
	_, _ = q.out.Write(append(batchRefusal(batchPerLine), '\n'))
}
