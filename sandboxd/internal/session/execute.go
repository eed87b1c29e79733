package session

import (
	"context"
	"fmt"
	"time"

	"github.com/codeexec/codeexec/sandboxd/internal/channel"
	"github.com/codeexec/codeexec/sandboxd/internal/sandbox"
	"github.com/codeexec/codeexec/services/logkeys"
)

// Request is one exec, or an attach to a run in flight.
type Request struct {
	Tenant, SessionID, Code string
	Servers                 []string
	// Timeout is the wall-clock limit; zero means the default. It is
	// clamped to the maximum.
	Timeout time.Duration
	// MaxToolCalls bounds the exec's tool calls; zero is no bound.
	MaxToolCalls int
	// AskApprovals says that the caller answers questions (an Event's
	// Question) with Manager.Answer; without it, a tool call that needs a
	// person's approval is refused at once.
	AskApprovals bool
	// YieldAfter, when set, makes the run outlive the call: the call
	// returns a StatusRunning result once that much time has passed (from
	// the call's start), and the run goes on (see flight).
	YieldAfter time.Duration
	// Attach, with no code, waits up to YieldAfter for the run in flight
	// (RunID, when set, names it); Replay and Quiet are how (see the
	// proto's ExecuteRequest).
	Attach        bool
	Replay, Quiet bool
	RunID         uint64
}

// Result is how an exec ended (sandbox.Outcome: status, exit code,
// error, output dropped) and what the session says with it.
type Result struct {
	sandbox.Outcome
	Servers []string
	Timeout time.Duration
	Session Info
	// Durable is set when the session is kept in the session store.
	Durable bool
	// Restored says what came back when the call ran in a sandbox rebuilt
	// from the session's checkpoint.
	Restored *RestoreReport
	// NotDurable, when set, says (once) why the session's state could not
	// be checkpointed.
	NotDurable string
	// Uncheckpointed, when set, are (once) the names the latest checkpoint
	// could not hold.
	Uncheckpointed []channel.LostName
	// RunID and Started name a run that may outlive its call; Yielded,
	// on a StatusRunning result, says why the call yielded early.
	RunID   uint64
	Started time.Time
	Yielded string
	// Interrupted, when set, says why the run did not finish: it was
	// cancelled, or its replica was lost.
	Interrupted string
}

// Execute runs code in a session and streams its events to send. A
// durable session that is not live here is taken from the session store
// (and restored from its checkpoint), unless another replica holds it
// live: then the error is an *ElsewhereError. With YieldAfter the run
// may outlive the call (see flight); with Attach the call follows the run
// in flight instead of starting one.
func (m *Manager) Execute(ctx context.Context, req Request, send Send) (*Result, error) {
	began := time.Now()
	s, err := m.claim(ctx, req.Tenant, req.SessionID)
	if err != nil {
		return nil, err
	}
	if req.Attach {
		return m.attach(ctx, s, req, send)
	}
	if req.Code == "" {
		return nil, fmt.Errorf("%w: code is empty", ErrInvalid)
	}
	timeout := m.clampTimeout(req.Timeout)
	// The call's deadline bounds loading its servers; what the loading
	// leaves of the timeout bounds the calls of a restore, and the code.
	deadline := began.Add(timeout)
	saved := m.fetchSavedTools(ctx, s)
	// Loading the call's servers waits for those still starting no longer
	// than the call's timeout, nor its yield (the call must answer by
	// then): a server not up by then is loaded with the error that says
	// so, which its use raises, and the code runs.
	prepBy := deadline
	if y := began.Add(req.YieldAfter); req.YieldAfter > 0 && y.Before(prepBy) {
		prepBy = y
	}
	prepCtx, cancelPrep := context.WithDeadline(ctx, prepBy)
	env, err := m.cfg.Broker.Prepare(prepCtx, s.tenant, req.Servers)
	cancelPrep()
	if err != nil {
		saved.stop()
		return nil, err
	}
	r := &run{code: req.Code, env: env, saved: saved, timeout: timeout,
		spent: spentTime{loading: time.Since(began), env: env}}
	if f := s.inFlight(); f != nil {
		// A run that has not yielded is a call like any other, soon
		// over (or cancelled): this one waits for it. A long run is
		// refused.
		if err := waitTurn(ctx, f, req.YieldAfter-time.Since(began)); err != nil {
			saved.stop()
			return nil, err
		}
	}
	if s, err = m.takeTurn(ctx, s, req, deadline); err != nil {
		saved.stop()
		return nil, err
	}
	// Asked on the session whose turn it holds, where Answer finds it.
	env.Controls = &sandbox.Controls{MaxToolCalls: req.MaxToolCalls}
	r.ask = req.AskApprovals
	if req.YieldAfter > 0 {
		if err := ctx.Err(); err != nil {
			// The caller went (or cancelled) before the run began: it
			// does not begin.
			saved.stop()
			s.release()
			return nil, err
		}
		return m.launch(ctx, s, r, req.YieldAfter-time.Since(began), send)
	}
	defer saved.stop()
	defer s.release()
	r.out, r.progress, r.display = outputTo(send), progressTo(send), displayTo(send)
	if r.ask {
		env.Controls.Ask = s.asker(0, func(q Question) error { return send(Event{Question: &q}) })
	}
	res, err := s.start(ctx, r)
	if err != nil {
		return nil, err
	}
	m.finish(ctx, s, res)
	return res, ctx.Err()
}

