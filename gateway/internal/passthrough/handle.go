package passthrough

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/mark3labs/mcp-go/mcp"
	"google.golang.org/grpc/status"

	"github.com/codeexec/codeexec/gateway/internal/auth"
	"github.com/codeexec/codeexec/gateway/internal/mcpfix"
	"github.com/codeexec/codeexec/gateway/internal/result"
	discoveryv1 "github.com/codeexec/codeexec/proto/gen/codeexec/discovery/v1"
)

// failure is a tool result that says what went wrong.
func failure(format string, args ...any) *mcp.CallToolResult {
	return mcp.NewToolResultError(fmt.Sprintf(format, args...))
}

// rpcFailure is the tool result of a failed discoveryd call: its message,
// written for the user (an unknown name says which ones there are, or
// which are close).
func rpcFailure(err error) *mcp.CallToolResult {
	return failure("%s", status.Convert(err).Message())
}

// structured is a result with text for the model and the same data as
// structuredContent.
func structured(text string, data any) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{mcp.NewTextContent(text)}, StructuredContent: data}
}

// args reads a call's arguments: only the names accepted, strings where
// strings are wanted. A bad one is a failure result saying what is
// accepted.
func args(req mcp.CallToolRequest, tool string, accepted ...string) (map[string]any, *mcp.CallToolResult) {
	in := req.GetArguments()
	var unknown []string
	for k := range in {
		if !slices.Contains(accepted, k) {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) > 0 {
		sort.Strings(unknown)
		return nil, failure("%s does not take %s; it takes: %s", tool, strings.Join(unknown, ", "), strings.Join(accepted, ", "))
	}
	return in, nil
}

// text reads a required, non-blank string argument.
func text(in map[string]any, tool, name, what string) (string, *mcp.CallToolResult) {
	s, ok := in[name].(string)
	if !ok || strings.TrimSpace(s) == "" {
		return "", failure("%s needs %q: %s", tool, name, what)
	}
	return strings.TrimSpace(s), nil
}

// unknownTool answers a call that mcpfix rerouted here from a tool this
// connection does not offer.
func unknownTool(req mcp.CallToolRequest) *mcp.CallToolResult {
	if name := mcpfix.UnknownTool(req); name != "" {
		return result.ToolResult(result.UnknownTool(name), result.Compact)
	}
	return nil
}

// hit is one search result or description.
type hit struct {
	Server      string          `json:"server"`
	Tool        string          `json:"tool"`
	Description string          `json:"description,omitempty"`
	Match       string          `json:"match,omitempty"`
	InputSchema json.RawMessage `json:"inputSchema,omitempty"`
	// Approval says why a person must approve each call, when one must.
	Approval string `json:"approval,omitempty"`
}

func hitOf(d *discoveryv1.ToolDoc) hit {
	h := hit{Server: d.GetServer(), Tool: d.GetTool(), Description: d.GetDescription(), Match: d.GetMatchReason(), Approval: d.GetApproval()}
	if js := d.GetInputSchemaJson(); js != "" && json.Valid([]byte(js)) {
		h.InputSchema = json.RawMessage(js)
	}
	return h
}

// Search serves search_tools: the same search as the sandbox's
// runtime.search_tool_docs, over every server the tenant may see.
func (p *Tools) Search(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	if r := unknownTool(req); r != nil {
		return r, nil
	}
	in, bad := args(req, SearchName, "query", "limit")
	if bad != nil {
		return bad, nil
	}
	query, bad := text(in, SearchName, "query", `words for what the tool does, e.g. "read a file", or its name`)
	if bad != nil {
		return bad, nil
	}
	limit := 5
	if v, ok := in["limit"]; ok {
		f, isNum := v.(float64)
		if !isNum || f != float64(int(f)) || f < 1 || f > 50 {
			return failure("limit must be a whole number from 1 to 50, not %v", v), nil
		}
		limit = int(f)
	}
	resp, err := p.opts.Discovery.SearchTools(ctx, &discoveryv1.SearchToolsRequest{Query: query, Limit: int32(limit),
		Detail: discoveryv1.Detail_DETAIL_SUMMARY, Tenant: auth.Tenant(ctx, p.opts.Tenant)})
	if err != nil {
		return rpcFailure(err), nil
	}
	out := struct {
		Results   []hit    `json:"results"`
		Total     int32    `json:"total"`
		Truncated bool     `json:"truncated,omitempty"`
		Unindexed []string `json:"unindexed,omitempty"`
	}{Results: []hit{}, Total: resp.GetTotal(), Truncated: resp.GetTruncated(), Unindexed: resp.GetUnindexedServers()}
	var b strings.Builder
	for _, d := range resp.GetDocs() {
		h := hitOf(d)
		out.Results = append(out.Results, h)
		fmt.Fprintf(&b, "%s %s: %s", h.Server, h.Tool, oneLine(h.Description))
		if h.Approval != "" {
			b.WriteString(" [asks the user first]")
		}
		b.WriteString("\n")
	}
	if len(out.Results) == 0 {
		b.WriteString("no tool matches; try other words\n")
	} else if out.Truncated {
		fmt.Fprintf(&b, "(%d of %d matches; raise limit for more)\n", len(out.Results), out.Total)
	}
	if len(out.Unindexed) > 0 {
		fmt.Fprintf(&b, "not searched (not started yet or failed): %s\n", strings.Join(out.Unindexed, ", "))
	}
	return structured(strings.TrimSuffix(b.String(), "\n"), out), nil
}

// oneLine is the first line of s, at most 200 characters.
func oneLine(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	if r := []rune(s); len(r) > 200 {
		s = string(r[:200]) + "…"
	}
	return s
}

// Describe serves describe_tool: one tool's description and input schema.
func (p *Tools) Describe(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	if r := unknownTool(req); r != nil {
		return r, nil
	}
	in, bad := args(req, DescribeName, "server", "tool")
	if bad != nil {
		return bad, nil
	}
	server, bad := text(in, DescribeName, "server", "a server's name, as search_tools gives it")
	if bad != nil {
		return bad, nil
	}
	tool, bad := text(in, DescribeName, "tool", "a tool's name, as search_tools gives it")
	if bad != nil {
		return bad, nil
	}
	resp, err := p.opts.Discovery.GetToolDocs(ctx, &discoveryv1.GetToolDocsRequest{Server: server, Tool: tool,
		Detail: discoveryv1.Detail_DETAIL_FULL, Tenant: auth.Tenant(ctx, p.opts.Tenant)})
	if err != nil {
		return rpcFailure(err), nil
	}
	if len(resp.GetDocs()) != 1 {
		return failure("server %q has no tool %q", server, tool), nil
	}
	h := hitOf(resp.GetDocs()[0])
	raw, err := json.Marshal(h)
	if err != nil {
		return nil, err
	}
	return structured(string(raw), h), nil
}
