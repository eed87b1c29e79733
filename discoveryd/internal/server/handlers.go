package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/codeexec/codeexec/discoveryd/internal/alias"
	"github.com/codeexec/codeexec/discoveryd/internal/search"
	"github.com/codeexec/codeexec/discoveryd/internal/upstream"
	discoveryv1 "github.com/codeexec/codeexec/proto/gen/codeexec/discovery/v1"
)

// Search limits: upstream's default, and a cap that keeps a result small
// enough for a model's context.
const (
	defaultSearchLimit = 5
	maxSearchLimit     = 50
)

// ListServers describes every configured server without starting any.
func (s *Server) ListServers(ctx context.Context, req *discoveryv1.ListServersRequest) (*discoveryv1.ListServersResponse, error) {
	if req.GetRescan() {
		s.rescan()
	}
	resp := &discoveryv1.ListServersResponse{}
	for _, name := range s.visibleNames(req.GetTenant()) {
		p, err := s.serverProto(name)
		if err != nil {
			return nil, s.toStatus(ctx, "ListServers", err)
		}
		resp.Servers = append(resp.Servers, p)
	}
	s.mu.Lock()
	resp.Warnings = slices.Clone(s.warnings)
	resp.Unloaded = slices.Clone(s.unloaded)
	s.mu.Unlock()
	return resp, nil
}

// tools starts the server if needed and returns its tools with aliases,
// each saying whether its calls need approval.
func (s *Server) tools(ctx context.Context, name string) ([]entry, error) {
	tools, err := s.mgr.Tools(ctx, name)
	if err != nil {
		return nil, err
	}
	es, err := entries(tools)
	for i := range es {
		es[i].approval = s.approvalOf(name, tools[i])
	}
	return es, err
}

// visibleTools resolves a server name or alias that tenant may see, and
// returns the server's name and tools.
func (s *Server) visibleTools(ctx context.Context, tenant, nameOrAlias string) (string, []entry, error) {
	name := s.resolve(nameOrAlias)
	if err := s.checkVisible(tenant, name); err != nil {
		return "", nil, err
	}
	es, err := s.tools(ctx, name)
	return name, es, err
}

// knownVisibleTools is visibleTools from the tools already known, listed
// here or in the catalogue, without starting the server.
func (s *Server) knownVisibleTools(ctx context.Context, tenant, nameOrAlias string) (string, []entry, error) {
	name := s.resolve(nameOrAlias)
	if err := s.checkVisible(tenant, name); err != nil {
		return "", nil, err
	}
	if _, err := s.mgr.Config(name); err != nil {
		return "", nil, err
	}
	s.fromCatalog(ctx, []string{name})
	tools, ok := s.knownTools(name)
	if !ok {
		return "", nil, fmt.Errorf("%w: server %q has not listed its tools in this process, and the catalogue has no current list of them; load it first with run_python(servers=[%q])", errNotKnown, name, name)
	}
	es, err := entries(tools)
	return name, es, err
}

// ListTools returns a server's tools, starting the server if needed.
func (s *Server) ListTools(ctx context.Context, req *discoveryv1.ListToolsRequest) (*discoveryv1.ListToolsResponse, error) {
	resp, err := s.listTools(ctx, req)
	return answer(ctx, s, "ListTools", resp, err)
}

func (s *Server) listTools(ctx context.Context, req *discoveryv1.ListToolsRequest) (*discoveryv1.ListToolsResponse, error) {
	if err := named(req.GetServer()); err != nil {
		return nil, err
	}
	name, es, err := s.visibleTools(ctx, req.GetTenant(), req.GetServer())
	if err != nil {
		return nil, err
	}
	srv, err := s.serverProto(name)
	if err != nil {
		return nil, err
	}
	resp := &discoveryv1.ListToolsResponse{Server: srv}
	for _, e := range es {
		resp.Tools = append(resp.Tools, e.proto())
	}
	return resp, nil
}

// GetToolDocs returns the docs of a server's tools, or of one tool.
func (s *Server) GetToolDocs(ctx context.Context, req *discoveryv1.GetToolDocsRequest) (*discoveryv1.GetToolDocsResponse, error) {
	resp, err := s.getToolDocs(ctx, req)
	if err == nil {
		go s.spare("GetToolDocs", req.GetTenant(), resp)
	}
	return answer(ctx, s, "GetToolDocs", resp, err)
}

