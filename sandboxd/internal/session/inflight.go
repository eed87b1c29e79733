package session

import (
	"context"
	"fmt"
	"time"

	"github.com/codeexec/codeexec/sandboxd/internal/channel"
	"github.com/codeexec/codeexec/sandboxd/internal/sandbox"
	flightpkg "github.com/codeexec/codeexec/sandboxd/internal/session/flight"
)

// Event is one event of a run for the call that follows it: a piece of
// output, or the code's progress. A new kind (a tool call that waits for
// a person's approval, say) is a new field here, a new case of the
// Execute stream's oneof, and a new case in the gateway's gather; the
// run buffers it like the others, so that a call attaching later gets it.
type Event struct {
	// Stream ("stdout" or "stderr") and Text are a piece of output.
	Stream, Text string
	// Progress, when set, is the code's report (runtime.progress).
	Progress *sandbox.Progress
	// Question, when set, is a tool call that waits for a person's
	// approval; its answer comes by Manager.Answer.
	Question *Question
	// Display, when set, is an image the code showed (display(x), a
	// figure), within the call's display limits.
	Display *channel.Display
}

// Send receives a run's events; an error means the call's stream is
// gone.
type Send func(Event) error

// flight is a run that may outlive its call (Request.YieldAfter): see
// package flight.
type flight = flightpkg.Run[Event, Result]

func newFlight(id uint64, timeout time.Duration, cancel context.CancelCauseFunc) *flight {
	// A progress report replaces one before it that no call has read yet;
	// output is bounded by the exec's output cap.
	return flightpkg.New[Event, Result](id, timeout, cancel, func(prev, next Event) bool {
		return prev.Progress != nil && next.Progress != nil
	})
}

// followOpts are how a call follows a run (see ExecuteRequest), and
// waits, whether a question of the run still waits for its answer.
type followOpts struct {
	replay, quiet bool
	waits         func(id string) bool
}

// follow streams f's events to send (see flight.Run.Follow) and returns
// the run's result, or a RUNNING one when the call yields first.
func follow(ctx context.Context, f *flight, send Send, yield time.Duration, o followOpts) (*Result, error) {
	out, err := f.Follow(ctx, send, yield, flightpkg.Opts[Event]{Replay: o.replay, Quiet: o.quiet,
		Skip: func(ev Event, ended bool) bool {
			// Answered, or its run is over: a caller that stopped at it
			// to ask would drop the run's result.
			return ev.Question != nil && (ended || o.waits == nil || !o.waits(ev.Question.ID))
		}})
	switch {
	case err != nil:
		return nil, err
	case out.Err != nil:
		return nil, out.Err
	case out.Running:
		res := &Result{Timeout: f.Timeout, RunID: f.ID, Started: f.Started, Yielded: out.Note}
		res.Status, res.Duration = StatusRunning, time.Since(f.Started)
		return res, nil
	}
	out.Res.RunID, out.Res.Started = f.ID, f.Started
	return out.Res, nil
}

// waitTurn waits, for a call with code on the session, until f ends, as
// calls on one session run one after another: unless f yields (it is a
// long run: the model was told it runs, and is told again) or wait
// passes (zero: no bound), when the call is refused with a BusyError.
func waitTurn(ctx context.Context, f *flight, wait time.Duration) error {
	ended, err := f.WaitTurn(ctx, wait)
	switch {
	case err != nil:
		return fmt.Errorf("waiting for the session's previous call: %w", err)
	case ended:
		return nil
	}
	return &BusyError{RunID: f.ID, Started: f.Started, Timeout: f.Timeout}
}

// Statuses of a call that a session adds to an exec's.
const (
	// StatusRunning: the call yielded; the run goes on.
	StatusRunning = sandbox.StatusRunning
	// StatusNoRun: an attach found no run in flight and nothing to
	// deliver.
	StatusNoRun = sandbox.StatusNoRun
)

// BusyError says that a call with code found a run in flight in its
// session.
type BusyError struct {
	RunID   uint64
	Started time.Time
	Timeout time.Duration
}

func (e *BusyError) Error() string {
	return fmt.Sprintf("a run is in progress in this session (started %s ago, timeout %s)",
		time.Since(e.Started).Round(time.Second), e.Timeout)
}
