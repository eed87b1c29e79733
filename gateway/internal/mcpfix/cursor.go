// Foreign list cursors. mcp-go decodes a list request's cursor as base64
// and answers one that is not with Invalid Params (-32602) and the
// decoder's message, 'illegal base64 data at input byte 4', which does not
// say that the cursor is at fault nor what to send. It builds that error
// itself, before any of the server's code runs, so CursorHandler and
// CursorWriter replace the message as the answer is written: mcp-go writes
// each message in one Write call, as one JSON line over stdio and as a
// JSON body or one server-sent event over HTTP. The code stays -32602, as
// the specification asks for an invalid cursor.
//
// Delete when: TestE2EListWithForeignCursorSaysWhatToSend passes without
// them.

package mcpfix

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"regexp"
)

// invalidCursor is the message that answers a cursor this server did not give.
const invalidCursor = "the cursor is not one this server gave: pass the nextCursor of a previous answer to the same list method, " +
	"or no cursor to list from the start"

// cursorMarker is in every write that holds mcp-go's answer to such a cursor.
var cursorMarker = []byte("illegal base64 data at input byte ")

// cursorDecodeError matches that answer's error: the code and message as mcp-go
// encodes them (outside a JSON string, where a quote would be escaped).
var cursorDecodeError = regexp.MustCompile(`"code":-32602,"message":"illegal base64 data at input byte [0-9]+"`)

var cursorReplacement = func() []byte {
	msg, _ := json.Marshal(invalidCursor)
	return append([]byte(`"code":-32602,"message":`), msg...)
}()

// rewriteCursor returns b with the message replaced, and whether it was there.
func rewriteCursor(b []byte) ([]byte, bool) {
	if !bytes.Contains(b, cursorMarker) || !cursorDecodeError.Match(b) {
		return b, false
	}
	return cursorDecodeError.ReplaceAllLiteral(b, cursorReplacement), true
}

// CursorWriter wraps the writer of a newline-delimited JSON-RPC stream (the
// stdio transport).
func CursorWriter(out io.Writer) io.Writer { return &cursorOut{w: out} }

type cursorOut struct{ w io.Writer }

func (w *cursorOut) Write(b []byte) (int, error) {
	out, changed := rewriteCursor(b)
	if !changed {
		return w.w.Write(b)
	}
	if _, err := w.w.Write(out); err != nil {
		return 0, err
	}
	return len(b), nil
}

// CursorHandler serves next, rewriting the answers it writes.
func CursorHandler(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		next.ServeHTTP(&cursorResponse{ResponseWriter: w}, r)
	})
}

type cursorResponse struct{ http.ResponseWriter }

func (r *cursorResponse) Write(b []byte) (int, error) {
	out, changed := rewriteCursor(b)
	if !changed {
		return r.ResponseWriter.Write(b)
	}
	// mcp-go sets no Content-Length on these answers; one set by another
	// layer would now be wrong.
	r.Header().Del("Content-Length")
	if _, err := r.ResponseWriter.Write(out); err != nil {
		return 0, err
	}
	return len(b), nil
}

// Flush flushes the event streams that mcp-go writes through r.
func (r *cursorResponse) Flush() {
	if f, ok := r.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the connection's writer.
func (r *cursorResponse) Unwrap() http.ResponseWriter { return r.ResponseWriter }