func (s *Server) getToolDocs(ctx context.Context, req *discoveryv1.GetToolDocsRequest) (*discoveryv1.GetToolDocsResponse, error) {
	if err := named(req.GetServer()); err != nil {
		return nil, err
	}
	detail, err := checkDetail(req.GetDetail())
	if err != nil {
		return nil, err
	}
	var name string
	var es []entry
	if req.GetKnownOnly() {
		name, es, err = s.knownVisibleTools(ctx, req.GetTenant(), req.GetServer())
	} else {
		name, es, err = s.visibleTools(ctx, req.GetTenant(), req.GetServer())
	}
	if err != nil {
		return nil, err
	}
	alias := s.serverAlias(name)
	resp := &discoveryv1.GetToolDocsResponse{}
	if req.GetTool() != "" {
		e, ok := findTool(es, req.GetTool())
		if !ok {
			names := make([]string, len(es))
			for i, e := range es {
				names[i] = e.name
			}
			return nil, upstream.UnknownToolError(name, req.GetTool(), names)
		}
		resp.Docs = append(resp.Docs, e.doc(name, alias, detail))
		return resp, nil
	}
	for _, e := range es {
		resp.Docs = append(resp.Docs, e.doc(name, alias, detail))
	}
	return resp, nil
}

func checkDetail(d discoveryv1.Detail) (discoveryv1.Detail, error) {
	switch d {
	case discoveryv1.Detail_DETAIL_UNSPECIFIED, discoveryv1.Detail_DETAIL_SUMMARY:
		return discoveryv1.Detail_DETAIL_SUMMARY, nil
	case discoveryv1.Detail_DETAIL_FULL:
		return d, nil
	}
	return 0, invalid("detail %d is not known; use DETAIL_SUMMARY or DETAIL_FULL", d)
}

// SearchTools ranks tools against a query.
func (s *Server) SearchTools(ctx context.Context, req *discoveryv1.SearchToolsRequest) (*discoveryv1.SearchToolsResponse, error) {
	start := time.Now()
	resp, err := s.searchTools(ctx, req)
	scope := "all"
	if len(req.GetServers()) > 0 {
		scope = "servers"
	}
	s.metrics.search.WithLabelValues(scope).Observe(time.Since(start).Seconds())
	if err == nil {
		go s.spare("SearchTools", req.GetTenant(), resp)
	}
	return answer(ctx, s, "SearchTools", resp, err)
}

// searchScope indexes the named servers a search is limited to, the
// catalogue's first and the rest by listing them, and returns which docs
// the search keeps and which servers it could not index.
func (s *Server) searchScope(ctx context.Context, tenant string, servers []string) (func(*search.Doc) bool, []string, error) {
	scope, err := s.resolveAll(servers)
	if err != nil {
		return nil, nil, err
	}
	for _, n := range scope {
		if err := s.checkVisible(tenant, n); err != nil {
			return nil, nil, err
		}
	}
	// Servers whose tools the catalogue knows are not started.
	s.fromCatalog(ctx, scope)
	var unknown []string
	for _, n := range scope {
		if _, known := s.knownTools(n); !known {
			unknown = append(unknown, n)
		}
	}
	failed := s.listAll(ctx, unknown)
	in := map[string]bool{}
	var unindexed []string
	for _, n := range scope {
		in[n] = true
		if _, known := s.knownTools(n); !known || failed[n] {
			unindexed = append(unindexed, n)
		}
	}
	return func(d *search.Doc) bool { return in[d.Server] }, unindexed, nil
}

func (s *Server) searchTools(ctx context.Context, req *discoveryv1.SearchToolsRequest) (*discoveryv1.SearchToolsResponse, error) {
	query := strings.TrimSpace(req.GetQuery())
	if query == "" {
		return nil, invalid("query is empty; give words such as \"read file\" or a tool name")
	}
	detail, err := checkDetail(req.GetDetail())
	if err != nil {
		return nil, err
	}
	limit := int(req.GetLimit())
	switch {
	case limit == 0:
		limit = defaultSearchLimit
	case limit < 1:
		limit = 1
	case limit > maxSearchLimit:
		limit = maxSearchLimit
	}
	resp := &discoveryv1.SearchToolsResponse{}
	var keep func(*search.Doc) bool
	if len(req.GetServers()) > 0 {
		keep, resp.UnindexedServers, err = s.searchScope(ctx, req.GetTenant(), req.GetServers())
		if err != nil {
			return nil, err
		}
	} else {
		// The first search must find tools on every server, not only on
		// those used so far: index the rest first, within a bound.
		names := s.visibleNames(req.GetTenant())
		resp.UnindexedServers = s.indexUnlisted(ctx, names)
		if len(names) < len(s.mgr.Names()) {
			in := map[string]bool{}
			for _, n := range names {
				in[n] = true
			}
			keep = func(d *search.Doc) bool { return in[d.Server] }
		}
	}
	res := s.searchIndex().SearchFunc(query, limit, keep)
	resp.Total = int32(res.Total)
	full := map[string][]entry{} // approvals and schemas, per server
	for _, h := range res.Hits {
		doc := &discoveryv1.ToolDoc{Server: h.Doc.Server, ServerAlias: h.Doc.ServerAlias, Tool: h.Doc.Tool, ToolAlias: h.Doc.ToolAlias, Description: h.Doc.Description, MatchReason: h.Why}
		es, ok := full[h.Doc.Server]
		if !ok {
			// A server not listed here may be in the catalogue.
			tools, _ := s.knownTools(h.Doc.Server)
			es, _ = entries(tools)
			for i := range es {
				es[i].approval = s.approvalOf(h.Doc.Server, tools[i])
			}
			full[h.Doc.Server] = es
		}
		if e, ok := findTool(es, h.Doc.Tool); ok {
			doc.Approval = e.approval
			if detail == discoveryv1.Detail_DETAIL_FULL {
				doc.InputSchemaJson = string(e.schema)
			}
		}
		resp.Docs = append(resp.Docs, doc)
	}
	resp.Truncated = int(resp.GetTotal()) > len(resp.GetDocs())
	return resp, nil
}

