package session

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/codeexec/codeexec/sandboxd/internal/channel"
	"github.com/codeexec/codeexec/sandboxd/internal/sandbox"
)

// run is one exec of a session in flight: the code, what it may use, the
// sandbox it runs in and how its time was spent. It runs while the
// session's turn is held. A plain run is bound to the request that
// started it: the request's end stops it. A run that may outlive its
// request (Request.YieldAfter) runs on a context of its own, and its
// events go to its flight, which the calls that follow it read.
type run struct {
	code    string
	env     *sandbox.ExecEnv
	saved   *savedTools
	timeout time.Duration
	spent   spentTime
	// out, progress and display receive the run's events.
	out      sandbox.Output
	progress func(sandbox.Progress)
	display  sandbox.Display
	// ask says that its caller answers the questions of its tool calls
	// that need a person's approval.
	ask bool
	// sb is the sandbox the run runs in, and restored what came back
	// when it was rebuilt from the session's checkpoint for the run.
	sb       *sandbox.Sandbox
	restored *RestoreReport
}

// exec runs r's code in r.sb until done, death or timeout: the code gets
// the part of the call's timeout that the time spent left it.
func (r *run) exec(ctx context.Context, s *Session) *Result {
	x := sandbox.Exec{
		Code: r.code, Env: r.env, Tenant: s.tenant, Calls: s.m.cfg.Broker,
		OutputLimit: s.m.cfg.OutputLimit, Limits: s.m.cfg.Limits,
		Tools: func(first bool) []channel.SavedTool {
			var tools []channel.SavedTool
			if first {
				tools = r.saved.wait(ctx, s)
			}
			r.saved.stop()
			return tools
		},
		Budget: r.spent.budget(r.timeout), Timeout: r.timeout, TimeoutNote: r.spent.note(),
		Paused: func() bool { return s.lease.Paused(r.sb) },
		Out:    r.out, Progress: r.progress, Display: r.display, Results: s.m.cfg.Results, Logger: s.logger(),
	}
	if l := s.lease; l != nil {
		x.Results.Workspace = s.m.cfg.Durable.WorkspaceBytes
		x.Checkpoint = &sandbox.Checkpoint{
			Bytes:  s.m.cfg.Durable.CheckpointBytes,
			Begin:  func() { l.BeginCheckpoint(s.Info().ExecCount + 1) },
			Cancel: l.CancelCheckpoint,
		}
	}
	res := &Result{Outcome: *r.sb.Exec(ctx, x)}
	res.Servers, res.Timeout, res.Restored = r.env.Allowed, r.timeout, r.restored
	return res
}

// spentTime is what took part of a call's timeout before its code ran:
// loading the call's servers (a server still starting is waited for up to
// the timeout) and the calls a restore of the session made (a class body
// or an unpickled value may call a helper). The time a sandbox takes to
// start, a restore takes to rebuild the namespace, or the call waits for
// the session's previous call is not the call's, and is not counted: a
// restore slower than the timeout would otherwise leave the code no time,
// every time.
type spentTime struct {
	loading, restoring time.Duration
	// env says which of the call's servers did not load.
	env *sandbox.ExecEnv
}

// budget is the code's part of timeout: what is left once the time spent
// is taken, but never less than a tenth of it (at most 1 s), in which the
// code learns, and can say, what the wait was for.
func (t spentTime) budget(timeout time.Duration) time.Duration {
	return max(timeout-t.loading-t.restoring, min(timeout/10, time.Second))
}

// note says, for the error of a call that timed out, what took part of
// its timeout and what to do; it is empty when nothing did.
func (t spentTime) note() string {
	var parts []string
	if d := t.loading.Round(100 * time.Millisecond); d > 0 {
		what := "loading the call's servers"
		var down []string
		for _, srv := range t.env.Servers {
			if srv.Error != nil {
				down = append(down, strconv.Quote(srv.Name))
			}
		}
		if len(down) > 0 {
			what += " (" + strings.Join(down, ", ") + " did not load)"
		}
		parts = append(parts, fmt.Sprintf("%s went to %s", d, what))
	}
	if d := t.restoring.Round(100 * time.Millisecond); d > 0 {
		parts = append(parts, fmt.Sprintf("%s to calls made while the session was restored from its checkpoint", d))
	}
	if len(parts) == 0 {
		return ""
	}
	return strings.Join(parts, " and ") + " before the code ran: pass a larger timeout, or call again once the servers are up"
}
