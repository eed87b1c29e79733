// Unknown tools. mcp-go answers a call to a tool the server does not have
// with a JSON-RPC error, before any handler runs; upstream answers with a
// tool result ("Unknown tool: x"), which the model can read and act on.
// The before-call hook that AddHooks adds reroutes such a call to the one
// tool's handler and leaves the name asked for where UnknownTool finds it.
//
// Delete when: TestUnknownTool passes without the hook, i.e. mcp-go lets
// the server answer a call to an unknown tool itself.

package mcpfix

import (
	"context"
	"net/http"

	"github.com/mark3labs/mcp-go/mcp"
)

// UnknownToolHeader carries the name of a tool the client asked for that
// does not exist. The header field is never filled from the wire body,
// and the hook always rewrites it, so a client cannot set it.
const UnknownToolHeader = "X-Codeexec-Unknown-Tool"

// routeUnknownTool returns the before-call hook that sends a call to any
// tool but tool to tool's handler; see UnknownToolHeader.
func routeUnknownTool(tool string) func(context.Context, any, *mcp.CallToolRequest) {
	return func(_ context.Context, _ any, req *mcp.CallToolRequest) {
		h := http.Header{}
		if req.Header != nil {
			h = req.Header.Clone()
		}
		h.Del(UnknownToolHeader)
		if req.Params.Name != tool {
			h.Set(UnknownToolHeader, req.Params.Name)
			req.Params.Name = tool
		}
		req.Header = h
	}
}

// UnknownTool returns the name of the unknown tool that req asked for, or
// "" when it asked for the tool its handler serves.
func UnknownTool(req mcp.CallToolRequest) string { return req.Header.Get(UnknownToolHeader) }
