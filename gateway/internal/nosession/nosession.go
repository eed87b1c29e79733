// Package nosession answers with 400 Bad Request a request to the MCP
// endpoint that a session-based revision (up to 2025-11-25) of the
// protocol makes outside any session, as the specification asks of a
// server that requires one. mcp-go answers a POST without Mcp-Session-Id
// 404, which tells a client that its session expired and to initialise
// again, though it had none, and a DELETE without one 200, though it ended
// nothing. Under 2026-07-28 there are no sessions: a request that states
// that revision, in its MCP-Protocol-Version header or its _meta, goes on
// to mcp-go as it is, and so does initialize, which opens a session.
package nosession

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

const (
	// PostWithout answers a POST outside any session.
	PostWithout = "this request has no Mcp-Session-Id header and is not initialize: under the MCP revisions up to 2025-11-25 " +
		"a client POSTs initialize first and sends the Mcp-Session-Id header of its answer on every later request; " +
		"a client of 2026-07-28, which has no sessions, sends the header " + mcp.HeaderProtocolVersion + ": 2026-07-28 " +
		"and the version in each request's _meta (" + mcp.MetaKeyProtocolVersion + ")"
	// DeleteWithout answers a DELETE outside any session.
	DeleteWithout = "a DELETE of /mcp ends the MCP session that its Mcp-Session-Id header names, and this request has no such header: " +
		"send the Mcp-Session-Id of the session to end; under 2026-07-28 there are no sessions to end"
)

// message is what this package reads of a POST.
type message struct {
	Method string          `json:"method"`
	ID     json.RawMessage `json:"id"`
	Params struct {
		Meta map[string]any `json:"_meta"`
	} `json:"params"`
}

// Handler refuses a POST or DELETE of a session-based client that carries
// no Mcp-Session-Id; every other request reaches next untouched.
func Handler(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get(server.HeaderKeySessionID) != "" || mcp.IsModernProtocol(r.Header.Get(mcp.HeaderProtocolVersion)) {
			next.ServeHTTP(w, r)
			return
		}
		switch r.Method {
		case http.MethodDelete:
			http.Error(w, DeleteWithout, http.StatusBadRequest)
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
		var m message
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
		out, _ := json.Marshal(mcp.NewJSONRPCError(mcp.NewRequestId(id), mcp.INVALID_REQUEST, PostWithout, nil))
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		_, _ = w.Write(out)
	})
}

type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) { return 0, e.err }
