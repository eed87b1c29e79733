// Package listenack keeps the acknowledgement that opens a
// subscriptions/listen stream (MCP 2026-07-28) from being lost over
// streamable HTTP.
//
// mcp-go v1.2.1 writes a request's notifications from a forwarder
// goroutine and the request's result from the request's own goroutine.
// When the handler returns while the forwarder holds a notification it has
// taken off the session's channel but not yet written, the result goes out
// first and the notification is dropped. codeexec has nothing to subscribe
// to (no listChanged, no resource subscriptions), so subscriptions/listen
// queues notifications/subscriptions/acknowledged and returns at once; about
// one stream in twenty began with the result and carried no
// acknowledgement (the conformance suite's
// sep-2575-server-sends-subscription-ack). Handler marks the response of
// each listen request, and the AfterListen hook, which runs before mcp-go
// writes the result, waits for that response's first write: the
// acknowledgement.
package listenack

import (
	"context"
	"net/http"
	"sync"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
)

// wait bounds how long a result is held back for its acknowledgement. The
// forwarder writes it within microseconds; the bound only keeps a stream
// whose acknowledgement never comes (mcp-go changed, say) from hanging.
const wait = time.Second

type key struct{}

// written is closed by the first write to a listen request's response.
type written struct {
	once sync.Once
	ch   chan struct{}
}

func (s *written) fire() { s.once.Do(func() { close(s.ch) }) }

// Handler serves next, and marks the response of each subscriptions/listen
// POST for AfterListen. mcp-go streams only to a writer that can flush, so
// a writer that cannot is passed on as it is.
func Handler(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f, ok := w.(http.Flusher)
		// A 2026-07-28 request must name its method in Mcp-Method, and
		// mcp-go refuses one whose header and body disagree.
		if !ok || r.Method != http.MethodPost || r.Header.Get(mcp.HeaderMethod) != string(mcp.MethodSubscriptionsListen) {
			next.ServeHTTP(w, r)
			return
		}
		s := &written{ch: make(chan struct{})}
		next.ServeHTTP(&writer{ResponseWriter: w, flusher: f, written: s}, r.WithContext(context.WithValue(r.Context(), key{}, s)))
	})
}

// AfterListen is an mcp-go after-subscriptions/listen hook. It returns
// once the listen request's response has been written to, or after a
// second, or when the request ends. Requests that Handler did not mark
// (stdio, in-process) return at once: their notifications are written in
// order.
func AfterListen(ctx context.Context, _ any, _ *mcp.SubscriptionsListenRequest, _ *mcp.SubscriptionsListenResult) {
	s, ok := ctx.Value(key{}).(*written)
	if !ok {
		return
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-s.ch:
	case <-ctx.Done():
	case <-t.C:
	}
}

// writer reports its first write. The forwarder writes and flushes a
// notification under a lock that the result's writer takes next, so the
// acknowledgement is complete on the wire before the result starts.
type writer struct {
	http.ResponseWriter
	flusher http.Flusher
	written *written
}

func (w *writer) Write(p []byte) (int, error) {
	n, err := w.ResponseWriter.Write(p)
	w.written.fire()
	return n, err
}

func (w *writer) Flush() { w.flusher.Flush() }

// Unwrap lets http.ResponseController reach the connection's writer.
func (w *writer) Unwrap() http.ResponseWriter { return w.ResponseWriter }
