package session

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/codeexec/codeexec/sandboxd/internal/channel"
	"github.com/codeexec/codeexec/sandboxd/internal/sandbox"
	"github.com/codeexec/codeexec/services/logkeys"
)

// outputTo and progressTo pass a run's events to send.
func outputTo(send Send) sandbox.Output {
	return func(stream, text string) error {
		if send == nil {
			return nil
		}
		return send(Event{Stream: stream, Text: text})
	}
}

func displayTo(send Send) sandbox.Display {
	return func(d *channel.Display) error {
		if send == nil {
			return nil
		}
		return send(Event{Display: d})
	}
}

func progressTo(send Send) func(sandbox.Progress) {
	return func(p sandbox.Progress) {
		if send != nil {
			_ = send(Event{Progress: &p}) // a gone caller ends the run anyway
		}
	}
}

// launch runs r, with the session's turn taken, as a run that outlives
// the call: on a context of its own, its events buffered in its flight.
// The call follows it for yield, then returns its result or a
// StatusRunning one. The turn is held until the run ends, so the session
// is never evicted or reaped under it.
func (m *Manager) launch(ctx context.Context, s *Session, r *run, yield time.Duration, send Send) (*Result, error) {
	runCtx, cancel := context.WithCancelCause(context.WithoutCancel(ctx))
	// The run's ID is its start in nanoseconds: a session runs one run at
	// a time, and a count of its calls would repeat after a replica lost
	// one (a task ID must never name two runs).
	f := newFlight(uint64(time.Now().UnixNano()), r.timeout, cancel)
	s.setFlight(f)
	r.out = func(stream, text string) error { f.Add(Event{Stream: stream, Text: text}); return nil }
	r.progress = func(p sandbox.Progress) { f.Add(Event{Progress: &p}) }
	r.display = func(d *channel.Display) error { f.Add(Event{Display: d}); return nil }
	if r.ask {
		r.env.Controls.Ask = s.asker(f.ID, func(q Question) error { f.Add(Event{Question: &q}); return nil })
	}
	go func() {
		defer cancel(nil)
		defer r.saved.stop()
		res, err := s.start(runCtx, r)
		if c := (*sandbox.CancelledError)(nil); err != nil && errors.As(context.Cause(runCtx), &c) {
			// Cancelled while its sandbox started: it ends as cancelled.
			res, err = &Result{Timeout: r.timeout, Session: s.Info(), Durable: s.lease != nil}, nil
			res.Status, res.StateLost, res.Error, res.Cancelled = sandbox.StatusKilled, true, c.Why, c.Why
		}
		if err == nil {
			m.finish(runCtx, s, res)
			if c := res.Cancelled; c != "" {
				res.Interrupted = c
			}
		}
		f.End(res, err)
		// A mark of the run in the store, when its call yielded, goes
		// with its checkpoint; a run that timed out or was cancelled
		// clears it here. One whose sandbox died keeps it: when that
		// was this replica stopping, the next holder says the run was
		// interrupted.
		if f.Marked() && !m.closing.Load() && err == nil && res.StateLost && (res.Status != sandbox.StatusKilled || res.Cancelled != "") {
			mctx, mcancel := context.WithTimeout(context.WithoutCancel(runCtx), m.cfg.StartTimeout)
			merr := s.lease.MarkRunning(mctx, nil)
			mcancel()
			if merr != nil {
				s.logger().WarnContext(runCtx, "could not clear the run's mark in the session store", logkeys.Error, merr)
			}
		}
		s.release()
	}()
	res, err := follow(ctx, f, send, max(yield, 0), followOpts{waits: s.questions.Has})
	return s.yielded(ctx, f, res, err)
}

// yielded completes the result of a call that followed f: the session's
// state, and, the first time a call yields, the run's mark in the store.
func (s *Session) yielded(ctx context.Context, f *flight, res *Result, err error) (*Result, error) {
	if err != nil {
		return nil, err
	}
	if res.Status == StatusRunning {
		res.Session, res.Durable = s.Info(), s.lease != nil
		if s.lease != nil && f.Mark() {
			began := f.Started
			if merr := s.lease.MarkRunning(context.WithoutCancel(ctx), &began); merr != nil {
				s.logger().WarnContext(ctx, "could not mark the run in the session store", logkeys.Error, merr)
			}
		}
	}
	return res, nil
}

