package session

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/codeexec/codeexec/sandboxd/internal/channel"
	"github.com/codeexec/codeexec/sandboxd/internal/sandbox"
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

// flight is what a run that may outlive its call (Request.YieldAfter)
// keeps for the calls that follow it: its events since the last result a
// call delivered, its result once it ends, and who follows it now. It is
// the mechanism by which a later call attaches to a run in flight: the
// run goes on in its sandbox whether or not a call follows it, and each
// call that attaches takes what the run did since the last one.
type flight struct {
	id      uint64
	started time.Time
	timeout time.Duration
	// cancel stops the run, with a *sandbox.CancelledError as the cause.
	cancel context.CancelCauseFunc

	mu sync.Mutex
	// events are the run's events from its start; delivered counts those
	// a call has delivered with a result (the next attach starts there).
	events    []Event
	delivered int
	// read is the furthest any call has read events: those before it are
	// never changed.
	read int
	// changed is closed (and replaced) whenever events grow or the run
	// ends, to wake the call that follows it.
	changed chan struct{}
	// follower counts attaches: a call that finds it moved on was
	// superseded by a newer one, and yields.
	follower uint64
	// res and err are the run's end, once done is closed; taken says a
	// call delivered it.
	done  chan struct{}
	res   *Result
	err   error
	taken bool
	// isMarked says the run is marked in the session store (a call
	// yielded on it).
	isMarked bool
	// yielded is closed the first time a call yields on the run: from
	// then on the run is a long one, and code on its session is refused.
	yielded     chan struct{}
	yieldedOnce sync.Once
}

// waitTurn waits, for a call with code on the session, until f ends, as
// calls on one session run one after another: unless f yields (it is a
// long run: the model was told it runs, and is told again) or wait
// passes (zero: no bound), when the call is refused with a BusyError.
func (f *flight) waitTurn(ctx context.Context, wait time.Duration) error {
	var timeout <-chan time.Time
	if wait > 0 {
		t := time.NewTimer(wait)
		defer t.Stop()
		timeout = t.C
	}
	select {
	case <-f.done:
		return nil
	case <-f.yielded:
	case <-timeout:
	case <-ctx.Done():
		return fmt.Errorf("waiting for the session's previous call: %w", ctx.Err())
	}
	return &BusyError{RunID: f.id, Started: f.started, Timeout: f.timeout}
}

// mark reports whether the run is to be marked in the store now: true
// the first time only.
func (f *flight) mark() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	first := !f.isMarked
	f.isMarked = true
	return first
}

// marked reports whether a call marked the run in the store.
func (f *flight) marked() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.isMarked
}

// resultTaken reports whether a call delivered the run's end.
func (f *flight) resultTaken() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.taken
}

func newFlight(id uint64, timeout time.Duration, cancel context.CancelCauseFunc) *flight {
	return &flight{id: id, started: time.Now(), timeout: timeout, cancel: cancel,
		changed: make(chan struct{}), done: make(chan struct{}), yielded: make(chan struct{})}
}

// add buffers ev. A progress report replaces one before it that no call
// has read yet, so that a run reporting often holds few, not thousands;
// output is bounded by the exec's output cap.
func (f *flight) add(ev Event) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if n := len(f.events); ev.Progress != nil && n > f.read && f.events[n-1].Progress != nil {
		f.events[n-1] = ev
	} else {
		f.events = append(f.events, ev)
	}
	f.wake()
}

// wake tells the follower that something changed; f.mu is held.
func (f *flight) wake() {
	close(f.changed)
	f.changed = make(chan struct{})
}

// end records the run's end and wakes its follower.
func (f *flight) end(res *Result, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.res, f.err = res, err
	close(f.done)
	f.wake()
}

// ended reports whether the run has ended.
func (f *flight) ended() bool {
	select {
	case <-f.done:
		return true
	default:
		return false
	}
}

// follow streams f's events to send, from the last delivered result on
// (from the start with replay; none with quiet), until the run ends or
// yield passes, ctx ends or a newer call attaches. It returns the run's
// result, or a RUNNING one; the events it sent count as delivered only
// when it returns a result (not for replay): a call whose stream broke
// leaves them to the next.
func (f *flight) follow(ctx context.Context, send Send, yield time.Duration, o followOpts) (*Result, error) {
	f.mu.Lock()
	if !o.replay {
		f.follower++
	}
	me, pos := f.follower, f.delivered
	if o.replay {
		pos = 0
	}
	f.mu.Unlock()
	timer := time.NewTimer(yield)
	defer timer.Stop()
	for {
		f.mu.Lock()
		batch, changed, superseded := f.events[pos:], f.changed, !o.replay && f.follower != me
		f.read = max(f.read, len(f.events))
		ended := f.ended()
		f.mu.Unlock()
		if !o.quiet && send != nil {
			for _, ev := range batch {
				if ev.Question != nil && (ended || !o.waits(ev.Question.ID)) {
					// Answered, or its run is over: a caller that stopped
					// at it to ask would drop the run's result.
					continue
				}
				if err := send(ev); err != nil {
					return nil, err
				}
			}
		}
		pos += len(batch)
		if ended {
			return f.finish(pos, o)
		}
		if superseded {
			return f.running(pos, o, "another call attached to this run"), nil
		}
		select {
		case <-changed:
		case <-timer.C:
			return f.running(pos, o, ""), nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// followOpts are how a call follows a run (see ExecuteRequest), and
// waits, whether a question of the run still waits for its answer.
type followOpts struct {
	replay, quiet bool
	waits         func(id string) bool
}

// finish delivers the run's end, having sent its events up to pos.
func (f *flight) finish(pos int, o followOpts) (*Result, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !o.replay {
		f.delivered, f.taken = pos, true
	}
	if f.err != nil {
		return nil, f.err
	}
	res := *f.res
	res.RunID, res.Started = f.id, f.started
	return &res, nil
}

// running is the result of a call that yielded with the run still going,
// having sent its events up to pos.
func (f *flight) running(pos int, o followOpts, note string) *Result {
	f.mu.Lock()
	if !o.replay {
		f.delivered = max(f.delivered, pos)
	}
	f.mu.Unlock()
	if !o.replay {
		f.yieldedOnce.Do(func() { close(f.yielded) })
	}
	res := &Result{Timeout: f.timeout, RunID: f.id, Started: f.started, Yielded: note}
	res.Status, res.Duration = StatusRunning, time.Since(f.started)
	return res
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
