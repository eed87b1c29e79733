// Package broker serves the sandbox's requests (docs/PROTOCOL.md §Call
// methods) by calling discoveryd and memoryd, and enforces each exec's
// server allow-list.
package broker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	discoveryv1 "github.com/codeexec/codeexec/proto/gen/codeexec/discovery/v1"
	memoryv1 "github.com/codeexec/codeexec/proto/gen/codeexec/memory/v1"
	"github.com/codeexec/codeexec/sandboxd/internal/channel"
	"github.com/codeexec/codeexec/sandboxd/internal/session"
)

// Broker implements session.Broker. A nil client means that service is not
// part of this deployment; calls that need it fail with a clear error.
type Broker struct {
	Discovery discoveryv1.DiscoveryServiceClient
	Memory    memoryv1.MemoryServiceClient
	Tools     memoryv1.ToolServiceClient
}

var _ session.Broker = (*Broker)(nil)

// Prepare resolves the servers allowed for one exec.
func (b *Broker) Prepare(ctx context.Context, tenant string, servers []string) (*session.ExecEnv, error) {
	env := &session.ExecEnv{Allowed: []string{}, Servers: []channel.Server{}, Discovered: []channel.DiscoveredServer{}}
	// Never nil: list_servers() sends this list, and the code expects an
	// empty list (upstream's ()), not null, when no servers were asked for.
	names := []string{}
	seen := make(map[string]bool, len(servers)) // a client may send thousands
	for _, s := range servers {
		s = strings.TrimSpace(s)
		if s != "" && !seen[s] {
			seen[s] = true
			names = append(names, s)
		}
	}
	if b.Discovery == nil {
		if len(names) > 0 {
			return nil, fmt.Errorf("%w: %s: MCP server discovery is not available in this deployment, so no servers can be loaded; call run_python without 'servers'",
				session.ErrInvalid, unknownServers(names))
		}
		return env, nil
	}
	list, err := b.Discovery.ListServers(ctx, &discoveryv1.ListServersRequest{Tenant: tenant})
	if err != nil {
		return nil, fmt.Errorf("list MCP servers: %w", err)
	}
	all := make([]channel.DiscoveredServer, 0, len(list.GetServers()))
	known := map[string]bool{}
	aliases := map[string]string{}
	for _, s := range list.GetServers() {
		all = append(all, channel.DiscoveredServer{Name: s.GetName(), Description: s.GetDescription()})
		known[s.GetName()] = true
		aliases[s.GetName()] = s.GetAlias()
	}
	env.Discovered = all
	var unknown []string
	for _, n := range names {
		if !known[n] {
			unknown = append(unknown, n)
		}
	}
	if len(unknown) > 0 {
		return nil, fmt.Errorf("%w: %s; configured servers: %s", session.ErrInvalid, unknownServers(unknown), configuredList(all))
	}
	metas := make([]channel.Server, 0, len(names))
	for _, n := range names {
		resp, err := b.Discovery.ListTools(ctx, &discoveryv1.ListToolsRequest{Server: n, Tenant: tenant})
		switch {
		case status.Code(err) == codes.NotFound:
			return nil, fmt.Errorf("%w: %s", session.ErrInvalid, status.Convert(err).Message())
		case err != nil:
			// A server that cannot start now is still allowed: the code
			// gets runtime.MCPError, with the reason, when it uses it, and
			// the other servers of the call stay usable.
			metas = append(metas, channel.Server{Name: n, Alias: aliases[n], Tools: []channel.Tool{}, Error: status.Convert(err).Message()})
			continue
		}
		srv := resp.GetServer()
		meta := channel.Server{Name: n, Alias: srv.GetAlias(), Description: srv.GetDescription(), Cwd: srv.GetCwd(), Tools: []channel.Tool{}}
		for _, t := range resp.GetTools() {
			tm := channel.Tool{Name: t.GetName(), Alias: t.GetAlias(), Description: t.GetDescription()}
			if js := t.GetInputSchemaJson(); js != "" && json.Valid([]byte(js)) {
				tm.InputSchema = json.RawMessage(js)
			}
			meta.Tools = append(meta.Tools, tm)
		}
		metas = append(metas, meta)
	}
	env.Allowed = names
	env.Servers = metas
	return env, nil
}

