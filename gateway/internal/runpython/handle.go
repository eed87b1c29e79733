package runpython

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/codeexec/codeexec/gateway/internal/auth"
	"github.com/codeexec/codeexec/gateway/internal/mcpfix"
	"github.com/codeexec/codeexec/gateway/internal/params"
	"github.com/codeexec/codeexec/gateway/internal/quota"
	"github.com/codeexec/codeexec/gateway/internal/result"
	sandboxv1 "github.com/codeexec/codeexec/proto/gen/codeexec/sandbox/v1"
	"github.com/codeexec/codeexec/services/logkeys"
	"github.com/codeexec/codeexec/services/requestid"
)

// Handle is the tool handler: it parses the call, admits it, runs it and
// renders its outcome, or returns the questions its run waits on (under
// 2026-07-28, input_required). Every failure becomes a tool result; it
// returns a Go error only for a retry whose requestState or answers do
// not answer the questions asked, which 2026-07-28 wants refused as
// Invalid params (see mcpfix.ErrInvalidParams).
func (t *Tool) Handle(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	p, refusal, ok := t.parse(ctx, req)
	if !ok {
		return result.ToolResult(refusal, t.opts.Mode), nil
	}
	c, ctx := t.begin(ctx)
	ctx = context.WithValue(ctx, beganKey{}, c.start)
	// A no-op unless tracing is configured; the span is the parent of the
	// gRPC spans of every service the call reaches.
	ctx, span := otel.Tracer("github.com/codeexec/codeexec/gateway").Start(ctx, Name,
		trace.WithAttributes(attribute.String(logkeys.Tenant, c.tenant), attribute.String(logkeys.RequestID, c.reqID)))
	defer span.End()
	c.span = span
	if isRetry(ctx, req) {
		// The answers to a run's questions: delivered, and the run
		// followed on.
		var callErr, err error
		if ctx, p, callErr, err = t.resume(ctx, c.tenant, req, p); err != nil {
			return nil, err
		} else if callErr != nil {
			return result.ToolResult(result.FromOutcome(result.Outcome{Err: callErr}), t.opts.Mode), nil
		}
	}
	release, done := func() {}, func() {}
	if p.Code != "" {
		// Waiting for a run, or stopping one, starts nothing: a tenant
		// at its quota must still be able to.
		var refusal result.Payload
		var ok bool
		if release, done, refusal, ok = t.admit(ctx, c); !ok {
			return result.ToolResult(refusal, t.opts.Mode), nil
		}
	}
	defer done()
	ev := t.progress(ctx, req)
	task := asTask(req, server.IsModernRequest(ctx)) && p.Code != ""
	if task {
		ctx = context.WithValue(ctx, taskModeKey{}, true)
	}
	out := t.Execute(ctx, c.tenant, c.mcpID, server.IsModernRequest(ctx), p, ev)
	ev.flush(ctx)
	if asked := len(out.Questions) > 0; (running(out) || asked) && out.Session != "" {
		// The run counts against its tenant's quota for its whole
		// length, not only for the call that started it.
		go t.holdUntilEnd(context.WithoutCancel(ctx), c.tenant, out, p.Timeout, release)
	} else {
		release()
	}
	if len(out.Questions) > 0 {
		// The run waits for the answers; the client's retry brings them.
		c.logger.InfoContext(ctx, "run_python asks the client", logkeys.RequestID, c.reqID, "questions", len(out.Questions))
		return t.questionsResult(c.tenant, out), nil
	}
	if task && running(out) {
		t.render(ctx, c, p, out)
		return taskResult(out, p), nil
	}
	if ctx.Err() != nil && !mcpfix.Gone(ctx) {
		// The client cancelled the call; see mcpfix.MarkCancelled.
		mcpfix.MarkCancelled(ctx)
	}
	return result.ToolResult(t.render(ctx, c, p, out), t.opts.Mode), nil
}

// parse reads the call's arguments, or returns the payload that refuses
// them: a call to an unknown tool, or arguments run_python does not take.
func (t *Tool) parse(ctx context.Context, req mcp.CallToolRequest) (params.RunPython, result.Payload, bool) {
	if name := mcpfix.UnknownTool(req); name != "" {
		t.opts.Logger.WarnContext(ctx, "call to unknown tool", logkeys.MCPTool, name)
		return params.RunPython{}, result.UnknownTool(name), false
	}
	p, msg, ok := params.Parse(req.GetArguments(), t.limits(ctx))
	if !ok {
		return p, result.Validation(msg), false
	}
	return p, result.Payload{}, true
}

