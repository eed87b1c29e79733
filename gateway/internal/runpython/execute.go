package runpython

import (
	"context"
	"slices"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/codeexec/codeexec/gateway/internal/params"
	"github.com/codeexec/codeexec/gateway/internal/result"
	"github.com/codeexec/codeexec/gateway/internal/sessions"
	sandboxv1 "github.com/codeexec/codeexec/proto/gen/codeexec/sandbox/v1"
	"github.com/codeexec/codeexec/services/logkeys"
	"github.com/codeexec/codeexec/services/requestid"
)

// Notices the gateway adds to a result.
const (
	// NoticeSessionLost: the sandbox session is gone (sandboxd restarted
	// or reaped it, or the MCP session began in an earlier gateway and
	// left no sandbox session to continue).
	NoticeSessionLost = "session lost; started a new session — earlier state is gone"
	// NoticeSilentReset: the sandbox was replaced between calls although
	// no call said its state was lost.
	NoticeSilentReset = "the sandbox was restarted since the last call; earlier state is gone"
)

// ephemeralPrefix marks the table keys of sessionless legacy calls.
const ephemeralPrefix = "ephemeral-"

// rpcGrace is how long past the code's own timeout the gateway waits for
// sandboxd to report, so that a hung service cannot hang the MCP call.
const rpcGrace = 30 * time.Second

// localCapFactor bounds the output the gateway buffers per stream to this
// multiple of the configured cap, in case sandboxd's own cut fails.
const localCapFactor = 2

// Execute runs p in a sandbox session of tenant's: the one p.Session
// names; else the one that serves the caller's MCP session (over stdio the
// process is the session, in either protocol era); else, for a request
// without a protocol session (MCP 2026-07-28 over HTTP), a new one. Modern
// requests (and every call that names or starts a session by handle) get
// the handle back in the result; a legacy client's results are exactly as
// they were before handles existed.
func (t *Tool) Execute(ctx context.Context, tenant, mcpID string, modern bool, p params.RunPython, ev *events) result.Outcome {
	base := result.Outcome{TimeoutSeconds: p.Timeout.Seconds(), Servers: p.Servers, OutputCapBytes: t.opts.OutputLimitBytes}
	if p.Code == "" && p.Session == "" && mcpID == "" {
		// A wait without a session names no run: nothing to wait for.
		base.Result = &sandboxv1.ExecResult{Status: sandboxv1.ExecStatus_EXEC_STATUS_NO_RUN}
		base.Notices = []string{"no session was named: pass the session handle of the run to wait for (session=\"…\")"}
		return base
	}
	if p.Session != "" || (mcpID == "" && modern) {
		return t.executeHandle(ctx, tenant, p, base, ev)
	}
	s, err := t.sessionOf(ctx, tenant, mcpID)
	if s.done != nil {
		defer s.done()
	}
	if err != nil {
		base.Err = err
		return base
	}
	return t.runInSession(ctx, s, modern, p, base, ev)
}

// mcpSession is the sandbox session of the caller's MCP session, as one
// call finds it.
type mcpSession struct {
	entry   *sessions.Entry
	id      string
	created bool
	// notices open the call's result.
	notices []string
	// done ends a throwaway session once the call is over; nil for any
	// other.
	done func()
}

// sessionOf finds, or starts, the sandbox session of the MCP session
// mcpID. An MCP session over HTTP has a handle derived from it, so that it
// outlives this gateway; over stdio the process is the session. A legacy
// request without a session (a stateless client of the older revisions)
// gets a throwaway sandbox, as before handles.
func (t *Tool) sessionOf(ctx context.Context, tenant, mcpID string) (*mcpSession, error) {
	table := t.opts.Sessions
	s := &mcpSession{}
	derived := sessions.IsOverHTTP(ctx) && mcpID != ""
	if mcpID == "" {
		mcpID = ephemeralPrefix + requestid.New()
		s.notices = append(s.notices, "no MCP session: this call ran in a fresh sandbox, and its state is not kept")
		s.done = func() { table.End(ctx, mcpID) }
	}
	e, err := table.Entry(tenant, mcpID, derived)
	if err != nil {
		return s, err
	}
	s.entry = e
	if s.id, s.created, err = table.SandboxID(ctx, e); err != nil {
		return s, err
	}
	if s.created && !table.IsKnown(mcpID) && !strings.HasPrefix(mcpID, ephemeralPrefix) {
		// The client's session began before this gateway process did,
		// and no sandbox session of it is left (over HTTP its derived
		// handle would have found it): whatever state it had is out of
		// reach.
		s.notices = append(s.notices, NoticeSessionLost)
	}
	return s, nil
}

