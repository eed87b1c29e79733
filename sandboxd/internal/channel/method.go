package channel

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// Request is the parameters of one call method: a Call's Params decode
// into the Request whose Method is the Call's. Fields tagged omitempty
// are optional; the agent sends every other one.
//
// A new method is a struct with a Method method, one entry in Requests,
// one handler in the broker and one Method in the agent's
// codeexec_protocol.py.
type Request interface {
	Method() string
}

// ListServersRequest asks for the servers allowed in the exec.
type ListServersRequest struct{}

// ListToolsRequest asks a server for its tools, live.
type ListToolsRequest struct {
	Server string `json:"server"`
}

// CallToolRequest calls a tool.
type CallToolRequest struct {
	Server string `json:"server"`
	Tool   string `json:"tool"`
	// Arguments is the tool's arguments: a JSON object.
	Arguments json.RawMessage `json:"arguments"`
}

// QueryToolDocsRequest asks for the docs of a server's tools.
type QueryToolDocsRequest struct {
	Server string `json:"server"`
	// Tool names one tool; without it every tool of the server is meant.
	Tool string `json:"tool,omitempty"`
	// Detail is "summary" or "full" (with input schemas).
	Detail string `json:"detail"`
}

// SearchToolDocsRequest searches the tools of every configured server.
type SearchToolDocsRequest struct {
	Query  string `json:"query"`
	Limit  int32  `json:"limit"`
	Detail string `json:"detail"`
}

// SaveMemoryRequest stores a value.
type SaveMemoryRequest struct {
	Key   string          `json:"key"`
	Value json.RawMessage `json:"value"`
	// Metadata is a JSON object kept beside the value.
	Metadata json.RawMessage `json:"metadata,omitempty"`
}

// LoadMemoryRequest reads a record.
type LoadMemoryRequest struct {
	Key string `json:"key"`
}

// UpdateMemoryRequest replaces a value if its record is still at
// Revision (0: if there is none), the compare-and-swap of update_memory.
type UpdateMemoryRequest struct {
	Key      string          `json:"key"`
	Value    json.RawMessage `json:"value"`
	Revision uint64          `json:"revision"`
}

// DeleteMemoryRequest deletes a record.
type DeleteMemoryRequest struct {
	Key string `json:"key"`
}

// ListMemoriesRequest lists the records, without their values.
type ListMemoriesRequest struct{}

// SaveToolRequest saves a function's source for later sessions.
type SaveToolRequest struct {
	Name      string `json:"name"`
	Source    string `json:"source"`
	Docstring string `json:"docstring"`
}

// ListSavedToolsRequest lists the saved tools with their sources.
type ListSavedToolsRequest struct{}

// DeleteSavedToolRequest deletes a saved tool.
type DeleteSavedToolRequest struct {
	Name string `json:"name"`
}

// Method implements Request.
func (*ListServersRequest) Method() string { return "list_servers" }

// Method implements Request.
func (*ListToolsRequest) Method() string { return "list_tools" }

// Method implements Request.
func (*CallToolRequest) Method() string { return "call_tool" }

// Method implements Request.
func (*QueryToolDocsRequest) Method() string { return "query_tool_docs" }

// Method implements Request.
func (*SearchToolDocsRequest) Method() string { return "search_tool_docs" }

// Method implements Request.
func (*SaveMemoryRequest) Method() string { return "memory.save" }

// Method implements Request.
func (*LoadMemoryRequest) Method() string { return "memory.load" }

// Method implements Request.
func (*UpdateMemoryRequest) Method() string { return "memory.update" }

// Method implements Request.
func (*DeleteMemoryRequest) Method() string { return "memory.delete" }

// Method implements Request.
func (*ListMemoriesRequest) Method() string { return "memory.list" }

// Method implements Request.
func (*SaveToolRequest) Method() string { return "tool.save" }

// Method implements Request.
func (*ListSavedToolsRequest) Method() string { return "tool.list" }

// Method implements Request.
func (*DeleteSavedToolRequest) Method() string { return "tool.delete" }

// Requests returns an empty Request of every method, for the tests that
// hold the broker and the agent to this list.
func Requests() []Request {
	return []Request{
		&ListServersRequest{}, &ListToolsRequest{}, &CallToolRequest{}, &QueryToolDocsRequest{},
		&SearchToolDocsRequest{}, &SaveMemoryRequest{}, &LoadMemoryRequest{}, &UpdateMemoryRequest{},
		&DeleteMemoryRequest{}, &ListMemoriesRequest{}, &SaveToolRequest{}, &ListSavedToolsRequest{},
		&DeleteSavedToolRequest{},
	}
}

// DecodeParams reads a call's parameters into req. Unlike frames, whose
// unknown fields are skipped, parameters must be exactly req's: both
// sides ship together, so a field the broker does not know is a bug to
// report, not a value to drop silently. Missing parameters mean {}.
func DecodeParams(params json.RawMessage, req Request) error {
	if len(bytes.TrimSpace(params)) == 0 {
		params = json.RawMessage("{}")
	}
	dec := json.NewDecoder(bytes.NewReader(params))
	dec.DisallowUnknownFields()
	err := dec.Decode(req)
	if err == nil {
		if _, end := dec.Token(); !errors.Is(end, io.EOF) {
			err = errors.New("data after the parameters object")
		}
	}
	if err != nil {
		return fmt.Errorf("bad parameters for %s: %w", req.Method(), err)
	}
	return nil
}
