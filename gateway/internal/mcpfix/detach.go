// Dropped connections. mcp-go cancels a request when its HTTP connection
// closes. The transports of the revisions before 2026-07-28 say that a
// disconnection is not a cancellation (a client cancels with
// notifications/cancelled), and connections drop for reasons of their
// own: a proxy's idle timeout, a network change, a laptop lid. A
// run_python stopped by one would lose its effects, as the session rolls
// back to its last checkpoint; detached, it runs to its end or its
// timeout, and the session keeps what it did. Under 2026-07-28, closing
// the stream is how a client cancels, so those requests are left as they
// are.
//
// Delete when: mcp-go keeps a session-based request running after its
// connection drops, and answers a cancelled one with nothing:
// TestE2EHTTPDroppedConnectionIsNotACancellation and
// TestCancelledIsNotAnswered pass without Detach.

package mcpfix

import (
	"context"
	"net/http"
	"sync"
	"sync/atomic"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

// stateKey holds the state of a detached request.
type stateKey struct{}

// detachState is what a detached request's handler and its response writer
// share: the connection it came on, and whether its client cancelled it.
type detachState struct {
	// gone reports whether the connection has closed, and after runs f
	// once it has (stop keeps it from running).
	gone      func() bool
	after     func(f func()) (stop func() bool)
	cancelled atomic.Bool
}

// Detach returns r with a context that the end of its connection does
// not cancel, and w to answer it with, when r is a POST in an MCP session
// of a revision before 2026-07-28; any other request is returned as it
// is. The connection's end stays known, for Gone and OnGone, and w drops the
// answer of a request marked by MarkCancelled.
func Detach(w http.ResponseWriter, r *http.Request) (http.ResponseWriter, *http.Request) {
	if !Detaches(r) {
		return w, r
	}
	conn := r.Context()
	st := &detachState{
		gone:  func() bool { return conn.Err() != nil },
		after: func(f func()) func() bool { return context.AfterFunc(conn, f) },
	}
	return &detachedAnswer{ResponseWriter: w, st: st}, r.WithContext(context.WithValue(context.WithoutCancel(conn), stateKey{}, st))
}

// Detaches reports whether Detach detaches r: a POST that carries an MCP
// session ID and no protocol version of 2026-07-28 or later (mcp-go
// refuses a body that declares one without the header saying so).
func Detaches(r *http.Request) bool {
	return r.Method == http.MethodPost && r.Header.Get(server.HeaderKeySessionID) != "" &&
		!mcp.IsModernProtocol(r.Header.Get(mcp.HeaderProtocolVersion))
}

// OnGone runs f once the connection of the detached request of ctx has
// closed, unless stop is called first; for any other ctx it does nothing,
// and ok is false.
func OnGone(ctx context.Context, f func()) (stop func() bool, ok bool) {
	st, ok := ctx.Value(stateKey{}).(*detachState)
	if !ok {
		return func() bool { return false }, false
	}
	return st.after(f), true
}

// Gone reports whether ctx is that of a detached request whose connection
// has closed, so that nothing more can reach its client.
func Gone(ctx context.Context) bool {
	st, ok := ctx.Value(stateKey{}).(*detachState)
	return ok && st.gone()
}

// MarkCancelled marks the detached request of ctx as cancelled by its client
// (notifications/cancelled), which the specification asks not to answer:
// what its handler writes from then on is dropped. Nothing was written
// yet: the POST gets 202 Accepted and no body, as a notification does; an
// event stream was begun: it ends without the answer. Either way the
// TypeScript SDK, which has forgotten the request, reports nothing. It
// does nothing for any other ctx.
func MarkCancelled(ctx context.Context) {
	if st, ok := ctx.Value(stateKey{}).(*detachState); ok {
		st.cancelled.Store(true)
	}
}

// detachedAnswer is the response writer of a detached request.
type detachedAnswer struct {
	http.ResponseWriter
	st    *detachState
	mu    sync.Mutex
	wrote bool // the status has been written
}

func (a *detachedAnswer) WriteHeader(status int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.drop() {
		return
	}
	a.wrote = true
	a.ResponseWriter.WriteHeader(status)
}

func (a *detachedAnswer) Write(p []byte) (int, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.drop() {
		return len(p), nil
	}
	a.wrote = true
	return a.ResponseWriter.Write(p)
}

// drop reports whether the request was cancelled, answering 202 if
// nothing was written yet. a.mu is held.
func (a *detachedAnswer) drop() bool {
	if !a.st.cancelled.Load() {
		return false
	}
	if !a.wrote {
		a.wrote = true
		h := a.Header()
		h.Del("Content-Type")
		h.Del("Content-Length")
		a.ResponseWriter.WriteHeader(http.StatusAccepted)
	}
	return true
}

// Flush flushes what was written; mcp-go streams only to a writer that
// can flush.
func (a *detachedAnswer) Flush() {
	if f, ok := a.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the connection's writer.
func (a *detachedAnswer) Unwrap() http.ResponseWriter { return a.ResponseWriter }