// runInSession runs p in s's sandbox session. NotFound before any output
// means sandboxd no longer knows the session, typically because it
// restarted: the call starts over once, in a new one, and says why
// (sandboxd's message: reaped when idle, its replica went away).
func (t *Tool) runInSession(ctx context.Context, s *mcpSession, modern bool, p params.RunPython, base result.Outcome, ev *events) result.Outcome {
	table, e, id := t.opts.Sessions, s.entry, s.id
	notices := s.notices
	out := t.runOnce(ctx, e.Tenant, id, p, base, ev)
	switch {
	case status.Code(out.Err) == codes.NotFound && out.Stdout == "" && out.Stderr == "" && p.Code != "":
		why := status.Convert(out.Err).Message()
		var err error
		if id, err = table.Replace(ctx, e, id); err != nil {
			base.Err = err
			return base
		}
		out = t.runOnce(ctx, e.Tenant, id, p, base, ev)
		notices = slices.DeleteFunc(notices, func(n string) bool { return n == NoticeSessionLost })
		notices = append(notices, NoticeSessionLost+" ("+why+")")
	case out.Err == nil && !out.Result.GetEnded() && e.Observe(id, out.Result):
		notices = append(notices, NoticeSilentReset)
	}
	if out.Err == nil && out.Result.GetEnded() {
		table.Ended(e, id) // also after a retry in a new session
	}
	out.Notices = append(notices, out.Notices...)
	if modern {
		out.Session, out.NewSession = id, s.created
		e.Handed()
	} else if running(out) {
		// A run that goes on is continued by its handle as well as by
		// the MCP session: the model is told it, to name it.
		out.Session = id
	}
	return out
}

// executeHandle runs p in the session p.Session names, or in a new one.
// An unknown handle (another tenant's, an expired one, a made-up one) is
// one answer for all, with what to do.
func (t *Tool) executeHandle(ctx context.Context, tenant string, p params.RunPython, base result.Outcome, ev *events) result.Outcome {
	handle, created := p.Session, false
	if handle == "" {
		// A new session, as an MCP session's is: within the tenant's
		// sessions quota.
		err := t.opts.Sessions.Admit(ctx, tenant, func() error {
			resp, err := t.opts.Sandbox.CreateSession(ctx, &sandboxv1.CreateSessionRequest{Tenant: tenant})
			handle = resp.GetSession().GetId()
			return err
		})
		if err != nil {
			base.Err = err
			return base
		}
		created = true
	}
	out := t.runOnce(ctx, tenant, handle, p, base, ev)
	if p.Session != "" && status.Code(out.Err) == codes.NotFound && out.Stdout == "" && out.Stderr == "" {
		out.Err = status.Errorf(codes.NotFound, "unknown session %q: it has ended or expired, or it belongs to another tenant; call run_python without a session to start a new one", handle)
		return out
	}
	out.Session, out.NewSession = handle, created
	return out
}

