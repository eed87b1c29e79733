package broker

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	discoveryv1 "github.com/codeexec/codeexec/proto/gen/codeexec/discovery/v1"
	"github.com/codeexec/codeexec/sandboxd/internal/session"
)

// doc is a tool doc in upstream's shape.
type doc struct {
	Server      string          `json:"server"`
	ServerAlias string          `json:"serverAlias"`
	Tool        string          `json:"tool"`
	ToolAlias   string          `json:"toolAlias"`
	Description string          `json:"description,omitempty"`
	InputSchema json.RawMessage `json:"inputSchema,omitempty"`
	// Match says why a search returned the tool; other docs leave it out.
	Match string `json:"match,omitempty"`
	// Loaded and LoadWith are set on search hits only. A search spans
	// every configured server, where upstream's searched only the servers
	// loaded in the call, so each hit says whether its server is loaded
	// in this call and the servers=[...] argument that loads it.
	Loaded   *bool  `json:"loaded,omitempty"`
	LoadWith string `json:"loadWith,omitempty"`
}

// markLoaded fills in a search hit's Loaded and LoadWith for the servers
// allowed in this exec.
func (d *doc) markLoaded(allowed []string) {
	loaded := slices.Contains(allowed, d.Server)
	d.Loaded = &loaded
	d.LoadWith = "servers=[" + quoted(d.Server) + "]"
}

// quoted renders s as a JSON string, which Python reads as the same
// string literal. HTML characters stay as they are.
func quoted(s string) string {
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s) // a string always encodes
	return strings.TrimSuffix(b.String(), "\n")
}

func toDocs(in []*discoveryv1.ToolDoc) []doc {
	out := make([]doc, 0, len(in))
	for _, d := range in {
		dd := doc{Server: d.GetServer(), ServerAlias: d.GetServerAlias(), Tool: d.GetTool(), ToolAlias: d.GetToolAlias(), Description: d.GetDescription(), Match: d.GetMatchReason()}
		if js := d.GetInputSchemaJson(); js != "" && json.Valid([]byte(js)) {
			dd.InputSchema = json.RawMessage(js)
		}
		out = append(out, dd)
	}
	return out
}

func detailOf(s string) (discoveryv1.Detail, error) {
	switch s {
	case "", "summary":
		return discoveryv1.Detail_DETAIL_SUMMARY, nil
	case "full":
		return discoveryv1.Detail_DETAIL_FULL, nil
	}
	return 0, fmt.Errorf("detail must be \"summary\" or \"full\", not %q", s)
}

func (b *Broker) discoveryCall(ctx context.Context, tenant string, env *session.ExecEnv, method string, p *callParams) (any, error) {
	switch method {
	case "list_tools":
		if err := allowed(env, p.Server); err != nil {
			return nil, err
		}
		resp, err := b.Discovery.ListTools(ctx, &discoveryv1.ListToolsRequest{Server: p.Server, Tenant: tenant})
		if err != nil {
			return nil, rpcError(err)
		}
		tools := make([]json.RawMessage, 0, len(resp.GetTools()))
		for _, t := range resp.GetTools() {
			if js := t.GetToolJson(); js != "" && json.Valid([]byte(js)) {
				tools = append(tools, json.RawMessage(js))
				continue
			}
			raw, _ := json.Marshal(map[string]any{"name": t.GetName(), "description": t.GetDescription(), "inputSchema": json.RawMessage(orEmptyObject(t.GetInputSchemaJson()))})
			tools = append(tools, raw)
		}
		return tools, nil
	case "call_tool":
		if err := allowed(env, p.Server); err != nil {
			return nil, err
		}
		if p.Tool == nil || *p.Tool == "" {
			return nil, fmt.Errorf("missing tool name")
		}
		args := p.Arguments
		if len(args) == 0 || string(args) == "null" {
			args = json.RawMessage("{}")
		}
		if args[0] != '{' {
			return nil, fmt.Errorf("arguments must be an object (keyword arguments), not %s", args)
		}
		resp, err := b.Discovery.CallTool(ctx, &discoveryv1.CallToolRequest{Server: p.Server, Tool: *p.Tool, ArgumentsJson: string(args), Tenant: tenant})
		if err != nil {
			return nil, rpcError(err)
		}
		return json.RawMessage(orEmptyObject(resp.GetResultJson())), nil
	case "query_tool_docs":
		if err := allowed(env, p.Server); err != nil {
			return nil, err
		}
		detail, err := detailOf(p.Detail)
		if err != nil {
			return nil, err
		}
		req := &discoveryv1.GetToolDocsRequest{Server: p.Server, Detail: detail, Tenant: tenant}
		if p.Tool != nil {
			req.Tool = *p.Tool
		}
		resp, err := b.Discovery.GetToolDocs(ctx, req)
		if err != nil {
			return nil, rpcError(err)
		}
		return toDocs(resp.GetDocs()), nil
	case "search_tool_docs":
		if strings.TrimSpace(p.Query) == "" {
			return nil, fmt.Errorf("Missing 'query' value: pass words that describe the tool you need, e.g. search_tool_docs(\"read a file\")")
		}
		detail, err := detailOf(p.Detail)
		if err != nil {
			return nil, err
		}
		// Search spans every configured server: finding which server to load
		// is the point of searching, so discoveryd starts the ones not yet
		// listed. Calls stay limited to the allow-list.
		resp, err := b.Discovery.SearchTools(ctx, &discoveryv1.SearchToolsRequest{Query: p.Query, Limit: p.Limit, Detail: detail, Tenant: tenant})
		if err != nil {
			return nil, rpcError(err)
		}
		docs := toDocs(resp.GetDocs())
		for i := range docs {
			docs[i].markLoaded(env.Allowed)
		}
		out := map[string]any{"results": docs, "total": resp.GetTotal(), "truncated": resp.GetTruncated()}
		if u := resp.GetUnindexedServers(); len(u) > 0 {
			// Servers that failed to start or were too slow were not
			// searched; saying so keeps a partial answer from looking
			// complete.
			out["unindexed"] = u
		}
		return out, nil
	}
	return nil, fmt.Errorf("unknown request %q", method)
}

func orEmptyObject(s string) string {
	if s == "" {
		return "{}"
	}
	return s
}
