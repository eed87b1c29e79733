// Package detach keeps the requests of a session-based MCP client running
// when their HTTP connection drops. The transports of the revisions before
// 2026-07-28 say that a disconnection is not a cancellation (a client
// cancels with notifications/cancelled), and connections drop for reasons
// of their own: a proxy's idle timeout, a network change, a laptop lid. A
// run_python stopped by one would lose its effects, as the session rolls
// back to its last checkpoint; detached, it runs to its end or its
// timeout, and the session keeps what it did. Under 2026-07-28, closing
// the stream is how a client cancels, so those requests are left as
// they are.
package detach

import (
	"context"
	"net/http"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

// connKey holds the context of the connection a detached request came on.
type connKey struct{}

// Request returns r with a context that the end of its connection does
// not cancel, when r is a POST in an MCP session of a revision before
// 2026-07-28; any other request is returned as it is. The connection's
// context stays reachable, for Gone.
func Request(r *http.Request) *http.Request {
	if !Applies(r) {
		return r
	}
	conn := r.Context()
	return r.WithContext(context.WithValue(context.WithoutCancel(conn), connKey{}, conn))
}

// Applies reports whether Request detaches r: a POST that carries an MCP
// session ID and no protocol version of 2026-07-28 or later (mcp-go
// refuses a body that declares one without the header saying so).
func Applies(r *http.Request) bool {
	return r.Method == http.MethodPost && r.Header.Get(server.HeaderKeySessionID) != "" &&
		!mcp.IsModernProtocol(r.Header.Get(mcp.HeaderProtocolVersion))
}

// Connection returns the context of the connection that a detached
// request's ctx came on, and false for any other ctx.
func Connection(ctx context.Context) (context.Context, bool) {
	conn, ok := ctx.Value(connKey{}).(context.Context)
	return conn, ok
}

// Gone reports whether ctx is that of a detached request whose connection
// has closed, so that nothing more can reach its client.
func Gone(ctx context.Context) bool {
	conn, ok := Connection(ctx)
	return ok && conn.Err() != nil
}