// resolveAll maps names or aliases to names, failing on the first unknown.
func (s *Server) resolveAll(in []string) ([]string, error) {
	var out []string
	for _, n := range in {
		name := s.resolve(n)
		if _, err := s.mgr.Config(name); err != nil {
			return nil, err
		}
		if !slices.Contains(out, name) {
			out = append(out, name)
		}
	}
	return out, nil
}

// listAll lists the servers concurrently so that they get indexed, and
// returns those that failed; their errors are logged.
func (s *Server) listAll(ctx context.Context, names []string) map[string]bool {
	var mu sync.Mutex
	failed := map[string]bool{}
	var wg sync.WaitGroup
	for _, n := range names {
		wg.Go(func() {
			if _, err := s.mgr.Tools(ctx, n); err != nil {
				s.logger.WarnContext(ctx, "cannot list tools for search", "mcp.server", n, "error", err)
				mu.Lock()
				failed[n] = true
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return failed
}

// CallTool proxies one tool call.
func (s *Server) CallTool(ctx context.Context, req *discoveryv1.CallToolRequest) (*discoveryv1.CallToolResponse, error) {
	start := time.Now()
	resp, err := s.callTool(ctx, req)
	// Unknown names are not labels: they would grow without bound.
	if server := s.resolve(req.GetServer()); s.visible(req.GetTenant(), server) {
		if _, cfgErr := s.mgr.Config(server); cfgErr == nil {
			s.metrics.observeCall(server, start, resp, err)
		}
	}
	return answer(ctx, s, "CallTool", resp, err)
}

func (s *Server) callTool(ctx context.Context, req *discoveryv1.CallToolRequest) (*discoveryv1.CallToolResponse, error) {
	if err := named(req.GetServer()); err != nil {
		return nil, err
	}
	if req.GetTool() == "" {
		return nil, invalid("tool is empty; name one of the server's tools (see ListTools)")
	}
	args := map[string]any{}
	if raw := strings.TrimSpace(req.GetArgumentsJson()); raw != "" {
		var v any
		if err := json.Unmarshal([]byte(raw), &v); err != nil {
			return nil, invalid("arguments_json is not valid JSON: %v", err)
		}
		m, ok := v.(map[string]any)
		if !ok {
			return nil, invalid("arguments_json must be a JSON object of argument names to values, got %s", jsonKind(v))
		}
		args = m
	}
	timeout := s.opts.CallTimeout
	if t := req.GetTimeout(); t != nil {
		if err := t.CheckValid(); err != nil || t.AsDuration() < 0 {
			return nil, invalid("timeout must be a positive duration, got %v", t.AsDuration())
		}
		if d := t.AsDuration(); d > 0 {
			timeout = min(d, MaxCallTimeout)
		}
	}
	name := s.resolve(req.GetServer())
	if err := s.checkVisible(req.GetTenant(), name); err != nil {
		return nil, err
	}
	tool := s.toolName(name, req.GetTool())
	gate := s.gate(req.GetTenant(), name, req.GetApproved())
	res, err := s.mgr.CallTool(ctx, name, tool, args, timeout, gate)
	if errors.Is(err, upstream.ErrUnknownTool) {
		// The tool list was not cached before this call; now it is, so an
		// alias can be resolved.
		if t := s.toolName(name, tool); t != tool {
			res, err = s.mgr.CallTool(ctx, name, t, args, timeout, gate)
		}
	}
	if err != nil {
		return nil, err
	}
	out, err := json.Marshal(res)
	if err != nil {
		return nil, err
	}
	return &discoveryv1.CallToolResponse{ResultJson: string(out)}, nil
}

// toolName maps a tool alias (the sandbox's proxies are named by alias) or
// a differently cased name to the tool's name, using the cached list. It
// runs on every call, so it avoids encoding the tools.
func (s *Server) toolName(server, tool string) string {
	cached, ok := s.mgr.CachedTools(server)
	if !ok {
		return tool
	}
	names := make([]string, len(cached))
	for i, t := range cached {
		if t.Name == tool {
			return tool
		}
		names[i] = t.Name
	}
	aliases := alias.Tools(names)
	es := make([]entry, len(names))
	for i := range names {
		es[i] = entry{name: names[i], alias: aliases[i]}
	}
	if e, ok := findTool(es, tool); ok {
		return e.name
	}
	return tool
}

func jsonKind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case []any:
		return "an array"
	case string:
		return "a string"
	case bool:
		return "a boolean"
	}
	return "a number"
}
