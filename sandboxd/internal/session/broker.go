package session

import (
	"context"
	"encoding/json"

	"github.com/codeexec/codeexec/sandboxd/internal/channel"
)

// Broker answers what the sandboxed code asks of the outside world: MCP
// discovery and tool calls, memory and saved tools. sandboxd wires it to
// discoveryd and memoryd; the session layer only enforces the protocol.
type Broker interface {
	// Prepare resolves the servers allowed for one exec. It fails with an
	// error wrapping ErrInvalid when a server is unknown.
	Prepare(ctx context.Context, tenant string, servers []string) (*ExecEnv, error)
	// Call serves one request from the sandbox. A failed call's error is a
	// *channel.Error: its code and message go back to the code, which
	// raises them as a typed runtime.MCPError.
	Call(ctx context.Context, tenant string, env *ExecEnv, method string, params json.RawMessage) (json.RawMessage, error)
	// SavedTools fetches the tenant's saved tools, which a session's first
	// exec in a sandbox carries (channel.Exec.SavedTools). Nil with no
	// error means none were fetched: the agent then asks for them itself.
	SavedTools(ctx context.Context, tenant string) ([]channel.SavedTool, error)
}

// ExecEnv is what one exec may use.
type ExecEnv struct {
	// Allowed lists the server names the exec may call, in request order.
	Allowed []string
	// Servers is the metadata of the allowed servers, as sent to the agent.
	Servers []channel.Server
	// Discovered lists every configured server.
	Discovered []channel.DiscoveredServer
	// Unloaded are the config entries that were not loaded, so that the
	// exec's code is told why when it names one.
	Unloaded []channel.UnloadedServer
}
