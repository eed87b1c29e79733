package session

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
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
	Session   Info
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
}

// Execute runs code in a session and streams its output to out. A durable
// session that is not live here is taken from the session store (and
// restored from its checkpoint), unless another replica holds it live: then
// the error is an *ElsewhereError.
func (m *Manager) Execute(ctx context.Context, req Request, out Output) (*Result, error) {
	s, err := m.claim(ctx, req.Tenant, req.SessionID)
	if err != nil {
		return nil, err
	}
	if req.Code == "" {
		return nil, fmt.Errorf("%w: code is empty", ErrInvalid)
	}
	timeout := m.clampTimeout(req.Timeout)
	saved := m.fetchSavedTools(ctx, s)
	defer saved.stop()
	// Loading the call's servers waits for those still starting no longer
	// than the call's timeout: a server not up by then is loaded with the
	// error that says so, which its use raises, and the code runs.
	prepCtx, cancelPrep := context.WithTimeout(ctx, timeout)
	env, err := m.cfg.Broker.Prepare(prepCtx, s.tenant, req.Servers)
	cancelPrep()
	if err != nil {
		return nil, err
	}
	for {
		if err := s.acquire(ctx); err != nil {
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
	startCtx, cancel := context.WithTimeout(ctx, m.cfg.StartTimeout)
	sb, report, err := s.ensureSandbox(startCtx, env, saved)
	cancel()
	if err != nil {
		s.setBusy(false, false)
		return nil, err
	}
	res := m.run(ctx, s, sb, req.Code, env, saved, timeout, out)
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

// run drives one exec on a live sandbox until done, death or timeout.
func (m *Manager) run(ctx context.Context, s *Session, sb *sandbox, code string, env *ExecEnv, saved *savedTools, timeout time.Duration, out Output) *Result {
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
	if err := sendExec(sb, id, code, env, limit, first, tools, checkpoint); err != nil {
		if checkpoint > 0 {
			s.cancelCheckpoint()
		}
		res.Status, res.StateLost = StatusKilled, true
		res.Error = "could not send code to the sandbox: " + err.Error()
		return res
	}
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	// A call waiting for its turn gives up when the timer fires, and the
	// loop below then finds the timeout.
	waitCtx, cancelWait := context.WithTimeout(callCtx, timeout)
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
			if limit > 0 && counted[stream]+int64(len(msg.Data)) > limit+(64<<10) {
				res.Dropped[stream] += int64(len(msg.Data))
				return false
			}
			counted[stream] += int64(len(msg.Data))
			if out != nil {
				if err := out(stream, msg.Data); err != nil {
					s.logger().DebugContext(ctx, "output receiver failed", logkeys.Error, err)
				}
			}
		case *channel.Call:
			// A call ends by the exec's timeout, so that a call to a server
			// still starting gives up in time to tell the code which one.
			sb.startCall(waitCtx, func() { m.serveCall(waitCtx, sb, s.tenant, env, id, msg) })
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
			sb.kill()
			drain()
			res.Duration = time.Since(start)
			res.Status, res.StateLost = StatusTimeout, true
			res.Error = fmt.Sprintf("execution exceeded the %s timeout; the sandbox was stopped", timeout)
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

// serveCall answers one call frame from the sandbox.
func (m *Manager) serveCall(ctx context.Context, sb *sandbox, tenant string, env *ExecEnv, execID int64, call *channel.Call) {
	var (
		result json.RawMessage
		err    error
	)
	if call.Exec != execID {
		err = channel.Errorf(channel.CodeFailedPrecondition, "this call was made after its run_python call had finished")
	} else {
		result, err = m.cfg.Broker.Call(ctx, tenant, env, call.Method, call.Params)
	}
	reply := channel.ReplyTo(call.ID, result, err)
	if err := sb.conn.Write(reply); err != nil {
		m.logger.DebugContext(ctx, "reply to sandbox failed", logkeys.Error, err)
	}
}
