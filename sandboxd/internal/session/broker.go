package session

import (
	"context"

	"github.com/codeexec/codeexec/sandboxd/internal/channel"
	"github.com/codeexec/codeexec/sandboxd/internal/sandbox"
)

// Broker answers what the sandboxed code asks of the outside world: MCP
// discovery and tool calls, memory and saved tools. sandboxd wires it to
// discoveryd and memoryd; the session layer only enforces the protocol.
type Broker interface {
	// Caller serves the calls of the code (and of a restore).
	sandbox.Caller
	// Prepare resolves the servers allowed for one exec. It fails with an
	// error wrapping ErrInvalid when a server is unknown.
	Prepare(ctx context.Context, tenant string, servers []string) (*sandbox.ExecEnv, error)
	// SavedTools fetches the tenant's saved tools, which a session's first
	// exec in a sandbox carries (channel.Exec.SavedTools). Nil with no
	// error means none were fetched: the agent then asks for them itself.
	SavedTools(ctx context.Context, tenant string) ([]channel.SavedTool, error)
}