// runOnce makes one Execute call, on the replica that holds the session
// (see route.Router), and gathers its stream: a run of p.Code that may
// yield after the tool's yield time, or, with no code, an attach to the
// session's run in flight (or its cancellation). A client that cancels
// the call cancels the run.
func (t *Tool) runOnce(ctx context.Context, tenant, sandboxID string, p params.RunPython, base result.Outcome, ev *events) result.Outcome {
	if p.Cancel {
		return t.cancelRun(ctx, tenant, sandboxID, base)
	}
	req := &sandboxv1.ExecuteRequest{
		SessionId:    sandboxID,
		Tenant:       tenant,
		Code:         p.Code,
		Servers:      p.Servers,
		Timeout:      durationpb.New(p.Timeout),
		MaxToolCalls: int32(t.opts.MaxToolCalls(tenant)),
		AskApprovals: true,
	}
	asks, stopAsking := t.newAsking(ctx, tenant, sandboxID, answeredOf(ctx))
	defer stopAsking()
	wait := p.Timeout
	if yield := t.yield(ctx); p.Code == "" {
		req.Attach, req.YieldAfter, wait = true, durationpb.New(yield), yield
		req.RunId = attachRunOf(ctx)
	} else if yield > 0 {
		req.YieldAfter, wait = durationpb.New(yield), min(wait, yield)
	} else if asks.pause {
		// The call may stop at a question while its run waits for the
		// answer: the run must outlive it.
		req.YieldAfter = durationpb.New(p.Timeout)
	}
	rpcCtx, cancel := context.WithTimeout(ctx, wait+rpcGrace)
	defer cancel()
	out := base
	if stream, err := t.opts.Sandbox.Execute(rpcCtx, req); err != nil {
		out.Err = err
	} else {
		out = t.gather(stream, base, ev, asks)
	}
	if ctx.Err() != nil && out.Result == nil && len(out.Questions) == 0 {
		// The client cancelled the call (or, under 2026-07-28, closed
		// its stream): the run stops too, and the session comes back
		// from its checkpoint.
		_, cerr := t.opts.Sandbox.CancelExecution(context.WithoutCancel(ctx), &sandboxv1.CancelExecutionRequest{
			SessionId: sandboxID, Tenant: tenant, Reason: "the call was cancelled by the client",
		})
		if cerr != nil {
			t.opts.Logger.WarnContext(ctx, "could not cancel the run of a cancelled call", logkeys.Error, cerr)
		}
	}
	return t.busy(out, sandboxID)
}

// yield is how long a call may run before it returns "running": the
// tool's yield time, less what the call has spent already.
func (t *Tool) yield(ctx context.Context) time.Duration {
	if ctx.Value(taskModeKey{}) != nil {
		return taskYield
	}
	if t.opts.Yield <= 0 {
		return 0
	}
	if began, ok := ctx.Value(beganKey{}).(time.Time); ok {
		return max(t.opts.Yield-time.Since(began), time.Second)
	}
	return t.opts.Yield
}

// beganKey holds when the call began, for yield.
type beganKey struct{}

// busy turns sandboxd's refusal of code on a session with a run in
// flight into what the model should do about it.
func (t *Tool) busy(out result.Outcome, handle string) result.Outcome {
	st := status.Convert(out.Err)
	for _, d := range st.Details() {
		if rf, ok := d.(*sandboxv1.RunInFlight); ok {
			out.Err = status.Errorf(codes.FailedPrecondition,
				"a run is in progress in this session (started %s ago, timeout %s): call run_python with code=\"\", session=%q to wait for it, or with cancel=true as well to stop it",
				time.Since(rf.GetStartTime().AsTime()).Round(time.Second), rf.GetTimeout().AsDuration(), handle)
		}
	}
	return out
}

// cancelRun stops the session's run in flight, and returns its end (or
// says that nothing was running).
func (t *Tool) cancelRun(ctx context.Context, tenant, sandboxID string, base result.Outcome) result.Outcome {
	resp, err := t.opts.Sandbox.CancelExecution(ctx, &sandboxv1.CancelExecutionRequest{
		SessionId: sandboxID, Tenant: tenant, Reason: "the run was cancelled (run_python cancel=true)",
	})
	if err != nil {
		base.Err = err
		return base
	}
	if !resp.GetCancelled() {
		base.Result = &sandboxv1.ExecResult{Status: sandboxv1.ExecStatus_EXEC_STATUS_NO_RUN}
		return base
	}
	p := params.RunPython{Code: "", Timeout: rpcGrace}
	return t.runOnce(ctx, tenant, sandboxID, p, base, nil)
}

// running reports whether out is a call that yielded with its run going.
func running(out result.Outcome) bool {
	return out.Err == nil && out.Result.GetStatus() == sandboxv1.ExecStatus_EXEC_STATUS_RUNNING
}
