// The URI of an unknown resource. The specification asks, in both eras,
// that the error answering a resources/read of a resource the server does
// not have carry the URI as error.data.uri (SEP-2164 under 2026-07-28,
// code -32602; before it, the -32002 example in the resources page), so
// that a client can tell which read failed without parsing the message.
// mcp-go builds that error itself, when no resource or template matches,
// before any of the server's code runs, and gives it no data; none of its
// hooks or options can change it. NotFoundHandler (streamable HTTP) and
// NotFoundStdio (newline-delimited JSON) therefore note the id and URI of
// each resources/read request on its way in and add the data to mcp-go's
// answer on its way out. Every other message passes through as it is, and
// so does every other error, including mcp-go's not-found errors once they
// carry data of their own.
//
// Delete when: TestUnknownResourceErrorNamesTheURI passes without them.

package mcpfix

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

// readRequest is what NotFoundHandler and NotFoundStdio read of a request.
type readRequest struct {
	Method string          `json:"method"`
	ID     json.RawMessage `json:"id"`
	Params struct {
		URI string `json:"uri"`
	} `json:"params"`
}

// parseRead returns the id (in idKey's form) and the URI of a resources/read
// request, and false for any other message.
func parseRead(msg []byte) (id, uri string, ok bool) {
	// Most messages are tool calls; this skips decoding them.
	if !bytes.Contains(msg, []byte(mcp.MethodResourcesRead)) {
		return "", "", false
	}
	var r readRequest
	if json.Unmarshal(msg, &r) != nil || r.Method != string(mcp.MethodResourcesRead) || len(r.ID) == 0 {
		return "", "", false
	}
	id, ok = idKey(r.ID)
	return id, r.Params.URI, ok
}

// readAnswer is what withURI reads of a response.
type readAnswer struct {
	Method string          `json:"method"`
	ID     json.RawMessage `json:"id"`
	Error  *struct {
		Code    int             `json:"code"`
		Message string          `json:"message"`
		Data    json.RawMessage `json:"data,omitempty"`
	} `json:"error"`
}

// withURI returns msg with error.data set to {"uri": uri} when msg is
// mcp-go's error for a resource it does not have and carries no data;
// otherwise it returns msg unchanged and false.
func withURI(msg []byte, uri string) ([]byte, bool) {
	var a readAnswer
	if json.Unmarshal(msg, &a) != nil || a.Error == nil || len(a.Error.Data) != 0 {
		return msg, false
	}
	// -32002 before 2026-07-28, -32602 under it; the message, not the
	// code, says that mcp-go found no resource (-32602 is also the answer
	// to malformed params).
	if a.Error.Code != mcp.RESOURCE_NOT_FOUND && a.Error.Code != mcp.INVALID_PARAMS {
		return msg, false
	}
	if !strings.HasSuffix(a.Error.Message, server.ErrResourceNotFound.Error()) {
		return msg, false
	}
	data, err := json.Marshal(map[string]string{"uri": uri})
	if err != nil {
		return msg, false
	}
	return setErrorMember(msg, "data", data)
}

// NotFoundHandler serves next, adding the URI to its answer to each resources/read
// POST of a resource it does not have. Other requests reach next untouched.
func NotFoundHandler(next http.Handler) http.Handler {
	return heldAnswers(next, mcp.MethodResourcesRead, func(body []byte) (string, func([]byte) ([]byte, bool), bool) {
		id, uri, ok := parseRead(body)
		return id, func(msg []byte) ([]byte, bool) { return withURI(msg, uri) }, ok
	})
}

// NotFoundStdio wraps the two ends of a newline-delimited JSON-RPC stream (the
// stdio transport): reads of resources/read requests from in are noted,
// and mcp-go's not-found answers to them written to out get the URI. A
// read longer than maxLine (its URI that long), or past
// maxPending awaiting their answers, is answered without it. mcp-go
// writes each message to out in one Write call, a newline at its end; a
// Write of any other shape passes through as it is.
func NotFoundStdio(in io.Reader, out io.Writer) (io.Reader, io.Writer) {
	r, w, _ := notFoundFilter(in, out)
	return r, w
}

// notFoundFilter is NotFoundStdio, with the reads not yet answered: their URIs by id.
func notFoundFilter(in io.Reader, out io.Writer) (io.Reader, io.Writer, *pending[string]) {
	return stdioFilter(in, out, noteRead, withURI)
}

// noteRead notes the id and URI of a resources/read request.
func noteRead(p *pending[string], line []byte) {
	if id, uri, ok := parseRead(line); ok {
		p.Add(id, uri)
	}
}
