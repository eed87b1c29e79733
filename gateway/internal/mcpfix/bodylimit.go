// Body size. mcp-go reads a request's whole body into memory and has no
// limit of its own. BodyLimitHandler refuses an over-size POST with 413
// before it is read.
//
// Delete when: mcp-go bounds bodies itself and answers as
// TestE2EHTTPBodyOverTheLimitIs413 expects without BodyLimitHandler.

package mcpfix

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/mark3labs/mcp-go/mcp"
)

// BodyLimitHandler serves next with bodies of at most limit bytes; a larger one is
// answered with 413 and a JSON-RPC error that gives the limit. hint, if
// set, follows the limit in that message and says what to send instead.
func BodyLimitHandler(next http.Handler, limit int64, hint string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ContentLength > limit {
			refuseBody(w, limit, hint)
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, limit)
		if r.ContentLength >= 0 || r.Method != http.MethodPost {
			// The server stops a body at its Content-Length, which is
			// within the limit.
			next.ServeHTTP(w, r)
			return
		}
		// A body of unknown length is read here, so that one over the
		// limit gets the same answer rather than mcp-go's parse error.
		body, err := io.ReadAll(r.Body)
		if tooLarge := (*http.MaxBytesError)(nil); errors.As(err, &tooLarge) {
			refuseBody(w, limit, hint)
			return
		}
		rest := io.Reader(bytes.NewReader(body))
		if err != nil {
			// next reads the same bytes and then the same error.
			rest = io.MultiReader(rest, errReader{err})
		}
		r.Body = io.NopCloser(rest)
		next.ServeHTTP(w, r)
	})
}

// refuseBody answers an over-size request.
func refuseBody(w http.ResponseWriter, limit int64, hint string) {
	msg := fmt.Sprintf("the request body is over %d bytes (%d MiB), the most this endpoint accepts", limit, limit>>20)
	if hint != "" {
		msg += "; " + hint
	}
	// The id is unknown: the body that holds it was not read.
	body, _ := json.Marshal(mcp.NewJSONRPCError(mcp.NewRequestId(nil), mcp.INVALID_REQUEST, msg, nil))
	w.Header().Set("Content-Type", "application/json")
	// The unread rest of the body would otherwise hold the connection.
	w.Header().Set("Connection", "close")
	w.WriteHeader(http.StatusRequestEntityTooLarge)
	_, _ = w.Write(body)
}

// errReader fails every read with err: what follows the bytes of a body
// read ahead of the handler whose reading failed.
type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) { return 0, e.err }
