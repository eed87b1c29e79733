package broker

import (
	"context"
	"encoding/json"
	"slices"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	discoveryv1 "github.com/codeexec/codeexec/proto/gen/codeexec/discovery/v1"
	"github.com/codeexec/codeexec/sandboxd/internal/channel"
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
	return 0, channel.Errorf(channel.CodeInvalidArgument, "detail must be \"summary\" or \"full\", not %q", s)
}

// listTools serves list_tools: the server's tools as it lists them.
func (b *Broker) listTools(ctx context.Context, o *origin, r *channel.ListToolsRequest) ([]json.RawMessage, error) {
	if err := allowed(o.env, r.Server); err != nil {
		return nil, err
	}
	if err := b.stillStarting(ctx, o, r.Server); err != nil {
		return nil, err
	}
	resp, err := b.Discovery.ListTools(ctx, &discoveryv1.ListToolsRequest{Server: r.Server, Tenant: o.tenant})
	if err != nil {
		return nil, err
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
}

// callTool serves call_tool: the tool's CallToolResult.
func (b *Broker) callTool(ctx context.Context, o *origin, r *channel.CallToolRequest) (json.RawMessage, error) {
	if err := allowed(o.env, r.Server); err != nil {
		return nil, err
	}
	if err := b.stillStarting(ctx, o, r.Server); err != nil {
		return nil, err
	}
	if r.Tool == "" {
		return nil, channel.Errorf(channel.CodeInvalidArgument, "missing tool name")
	}
	args := r.Arguments
	if len(args) == 0 || string(args) == "null" {
		args = json.RawMessage("{}")
	}
	if args[0] != '{' {
		return nil, channel.Errorf(channel.CodeInvalidArgument, "arguments must be an object (keyword arguments), not %s", args)
	}
	if err := b.checkArguments(o, r.Server, r.Tool, args); err != nil {
		return nil, err
	}
	if err := countCall(o.env.Controls); err != nil {
		return nil, err
	}
	req := &discoveryv1.CallToolRequest{Server: r.Server, Tool: r.Tool, ArgumentsJson: string(args), Tenant: o.tenant}
	resp, err := b.Discovery.CallTool(ctx, req)
	if need := approvalRequired(err); need != nil {
		// discoveryd refuses a marked tool's call until a person has
		// approved it: ask, and call again if they do.
		if err := ask(ctx, o.env.Controls, need, args); err != nil {
			return nil, err
		}
		req.Approved = true
		resp, err = b.Discovery.CallTool(ctx, req)
	}
	if err != nil {
		return nil, err
	}
	return json.RawMessage(orEmptyObject(resp.GetResultJson())), nil
}

// queryToolDocs serves query_tool_docs: the docs of a loaded server's
// tools, or of another server's as far as they are known (listed by
// discoveryd or kept in its catalogue), without starting it: reading docs
// calls nothing, and the docs say what to load.
func (b *Broker) queryToolDocs(ctx context.Context, o *origin, r *channel.QueryToolDocsRequest) ([]doc, error) {
	detail, err := detailOf(r.Detail)
	if err != nil {
		return nil, err
	}
	if notLoaded := allowed(o.env, r.Server); notLoaded != nil {
		if channel.AsError(notLoaded).Code != channel.CodePermissionDenied {
			return nil, notLoaded
		}
		resp, err := b.Discovery.GetToolDocs(ctx, &discoveryv1.GetToolDocsRequest{Server: r.Server, Tool: r.Tool, Detail: detail, Tenant: o.tenant, KnownOnly: true})
		switch status.Code(err) {
		case codes.OK:
			return toDocs(resp.GetDocs()), nil
		case codes.NotFound:
			if r.Tool != "" && strings.Contains(status.Convert(err).Message(), "unknown tool") {
				return nil, err // the server's tools are known, and this is not one
			}
			return nil, notLoaded
		case codes.FailedPrecondition:
			return nil, notLoaded // tools not known: say how to load the server
		default:
			return nil, err
		}
	}
	if err := b.stillStarting(ctx, o, r.Server); err != nil {
		return nil, err
	}
	resp, err := b.Discovery.GetToolDocs(ctx, &discoveryv1.GetToolDocsRequest{Server: r.Server, Tool: r.Tool, Detail: detail, Tenant: o.tenant})
	if err != nil {
		return nil, err
	}
	return toDocs(resp.GetDocs()), nil
}

// searchResult is search_tool_docs' result.
type searchResult struct {
	Results   []doc `json:"results"`
	Total     int32 `json:"total"`
	Truncated bool  `json:"truncated"`
	// Unindexed names the servers that failed to start or were too slow,
	// so were not searched; saying so keeps a partial answer from looking
	// complete.
	Unindexed []string `json:"unindexed,omitempty"`
}

// searchToolDocs serves search_tool_docs. The search spans every
// configured server: finding which server to load is the point of
// searching, so discoveryd starts the ones not yet listed. Calls stay
// limited to the allow-list.
func (b *Broker) searchToolDocs(ctx context.Context, o *origin, r *channel.SearchToolDocsRequest) (*searchResult, error) {
	if strings.TrimSpace(r.Query) == "" {
		return nil, channel.Errorf(channel.CodeInvalidArgument, "Missing 'query' value: pass words that describe the tool you need, e.g. search_tool_docs(\"read a file\")")
	}
	detail, err := detailOf(r.Detail)
	if err != nil {
		return nil, err
	}
	resp, err := b.Discovery.SearchTools(ctx, &discoveryv1.SearchToolsRequest{Query: r.Query, Limit: r.Limit, Detail: detail, Tenant: o.tenant})
	if err != nil {
		return nil, err
	}
	docs := toDocs(resp.GetDocs())
	for i := range docs {
		docs[i].markLoaded(o.env.Allowed)
	}
	return &searchResult{Results: docs, Total: resp.GetTotal(), Truncated: resp.GetTruncated(), Unindexed: resp.GetUnindexedServers()}, nil
}

// stillStarting returns the error with which the exec's server was loaded
// when loading it ran out of the call's timeout and the server is still
// not up (running, with its tools listed): the call has waited for it once
// already, and waiting again would hold it past its timeout to learn the
// same thing. A server that came up meanwhile is used as usual.
func (b *Broker) stillStarting(ctx context.Context, o *origin, server string) error {
	i := slices.IndexFunc(o.env.Servers, func(s channel.Server) bool { return s.Name == server })
	if i < 0 || o.env.Servers[i].Error == nil || o.env.Servers[i].Error.Code != channel.CodeDeadlineExceeded {
		return nil
	}
	list, err := b.Discovery.ListServers(ctx, &discoveryv1.ListServersRequest{Tenant: o.tenant})
	if err != nil {
		return err
	}
	for _, s := range list.GetServers() {
		if s.GetName() == server && s.GetStatus() == discoveryv1.ServerStatus_SERVER_STATUS_RUNNING && s.GetToolCount() > 0 {
			return nil
		}
	}
	return o.env.Servers[i].Error
}

func orEmptyObject(s string) string {
	if s == "" {
		return "{}"
	}
	return s
}
