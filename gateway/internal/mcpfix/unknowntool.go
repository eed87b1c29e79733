// Unknown tools. mcp-go answers a call to a tool the server does not have
// with a JSON-RPC error, before any handler runs; upstream answers with a
// tool result ("Unknown tool: x"), which the model can read and act on.
// The before-call hook that AddHooks adds reroutes such a call to the
// handler of the first tool the request may call, and leaves the name
// asked for where UnknownTool finds it; every handler answers it.
//
// Delete when: TestUnknownTool passes without the hook, i.e. mcp-go lets
// the server answer a call to an unknown tool itself.

package mcpfix

import (
	"context"
	"net/http"
	"slices"

	"github.com/mark3labs/mcp-go/mcp"
)

// UnknownToolHeader carries the name of a tool the client asked for that
// does not exist. The header field is never filled from the wire body,
// and the hook always rewrites it, so a client cannot set it.
const UnknownToolHeader = "X-Codeexec-Unknown-Tool"

// routeUnknownTool returns the before-call hook that sends a call to a
// tool not among tools(ctx) (the tools the request may call, never none)
// to the first one's handler; see UnknownToolHeader.
func routeUnknownTool(tools func(context.Context) []string) func(context.Context, any, *mcp.CallToolRequest) {
	return func(ctx context.Context, _ any, req *mcp.CallToolRequest) {
		h := http.Header{}
		if req.Header != nil {
			h = req.Header.Clone()
		}
		h.Del(UnknownToolHeader)
		if names := tools(ctx); !slices.Contains(names, req.Params.Name) {
			h.Set(UnknownToolHeader, req.Params.Name)
			req.Params.Name = names[0]
		}
		req.Header = h
	}
}

// UnknownTool returns the name of the unknown tool that req asked for, or
// "" when it asked for the tool its handler serves.
func UnknownTool(req mcp.CallToolRequest) string { return req.Header.Get(UnknownToolHeader) }
