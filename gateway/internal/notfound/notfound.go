// Package notfound puts the URI into the error that answers a
// resources/read of a resource the server does not have.
//
// The specification asks for it in both eras: the error SHOULD carry the
// URI as error.data.uri (SEP-2164 under 2026-07-28, code -32602; before it,
// the -32002 example in the resources page), so that a client can tell
// which read failed without parsing the message. mcp-go v1.2.1 builds that
// error itself, when no resource or template matches, before any of the
// server's code runs, and gives it no data; none of its hooks or options can
// change it. Handler (streamable HTTP) and Stdio (newline-delimited JSON)
// therefore note the id and URI of each resources/read request on its way
// in and add the data to mcp-go's answer on its way out. Every other
// message passes through as it is, and so does every other error,
// including mcp-go's not-found errors once they carry data of their own.
package notfound

import (
	"bytes"
	"encoding/json"
	"strings"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/codeexec/codeexec/gateway/internal/jsonl"
)

// read is what this package reads of a request.
type read struct {
	Method string          `json:"method"`
	ID     json.RawMessage `json:"id"`
	Params struct {
		URI string `json:"uri"`
	} `json:"params"`
}

// parseRead returns the id (in jsonl.IDKey's form) and the URI of a resources/read
// request, and false for any other message.
func parseRead(msg []byte) (id, uri string, ok bool) {
	// Most messages are tool calls; this skips decoding them.
	if !bytes.Contains(msg, []byte(mcp.MethodResourcesRead)) {
		return "", "", false
	}
	var r read
	if json.Unmarshal(msg, &r) != nil || r.Method != string(mcp.MethodResourcesRead) || len(r.ID) == 0 {
		return "", "", false
	}
	id, ok = jsonl.IDKey(r.ID)
	return id, r.Params.URI, ok
}

// answer is what this package reads of a response.
type answer struct {
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
	var a answer
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
	// Set only error.data, keeping every other member as mcp-go wrote it.
	var top, e map[string]json.RawMessage
	if json.Unmarshal(msg, &top) != nil || json.Unmarshal(top["error"], &e) != nil {
		return msg, false
	}
	data, err := json.Marshal(map[string]string{"uri": uri})
	if err != nil {
		return msg, false
	}
	e["data"] = data
	if top["error"], err = json.Marshal(e); err != nil {
		return msg, false
	}
	out, err := json.Marshal(top)
	if err != nil {
		return msg, false
	}
	return out, true
}
