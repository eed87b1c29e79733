package flight

import (
	"context"
	"time"
)

// Opts are how a call follows a run. Replay sends the events from the
// run's start and delivers nothing; Quiet sends none. Skip, when set,
// leaves out an event the call must not send (ended: the run is over).
type Opts[E any] struct {
	Replay, Quiet bool
	Skip          func(ev E, ended bool) bool
}

// Outcome is what a call that followed a run takes back: the run's end
// (Res or Err), or, when Running, that it yielded with the run still
// going (Note, when set, says why it yielded early).
type Outcome[R any] struct {
	Res     *R
	Err     error
	Running bool
	Note    string
}

// Follow sends the run's events to send, from the last delivered result
// on (from the start with Replay; none with Quiet), until the run ends or
// yield passes, ctx ends or a newer call attaches (which wakes it). The
// events it sent count as delivered only when it returns the run's end
// (and not with Replay): a call whose stream broke leaves them to the
// next. Its error is send's or ctx's.
func (f *Run[E, R]) Follow(ctx context.Context, send func(E) error, yield time.Duration, o Opts[E]) (Outcome[R], error) {
	f.mu.Lock()
	if !o.Replay {
		// The call that followed until now yields at once, not at its
		// next event or its yield time.
		f.follower++
		f.wake()
	}
	me, pos := f.follower, f.delivered
	if o.Replay {
		pos = 0
	}
	f.mu.Unlock()
	timer := time.NewTimer(yield)
	defer timer.Stop()
	for {
		f.mu.Lock()
		batch, changed, superseded := f.events[pos:], f.changed, !o.Replay && f.follower != me
		f.read = max(f.read, len(f.events))
		ended := f.Ended()
		f.mu.Unlock()
		if !o.Quiet && send != nil {
			for _, ev := range batch {
				if o.Skip != nil && o.Skip(ev, ended) {
					continue
				}
				if err := send(ev); err != nil {
					return Outcome[R]{}, err
				}
			}
		}
		pos += len(batch)
		if ended {
			return f.finish(pos, o), nil
		}
		if superseded {
			return f.running(pos, o, "another call attached to this run"), nil
		}
		select {
		case <-changed:
		case <-timer.C:
			return f.running(pos, o, ""), nil
		case <-ctx.Done():
			return Outcome[R]{}, ctx.Err()
		}
	}
}

// finish delivers the run's end, having sent its events up to pos.
func (f *Run[E, R]) finish(pos int, o Opts[E]) Outcome[R] {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !o.Replay {
		f.delivered, f.taken = pos, true
	}
	if f.err != nil {
		return Outcome[R]{Err: f.err}
	}
	res := *f.res
	return Outcome[R]{Res: &res}
}

// running is the outcome of a call that yielded with the run still
// going, having sent its events up to pos.
func (f *Run[E, R]) running(pos int, o Opts[E], note string) Outcome[R] {
	f.mu.Lock()
	if !o.Replay {
		f.delivered = max(f.delivered, pos)
	}
	f.mu.Unlock()
	if !o.Replay {
		f.yieldedOnce.Do(func() { close(f.yielded) })
	}
	return Outcome[R]{Running: true, Note: note}
}