// call is what the steps of one call share.
type call struct {
	mcpID, reqID, tenant string
	span                 trace.Span
	logger               *slog.Logger
	start                time.Time
}

// begin names the call. The gateway is where a call
// enters the suite, so it gives the call its request ID unless the client
// did; the gRPC client interceptor passes the ID on to sandboxd and beyond.
func (t *Tool) begin(ctx context.Context) (*call, context.Context) {
	c := &call{start: time.Now()}
	if s := server.ClientSessionFromContext(ctx); s != nil {
		c.mcpID = s.SessionID()
	}
	c.reqID = requestid.From(ctx)
	if c.reqID == "" {
		c.reqID = requestid.New()
		ctx = requestid.With(ctx, c.reqID)
	}
	c.tenant = auth.Tenant(ctx, t.opts.Tenant)
	// The request ID is put in each record, not in With, so that a
	// requestid.LogHandler does not add it a second time.
	c.logger = t.opts.Logger.With(logkeys.MCPTool, Name, logkeys.MCPSession, c.mcpID, logkeys.Tenant, c.tenant)
	return c, ctx
}

// admit lets the call run unless the gateway is shutting down or its
// tenant is over a quota; when ok, release gives the tenant's place back
// once the run is over, and end tells shutdown the call is.
func (t *Tool) admit(ctx context.Context, c *call) (release, end func(), refusal result.Payload, ok bool) {
	done, err := t.opts.Calls.Begin()
	if err != nil {
		t.opts.Metrics.ObserveCall("refused", c.start)
		return nil, nil, result.Failure("The server is shutting down; retry on a new connection in a moment.", err.Error()), false
	}
	release, err = t.opts.Quota.Acquire(c.tenant)
	if err != nil {
		done()
		t.opts.Metrics.ObserveCall("refused", c.start)
		var qe *quota.Error
		if errors.As(err, &qe) {
			t.opts.Metrics.Quota.WithLabelValues(qe.Limit).Inc()
		}
		c.logger.WarnContext(ctx, "run_python refused", logkeys.RequestID, c.reqID, logkeys.Error, err)
		return nil, nil, result.Failure(err.Error(), err.Error()), false
	}
	return release, done, result.Payload{}, true
}

// holdUntilEnd keeps the tenant's place of a run that outlived its call
// (out) until the run ends: it follows the run quietly, taking nothing
// from the calls that continue it, wherever its session lives.
func (t *Tool) holdUntilEnd(ctx context.Context, tenant string, out result.Outcome, timeout time.Duration, release func()) {
	defer release()
	ctx, cancel := context.WithTimeout(ctx, timeout+rpcGrace)
	defer cancel()
	stream, err := t.opts.Sandbox.Execute(ctx, &sandboxv1.ExecuteRequest{
		SessionId: out.Session, Tenant: tenant, Attach: true, Replay: true, Quiet: true,
		RunId: out.Result.GetRunId(), YieldAfter: durationpb.New(timeout),
	})
	if err != nil {
		return
	}
	for {
		if _, err := stream.Recv(); err != nil {
			return // the run's end, or its replica's
		}
	}
}

// render turns the outcome into the payload of the result, and counts and
// logs the call. A session quota met by the call is a refusal.
func (t *Tool) render(ctx context.Context, c *call, p params.RunPython, out result.Outcome) result.Payload {
	payload := result.FromOutcome(out)
	status := payload.Status
	if qe := (*quota.Error)(nil); errors.As(out.Err, &qe) {
		payload, status = result.Failure(qe.Error(), qe.Error()), "refused"
		t.opts.Metrics.Quota.WithLabelValues(qe.Limit).Inc()
	}
	t.opts.Metrics.ObserveCall(status, c.start)
	c.span.SetAttributes(attribute.String(logkeys.ExecStatus, status))
	c.logger.LogAttrs(ctx, levelFor(payload), "run_python finished",
		slog.String(logkeys.RequestID, c.reqID),
		slog.String(logkeys.ExecStatus, payload.Status),
		slog.Duration(logkeys.Duration, time.Since(c.start)),
		slog.Float64("timeout.seconds", p.Timeout.Seconds()),
		slog.Any("servers", p.Servers))
	return payload
}

// levelFor logs failures of the gateway's own dependencies as warnings and
// everything the user's code did as info.
func levelFor(p result.Payload) slog.Level {
	if p.Status == result.StatusError && p.ExitCode == nil {
		return slog.LevelWarn
	}
	return slog.LevelInfo
}
