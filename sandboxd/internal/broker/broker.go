// Package broker serves the sandbox's requests (docs/PROTOCOL.md §Call
// methods) by calling discoveryd and memoryd, and enforces each exec's
// server allow-list.
package broker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	discoveryv1 "github.com/codeexec/codeexec/proto/gen/codeexec/discovery/v1"
	memoryv1 "github.com/codeexec/codeexec/proto/gen/codeexec/memory/v1"
	"github.com/codeexec/codeexec/sandboxd/internal/channel"
	"github.com/codeexec/codeexec/sandboxd/internal/sandbox"
	"github.com/codeexec/codeexec/sandboxd/internal/session"
)

// Broker implements session.Broker. A nil client means that service is not
// part of this deployment; calls that need it fail with a clear error.
type Broker struct {
	Discovery discoveryv1.DiscoveryServiceClient
	Memory    memoryv1.MemoryServiceClient
	Tools     memoryv1.ToolServiceClient
	// Logger says once per schema that a tool's input schema does not
	// compile; nil logs nothing.
	Logger *slog.Logger

	// schemas checks tool call arguments against the tools' schemas.
	schemas schemas
}

var _ session.Broker = (*Broker)(nil)

// Prepare resolves the servers allowed for one exec.
func (b *Broker) Prepare(ctx context.Context, tenant string, servers []string) (*sandbox.ExecEnv, error) {
	env := &sandbox.ExecEnv{Allowed: []string{}, Servers: []channel.Server{}, Discovered: []channel.DiscoveredServer{}}
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
	// Rescan, as upstream does on every call: a server added to a config
	// since the last call is found (discoveryd reads only changed files).
	list, err := b.Discovery.ListServers(ctx, &discoveryv1.ListServersRequest{Tenant: tenant, Rescan: true})
	if err != nil {
		return nil, fmt.Errorf("list MCP servers: %w", err)
	}
	all := make([]channel.DiscoveredServer, 0, len(list.GetServers()))
	known := map[string]bool{}
	aliases := map[string]string{}
	for _, s := range list.GetServers() {
		d := channel.DiscoveredServer{Name: s.GetName(), Description: s.GetDescription(), Alias: s.GetAlias()}
		if s.GetStatus() == discoveryv1.ServerStatus_SERVER_STATUS_FAILED {
			d.Failed = s.GetLastError()
		}
		all = append(all, d)
		known[s.GetName()] = true
		aliases[s.GetName()] = s.GetAlias()
	}
	env.Discovered = all
	for _, u := range list.GetUnloaded() {
		env.Unloaded = append(env.Unloaded, channel.UnloadedServer{Name: u.GetName(), Source: u.GetSource(), Reason: u.GetReason()})
	}
	var unknown []string
	for _, n := range names {
		if !known[n] {
			unknown = append(unknown, n)
		}
	}
	if len(unknown) > 0 {
		return nil, fmt.Errorf("%w: %s%s; configured servers: %s", session.ErrInvalid, unknownServers(unknown), whyUnloaded(unknown, list.GetUnloaded()), configuredList(all))
	}
	// The servers are listed at once, not one after the other, so that a
	// slow one delays the call by its own time only.
	metas := make([]channel.Server, len(names))
	errs := make([]error, len(names))
	var wg sync.WaitGroup
	for i, n := range names {
		wg.Go(func() { metas[i], errs[i] = b.serverMeta(ctx, tenant, n, aliases[n]) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	env.Allowed = names
	env.Servers = metas
	return env, nil
}

// serverMeta lists one server of an exec's servers. Only a server that is
// not known is an error; one that cannot start now is still allowed: the
// code gets runtime.MCPError, with the reason, when it uses it, and the
// other servers of the call stay usable. The error is the one a call would
// get, so the sync helpers raise it too.
func (b *Broker) serverMeta(ctx context.Context, tenant, name, alias string) (channel.Server, error) {
	resp, err := b.Discovery.ListTools(ctx, &discoveryv1.ListToolsRequest{Server: name, Tenant: tenant})
	switch {
	case status.Code(err) == codes.NotFound:
		return channel.Server{}, fmt.Errorf("%w: %s", session.ErrInvalid, status.Convert(err).Message())
	case err != nil:
		return channel.Server{Name: name, Alias: alias, Tools: []channel.Tool{}, Error: channel.AsError(callError(err))}, nil
	}
	srv := resp.GetServer()
	meta := channel.Server{Name: name, Alias: srv.GetAlias(), Description: srv.GetDescription(), Cwd: srv.GetCwd(), Tools: []channel.Tool{}}
	for _, t := range resp.GetTools() {
		tm := channel.Tool{Name: t.GetName(), Alias: t.GetAlias(), Description: t.GetDescription()}
		if js := t.GetInputSchemaJson(); js != "" && json.Valid([]byte(js)) {
			tm.InputSchema = json.RawMessage(js)
		}
		meta.Tools = append(meta.Tools, tm)
	}
	return meta, nil
}

// listServers serves list_servers: the servers allowed in the exec, as
// Prepare resolved them.
func (b *Broker) listServers(_ context.Context, o *origin, _ *channel.ListServersRequest) ([]string, error) {
	return o.env.Allowed, nil
}
