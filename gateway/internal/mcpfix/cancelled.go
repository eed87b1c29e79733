// Cancelled requests over stdio. The specification asks that a receiver
// of notifications/cancelled SHOULD NOT respond to the cancelled request,
// and clients hold it to that: the TypeScript SDK has forgotten the
// request by then, and reports its answer as an error ("Received a
// response for an unknown message ID"). mcp-go stops the handler but
// writes its answer all the same. CancelledStdio notes the ids of the
// requests cancelled on the way in and drops their answers on the way
// out; every other message passes through as it is.
//
// Delete when: TestE2EStdioCancelledCallIsNotAnswered passes without
// CancelledStdio.

package mcpfix

import (
	"encoding/json"
	"io"

	"github.com/mark3labs/mcp-go/mcp"
)

// CancelledStdio wraps the two ends of a newline-delimited JSON-RPC stream: the
// requests cancelled on in are noted, and their answers written to out
// are dropped. A request read afterwards with the id of a noted one is a
// new request, so the note is cleared. A cancellation longer than
// maxLine, or past maxPending awaiting their answers, is not
// noted: its request is answered. mcp-go writes each message to out in one
// Write call, a newline at its end; a Write of any other shape passes
// through as it is.
func CancelledStdio(in io.Reader, out io.Writer) (io.Reader, io.Writer) {
	drop := func([]byte, struct{}) ([]byte, bool) { return nil, true }
	r, w, _ := stdioFilter(in, out, noteCancel, drop)
	return r, w
}

// cancelMessage is what CancelledStdio reads of a line from the client.
type cancelMessage struct {
	Method string          `json:"method"`
	ID     json.RawMessage `json:"id"`
	Params struct {
		RequestID json.RawMessage `json:"requestId"`
	} `json:"params"`
}

// noteCancel notes the request a cancellation names, and forgets the id of
// a new request.
func noteCancel(p *pending[struct{}], line []byte) {
	var m cancelMessage
	if json.Unmarshal(line, &m) != nil || m.Method == "" {
		return
	}
	if m.Method == string(mcp.MethodNotificationCancelled) {
		if id, ok := idKey(m.Params.RequestID); ok {
			p.Add(id, struct{}{})
		}
		return
	}
	if id, ok := idKey(m.ID); ok {
		p.Forget(id)
	}
}
