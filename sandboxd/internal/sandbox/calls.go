package sandbox

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/codeexec/codeexec/sandboxd/internal/channel"
	"github.com/codeexec/codeexec/services/logkeys"
)

// Caller serves the calls the code in a sandbox makes: MCP discovery and
// tool calls, memory and saved tools (the broker package).
type Caller interface {
	// Call serves one request from the sandbox. A failed call's error is a
	// *channel.Error: its code and message go back to the code, which
	// raises them as a typed runtime.MCPError.
	Call(ctx context.Context, tenant string, env *ExecEnv, method string, params json.RawMessage) (json.RawMessage, error)
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
	// Controls, when set, are the approvals and limits of the exec's tool
	// calls; nil asks nobody and limits nothing.
	Controls *Controls
}

// maxCallsInFlight bounds the calls of one sandbox that sandboxd serves at
// once. Code that wrote call frames to the channel in a loop (it can reach
// the agent's channel object) used to get a goroutine for each: 400,000 of
// them took gigabytes of sandboxd's memory and starved the rest of the
// process, the replica's lease renewal among it, so that every tenant's
// live sandboxes were stopped. The agent has every call's reply read by a
// thread of its own, so an honest one never waits on a call it made to
// have another of its calls served.
const maxCallsInFlight = 64

// startCall runs serve in a goroutine of its own once fewer than
// maxCallsInFlight of the sandbox's calls are being served. Until then it
// waits, and the frames behind the call wait with it; it gives up, and
// serve does not run, when ctx ends or the sandbox dies.
func (sb *Sandbox) startCall(ctx context.Context, serve func()) {
	select {
	case sb.calls <- struct{}{}:
	case <-ctx.Done():
		return
	case <-sb.dead:
		return
	}
	go func() {
		defer func() { <-sb.calls }()
		serve()
	}()
}

// call is one call frame to answer: who serves it, for which exec, and
// the error of a call that ctx's deadline ended (late, when set).
type call struct {
	caller Caller
	tenant string
	env    *ExecEnv
	exec   int64
	late   *channel.Error
}

// serve answers one call frame from the sandbox.
func (sb *Sandbox) serve(ctx context.Context, c call, f *channel.Call) {
	var (
		result json.RawMessage
		err    error
	)
	if f.Exec != c.exec {
		err = channel.Errorf(channel.CodeFailedPrecondition, "this call was made after its run_python call had finished")
	} else {
		result, err = c.caller.Call(ctx, c.tenant, c.env, f.Method, f.Params)
		// A call that timed out as ctx's deadline came gets late, which
		// says whose time it was, rather than a bare "context deadline
		// exceeded". (The service's end of the call may give up a moment
		// before ctx does; one that gives up earlier names what it waited
		// for, and keeps its error.)
		if e, ok := errors.AsType[*channel.Error](err); ok && c.late != nil && e.Code == channel.CodeDeadlineExceeded {
			if dl, ok := ctx.Deadline(); ok && time.Until(dl) < 10*time.Millisecond {
				err = c.late
			}
		}
	}
	reply := channel.ReplyTo(f.ID, result, err)
	if err := sb.conn.Write(reply); err != nil {
		sb.logger.DebugContext(ctx, "reply to sandbox failed", logkeys.Error, err)
	}
}
