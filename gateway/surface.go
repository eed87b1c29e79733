package gateway

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/codeexec/codeexec/gateway/internal/passthrough"
	"github.com/codeexec/codeexec/gateway/internal/runpython"
)

// The tool surfaces a connection may be offered (Config.Tools, and
// ?tools= on the HTTP URL).
const (
	// ToolsRunPython offers run_python alone (the default).
	ToolsRunPython = "run_python"
	// ToolsPassthrough offers search_tools, describe_tool and call_tool
	// instead, for clients that write their own code: codeexec's
	// discovery, tenants, approvals and limits without the sandbox.
	ToolsPassthrough = "passthrough"
	// ToolsBoth offers all four.
	ToolsBoth = "both"
)

// surfaces maps each surface to its tools; the first is where calls to a
// tool the surface lacks are answered.
var surfaces = map[string][]string{
	ToolsRunPython:   {runpython.Name},
	ToolsPassthrough: passthrough.Names,
	ToolsBoth:        append([]string{runpython.Name}, passthrough.Names...),
}

// parseSurface reads a surface's name; "" is run_python.
func parseSurface(s string) ([]string, error) {
	if s == "" {
		s = ToolsRunPython
	}
	names, ok := surfaces[strings.ToLower(strings.TrimSpace(s))]
	if !ok {
		return nil, fmt.Errorf("tools %q: accepted: %s (the default), %s or %s", s, ToolsRunPython, ToolsPassthrough, ToolsBoth)
	}
	return names, nil
}

type surfaceKey struct{}

// surface is the tools the request may see and call: its connection's
// (?tools= over HTTP), else the configured ones.
func (g *Gateway) surface(ctx context.Context) []string {
	if names, ok := ctx.Value(surfaceKey{}).([]string); ok {
		return names
	}
	return g.tools
}

// filterTools is the tool filter: tools/list shows, and tools/call
// reaches, the request's surface alone.
func (g *Gateway) filterTools(ctx context.Context, tools []mcp.Tool) []mcp.Tool {
	names := g.surface(ctx)
	out := make([]mcp.Tool, 0, len(names))
	for _, t := range tools {
		if !slices.Contains(names, t.Name) {
			continue
		}
		if t.Name == runpython.Name {
			t = g.tool.DefinitionFor(ctx) // the tenant's own timeout limits
		}
		out = append(out, t)
	}
	return out
}

// connectionSurface reads the surface an HTTP request asks for: ?tools=,
// or ?codemode=false (which OpenCode appends to remote MCP URLs) for
// passthrough. ok is false, after an answer of 400, when it names none
// that this gateway offers.
func (g *Gateway) connectionSurface(w http.ResponseWriter, r *http.Request) (*http.Request, bool) {
	q := r.URL.Query()
	want := q.Get("tools")
	if want == "" && strings.EqualFold(q.Get("codemode"), "false") {
		want = ToolsPassthrough
	}
	if want == "" {
		return r, true
	}
	names, err := parseSurface(want)
	if err == nil && !g.passthrough && !slices.Equal(names, surfaces[ToolsRunPython]) {
		err = fmt.Errorf("tools %q: this server offers run_python alone; the passthrough tools need MCP server discovery, which it was not given", want)
	}
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return nil, false
	}
	return r.WithContext(context.WithValue(r.Context(), surfaceKey{}, names)), true
}
