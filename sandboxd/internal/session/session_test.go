package session_test

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/codeexec/codeexec/sandboxd/internal/sandbox"
	"github.com/codeexec/codeexec/sandboxd/internal/session"
)

// A session keeps its namespace from call to call, and only its tenant
// sees it.
func TestSessionKeepsItsState(t *testing.T) {
	t.Parallel()
	r := newReplica(t, nil, "", options{})
	id := r.create(t)
	r.run(t, id, "x = 41")
	res, out := r.run(t, id, "x += 1\nprint(x)")
	if out != "42\n" || res.Status != sandbox.StatusOK || res.Session.ExecCount != 2 || res.Durable {
		t.Errorf("second call: %q, status %v, %d execs, durable %v", out, res.Status, res.Session.ExecCount, res.Durable)
	}
	if _, err := r.m.Get("mallory", id); !errors.Is(err, session.ErrNotFound) {
		t.Errorf("another tenant's Get: %v, want ErrNotFound", err)
	}
	if list := r.m.List("alice"); len(list) != 1 || list[0].ID != id {
		t.Errorf("List: %v", list)
	}
	if err := r.m.Destroy(t.Context(), "alice", id); err != nil {
		t.Fatal(err)
	}
	if _, _, err := r.exec(t.Context(), id, "print(x)"); !errors.Is(err, session.ErrNotFound) {
		t.Errorf("a call after Destroy: %v, want ErrNotFound", err)
	}
}

// A durable session outlives its sandbox: the next call restores the last
// checkpoint into a new sandbox, rolls the call that killed it back, and
// says so once.
func TestDurableSessionSurvivesItsSandbox(t *testing.T) {
	t.Parallel()
	r := newReplica(t, storeConn(t), "unix:/a.sock", options{})
	for _, tc := range []struct{ name, kill, reason string }{
		{"exit", "y = 1\nimport os\nos._exit(3)", "stopped"},
		{"timeout", "y = 1\nimport time\ntime.sleep(60)", "timed out"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			id := r.create(t)
			r.run(t, id, "x = 41\ndef inc(v):\n    return v + 1\n")
			res, err := r.m.Execute(t.Context(), session.Request{Tenant: "alice", SessionID: id, Code: tc.kill, Timeout: time.Second}, nil)
			if err != nil || !res.StateLost {
				t.Fatalf("the killing call: %+v, %v", res, err)
			}
			res, out := r.run(t, id, "print(inc(x), 'y' in globals())")
			if out != "42 False\n" {
				t.Fatalf("after the restore: %q, want x and inc back and y rolled back", out)
			}
			rep := res.Restored
			if rep == nil || !strings.Contains(rep.Reason, tc.reason) || !rep.RolledBack || !slices.Contains(rep.Names, "inc") {
				t.Fatalf("restore report %+v, want it to say %q, rolled back, with inc", rep, tc.reason)
			}
			if res, _ := r.run(t, id, "pass"); res.Restored != nil {
				t.Errorf("the call after the restore reports a restore again: %+v", res.Restored)
			}
		})
	}
}

// A session live on one replica is refused by another, which says where
// it is; once its replica stops, the other takes it from the store with
// its checkpoint.
func TestSessionMovesBetweenReplicas(t *testing.T) {
	t.Parallel()
	conn := storeConn(t)
	a := newReplica(t, conn, "unix:/a.sock", options{})
	b := newReplica(t, conn, "unix:/b.sock", options{})
	id := a.create(t)
	a.run(t, id, "x = 41")
	a.run(t, id, "pass") // the checkpoint of the call before is stored
	if _, _, err := b.exec(t.Context(), id, "print(x)"); elsewhere(err) != "unix:/a.sock" {
		t.Fatalf("b while a holds the session: %v, want it elsewhere, at a", err)
	}
	if err := b.m.Destroy(t.Context(), "alice", id); elsewhere(err) != "unix:/a.sock" {
		t.Fatalf("Destroy on b while a holds the session: %v, want it sent to a", err)
	}
	a.m.Close()
	res, out := b.run(t, id, "print(x)")
	if out != "41\n" || res.Restored == nil || !strings.Contains(res.Restored.Reason, "stopped") {
		t.Fatalf("on b: %q, restored %+v", out, res.Restored)
	}
}

// With a store, MaxSessions bounds sandboxes, not sessions: a session
// beyond it stops the sandbox idle longest, whose session comes back
// from its checkpoint when called.
func TestMaxSessionsStopsTheSandboxIdleLongest(t *testing.T) {
	t.Parallel()
	r := newReplica(t, storeConn(t), "unix:/a.sock", options{config: func(c *session.Config) { c.MaxSessions = 1 }})
	first, second := r.create(t), r.create(t)
	r.run(t, first, "me = 'first'")
	r.run(t, second, "me = 'second'")
	res, out := r.run(t, first, "print(me)")
	if out != "first\n" || res.Restored == nil || !strings.Contains(res.Restored.Reason, "make room") {
		t.Errorf("the first session after the second took its place: %q, restored %+v", out, res.Restored)
	}
}

// An idle session's sandbox is stopped and the session kept, as a record:
// the next call restores it.
func TestIdleSessionKeepsItsState(t *testing.T) {
	t.Parallel()
	r := newReplica(t, storeConn(t), "unix:/a.sock", options{config: func(c *session.Config) { c.IdleTimeout = 300 * time.Millisecond }})
	id := r.create(t)
	r.run(t, id, "x = 1")
	waitFor(t, "the idle session's sandbox to stop", func() bool { return len(r.m.List("alice")) == 0 })
	res, out := r.run(t, id, "print(x)")
	if out != "1\n" || res.Restored == nil || !strings.Contains(res.Restored.Reason, "idle") {
		t.Errorf("after idling: %q, restored %+v", out, res.Restored)
	}
}

// Reset starts a session afresh, its checkpoint cleared; code may end
// its session, which then is gone.
func TestResetAndEnd(t *testing.T) {
	t.Parallel()
	r := newReplica(t, storeConn(t), "unix:/a.sock", options{})
	id := r.create(t)
	r.run(t, id, "x = 1")
	if _, err := r.m.Reset(t.Context(), "alice", id); err != nil {
		t.Fatal(err)
	}
	res, out := r.run(t, id, "print('x' in globals())")
	if out != "False\n" || res.Restored != nil {
		t.Errorf("after Reset: %q, restored %+v; want a fresh session and nothing to report", out, res.Restored)
	}
	if res, _ := r.run(t, id, "runtime.end_session()"); !res.Ended {
		t.Fatal("the call that ended its session does not say so")
	}
	if _, _, err := r.exec(t.Context(), id, "pass"); !errors.Is(err, session.ErrNotFound) {
		t.Errorf("a call after the session ended: %v, want ErrNotFound", err)
	}
}

// A session the store did not record works without durability, and its
// first result says so, once.
func TestUnrecordedSessionSaysItIsNotDurable(t *testing.T) {
	t.Parallel()
	r := newReplica(t, storeConn(t), "unix:/a.sock", options{})
	r.link.sessionsOnly.Store(true)
	r.link.cut.Store(true)
	id := r.create(t)
	res, out := r.run(t, id, "x = 1\nprint(x)")
	if out != "1\n" || res.Durable || !strings.Contains(res.NotDurable, "the session store did not record it") {
		t.Errorf("first call: %q, durable %v, not durable %q", out, res.Durable, res.NotDurable)
	}
	if res, _ := r.run(t, id, "pass"); res.NotDurable != "" {
		t.Errorf("second call says again: %q", res.NotDurable)
	}
}
