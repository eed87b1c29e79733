// Package passthrough is the surface for clients that write their own
// code: search_tools, describe_tool and call_tool over the user's MCP
// servers, with codeexec's discovery, tenants, approvals and limits, and
// no sandbox. The handlers are in handle.go; a call that needs a person's
// approval asks in approve.go.
package passthrough

import (
	"encoding/json"
	"log/slog"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/codeexec/codeexec/gateway/internal/drain"
	"github.com/codeexec/codeexec/gateway/internal/quota"
	"github.com/codeexec/codeexec/gateway/internal/reqstate"
	discoveryv1 "github.com/codeexec/codeexec/proto/gen/codeexec/discovery/v1"
)

// The tools' names.
const (
	SearchName   = "search_tools"
	DescribeName = "describe_tool"
	CallName     = "call_tool"
)

// Names lists the surface's tools in the order tools/list shows them.
var Names = []string{SearchName, DescribeName, CallName}

// The definitions are what a model reads on every turn: short.
const (
	searchDescription   = "Find tools of the user's MCP servers by what they do. Returns each match's server, tool and description."
	searchSchema        = `{"type":"object","properties":{"query":{"type":"string","description":"Words for what the tool does, or its name"},"limit":{"type":"integer","minimum":1,"maximum":50,"default":5}},"required":["query"],"additionalProperties":false}`
	describeDescription = "A tool's description and input schema."
	describeSchema      = `{"type":"object","properties":{"server":{"type":"string"},"tool":{"type":"string"}},"required":["server","tool"],"additionalProperties":false}`
	callDescription     = "Call a tool of the user's MCP servers. arguments must match its input schema (describe_tool)."
	callSchema          = `{"type":"object","properties":{"server":{"type":"string"},"tool":{"type":"string"},"arguments":{"type":"object"}},"required":["server","tool"],"additionalProperties":false}`
)

// Options are what the surface needs from the gateway.
type Options struct {
	// Discovery answers searches and docs, and makes the calls.
	Discovery discoveryv1.DiscoveryServiceClient
	// Tenant is the caller's tenant when the context names none (stdio).
	Tenant string
	// Quota and Calls admit call_tool as they admit run_python: the
	// tenant's caps, and shutdown.
	Quota *quota.Execs
	Calls *drain.Tracker
	// Logger logs calls that fail for the gateway's own reasons.
	Logger *slog.Logger
	// States seals the requestState of call_tool's questions.
	States *reqstate.Sealer
}

// Tools serves the surface.
type Tools struct{ opts Options }

// New returns the surface.
func New(opts Options) *Tools { return &Tools{opts: opts} }

// Definitions are the tools as tools/list shows them. search_tools and
// describe_tool only read; call_tool does whatever the tool it calls
// does, so its hints say the worst.
func Definitions() []mcp.Tool {
	search := mcp.NewToolWithRawSchema(SearchName, searchDescription, json.RawMessage(searchSchema))
	search.Annotations = mcp.ToolAnnotation{Title: "Search tools", ReadOnlyHint: new(true), OpenWorldHint: new(false)}
	describe := mcp.NewToolWithRawSchema(DescribeName, describeDescription, json.RawMessage(describeSchema))
	describe.Annotations = mcp.ToolAnnotation{Title: "Describe a tool", ReadOnlyHint: new(true), OpenWorldHint: new(false)}
	call := mcp.NewToolWithRawSchema(CallName, callDescription, json.RawMessage(callSchema))
	call.Annotations = mcp.ToolAnnotation{Title: "Call a tool", ReadOnlyHint: new(false), DestructiveHint: new(true), IdempotentHint: new(false), OpenWorldHint: new(true)}
	for _, t := range []*mcp.Tool{&search, &describe, &call} {
		t.Title = t.Annotations.Title
	}
	return []mcp.Tool{search, describe, call}
}
