package session

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/codeexec/codeexec/sandboxd/internal/channel"
	"github.com/codeexec/codeexec/services/logkeys"
)

// Status is how an exec ended.
type Status int

// Exec statuses; see the proto's ExecStatus.
const (
	StatusOK Status = iota + 1
	StatusError
	StatusTimeout
	StatusKilled
)

// Output receives output as it arrives. stream is "stdout" or "stderr".
type Output func(stream, text string) error

// Request is one exec.
type Request struct {
	Tenant, SessionID, Code string
	Servers                 []string
	// Timeout is the wall-clock limit; zero means the default. It is
	// clamped to the maximum.
	Timeout time.Duration
	// Display, when set, receives the images the code shows.
	Display Display
}

// Result is how an exec ended. Failures of user code are data here.
type Result struct {
	Status    Status
	ExitCode  int
	Error     string
	Duration  time.Duration
	StateLost bool
	Dropped   map[string]int64
	Servers   []string
	Timeout   time.Duration
	// TimeoutNote, for a call that timed out, says what took part of its
	// timeout before the code ran, and what to do; empty when nothing did.
	TimeoutNote string
	Session     Info
	// Durable is set when the session is kept in the session store.
	Durable bool
	// Ended is set when the code ended its session: it is destroyed, its
	// checkpoint deleted.
	Ended bool
	// Restored says what came back when the call ran in a sandbox rebuilt
	// from the session's checkpoint.
	Restored *RestoreReport
	// NotDurable, when set, says (once) why the session's state could not
	// be checkpointed.
	NotDurable string
	// Uncheckpointed, when set, are (once) the names the latest checkpoint
	// could not hold.
	Uncheckpointed []channel.LostName
	// Files are the files under /workspace/out the call made or changed,
	// and FilesMore how many more there were.
	Files     []channel.OutFile
	FilesMore int
}

