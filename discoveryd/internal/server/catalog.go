package server

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/codeexec/codeexec/discoveryd/internal/alias"
	"github.com/codeexec/codeexec/discoveryd/internal/config"
	"github.com/codeexec/codeexec/discoveryd/internal/search"
	"github.com/codeexec/codeexec/discoveryd/internal/upstream"
	discoveryv1 "github.com/codeexec/codeexec/proto/gen/codeexec/discovery/v1"
)

// entry is one tool with everything the RPCs return about it.
type entry struct {
	name, alias, description string
	schema                   json.RawMessage // inputSchema
	raw                      json.RawMessage // the whole Tool
	params                   []string
	paramText                string
	// approval says why a person must approve each call, or "".
	approval string
}

// entries converts a server's tools, assigning aliases in list order.
func entries(tools []mcp.Tool) ([]entry, error) {
	names := make([]string, len(tools))
	for i, t := range tools {
		names[i] = t.Name
	}
	aliases := alias.Tools(names)
	out := make([]entry, len(tools))
	for i, t := range tools {
		raw, err := json.Marshal(t)
		if err != nil {
			return nil, fmt.Errorf("encode tool %q: %w", t.Name, err)
		}
		var parsed struct {
			InputSchema json.RawMessage `json:"inputSchema"`
		}
		_ = json.Unmarshal(raw, &parsed)
		e := entry{name: t.Name, alias: aliases[i], description: t.Description, schema: parsed.InputSchema, raw: raw}
		e.params, e.paramText = schemaParams(parsed.InputSchema)
		out[i] = e
	}
	return out, nil
}

// schemaParams returns the top-level property names of a JSON schema and
// their descriptions, for the search index.
func schemaParams(schema json.RawMessage) ([]string, string) {
	var s struct {
		Properties map[string]struct {
			Description string `json:"description"`
		} `json:"properties"`
	}
	if json.Unmarshal(schema, &s) != nil {
		return nil, ""
	}
	names := make([]string, 0, len(s.Properties))
	for n := range s.Properties {
		names = append(names, n)
	}
	sort.Strings(names)
	var text []string
	for _, n := range names {
		if d := s.Properties[n].Description; d != "" {
			text = append(text, d)
		}
	}
	return names, strings.Join(text, " ")
}

func (e entry) proto() *discoveryv1.Tool {
	return &discoveryv1.Tool{Name: e.name, Alias: e.alias, Description: e.description, InputSchemaJson: string(e.schema), ToolJson: string(e.raw), Approval: e.approval}
}

func (e entry) doc(server, serverAlias string, detail discoveryv1.Detail) *discoveryv1.ToolDoc {
	d := &discoveryv1.ToolDoc{Server: server, ServerAlias: serverAlias, Tool: e.name, ToolAlias: e.alias, Description: e.description, Approval: e.approval}
	if detail == discoveryv1.Detail_DETAIL_FULL {
		d.InputSchemaJson = string(e.schema)
	}
	return d
}

// findTool matches a tool by exact name, then by alias, then by name or
// alias ignoring case, as upstream's query_tool_docs does.
func findTool(es []entry, want string) (entry, bool) {
	for _, e := range es {
		if e.name == want {
			return e, true
		}
	}
	for _, e := range es {
		if e.alias == want {
			return e, true
		}
	}
	for _, e := range es {
		if strings.EqualFold(e.name, want) || strings.EqualFold(e.alias, want) {
			return e, true
		}
	}
	return entry{}, false
}

// serverProto describes a server without starting it.
func (s *Server) serverProto(name string) (*discoveryv1.Server, error) {
	cfg, err := s.mgr.Config(name)
	if err != nil {
		return nil, err
	}
	st, err := s.mgr.Status(name)
	if err != nil {
		return nil, err
	}
	p := &discoveryv1.Server{
		Name: cfg.Name, Alias: s.serverAlias(name), Description: cfg.Description, Cwd: cfg.Cwd,
		LastError: st.LastError, Source: cfg.Source, Command: cfg.Command, ToolCount: int32(st.ToolCount),
	}
	switch cfg.Transport {
	case config.TransportStdio:
		p.Transport = discoveryv1.Transport_TRANSPORT_STDIO
	case config.TransportHTTP:
		p.Transport = discoveryv1.Transport_TRANSPORT_STREAMABLE_HTTP
	case config.TransportSSE:
		p.Transport = discoveryv1.Transport_TRANSPORT_SSE
	}
	switch st.State {
	case upstream.StateRunning:
		p.Status = discoveryv1.ServerStatus_SERVER_STATUS_RUNNING
	case upstream.StateFailed:
		p.Status = discoveryv1.ServerStatus_SERVER_STATUS_FAILED
	default:
		p.Status = discoveryv1.ServerStatus_SERVER_STATUS_STOPPED
	}
	return p, nil
}

// searchIndex returns the index over every server listed so far,
// rebuilding it after a tool list changed, or once the model has made the
// vectors it lacked.
func (s *Server) searchIndex() *search.Index {
	s.indexMu.Lock()
	defer s.indexMu.Unlock()
	if s.index != nil && !s.indexDirty.Load() {
		return s.index
	}
	s.indexDirty.Store(false) // a change during the build marks it again
	var docs []search.Doc
	for _, name := range s.mgr.Names() {
		tools, ok := s.knownTools(name)
		if !ok {
			continue
		}
		es, err := entries(tools)
		if err != nil {
			s.logger.Warn("cannot index tools", "mcp.server", name, "error", err)
			continue
		}
		alias := s.serverAlias(name)
		cfg, _ := s.mgr.Config(name) // listed above, so configured
		for _, e := range es {
			docs = append(docs, search.Doc{Server: name, ServerAlias: alias, Tool: e.name, ToolAlias: e.alias, Description: e.description,
				Params: e.params, ParamText: e.paramText, ServerDescription: cfg.Description})
		}
	}
	var opts search.Options
	if s.vec != nil {
		opts.Semantic, opts.Pending = s.semanticFor(docs)
	}
	s.index = search.NewIndexWith(docs, opts)
	return s.index
}