// takeTurn takes the turn of the session of req, s or the one taken from
// the store again when s was released while the call waited, once no
// fence holds it.
func (m *Manager) takeTurn(ctx context.Context, s *Session, req Request, deadline time.Time) (*Session, error) {
	for {
		if err := s.acquire(ctx); err != nil {
			return nil, err
		}
		// A session held by a fence runs nothing until the store
		// answers again; then it may be this replica's still, or not.
		if err := s.lease.WaitSettled(ctx, deadline); err != nil {
			s.release()
			return nil, err
		}
		if m.current(s) {
			return s, nil
		}
		// Released while this call waited (evicted, reaped idle): it is
		// in the store again, and this Session must not run on.
		s.release()
		var err error
		if s, err = m.claim(ctx, req.Tenant, req.SessionID); err != nil {
			return nil, err
		}
	}
}

// start readies the session's sandbox for r, with its turn taken, runs r
// in it and returns r's result, with what the session has to say.
func (s *Session) start(ctx context.Context, r *run) (*Result, error) {
	// The previous call's checkpoint is stored before this one runs (it
	// usually is by now): so once a call has returned, the one before it
	// is durable whatever happens next.
	if s.lease != nil {
		s.lease.WaitCommits(s.m.cfg.StartTimeout)
	}
	s.setBusy(true, false)
	// A restore's calls get what the loading left of the timeout, counted
	// from now: the wait for the session's previous call is not this
	// call's (a call queued behind one that timed out would otherwise
	// restore with its deadline gone, and every such call would fail).
	restoreDeadline := time.Now().Add(r.spent.budget(r.timeout))
	startCtx, cancel := context.WithTimeout(ctx, s.m.cfg.StartTimeout)
	sb, report, err := s.ensureSandbox(startCtx, r.env, r.saved, restoreDeadline)
	cancel()
	if err != nil {
		s.setBusy(false, false)
		return nil, err
	}
	if report != nil {
		r.spent.restoring = report.callsTook
	}
	r.sb, r.restored = sb, report
	res := r.exec(ctx, s)
	sb.FirstExecDone()
	if res.StateLost {
		s.stopSandbox()
		s.lease.Lost(lostReason(res), true)
	}
	s.setBusy(false, true)
	res.Durable = s.lease != nil
	s.notes(sb, res)
	res.Session = s.Info()
	return res, nil
}

// notes adds to res, once each, what the session has to say of its
// checkpoints: a refusal, or a store that did not record it, and the
// names the latest checkpoint could not hold.
func (s *Session) notes(sb *sandbox.Sandbox, res *Result) {
	if s.lease == nil {
		if !s.unrecordedSaid {
			res.NotDurable, s.unrecordedSaid = s.unrecorded, true
		}
		return
	}
	s.lease.NoteRefused(sb.TakeRefused())
	res.NotDurable = s.lease.TakeNotDurable()
	res.Uncheckpointed = s.lease.TakeUncheckpointed()
}

// finish ends the session whose code ended it, and notes the result.
func (m *Manager) finish(ctx context.Context, s *Session, res *Result) {
	if res.Ended {
		// The code ended its session: once the checkpoints on their way
		// are done, it goes, record and chunks with it.
		if s.lease != nil {
			s.lease.WaitCommits(m.cfg.StartTimeout)
		}
		if err := m.Destroy(context.WithoutCancel(ctx), s.tenant, s.id); err != nil {
			s.logger().WarnContext(ctx, "could not end the session its code ended", logkeys.Error, err)
		}
	}
	m.metrics.Exec(res.Status.String(), res.Duration)
	s.logger().InfoContext(ctx, "exec finished", logkeys.ExecStatus, res.Status, logkeys.Duration, res.Duration, logkeys.Error, res.Error)
}

// lostReason says, for the next restore's report, why the sandbox of a
// call that ended so went away.
func lostReason(res *Result) string {
	switch res.Status {
	case sandbox.StatusTimeout:
		return "the previous call timed out"
	case sandbox.StatusKilled:
		if res.Error != "" {
			return "the previous call's sandbox stopped: " + res.Error
		}
		return "the previous call's sandbox stopped"
	default:
		return "the previous call stopped its sandbox: " + res.Error
	}
}
