package session_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/codeexec/codeexec/sandboxd/internal/sandbox"
	"github.com/codeexec/codeexec/sandboxd/internal/session"
)

// waitPaused calls the session id, idle on r, with a short timeout until
// r answers that it is paused (r has fenced itself), and returns that
// answer.
func waitPaused(t *testing.T, r *replica, id string) error {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		_, err := r.m.Execute(t.Context(), session.Request{Tenant: "alice", SessionID: id, Code: "pass", Timeout: time.Second}, nil)
		if errors.Is(err, session.ErrPaused) {
			return err
		}
		if err != nil {
			t.Fatalf("a call while the store is cut: %v, want it to run or be paused", err)
		}
		if time.Now().After(deadline) {
			t.Fatal("the replica did not fence itself within 30 s of losing the store")
		}
	}
}

// busy waits for the session id on r to take a call.
func busy(t *testing.T, r *replica, id string) {
	t.Helper()
	waitFor(t, "the call to run", func() bool {
		s, err := r.m.Get("alice", id)
		return err == nil && s.Info().State == session.StateBusy
	})
}

// A replica that loses the store pauses its sandboxes rather than stop
// them, and holds their calls; when the store is back and nobody took a
// session meanwhile, it runs on where it was, the call in flight
// included, with nothing restored. A session made while the store was
// out of reach is not in it, and runs on through the fence.
func TestFencedReplicaPausesAndResumes(t *testing.T) {
	t.Parallel()
	a := newReplica(t, storeConn(t), "unix:/a.sock", options{timing: fast})
	id, idle := a.create(t), a.create(t)
	a.run(t, id, "x = 41")
	a.run(t, idle, "pass")
	type outcome struct {
		res *session.Result
		out string
		err error
	}
	inFlight, started := make(chan outcome, 1), make(chan struct{})
	go func() {
		// It sleeps in short steps and reports its longest: a sandbox
		// paused during one shows a step as long as the pause.
		var out strings.Builder
		res, err := a.m.Execute(context.Background(), session.Request{Tenant: "alice", SessionID: id, Timeout: time.Minute, Code: `
import time
print("started", flush=True)
longest, last = 0.0, time.monotonic()
for _ in range(60):
    time.sleep(0.05)
    now = time.monotonic()
    longest, last = max(longest, now - last), now
x += 1
print("done", x, round(longest, 1))`}, func(ev session.Event) error {
			if out.Len() == 0 {
				close(started)
			}
			out.WriteString(ev.Text)
			return nil
		})
		inFlight <- outcome{res, strings.TrimPrefix(out.String(), "started\n"), err}
	}()
	select {
	case <-started:
	case got := <-inFlight:
		t.Fatalf("the call ended before it started: %+v, %v", got.res, got.err)
	}
	a.link.cut.Store(true)
	err := waitPaused(t, a, idle)
	if msg := err.Error(); !strings.Contains(msg, "has not reached the session store for") || !strings.Contains(msg, "retry") {
		t.Errorf("a call while paused: %q, want it to say why and to retry", msg)
	}
	other := a.create(t)
	if res, out := a.run(t, other, "y = 5\nprint(y)"); out != "5\n" || res.Durable {
		t.Errorf("a session made while the store is cut: %q, durable %v; want it to run, not durable", out, res.Durable)
	}
	a.link.cut.Store(false)

	got := <-inFlight
	var x int
	var longest float64
	if got.err != nil || got.res.Status != sandbox.StatusOK || got.res.Restored != nil {
		t.Fatalf("the call in flight: %v, %+v; want it to finish in its sandbox", got.err, got.res)
	}
	if _, err := fmt.Sscanf(got.out, "done %d %g", &x, &longest); err != nil || x != 42 {
		t.Fatalf("the call in flight printed %q", got.out)
	}
	// Paused from the fence until the store came back: past the second
	// the paused call above waited, not the 50 ms of a step that ran on.
	if longest < 0.5 {
		t.Errorf("the longest 50 ms step of the call in flight took %g s: its sandbox was not paused", longest)
	}
	if res, out := a.run(t, id, "print(x)"); out != "42\n" || res.Restored != nil {
		t.Errorf("after the outage: %q, restored %+v; want the state as the call left it", out, res.Restored)
	}
}

// A replica cut off for longer than its lease loses its session to one
// that reaches the store, which restores it; when the first is back it
// stops its paused sandbox and sends the session's calls there.
func TestPausedSessionTakenOverIsStopped(t *testing.T) {
	t.Parallel()
	conn := storeConn(t)
	a := newReplica(t, conn, "unix:/a.sock", options{timing: fast})
	b := newReplica(t, conn, "unix:/b.sock", options{timing: fast})
	id := a.create(t)
	a.run(t, id, "x = 41")
	a.run(t, id, "pass")
	a.link.cut.Store(true)
	_ = waitPaused(t, a, id)
	var res *session.Result
	var out string
	waitFor(t, "b to take the session once a's lease lapsed", func() bool {
		var err error
		res, out, err = b.exec(t.Context(), id, "print(x)")
		return err == nil
	})
	if out != "41\n" || res.Restored == nil || !strings.Contains(res.Restored.Reason, "went away") {
		t.Fatalf("on b: %q, restored %+v", out, res.Restored)
	}
	a.link.cut.Store(false)
	waitFor(t, "a to send the session's calls to b", func() bool {
		_, _, err := a.exec(t.Context(), id, "print(x)")
		return elsewhere(err) == "unix:/b.sock"
	})
	if list := a.m.List("alice"); len(list) != 0 {
		t.Errorf("a still lists %v after the session moved to b", list)
	}
}

// A call whose timeout runs out while its sandbox is paused ends as a
// timeout that says so; no sandbox starts for the session while the store
// is out of reach, and once it is back the session comes back from its
// checkpoint.
func TestCallTimesOutWhilePaused(t *testing.T) {
	t.Parallel()
	a := newReplica(t, storeConn(t), "unix:/a.sock", options{timing: fast})
	id := a.create(t)
	a.run(t, id, "x = 41")
	a.run(t, id, "pass")
	done := make(chan *session.Result, 1)
	go func() {
		res, err := a.m.Execute(context.Background(), session.Request{Tenant: "alice", SessionID: id, Code: "import time\ntime.sleep(60)", Timeout: 2 * time.Second}, nil)
		if err != nil {
			t.Errorf("the call that runs out of time while paused: %v", err)
		}
		done <- res
	}()
	busy(t, a, id)
	a.link.cut.Store(true)
	res := <-done
	if res == nil {
		return
	}
	if res.Status != sandbox.StatusTimeout || !strings.Contains(res.Error, "paused since this sandbox replica lost the session store") {
		t.Fatalf("status %v, error %q; want a timeout that says the sandbox was paused", res.Status, res.Error)
	}
	if _, err := a.m.Execute(t.Context(), session.Request{Tenant: "alice", SessionID: id, Code: "print('ran while fenced')", Timeout: time.Second}, nil); !errors.Is(err, session.ErrPaused) {
		t.Fatalf("a call while the store is still cut: %v, want ErrPaused", err)
	}
	a.link.cut.Store(false)
	waitFor(t, "the session to come back", func() bool {
		var out string
		var err error
		res, out, err = a.exec(t.Context(), id, "print(x)")
		return err == nil && out == "41\n"
	})
	if res.Restored == nil || !strings.Contains(res.Restored.Reason, "timed out") || !res.Restored.RolledBack {
		t.Errorf("restored %+v, want it to say the call timed out, rolled back", res.Restored)
	}
}
