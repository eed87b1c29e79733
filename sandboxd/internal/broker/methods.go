package broker

import (
	"context"
	"encoding/json"

	"github.com/codeexec/codeexec/sandboxd/internal/channel"
	"github.com/codeexec/codeexec/sandboxd/internal/sandbox"
)

// methods serves each call method by its name. A method's name comes from
// its channel.Request type, so a handler cannot be filed under another
// method's name.
var methods = table(
	[]method{route((*Broker).listServers)},
	needing((*Broker).needDiscovery,
		route((*Broker).listTools), route((*Broker).callTool),
		route((*Broker).queryToolDocs), route((*Broker).searchToolDocs)),
	needing((*Broker).needMemory,
		route((*Broker).saveMemory), route((*Broker).loadMemory), route((*Broker).updateMemory),
		route((*Broker).deleteMemory), route((*Broker).listMemories),
		route((*Broker).saveTool), route((*Broker).listSavedTools), route((*Broker).deleteSavedTool)),
)

// origin is what a handler knows of a call besides its parameters: whose
// exec made it and what that exec may use.
type origin struct {
	tenant string
	env    *sandbox.ExecEnv
}

// method is one entry of the table.
type method struct {
	name string
	// serve decodes the parameters and runs the handler.
	serve func(ctx context.Context, b *Broker, o *origin, params json.RawMessage) (any, error)
}

// route makes the entry of a handler: its request type names the method
// and its parameters decode into that type, strictly.
func route[R any, P interface {
	*R
	channel.Request
}, Res any](h func(*Broker, context.Context, *origin, P) (Res, error)) method {
	return method{
		name: P(new(R)).Method(),
		serve: func(ctx context.Context, b *Broker, o *origin, params json.RawMessage) (any, error) {
			req := P(new(R))
			if err := channel.DecodeParams(params, req); err != nil {
				return nil, channel.Errorf(channel.CodeInvalidArgument, "%v", err)
			}
			res, err := h(b, ctx, o, req)
			return res, err
		},
	}
}

// needing makes ms fail with need's error, before their parameters are
// read, when the service they call is not part of this deployment.
func needing(need func(*Broker) error, ms ...method) []method {
	for i, m := range ms {
		serve := m.serve
		ms[i].serve = func(ctx context.Context, b *Broker, o *origin, params json.RawMessage) (any, error) {
			if err := need(b); err != nil {
				return nil, err
			}
			return serve(ctx, b, o, params)
		}
	}
	return ms
}

func table(groups ...[]method) map[string]method {
	t := map[string]method{}
	for _, g := range groups {
		for _, m := range g {
			if _, dup := t[m.name]; dup {
				panic("broker: two handlers for " + m.name)
			}
			t[m.name] = m
		}
	}
	return t
}

// Call serves one request from sandboxed code. A failed call's error is a
// *channel.Error, whose code the agent raises as a typed exception.
func (b *Broker) Call(ctx context.Context, tenant string, env *sandbox.ExecEnv, name string, params json.RawMessage) (json.RawMessage, error) {
	m, ok := methods[name]
	if !ok {
		return nil, channel.Errorf(channel.CodeInvalidArgument, "unknown request %q from the sandbox", name)
	}
	out, err := m.serve(ctx, b, &origin{tenant: tenant, env: env}, params)
	if err != nil {
		return nil, callError(err)
	}
	if raw, ok := out.(json.RawMessage); ok {
		return raw, nil
	}
	return json.Marshal(out)
}

var (
	errNoDiscovery = channel.Errorf(channel.CodeUnavailable, "MCP server discovery is not available in this deployment")
	errNoMemory    = channel.Errorf(channel.CodeUnavailable, "memory and saved tools are not available in this deployment (memoryd is not configured)")
)

func (b *Broker) needDiscovery() error {
	if b.Discovery == nil {
		return errNoDiscovery
	}
	return nil
}

func (b *Broker) needMemory() error {
	if b.Memory == nil || b.Tools == nil {
		return errNoMemory
	}
	return nil
}