// Call serves one request from sandboxed code.
func (b *Broker) Call(ctx context.Context, tenant string, env *session.ExecEnv, method string, params json.RawMessage) (json.RawMessage, error) {
	var p callParams
	if len(params) > 0 {
		if err := json.Unmarshal(params, &p); err != nil {
			return nil, fmt.Errorf("bad parameters for %s: %v", method, err)
		}
	}
	var (
		out any
		err error
	)
	switch {
	case method == "list_servers":
		out = env.Allowed
	case strings.HasPrefix(method, "memory."), strings.HasPrefix(method, "tool."):
		out, err = b.memoryCall(ctx, tenant, method, &p)
	case method == "list_tools", method == "call_tool", method == "query_tool_docs", method == "search_tool_docs":
		if b.Discovery == nil {
			return nil, errors.New("MCP server discovery is not available in this deployment")
		}
		out, err = b.discoveryCall(ctx, tenant, env, method, &p)
	default:
		return nil, fmt.Errorf("unknown request %q from the sandbox", method)
	}
	if err != nil {
		return nil, err
	}
	if raw, ok := out.(json.RawMessage); ok {
		return raw, nil
	}
	return json.Marshal(out)
}

// callParams is the union of every method's parameters.
type callParams struct {
	Server    string          `json:"server"`
	Tool      *string         `json:"tool"`
	Arguments json.RawMessage `json:"arguments"`
	Detail    string          `json:"detail"`
	Query     string          `json:"query"`
	Limit     int32           `json:"limit"`
	Key       *string         `json:"key"`
	Value     json.RawMessage `json:"value"`
	Metadata  json.RawMessage `json:"metadata"`
	Revision  uint64          `json:"revision"`
	Name      string          `json:"name"`
	Source    string          `json:"source"`
	Docstring string          `json:"docstring"`
}

// allowed checks the exec's allow-list.
func allowed(env *session.ExecEnv, server string) error {
	if server == "" {
		return errors.New("missing server name")
	}
	if slices.Contains(env.Allowed, server) {
		return nil
	}
	// Upstream's words first ("Server 'x' is not available"), then what to
	// do: the exact servers argument that loads it with the others.
	load := make([]string, 0, len(env.Allowed)+1)
	for _, n := range append(slices.Clone(env.Allowed), server) {
		load = append(load, quoted(n))
	}
	if len(env.Allowed) == 0 {
		return fmt.Errorf("Server %s is not available: no servers are loaded in this call; pass servers=[%s] to run_python", pyRepr(server), load[0])
	}
	return fmt.Errorf("Server %s is not available: it is not loaded in this call (loaded: %s); pass servers=[%s] to run_python",
		pyRepr(server), quoteList(env.Allowed), strings.Join(load, ", "))
}

// pyRepr quotes s as Python's repr() does, since upstream's messages
// name servers with {server!r}: single quotes unless s holds a single
// quote and no double quote.
func pyRepr(s string) string {
	q := byte('\'')
	if strings.ContainsRune(s, '\'') && !strings.ContainsRune(s, '"') {
		q = '"'
	}
	var b strings.Builder
	b.WriteByte(q)
	for _, r := range s {
		switch {
		case r == '\\' || r == rune(q):
			b.WriteByte('\\')
			b.WriteRune(r)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case r == utf8.RuneError || strconv.IsPrint(r):
			b.WriteRune(r)
		case r < 0x100:
			fmt.Fprintf(&b, `\x%02x`, r)
		case r < 0x10000:
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			fmt.Fprintf(&b, `\U%08x`, r)
		}
	}
	b.WriteByte(q)
	return b.String()
}

func quoteList(names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = fmt.Sprintf("%q", n)
	}
	return strings.Join(q, ", ")
}

// Messages name at most this many unknown or configured servers, so that
// a call with thousands of names gets an error the model can read.
const (
	maxUnknownNamed    = 5
	maxConfiguredNamed = 20
)

// unknownServers says which requested servers do not exist: the first few
// and how many there are in all.
func unknownServers(names []string) string {
	if len(names) == 1 {
		return "unknown MCP server " + quoteList(names)
	}
	return fmt.Sprintf("%d unknown MCP servers: %s", len(names), someOf(names, maxUnknownNamed))
}

// someOf quotes the first n names, then counts the rest.
func someOf(names []string, n int) string {
	if len(names) <= n {
		return quoteList(names)
	}
	return fmt.Sprintf("%s and %d more", quoteList(names[:n]), len(names)-n)
}

func configuredList(all []channel.DiscoveredServer) string {
	if len(all) == 0 {
		return "none (add servers to ~/MCPs/*.json, your MCP client config, or MCP_SERVERS_CONFIG)"
	}
	names := make([]string, len(all))
	for i, d := range all {
		names[i] = d.Name
	}
	sort.Strings(names)
	if len(names) > maxConfiguredNamed {
		return someOf(names, maxConfiguredNamed) + " (runtime.discovered_servers() lists them all)"
	}
	return quoteList(names)
}

// rpcError turns a downstream gRPC error into the text the code sees.
func rpcError(err error) error {
	st := status.Convert(err)
	switch st.Code() {
	case codes.DeadlineExceeded:
		return fmt.Errorf("timed out: %s", st.Message())
	case codes.Unavailable:
		return fmt.Errorf("unavailable: %s", st.Message())
	}
	return errors.New(st.Message())
}
