package session_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/codeexec/codeexec/sandboxd/internal/sandbox"
	"github.com/codeexec/codeexec/sandboxd/internal/session"
)

// events gathers what a call streams.
type events struct {
	mu       sync.Mutex
	out      strings.Builder
	progress []sandbox.Progress
}

func (e *events) send(ev session.Event) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if ev.Progress != nil {
		e.progress = append(e.progress, *ev.Progress)
	} else {
		e.out.WriteString(ev.Text)
	}
	return nil
}

// call makes one call of a run that may yield after yield.
func (r *replica) call(ctx context.Context, req session.Request) (*session.Result, *events, error) {
	req.Tenant = "alice"
	if req.Timeout == 0 {
		req.Timeout = 20 * time.Second
	}
	e := &events{}
	res, err := r.m.Execute(ctx, req, e.send)
	return res, e, err
}

// A run that outlives its call yields with its output so far, goes on,
// refuses code meanwhile, and a later attach gets the output since, then
// the end; its variables stay.
func TestRunYieldsAndAttachContinuesIt(t *testing.T) {
	t.Parallel()
	r := newReplica(t, storeConn(t), "unix:/a.sock", options{})
	id := r.create(t)
	code := "import time\nfor i in range(6):\n    print('step', i, flush=True)\n    time.sleep(0.25)\ntotal = 42\n"
	res, ev, err := r.call(t.Context(), session.Request{SessionID: id, Code: code, YieldAfter: 400 * time.Millisecond})
	if err != nil || res.Status != session.StatusRunning || res.RunID == 0 {
		t.Fatalf("first call: %+v, %v; want it running", res, err)
	}
	first := ev.out.String()
	if strings.Contains(first, "step 5") {
		t.Errorf("output so far: %q", first)
	}
	var busy *session.BusyError
	if _, _, err := r.call(t.Context(), session.Request{SessionID: id, Code: "print(1)", YieldAfter: time.Second}); !errors.As(err, &busy) || busy.RunID != res.RunID {
		t.Errorf("code while the run is in flight: %v, want a BusyError naming run %d", err, res.RunID)
	}
	var all strings.Builder
	all.WriteString(first)
	for range 20 {
		got, ev, err := r.call(t.Context(), session.Request{SessionID: id, Attach: true, YieldAfter: 500 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		all.WriteString(ev.out.String())
		if got.Status != session.StatusRunning {
			if got.Status != sandbox.StatusOK || got.RunID != res.RunID {
				t.Fatalf("the run's end: %+v", got)
			}
			break
		}
	}
	want := "step 0\nstep 1\nstep 2\nstep 3\nstep 4\nstep 5\n"
	if all.String() != want {
		t.Errorf("output over the calls: %q, want each line once: %q", all.String(), want)
	}
	got, _, err := r.call(t.Context(), session.Request{SessionID: id, Attach: true, YieldAfter: time.Second})
	if err != nil || got.Status != session.StatusNoRun {
		t.Errorf("attach with nothing in flight: %+v, %v; want no run, at once", got, err)
	}
	if _, out := r.run(t, id, "print(total)"); out != "42\n" {
		t.Errorf("after the run: %q", out)
	}
}

// A run that ends while no call follows it keeps its result for the next
// attach; a replay leaves it for the one after.
func TestEndedRunWaitsForItsAttach(t *testing.T) {
	t.Parallel()
	r := newReplica(t, nil, "", options{})
	id := r.create(t)
	res, _, err := r.call(t.Context(), session.Request{SessionID: id, Code: "import time\ntime.sleep(0.5)\nprint('end')", YieldAfter: 100 * time.Millisecond})
	if err != nil || res.Status != session.StatusRunning {
		t.Fatalf("%+v, %v", res, err)
	}
	time.Sleep(time.Second)
	look, ev, err := r.call(t.Context(), session.Request{SessionID: id, Attach: true, Replay: true, RunID: res.RunID})
	if err != nil || look.Status != sandbox.StatusOK || ev.out.String() != "end\n" {
		t.Fatalf("replay: %+v, %q, %v", look, ev.out.String(), err)
	}
	got, ev, err := r.call(t.Context(), session.Request{SessionID: id, Attach: true, YieldAfter: time.Second})
	if err != nil || got.Status != sandbox.StatusOK || ev.out.String() != "end\n" {
		t.Fatalf("attach after the end: %+v, %q, %v", got, ev.out.String(), err)
	}
	if _, _, err := r.call(t.Context(), session.Request{SessionID: id, Attach: true, RunID: res.RunID + 1}); !errors.Is(err, session.ErrNotFound) {
		t.Errorf("attach to another run: %v, want not found", err)
	}
}

// Cancel stops a run as a timeout does: its result says who cancelled
// it, and the session comes back from its checkpoint without the run's
// effects.
func TestCancelStopsTheRunAndRestores(t *testing.T) {
	t.Parallel()
	r := newReplica(t, storeConn(t), "unix:/a.sock", options{})
	id := r.create(t)
	r.run(t, id, "x = 1")
	res, _, err := r.call(t.Context(), session.Request{SessionID: id, Code: "x = 2\nimport time\ntime.sleep(30)", YieldAfter: 200 * time.Millisecond})
	if err != nil || res.Status != session.StatusRunning {
		t.Fatalf("%+v, %v", res, err)
	}
	if ok, err := r.m.Cancel(t.Context(), "alice", id, res.RunID, "cancelled by the test"); !ok || err != nil {
		t.Fatalf("Cancel: %v, %v", ok, err)
	}
	got, _, err := r.call(t.Context(), session.Request{SessionID: id, Attach: true, YieldAfter: 10 * time.Second})
	if err != nil || got.Status != sandbox.StatusKilled || got.Interrupted != "cancelled by the test" {
		t.Fatalf("the cancelled run's result: %+v, %v", got, err)
	}
	after, out := r.run(t, id, "print(x)")
	if out != "1\n" || after.Restored == nil || !after.Restored.RolledBack {
		t.Errorf("after the cancel: %q, restored %+v; want x back at 1, rolled back", out, after.Restored)
	}
	if ok, _ := r.m.Cancel(t.Context(), "alice", id, 0, ""); ok {
		t.Error("Cancel with nothing in flight said it cancelled")
	}
}

// runtime.progress reaches the call as progress events, spaced out.
func TestProgressEvents(t *testing.T) {
	t.Parallel()
	r := newReplica(t, nil, "", options{})
	id := r.create(t)
	code := "import time\nfor i in range(5):\n    runtime.progress(i, 4, 'item %d' % i)\n    time.sleep(0.15)\n"
	res, ev, err := r.call(t.Context(), session.Request{SessionID: id, Code: code, YieldAfter: 10 * time.Second})
	if err != nil || res.Status != sandbox.StatusOK {
		t.Fatalf("%+v, %v", res, err)
	}
	if n := len(ev.progress); n < 2 || ev.progress[n-1] != (sandbox.Progress{Done: 4, Total: 4, Message: "item 4"}) {
		t.Errorf("progress: %+v; want several, the last 4 of 4", ev.progress)
	}
}

// A run whose replica stops in its middle is reported, on the next
// attach through another replica, as interrupted, with the session
// restored from the checkpoint before the run.
func TestRunOfALostReplicaIsInterrupted(t *testing.T) {
	t.Parallel()
	conn := storeConn(t)
	a := newReplica(t, conn, "unix:/a.sock", options{})
	b := newReplica(t, conn, "unix:/b.sock", options{})
	id := a.create(t)
	a.run(t, id, "x = 1")
	res, _, err := a.call(t.Context(), session.Request{SessionID: id, Code: "x = 2\nimport time\ntime.sleep(30)", YieldAfter: 200 * time.Millisecond})
	if err != nil || res.Status != session.StatusRunning {
		t.Fatalf("%+v, %v", res, err)
	}
	a.m.Close()
	got, _, err := b.call(t.Context(), session.Request{SessionID: id, Attach: true, YieldAfter: time.Second})
	if err != nil || got.Status != sandbox.StatusKilled || !strings.Contains(got.Interrupted, "was interrupted") || got.Restored == nil || !got.Restored.RolledBack {
		t.Fatalf("attach on b: %+v, %v; want the run interrupted and the session restored", got, err)
	}
	if _, out := b.run(t, id, "print(x)"); out != "1\n" {
		t.Errorf("x after the interrupted run: %q, want 1", out)
	}
}

// A run in flight keeps its sandbox under MaxSessions: another session
// that needs a place waits and is refused rather than take it, and the
// run goes on to its end.
func TestRunningSessionIsNotEvicted(t *testing.T) {
	t.Parallel()
	r := newReplica(t, storeConn(t), "unix:/a.sock", options{config: func(c *session.Config) { c.MaxSessions = 1 }})
	first, second := r.create(t), r.create(t)
	res, _, err := r.call(t.Context(), session.Request{SessionID: first, Code: "import time\ntime.sleep(4)\nprint('end')", YieldAfter: 300 * time.Millisecond})
	if err != nil || res.Status != session.StatusRunning {
		t.Fatalf("%+v, %v", res, err)
	}
	if _, _, err := r.exec(t.Context(), second, "print(1)"); !errors.Is(err, session.ErrExhausted) {
		t.Errorf("another session while the only sandbox runs: %v, want no room", err)
	}
	got, ev, err := r.call(t.Context(), session.Request{SessionID: first, Attach: true, YieldAfter: 10 * time.Second})
	if err != nil || got.Status != sandbox.StatusOK || ev.out.String() != "end\n" || got.Restored != nil {
		t.Errorf("the run after the other session's try: %+v, %q, %v; want it ended in its own sandbox", got, ev.out.String(), err)
	}
}
