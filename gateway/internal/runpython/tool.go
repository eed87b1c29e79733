// Package runpython is the gateway's one tool: its definition, its
// handler, and the running of one call in the sandbox session of its MCP
// session. Every failure becomes a tool result the model can read.
package runpython

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/codeexec/codeexec/gateway/internal/auth"
	"github.com/codeexec/codeexec/gateway/internal/capabilities"
	"github.com/codeexec/codeexec/gateway/internal/drain"
	"github.com/codeexec/codeexec/gateway/internal/mcpfix"
	"github.com/codeexec/codeexec/gateway/internal/metrics"
	"github.com/codeexec/codeexec/gateway/internal/params"
	"github.com/codeexec/codeexec/gateway/internal/quota"
	"github.com/codeexec/codeexec/gateway/internal/result"
	"github.com/codeexec/codeexec/gateway/internal/sessions"
	sandboxv1 "github.com/codeexec/codeexec/proto/gen/codeexec/sandbox/v1"
	"github.com/codeexec/codeexec/services/logkeys"
	"github.com/codeexec/codeexec/services/requestid"
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
	`save_tool(func) to keep a function for later sessions."},` +
	`"servers":{"type":"array","items":{"type":"string"},"description":"MCP servers to expose as mcp_<alias> proxies"},` +
	`"timeout":{"type":"integer","minimum":1,"maximum":%d,"default":%d,"description":"Timeout in seconds"},` +
	`"session":{"type":"string","description":"Session handle from an earlier result, to continue that session"}},` +
	`"required":["code"]}`

// Options are what the tool needs from the gateway.
type Options struct {
	// Limits bound each call's timeout, in whole seconds.
	Limits params.Limits
	// Mode renders results (compact or TOON).
	Mode result.Mode
	// OutputLimitBytes is sandboxd's per-stream output cap, quoted in
	// truncation notes; zero means unknown.
	OutputLimitBytes int64
	// Tenant is the caller's tenant when the context names none (stdio).
	Tenant string
	// Sandbox runs the code.
	Sandbox sandboxv1.SandboxServiceClient
	// Sessions routes each MCP session to its sandbox session.
	Sessions *sessions.Table
	// Elsewhere returns a client of the sandbox replica at an address that
	// a SessionElsewhere answer named; nil follows no such answer.
	Elsewhere func(addr string) (sandboxv1.SandboxServiceClient, error)
	// Quota and Calls admit calls: per-tenant caps, and shutdown.
	Quota *quota.Execs
	Calls *drain.Tracker
	// Metrics times calls and counts refusals.
	Metrics *metrics.Metrics
	// Logger logs each call's outcome.
	Logger *slog.Logger
}

// Tool is the run_python tool.
type Tool struct{ opts Options }

// New returns the tool.
func New(opts Options) *Tool { return &Tool{opts: opts} }

// Definition is the tool as tools/list shows it.
func (t *Tool) Definition() mcp.Tool {
	lim := t.opts.Limits
	s := fmt.Sprintf(schema, lim.MaxSeconds, params.Clamp(lim.DefaultSeconds, lim.MaxSeconds))
	return mcp.NewToolWithRawSchema(Name, description, json.RawMessage(s))
}

// Handle is the tool handler. Every failure becomes a tool result; it
// never returns a Go error.
func (t *Tool) Handle(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	mode := t.opts.Mode
	if name := mcpfix.UnknownTool(req); name != "" {
		t.opts.Logger.WarnContext(ctx, "call to unknown tool", logkeys.MCPTool, name)
		return result.ToolResult(result.UnknownTool(name), mode), nil
	}
	p, msg, ok := params.Parse(req.GetArguments(), t.opts.Limits)
	if !ok {
		return result.ToolResult(result.Validation(msg), mode), nil
	}

	mcpID := ""
	if s := server.ClientSessionFromContext(ctx); s != nil {
		mcpID = s.SessionID()
	}
	// The gateway is where a call enters the suite, so it names it; the
	// gRPC client interceptor passes the ID on to sandboxd and beyond.
	reqID := requestid.From(ctx)
	if reqID == "" {
		reqID = requestid.New()
		ctx = requestid.With(ctx, reqID)
	}
	tenant := auth.Tenant(ctx, t.opts.Tenant)
	// A no-op unless tracing is configured; the span is the parent of the
	// gRPC spans of every service the call reaches.
	ctx, span := otel.Tracer("github.com/codeexec/codeexec/gateway").Start(ctx, Name,
		trace.WithAttributes(attribute.String(logkeys.Tenant, tenant), attribute.String(logkeys.RequestID, reqID)))
	defer span.End()
	// The request ID is put in each record, not in With, so that a
	// requestid.LogHandler does not add it a second time.
	logger := t.opts.Logger.With(logkeys.MCPTool, Name, logkeys.MCPSession, mcpID, logkeys.Tenant, tenant)
	start := time.Now()
	end, err := t.opts.Calls.Begin()
	if err != nil {
		t.opts.Metrics.ObserveCall("refused", start)
		return result.ToolResult(result.Failure("The server is shutting down; retry on a new connection in a moment.", err.Error()), mode), nil
	}
	defer end()
	release, err := t.opts.Quota.Acquire(tenant)
	if err != nil {
		t.opts.Metrics.ObserveCall("refused", start)
		var qe *quota.Error
		if errors.As(err, &qe) {
			t.opts.Metrics.Quota.WithLabelValues(qe.Limit).Inc()
		}
		logger.WarnContext(ctx, "run_python refused", logkeys.RequestID, reqID, logkeys.Error, err)
		return result.ToolResult(result.Failure(err.Error(), err.Error()), mode), nil
	}
	defer release()
	out := t.Execute(ctx, tenant, mcpID, server.IsModernRequest(ctx), p, t.progress(ctx, req))
	if ctx.Err() != nil && !mcpfix.Gone(ctx) {
		// The client cancelled the call; see mcpfix.MarkCancelled.
		mcpfix.MarkCancelled(ctx)
	}
	payload := result.FromOutcome(out)
	status := payload.Status
	if qe := (*quota.Error)(nil); errors.As(out.Err, &qe) {
		payload, status = result.Failure(qe.Error(), qe.Error()), "refused"
		t.opts.Metrics.Quota.WithLabelValues(qe.Limit).Inc()
	}
	t.opts.Metrics.ObserveCall(status, start)
	span.SetAttributes(attribute.String(logkeys.ExecStatus, status))
	logger.LogAttrs(ctx, levelFor(payload), "run_python finished",
		slog.String(logkeys.RequestID, reqID),
		slog.String(logkeys.ExecStatus, payload.Status),
		slog.Duration(logkeys.Duration, time.Since(start)),
		slog.Int("timeout.seconds", p.TimeoutSeconds),
		slog.Any("servers", p.Servers))
	return result.ToolResult(payload, mode), nil
}

// levelFor logs failures of the gateway's own dependencies as warnings and
// everything the user's code did as info.
func levelFor(p result.Payload) slog.Level {
	if p.Status == result.StatusError && p.ExitCode == nil {
		return slog.LevelWarn
	}
	return slog.LevelInfo
}
