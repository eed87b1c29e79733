// Package runpython is the gateway's one tool: its definition, and its
// handler, which parses a call (handle.go), finds the sandbox session it
// runs in (execute.go), streams it from the replica that holds that
// session (stream.go), and renders the outcome. Every failure becomes a
// tool result the model can read. A call still running at the yield time
// returns "running", and a call with code "" attaches to the run again;
// under the tasks extension the run is a task (task.go).
package runpython

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/codeexec/codeexec/gateway/internal/auth"
	"github.com/codeexec/codeexec/gateway/internal/capabilities"
	"github.com/codeexec/codeexec/gateway/internal/drain"
	"github.com/codeexec/codeexec/gateway/internal/metrics"
	"github.com/codeexec/codeexec/gateway/internal/params"
	"github.com/codeexec/codeexec/gateway/internal/quota"
	"github.com/codeexec/codeexec/gateway/internal/reqstate"
	"github.com/codeexec/codeexec/gateway/internal/result"
	"github.com/codeexec/codeexec/gateway/internal/sessions"
	sandboxv1 "github.com/codeexec/codeexec/proto/gen/codeexec/sandbox/v1"
)

// Name is the tool's name.
const Name = "run_python"

// description is what the model reads on every turn, so it is short:
// what the tool does, that state persists, how servers are exposed, and
// where the manual is.
const description = "Run Python in a persistent sandbox, like a notebook kernel: variables, " +
	"imports, functions and classes persist between calls, and come back from a checkpoint after a timeout or crash. Top-level await works. " +
	"servers=[\"name\"] exposes each MCP server as an mcp_<alias> proxy: await mcp_<alias>.<tool>(**args). " +
	"For the manual run print(runtime.capability_summary()) or read " + capabilities.URI + "."

// schema is the input schema; the %d are the maximum and the default
// timeout in seconds. Like upstream's (which embeds its helper summary),
// the code description names the helpers for discovery, search, docs,
// memory and saved tools, in one sentence.
const schema = `{"type":"object","properties":{` +
	`"code":{"type":"string","description":"Python source. Helpers: runtime.discovered_servers(), ` +
	`await runtime.search_tool_docs(query), await runtime.query_tool_docs(server, tool), save_memory(key, value)/load_memory(key), ` +
	`save_tool(func) keeps a function."},` +
	`"servers":{"type":"array","items":{"type":"string"},"description":"MCP servers to expose as mcp_<alias> proxies"},` +
	`"timeout":{"type":"number","minimum":1,"maximum":%d,"default":%d,"description":"Timeout in seconds"},` +
	`"session":{"type":"string","description":"Session handle from an earlier result, to continue that session"},` +
	`"cancel":{"type":"boolean","description":"Stop the run in flight (code=\"\")"}},` +
	`"required":["code"],"additionalProperties":false}`

// Options are what the tool needs from the gateway.
type Options struct {
	// Limits bound each call's timeout, in whole seconds; TenantLimits,
	// when set, bound those of a tenant's calls instead.
	Limits       params.Limits
	TenantLimits func(tenant string) params.Limits
	// Yield is how long a call runs before it returns status "running"
	// while its code runs on; zero never yields.
	Yield time.Duration
	// Mode renders results (compact or TOON).
	Mode result.Mode
	// OutputLimitBytes is sandboxd's per-stream output cap, quoted in
	// truncation notes; zero means unknown.
	OutputLimitBytes int64
	// Tenant is the caller's tenant when the context names none (stdio).
	Tenant string
	// Sandbox runs the code on the replica that holds each session (a
	// route.Router).
	Sandbox sandboxv1.SandboxServiceClient
	// Sessions maps each MCP session to its sandbox session.
	Sessions *sessions.Table
	// Quota and Calls admit calls: per-tenant caps, and shutdown.
	Quota *quota.Execs
	Calls *drain.Tracker
	// Metrics times calls and counts refusals.
	Metrics *metrics.Metrics
	// Logger logs each call's outcome.
	Logger *slog.Logger
	// MaxToolCalls is the most tool calls one run of a tenant may make;
	// 0 is no limit.
	MaxToolCalls func(tenant string) int
	// States seals the requestState of input_required results.
	States *reqstate.Sealer
}

// Tool is the run_python tool.
type Tool struct{ opts Options }

// New returns the tool.
func New(opts Options) *Tool { return &Tool{opts: opts} }

// Title is the tool's display name.
const Title = "Run Python"

// Definition is the tool as tools/list shows it. Its hints are honest, so
// that clients ask before running it as they should: the code can change
// anything the user's servers can (not read-only, possibly destructive,
// not idempotent), and reaches the world outside through them (open
// world).
func (t *Tool) Definition() mcp.Tool { return definition(t.opts.Limits) }

// DefinitionFor is Definition as the caller's tenant sees it: its schema
// states the tenant's own timeout limits (Options.TenantLimits).
func (t *Tool) DefinitionFor(ctx context.Context) mcp.Tool { return definition(t.limits(ctx)) }

// limits bound the timeout of the caller's calls.
func (t *Tool) limits(ctx context.Context) params.Limits {
	if t.opts.TenantLimits != nil {
		return t.opts.TenantLimits(auth.Tenant(ctx, t.opts.Tenant))
	}
	return t.opts.Limits
}

func definition(lim params.Limits) mcp.Tool {
	s := fmt.Sprintf(schema, lim.MaxSeconds, params.Clamp(lim.DefaultSeconds, lim.MaxSeconds))
	tool := mcp.NewToolWithRawSchema(Name, description, json.RawMessage(s))
	tool.Title = Title
	tool.Annotations = mcp.ToolAnnotation{Title: Title, ReadOnlyHint: new(false), DestructiveHint: new(true), IdempotentHint: new(false), OpenWorldHint: new(true)}
	return tool
}