// attach follows the session's run in flight (Request.Attach). With
// none, it delivers the last run's result if no call has; else it says
// there is nothing to wait for, unless the session's replica was lost in
// the middle of a run: then the session is restored, and the result says
// the run was interrupted.
func (m *Manager) attach(ctx context.Context, s *Session, req Request, send Send) (*Result, error) {
	f := s.lastFlight()
	switch {
	case f != nil && req.RunID != 0 && f.ID != req.RunID, f == nil && req.RunID != 0:
		return nil, fmt.Errorf("%w: run %d is not this session's run in flight nor its last; the session has run other code since", ErrNotFound, req.RunID)
	case f == nil || (f.Ended() && f.ResultTaken() && !req.Replay):
		// A session taken from the store with its run interrupted (its
		// holder lost) has no flight here: it is restored now.
		if f == nil && s.lease.Interrupted() {
			return m.recoverInterrupted(ctx, s, req)
		}
		res := &Result{Session: s.Info(), Durable: s.lease != nil}
		res.Status = StatusNoRun
		return res, nil
	}
	if !req.Replay && !req.Quiet && send != nil && !f.Ended() {
		// The questions of the run that still wait were sent to calls
		// that ended without their answers: this call gets them first.
		for _, q := range s.waiting() {
			if err := send(Event{Question: &q}); err != nil {
				return nil, err
			}
		}
	}
	res, err := follow(ctx, f, send, req.YieldAfter, followOpts{replay: req.Replay, quiet: req.Quiet, waits: s.questions.Has})
	return s.yielded(ctx, f, res, err)
}

// recoverInterrupted restores a session whose run was interrupted when
// its replica was lost, and says so.
func (m *Manager) recoverInterrupted(ctx context.Context, s *Session, req Request) (*Result, error) {
	deadline := time.Now().Add(m.cfg.StartTimeout)
	env, err := m.cfg.Broker.Prepare(ctx, s.tenant, nil)
	if err != nil {
		return nil, err
	}
	saved := m.fetchSavedTools(ctx, s)
	defer saved.stop()
	if s, err = m.takeTurn(ctx, s, req, deadline); err != nil {
		return nil, err
	}
	defer s.release()
	startCtx, cancel := context.WithTimeout(ctx, m.cfg.StartTimeout)
	_, report, err := s.ensureSandbox(startCtx, env, saved, deadline)
	cancel()
	if err != nil {
		return nil, err
	}
	why := "its sandbox went away"
	if report != nil {
		why = report.Reason
	}
	res := &Result{Restored: report, Interrupted: why, Durable: s.lease != nil, Session: s.Info()}
	res.Status, res.StateLost, res.Error = sandbox.StatusKilled, true, why
	return res, nil
}

// Cancel stops the run in flight of a session (runID, when not zero,
// names it), as a timeout would; why is what its result says. It reports
// false when no such run is in flight here. A durable session live on
// another replica is an *ElsewhereError.
func (m *Manager) Cancel(ctx context.Context, tenant, id string, runID uint64, why string) (bool, error) {
	s, err := m.Get(tenant, id)
	if err != nil {
		d := m.cfg.Durable
		if d == nil || !errors.Is(err, ErrNotFound) {
			return false, err
		}
		where, herr := d.Store.Holder(ctx, tenant, id)
		if herr != nil {
			return false, herr
		}
		if where != nil {
			return false, &ElsewhereError{Replica: where.Replica, Address: where.Address}
		}
		return false, nil
	}
	f := s.inFlight()
	if f == nil || (runID != 0 && f.ID != runID) {
		return false, nil
	}
	if why == "" {
		why = "the run was cancelled"
	}
	f.Cancel(&sandbox.CancelledError{Why: why})
	s.logger().InfoContext(ctx, "run cancelled", "run", f.ID, "reason", why)
	return true, nil
}
