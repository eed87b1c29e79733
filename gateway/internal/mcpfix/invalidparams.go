// Invalid input responses. Under MCP 2026-07-28 (SEP-2322) a server
// refuses a retry whose requestState fails its check, or whose
// inputResponses do not answer the question asked, with a JSON-RPC error,
// -32602 (Invalid params). mcp-go gives every error a tool handler returns
// -32603 (Internal error), which tells the client the server broke.
// A handler's refusal wraps ErrInvalidParams, whose text starts its
// message; InvalidParamsHandler (streamable HTTP) and InvalidParamsStdio
// note the tools/call requests that carry inputResponses or requestState
// on their way in, and give such an answer to one of them -32602 on its
// way out. Every other answer passes as mcp-go wrote it.
//
// Delete when: TestE2EApproveInputRequiredRules sees -32602 without them, i.e.
// mcp-go lets a handler choose its error's code.

package mcpfix

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"

	"github.com/mark3labs/mcp-go/mcp"
)

// ErrInvalidParams marks a tool handler's refusal of a retry's input as
// the caller's mistake.
var ErrInvalidParams = errors.New("invalid params")

// parseRetry returns the id of a tools/call that carries answers to an
// input_required result, and false for any other message.
func parseRetry(msg []byte) (string, bool) {
	if !bytes.Contains(msg, []byte(`"inputResponses"`)) && !bytes.Contains(msg, []byte(`"requestState"`)) {
		return "", false
	}
	var r struct {
		Method string          `json:"method"`
		ID     json.RawMessage `json:"id"`
	}
	if json.Unmarshal(msg, &r) != nil || r.Method != string(mcp.MethodToolsCall) || len(r.ID) == 0 {
		return "", false
	}
	return idKey(r.ID)
}

// asInvalidParams gives -32602 to mcp-go's -32603 answer carrying a
// handler's ErrInvalidParams.
func asInvalidParams(msg []byte, _ struct{}) ([]byte, bool) {
	var a readAnswer
	if json.Unmarshal(msg, &a) != nil || a.Error == nil ||
		a.Error.Code != mcp.INTERNAL_ERROR || !strings.HasPrefix(a.Error.Message, ErrInvalidParams.Error()+": ") {
		return msg, false
	}
	return setErrorMember(msg, "code", json.RawMessage(`-32602`))
}

// InvalidParamsHandler serves next, giving its refusals of retries'
// input -32602.
func InvalidParamsHandler(next http.Handler) http.Handler {
	return heldAnswers(next, mcp.MethodToolsCall, func(body []byte) (string, func([]byte) ([]byte, bool), bool) {
		id, ok := parseRetry(body)
		return id, func(msg []byte) ([]byte, bool) { return asInvalidParams(msg, struct{}{}) }, ok
	})
}

// InvalidParamsStdio wraps the two ends of a newline-delimited JSON-RPC
// stream (the stdio transport) in the same fix.
func InvalidParamsStdio(in io.Reader, out io.Writer) (io.Reader, io.Writer) {
	note := func(p *pending[struct{}], line []byte) {
		if id, ok := parseRetry(line); ok {
			p.Add(id, struct{}{})
		}
	}
	r, w, _ := stdioFilter(in, out, note, asInvalidParams)
	return r, w
}
