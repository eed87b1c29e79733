// Requests outside any session. The specification asks a server that
// requires sessions to answer 400 Bad Request to a request that a
// session-based revision (up to 2025-11-25) makes without one. mcp-go
// answers a POST without Mcp-Session-Id 404, which tells a client that its
// session expired and to initialise again, though it had none; a DELETE
// without one 200, though it ended nothing; and a GET without one with
// the stream of a new, empty session that nothing is ever sent on, so that
// a client of the old HTTP+SSE transport waits for its endpoint event
// forever. NoSessionHandler answers all three 400, saying what to send.
// Under 2026-07-28 there are no sessions: a request that states that
// revision, in its MCP-Protocol-Version header or its _meta, goes on to
// mcp-go as it is, and so does initialize, which opens a session.
//
// Delete when: TestE2EHTTPRequestOutsideSessionIs400 and
// TestE2EHTTPGetWithoutSessionSaysWhatToDo pass without NoSessionHandler.

package mcpfix

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

const (
	// noSessionPost answers a POST outside any session.
	noSessionPost = "this request has no Mcp-Session-Id header and is not initialize: under the MCP revisions up to 2025-11-25 " +
		"a client POSTs initialize first and sends the Mcp-Session-Id header of its answer on every later request; " +
		"a client of 2026-07-28, which has no sessions, sends the header " + mcp.HeaderProtocolVersion + ": 2026-07-28 " +
		"and the version in each request's _meta (" + mcp.MetaKeyProtocolVersion + ")"
	// noSessionGet answers a GET outside any session.
	noSessionGet = "a GET of /mcp opens the event stream of an MCP session, and this request has no Mcp-Session-Id header: " +
		"a client of streamable HTTP POSTs initialize first and sends the Mcp-Session-Id header of its answer on every request. " +
		"A client configured for the older HTTP+SSE transport (type \"sse\", revision 2024-11-05) must be configured for " +
		"streamable HTTP (type \"http\" or \"streamable-http\") at this same URL, which codeexec serves instead"
	// noSessionDelete answers a DELETE outside any session.
	noSessionDelete = "a DELETE of /mcp ends the MCP session that its Mcp-Session-Id header names, and this request has no such header: " +
		"send the Mcp-Session-Id of the session to end; under 2026-07-28 there are no sessions to end"
)

// sessionlessPost is what NoSessionHandler reads of a POST.
type sessionlessPost struct {
	Method string          `json:"method"`
	ID     json.RawMessage `json:"id"`
	Params struct {
		Meta map[string]any `json:"_meta"`
	} `json:"params"`
}

// NoSessionHandler refuses a POST, GET or DELETE of a session-based client
// that carries no Mcp-Session-Id; every other request reaches next
// untouched.
func NoSessionHandler(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get(server.HeaderKeySessionID) != "" || mcp.IsModernProtocol(r.Header.Get(mcp.HeaderProtocolVersion)) {
			next.ServeHTTP(w, r)
			return
		}
		switch r.Method {
		case http.MethodDelete:
			http.Error(w, noSessionDelete, http.StatusBadRequest)
			return
		case http.MethodGet:
			http.Error(w, noSessionGet, http.StatusBadRequest)
			return
		case http.MethodPost:
		default:
			next.ServeHTTP(w, r)
			return
		}
		if r.Body == nil {
			next.ServeHTTP(w, r)
			return
		}
		body, err := io.ReadAll(r.Body)
		rest := io.Reader(bytes.NewReader(body))
		if err != nil {
			// next reads the same bytes and then the same error.
			rest = io.MultiReader(rest, errReader{err})
		}
		r.Body = io.NopCloser(rest)
		var m sessionlessPost
		// A body that is not a request or a notification (not JSON, a
		// response, one without a method) is left for mcp-go to answer, as
		// is a request whose _meta states 2026-07-28.
		if err != nil || json.Unmarshal(body, &m) != nil || m.Method == "" || m.Method == string(mcp.MethodInitialize) {
			next.ServeHTTP(w, r)
			return
		}
		if v, _ := m.Params.Meta[mcp.MetaKeyProtocolVersion].(string); mcp.IsModernProtocol(v) {
			next.ServeHTTP(w, r)
			return
		}
		var id any
		if len(m.ID) > 0 {
			_ = json.Unmarshal(m.ID, &id)
		}
		out, _ := json.Marshal(mcp.NewJSONRPCError(mcp.NewRequestId(id), mcp.INVALID_REQUEST, noSessionPost, nil))
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		_, _ = w.Write(out)
	})
}