// Execute runs code in a session and streams its output to out. A durable
// session that is not live here is taken from the session store (and
// restored from its checkpoint), unless another replica holds it live: then
// the error is an *ElsewhereError.
func (m *Manager) Execute(ctx context.Context, req Request, out Output) (*Result, error) {
	began := time.Now()
	s, err := m.claim(ctx, req.Tenant, req.SessionID)
	if err != nil {
		return nil, err
	}
	if req.Code == "" {
		return nil, fmt.Errorf("%w: code is empty", ErrInvalid)
	}
	timeout := m.clampTimeout(req.Timeout)
	// The call's deadline bounds loading its servers; what the loading
	// leaves of the timeout bounds the calls of a restore, and the code.
	deadline := began.Add(timeout)
	saved := m.fetchSavedTools(ctx, s)
	defer saved.stop()
	// Loading the call's servers waits for those still starting no longer
	// than the call's timeout: a server not up by then is loaded with the
	// error that says so, which its use raises, and the code runs.
	prepCtx, cancelPrep := context.WithDeadline(ctx, deadline)
	env, err := m.cfg.Broker.Prepare(prepCtx, s.tenant, req.Servers)
	cancelPrep()
	if err != nil {
		return nil, err
	}
	spent := spentTime{loading: time.Since(began), env: env}
	for {
		if err := s.acquire(ctx); err != nil {
			return nil, err
		}
		// A session held by a fence runs nothing until the store
		// answers again; then it may be this replica's still, or not.
		if err := s.waitSettled(ctx, deadline); err != nil {
			s.release()
			return nil, err
		}
		if m.current(s) {
			break
		}
		// Released while this call waited (evicted, reaped idle): it is
		// in the store again, and this Session must not run on.
		s.release()
		if s, err = m.claim(ctx, req.Tenant, req.SessionID); err != nil {
			return nil, err
		}
	}
	defer s.release()
	// The previous call's checkpoint is stored before this one runs (it
	// usually is by now): so once a call has returned, the one before it
	// is durable whatever happens next.
	if s.isDurable() {
		s.waitCommit(m.cfg.StartTimeout)
	}

	s.setBusy(true, false)
	// A restore's calls get what the loading left of the timeout, counted
	// from now: the wait for the session's previous call is not this
	// call's (a call queued behind one that timed out would otherwise
	// restore with its deadline gone, and every such call would fail).
	restoreDeadline := time.Now().Add(spent.budget(timeout))
	startCtx, cancel := context.WithTimeout(ctx, m.cfg.StartTimeout)
	sb, report, err := s.ensureSandbox(startCtx, env, saved, restoreDeadline)
	cancel()
	if err != nil {
		s.setBusy(false, false)
		return nil, err
	}
	if report != nil {
		spent.restoring = report.callsTook
	}
	res := m.run(ctx, s, sb, req, env, saved, timeout, spent, out)
	sb.firstExecDone()
	res.Servers = env.Allowed
	res.Timeout = timeout
	res.Restored = report
	if res.StateLost {
		s.stopSandbox()
		s.lost(lostReason(res), true)
	}
	s.setBusy(false, true)
	res.Durable = s.isDurable()
	s.noteRefused(sb.takeRefused())
	res.NotDurable = s.takeNotDurable()
	res.Uncheckpointed = s.takeUncheckpointed()
	res.Session = s.Info()
	if res.Ended {
		// The code ended its session: once the checkpoints on their way
		// are done, it goes, record and chunks with it.
		s.waitCommit(m.cfg.StartTimeout)
		if err := m.Destroy(context.WithoutCancel(ctx), s.tenant, s.id); err != nil {
			s.logger().WarnContext(ctx, "could not end the session its code ended", logkeys.Error, err)
		}
	}
	m.metrics.observe(res)
	s.logger().InfoContext(ctx, "exec finished", logkeys.ExecStatus, res.Status, logkeys.Duration, res.Duration, logkeys.Error, res.Error)
	return res, ctx.Err()
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
	env *ExecEnv
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

// run drives one exec on a live sandbox until done, death or timeout: the
// code gets the part of the call's timeout that spent left it.
func (m *Manager) run(ctx context.Context, s *Session, sb *sandbox, req Request, env *ExecEnv, saved *savedTools, timeout time.Duration, spent spentTime, out Output) *Result {
	sb.mu.Lock()
	sb.nextExec++
	id := sb.nextExec
	first := !sb.sessionStarted
	sb.sessionStarted = true
	sb.mu.Unlock()
	var tools []channel.SavedTool
	if first {
		tools = saved.wait(ctx, s)
	}
	saved.stop()

	callCtx, cancelCalls := context.WithCancel(ctx)
	defer cancelCalls()
	limit := m.cfg.OutputLimit
	// With a budget the agent sends at most that many characters (4
	// bytes each at most) and ignores the cap; the backstop follows.
	backstop := limit
	if b := m.cfg.Results.Budget; b > 0 && limit > 0 {
		backstop = max(limit, 4*b)
	}
	gate := newDisplayGate(m.cfg.Results)
	counted := map[string]int64{}
	res := &Result{Dropped: map[string]int64{}}
	runawayBefore := sb.proc.PidsLimitHit()

	var checkpoint int64
	if s.isDurable() {
		checkpoint = m.cfg.Durable.CheckpointBytes
	}
	if checkpoint > 0 {
		// Noted before the exec goes out, so that the committer, which
		// may read the checkpoint before this goroutine reads the done
		// before it, finds the count the checkpoint reflects.
		s.beginCheckpoint(s.Info().ExecCount + 1)
		sb.expectCheckpoint(id)
	}
	start := time.Now()
	results := m.cfg.Results
	if checkpoint > 0 {
		results.workspace = m.cfg.Durable.WorkspaceBytes
	}
	if err := sendExec(sb, id, req.Code, env, limit, first, tools, checkpoint, results); err != nil {
		if checkpoint > 0 {
			s.cancelCheckpoint()
		}
		res.Status, res.StateLost = StatusKilled, true
		res.Error = "could not send code to the sandbox: " + err.Error()
		return res
	}
	budget := spent.budget(timeout)
	timer := time.NewTimer(budget)
	defer timer.Stop()
	// A call waiting for its turn gives up when the timer fires, and the
	// loop below then finds the timeout.
	waitCtx, cancelWait := context.WithTimeout(callCtx, budget)
	defer cancelWait()

	handle := func(msg channel.Message) (finished bool) {
		switch msg := msg.(type) {
		case *channel.Out:
			if msg.Exec != id {
				return false // output of an earlier exec: never attributed here
			}
			stream := msg.Stream
			if stream != "stderr" {
				stream = "stdout"
			}
			// The agent applies the cap; this is a backstop against an agent
			// that does not.
			if backstop > 0 && counted[stream]+int64(len(msg.Data)) > backstop+(64<<10) {
				res.Dropped[stream] += int64(len(msg.Data))
				return false
			}
			counted[stream] += int64(len(msg.Data))
			if out != nil {
				if err := out(stream, msg.Data); err != nil {
					s.logger().DebugContext(ctx, "output receiver failed", logkeys.Error, err)
				}
			}
		case *channel.Display:
			if msg.Exec == id && req.Display != nil && gate.admit(msg) {
				if err := req.Display(msg); err != nil {
					s.logger().DebugContext(ctx, "display receiver failed", logkeys.Error, err)
				}
			}
		case *channel.Call:
			// A call ends by the exec's timeout, so that a call to a server
			// still starting gives up in time to tell the code which one.
			sb.startCall(waitCtx, func() { m.serveCall(waitCtx, sb, s.tenant, env, id, msg, nil) })
		case *channel.Done:
			if msg.Exec != id {
				return false
			}
			res.ExitCode = msg.Exit
			res.Error = msg.Error
			res.Status = StatusOK
			if !msg.OK {
				res.Status = StatusError
				if res.ExitCode == 0 {
					res.ExitCode = 1
				}
			}
			// The agent's own counts; a frame forged by the code may say
			// anything, and a negative or huge count must not wrap round.
			for k, v := range msg.Dropped {
				if v > 0 && (k == "stdout" || k == "stderr") {
					res.Dropped[k] = min(res.Dropped[k], math.MaxInt64-v) + v
				}
			}
			res.Ended = msg.End
			res.Files, res.FilesMore = outFiles(msg)
			if checkpoint > 0 && msg.End {
				// The agent takes no checkpoint of a session it ends.
				s.cancelCheckpoint()
			}
			return true
		default:
			s.logger().WarnContext(ctx, "unexpected message from sandbox", "type", msg.Type())
		}
		return false
	}
	drain := func() {
		for {
			select {
			case msg := <-sb.msgs:
				if handle(msg) {
					return
				}
			default:
				return
			}
		}
	}

	for {
		select {
		case msg := <-sb.msgs:
			if handle(msg) {
				res.Duration = time.Since(start)
				if !runawayBefore && sb.proc.PidsLimitHit() {
					// Runaway processes would keep the sandbox busy forever.
					res.Status, res.StateLost = StatusError, true
					res.Error = joinErr(res.Error, fmt.Sprintf(
						"the code reached the process limit (%d; raise MCP_BRIDGE_PIDS if it needs more), so the sandbox was stopped to clear the runaway processes",
						m.cfg.Limits.Pids))
				}
				return res
			}
		case <-sb.dead:
			drain()
			res.Duration = time.Since(start)
			res.Status, res.StateLost = StatusKilled, true
			res.Error = sb.describeDeath() + deathHint(sb, m)
			return res
		case <-timer.C:
			paused := s.pausedNow(sb)
			sb.kill()
			drain()
			res.Duration = time.Since(start)
			res.Status, res.StateLost = StatusTimeout, true
			res.Error = fmt.Sprintf("execution exceeded the %s timeout; the sandbox was stopped", timeout)
			if res.TimeoutNote = spent.note(); res.TimeoutNote != "" {
				res.Error = fmt.Sprintf("execution exceeded the %s timeout (%s); the sandbox was stopped", timeout, res.TimeoutNote)
			}
			if paused {
				res.Error += "; it had been paused since this sandbox replica lost the session store, which did not come back in time"
			}
			return res
		case <-ctx.Done():
			// The caller is gone; the code must not run on unobserved.
			sb.kill()
			res.Duration = time.Since(start)
			res.Status, res.StateLost = StatusKilled, true
			res.Error = "the call was cancelled by the client; the sandbox was stopped"
			return res
		}
	}
}

// lostReason says, for the next restore's report, why the sandbox of a
// call that ended so went away.
func lostReason(res *Result) string {
	switch res.Status {
	case StatusTimeout:
		return "the previous call timed out"
	case StatusKilled:
		if res.Error != "" {
			return "the previous call's sandbox stopped: " + res.Error
		}
		return "the previous call's sandbox stopped"
	default:
		return "the previous call stopped its sandbox: " + res.Error
	}
}

func deathHint(sb *sandbox, m *Manager) string {
	u := sb.finalUsage()
	switch {
	case u.OOMKilled && m.cfg.Limits.MemoryBytes > 0:
		return fmt.Sprintf(" (memory limit %d MiB; use less memory or raise MCP_BRIDGE_MEMORY)", m.cfg.Limits.MemoryBytes>>20)
	case u.PidsLimitHit && m.cfg.Limits.Pids > 0:
		return fmt.Sprintf(" (process limit %d; raise MCP_BRIDGE_PIDS)", m.cfg.Limits.Pids)
	}
	return ""
}

func joinErr(a, b string) string {
	if a == "" {
		return b
	}
	return a + "; " + b
}

// serveCall answers one call frame from the sandbox. late, when set, is
// the error of a call that ctx's deadline ended.
func (m *Manager) serveCall(ctx context.Context, sb *sandbox, tenant string, env *ExecEnv, execID int64, call *channel.Call, late *channel.Error) {
	var (
		result json.RawMessage
		err    error
	)
	if call.Exec != execID {
		err = channel.Errorf(channel.CodeFailedPrecondition, "this call was made after its run_python call had finished")
	} else {
		result, err = m.cfg.Broker.Call(ctx, tenant, env, call.Method, call.Params)
		// A call that timed out as ctx's deadline came gets late, which
		// says whose time it was, rather than a bare "context deadline
		// exceeded". (The service's end of the call may give up a moment
		// before ctx does; one that gives up earlier names what it waited
		// for, and keeps its error.)
		if e, ok := errors.AsType[*channel.Error](err); ok && late != nil && e.Code == channel.CodeDeadlineExceeded {
			if dl, ok := ctx.Deadline(); ok && time.Until(dl) < 10*time.Millisecond {
				err = late
			}
		}
	}
	reply := channel.ReplyTo(call.ID, result, err)
	if err := sb.conn.Write(reply); err != nil {
		m.logger.DebugContext(ctx, "reply to sandbox failed", logkeys.Error, err)
	}
}
