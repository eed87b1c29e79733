// Package cursor rewrites mcp-go's answer to a list request (tools/list,
// resources/list, …) whose cursor is not one the server gave. mcp-go
// decodes a cursor as base64 and answers one that is not with Invalid
// Params (-32602) and the decoder's message, 'illegal base64 data at input
// byte 4', which does not say that the cursor is at fault nor what to send.
// It builds that error itself, before any of the server's code runs, so the
// message is replaced as the answer is written: mcp-go writes each message
// in one Write call, as one JSON line over stdio and as a JSON body or one
// server-sent event over HTTP. The code stays -32602, as the specification
// asks for an invalid cursor.
package cursor

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"regexp"
)

// Invalid is the message that answers a cursor this server did not give.
const Invalid = "the cursor is not one this server gave: pass the nextCursor of a previous answer to the same list method, " +
	"or no cursor to list from the start"

// marker is in every write that holds mcp-go's answer to such a cursor.
var marker = []byte("illegal base64 data at input byte ")

// decodeError matches that answer's error: the code and message as mcp-go
// encodes them (outside a JSON string, where a quote would be escaped).
var decodeError = regexp.MustCompile(`"code":-32602,"message":"illegal base64 data at input byte [0-9]+"`)

var replacement = func() []byte {
	msg, _ := json.Marshal(Invalid)
	return append([]byte(`"code":-32602,"message":`), msg...)
}()

// rewrite returns b with the message replaced, and whether it was there.
func rewrite(b []byte) ([]byte, bool) {
	if !bytes.Contains(b, marker) || !decodeError.Match(b) {
		return b, false
	}
	return decodeError.ReplaceAllLiteral(b, replacement), true
}

// Writer wraps the writer of a newline-delimited JSON-RPC stream (the
// stdio transport).
func Writer(out io.Writer) io.Writer { return &writer{w: out} }

type writer struct{ w io.Writer }

func (w *writer) Write(b []byte) (int, error) {
	out, changed := rewrite(b)
	if !changed {
		return w.w.Write(b)
	}
	if _, err := w.w.Write(out); err != nil {
		return 0, err
	}
	return len(b), nil
}

// Handler serves next, rewriting the answers it writes.
func Handler(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		next.ServeHTTP(&response{ResponseWriter: w}, r)
	})
}

type response struct{ http.ResponseWriter }

func (r *response) Write(b []byte) (int, error) {
	out, changed := rewrite(b)
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
func (r *response) Flush() {
	if f, ok := r.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the connection's writer.
func (r *response) Unwrap() http.ResponseWriter { return r.ResponseWriter }
