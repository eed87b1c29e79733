package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/codeexec/codeexec/gateway/internal/params"
	"github.com/codeexec/codeexec/gateway/internal/result"
	"github.com/codeexec/codeexec/services/logkeys"
	"github.com/codeexec/codeexec/services/requestid"
)

// ToolName is the one tool the gateway offers.
const ToolName = "run_python"

// toolDescription is what the model reads on every turn, so it is short:
// what the tool does, that state persists, how servers are exposed, and
// where the manual is.
const toolDescription = "Run Python in a persistent sandbox, like a notebook kernel: variables, " +
	"imports and functions persist between calls (a timeout resets them). Top-level await works. " +
	"servers=[\"name\"] exposes each MCP server as an mcp_<alias> proxy: await mcp_<alias>.<tool>(**args). " +
	"For the manual call runtime.capability_summary() or read " + CapabilitiesURI + "."

// toolSchema is the input schema; the %d are the maximum and the default
// timeout in seconds. Like upstream's (which embeds its helper summary),
// the code description names the helpers for discovery, search, docs,
// memory and saved tools, in one sentence.
const toolSchema = `{"type":"object","properties":{` +
	`"code":{"type":"string","description":"Python source. Helpers: runtime.discovered_servers(), ` +
	`runtime.search_tool_docs(query), runtime.query_tool_docs(server, tool), save_memory(key, value)/load_memory(key), ` +
	`save_tool(func) to keep a function for later sessions."},` +
	`"servers":{"type":"array","items":{"type":"string"},"description":"MCP servers to expose as mcp_<alias> proxies"},` +
	`"timeout":{"type":"integer","minimum":1,"maximum":%d,"default":%d,"description":"Timeout in seconds"}},` +
	`"required":["code"]}`

func (g *Gateway) tool() mcp.Tool {
	schema := fmt.Sprintf(toolSchema, g.maxSec, params.Clamp(g.defaultSec, g.maxSec))
	return mcp.NewToolWithRawSchema(ToolName, toolDescription, json.RawMessage(schema))
}

// unknownToolHeader carries the name of a tool the client asked for that
// does not exist. mcp-go answers such calls with a protocol error before
// any handler runs; upstream answers with a tool result ("Unknown tool:
// x"), which the model can read and act on. The before-call hook reroutes
// the call to run_python's handler and leaves the name here. The header
// field is never filled from the wire body, and the hook always rewrites
// it, so a client cannot set it.
const unknownToolHeader = "X-Codeexec-Unknown-Tool"

// routeUnknownTools is an mcp-go before-call hook; see unknownToolHeader.
func routeUnknownTools(_ context.Context, _ any, req *mcp.CallToolRequest) {
	h := http.Header{}
	if req.Header != nil {
		h = req.Header.Clone()
	}
	h.Del(unknownToolHeader)
	if req.Params.Name != ToolName {
		h.Set(unknownToolHeader, req.Params.Name)
		req.Params.Name = ToolName
	}
	req.Header = h
}

// handleRunPython is the tool handler. Every failure becomes a tool result;
// it returns a Go error never.
func (g *Gateway) handleRunPython(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	if name := req.Header.Get(unknownToolHeader); name != "" {
		g.logger.WarnContext(ctx, "call to unknown tool", logkeys.MCPTool, name)
		return result.ToolResult(result.UnknownTool(name), g.mode), nil
	}
	p, msg, ok := params.Parse(req.GetArguments(), params.Limits{DefaultSeconds: g.defaultSec, MaxSeconds: g.maxSec})
	if !ok {
		return result.ToolResult(result.Validation(msg), g.mode), nil
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
	tenant := g.tenantOf(ctx)
	// A no-op unless tracing is configured; the span is the parent of the
	// gRPC spans of every service the call reaches.
	ctx, span := otel.Tracer("github.com/codeexec/codeexec/gateway").Start(ctx, "run_python",
		trace.WithAttributes(attribute.String(logkeys.Tenant, tenant), attribute.String(logkeys.RequestID, reqID)))
	defer span.End()
	// The request ID is put in each record, not in With, so that a
	// requestid.LogHandler does not add it a second time.
	logger := g.logger.With(logkeys.MCPTool, ToolName, logkeys.MCPSession, mcpID, logkeys.Tenant, tenant)
	start := time.Now()
	end, err := g.calls.begin()
	if err != nil {
		g.metrics.observe("refused", start)
		return result.ToolResult(result.Failure("The server is shutting down; retry on a new connection in a moment.", err.Error()), g.mode), nil
	}
	defer end()
	release, err := g.quota.acquire(tenant)
	if err != nil {
		g.metrics.observe("refused", start)
		var qe *QuotaError
		if errors.As(err, &qe) {
			g.metrics.quota.WithLabelValues(qe.Limit).Inc()
		}
		logger.WarnContext(ctx, "run_python refused", logkeys.RequestID, reqID, logkeys.Error, err)
		return result.ToolResult(result.Failure(err.Error(), err.Error()), g.mode), nil
	}
	defer release()
	out := g.execute(ctx, tenant, mcpID, p, g.progress(ctx, req))
	payload := result.FromOutcome(out)
	status := payload.Status
	if qe := (*QuotaError)(nil); errors.As(out.Err, &qe) {
		payload, status = result.Failure(qe.Error(), qe.Error()), "refused"
		g.metrics.quota.WithLabelValues(qe.Limit).Inc()
	}
	g.metrics.observe(status, start)
	span.SetAttributes(attribute.String(logkeys.ExecStatus, status))
	logger.LogAttrs(ctx, levelFor(payload), "run_python finished",
		slog.String(logkeys.RequestID, reqID),
		slog.String(logkeys.ExecStatus, payload.Status),
		slog.Duration(logkeys.Duration, time.Since(start)),
		slog.Int("timeout.seconds", p.TimeoutSeconds),
		slog.Any("servers", p.Servers))
	return result.ToolResult(payload, g.mode), nil
}

// levelFor logs failures of the gateway's own dependencies as warnings and
// everything the user's code did as info.
func levelFor(p result.Payload) slog.Level {
	if p.Status == result.StatusError && p.ExitCode == nil {
		return slog.LevelWarn
	}
	return slog.LevelInfo
}
