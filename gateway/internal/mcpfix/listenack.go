// The acknowledgement of a listen stream. mcp-go writes a request's
// notifications from a forwarder goroutine and the request's result from
// the request's own goroutine. When the handler returns while the
// forwarder holds a notification it has taken off the session's channel
// but not yet written, the result goes out first and the notification is
// dropped. codeexec has nothing to subscribe to (no listChanged, no
// resource subscriptions), so subscriptions/listen (MCP 2026-07-28) queues
// notifications/subscriptions/acknowledged and returns at once; about one
// stream in twenty began with the result and carried no acknowledgement
// (the conformance suite's sep-2575-server-sends-subscription-ack).
// ListenAckHandler marks the response of each listen request, and the
// AfterListen hook, which runs before mcp-go writes the result, waits for
// that response's first write: the acknowledgement.
//
// Delete when: TestHTTPListenStreamIsAcknowledged passes without them.

package mcpfix

import (
	"context"
	"net/http"
	"sync"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
)

// listenWait bounds how long a result is held back for its acknowledgement. The
// forwarder writes it within microseconds; the bound only keeps a stream
// whose acknowledgement never comes (mcp-go changed, say) from hanging.
const listenWait = time.Second

type listenKey struct{}

// listenWritten is closed by the first write to a listen request's response.
type listenWritten struct {
	once sync.Once
	ch   chan struct{}
}

func (s *listenWritten) fire() { s.once.Do(func() { close(s.ch) }) }

// ListenAckHandler serves next, and marks the response of each subscriptions/listen
// POST for AfterListen. mcp-go streams only to a writer that can flush, so
// a writer that cannot is passed on as it is.
func ListenAckHandler(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f, ok := w.(http.Flusher)
		// A 2026-07-28 request must name its method in Mcp-Method, and
		// mcp-go refuses one whose header and body disagree.
		if !ok || r.Method != http.MethodPost || r.Header.Get(mcp.HeaderMethod) != string(mcp.MethodSubscriptionsListen) {
			next.ServeHTTP(w, r)
			return
		}
		s := &listenWritten{ch: make(chan struct{})}
		next.ServeHTTP(&listenWriter{ResponseWriter: w, flusher: f, written: s}, r.WithContext(context.WithValue(r.Context(), listenKey{}, s)))
	})
}

// AfterListen is an mcp-go after-subscriptions/listen hook. It returns
// once the listen request's response has been written to, or after a
// second, or when the request ends. Requests that ListenAckHandler did not mark
// (stdio, in-process) return at once: their notifications are written in
// order.
func AfterListen(ctx context.Context, _ any, _ *mcp.SubscriptionsListenRequest, _ *mcp.SubscriptionsListenResult) {
	s, ok := ctx.Value(listenKey{}).(*listenWritten)
	if !ok {
		return
	}
	t := time.NewTimer(listenWait)
	defer t.Stop()
	select {
	case <-s.ch:
	case <-ctx.Done():
	case <-t.C:
	}
}

// listenWriter reports its first write. The forwarder writes and flushes a
// notification under a lock that the result's writer takes next, so the
// acknowledgement is complete on the wire before the result starts.
type listenWriter struct {
	http.ResponseWriter
	flusher http.Flusher
	written *listenWritten
}

func (w *listenWriter) Write(p []byte) (int, error) {
	n, err := w.ResponseWriter.Write(p)
	w.written.fire()
	return n, err
}

func (w *listenWriter) Flush() { w.flusher.Flush() }

// Unwrap lets http.ResponseController reach the connection's writer.
func (w *listenWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
