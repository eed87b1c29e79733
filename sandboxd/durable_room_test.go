package sandboxd_test

import (
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	sandboxv1 "github.com/codeexec/codeexec/proto/gen/codeexec/sandbox/v1"
	"github.com/codeexec/codeexec/sandboxd"
)

// states returns the state of each of alice's sessions on c.
func states(t *testing.T, c sandboxv1.SandboxServiceClient) map[string]sandboxv1.SessionState {
	t.Helper()
	resp, err := c.ListSessions(t.Context(), &sandboxv1.ListSessionsRequest{Tenant: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]sandboxv1.SessionState{}
	for _, s := range resp.GetSessions() {
		out[s.GetId()] = s.GetState()
	}
	return out
}

// Sessions that need a sandbox while every sandbox runs a call wait for
// those calls, not for a place to be freed: two of them waiting at once
// both get the sandboxes of the two calls that end, and the sessions
// stopped for them keep their state.
func TestMaxSessionsWaitersGetTheSandboxesOfEndingCalls(t *testing.T) {
	t.Parallel()
	store := sessionStore(t)
	r := newReplica(t, store, "unix:/r1.sock", func(c *sandboxd.Config) { c.MaxSessions = 2; c.PoolSize = 0 })
	busy := []string{create(t, r.c, "alice"), create(t, r.c, "alice")}
	for i, id := range busy {
		run(t, r.c, id, "mine = '"+string(rune('a'+i))+"'")
	}
	// The long calls wait in a tool call until both waiters below wait
	// for a place, and end then: a waiter that is not woken when a call
	// ends gives up after placeWait (2 s). They used to sleep 1 s, which
	// a loaded machine stretched past the waiters' 2 s (ResourceExhausted
	// in a run of this package beside two busy loops; a 2.5 s sleep fails
	// it every time).
	hold := make(chan struct{})
	r.fd.mu.Lock()
	r.fd.hold = hold
	r.fd.mu.Unlock()
	busyState := func(ids []string) func() bool {
		return func() bool {
			st := states(t, r.c)
			return st[ids[0]] == sandboxv1.SessionState_SESSION_STATE_BUSY && st[ids[1]] == sandboxv1.SessionState_SESSION_STATE_BUSY
		}
	}
	var wg sync.WaitGroup
	for _, id := range busy {
		wg.Go(func() {
			res, err := execute(t.Context(), r.c, &sandboxv1.ExecuteRequest{SessionId: id, Tenant: "alice", Servers: []string{"demo"}, Timeout: durationpb.New(time.Minute),
				Code: "await mcp_demo.echo(text='held')"})
			if err != nil || res.result.GetStatus() != sandboxv1.ExecStatus_EXEC_STATUS_OK {
				t.Errorf("the long call: %v, %v", err, res)
			}
		})
	}
	waitUntil(t, "both sessions to run their call", busyState(busy))
	waiters := []string{create(t, r.c, "alice"), create(t, r.c, "alice")}
	for _, id := range waiters {
		wg.Go(func() {
			res, err := execute(t.Context(), r.c, &sandboxv1.ExecuteRequest{SessionId: id, Tenant: "alice", Code: "print('ran')", Timeout: durationpb.New(20 * time.Second)})
			if err != nil || res.stdout != "ran\n" {
				t.Errorf("a session waiting for a sandbox: %v (stdout %q)", err, res.stdout)
			}
		})
	}
	// A waiter is busy from when it asks for a sandbox, and has none to
	// get until a long call ends.
	waitUntil(t, "both waiters to wait for a sandbox", busyState(waiters))
	close(hold)
	wg.Wait()
	for i, id := range busy {
		if got := run(t, r.c, id, "print(mine)"); got.stdout != string(rune('a'+i))+"\n" {
			t.Errorf("session %d after giving its sandbox up: %q (stderr %q)", i, got.stdout, got.stderr)
		}
	}
}

// A session that needs a place stops one sandbox for it, not two: the
// place of the sandbox it stopped is free once that sandbox is reaped.
func TestMaxSessionsStopsOneSandboxPerPlace(t *testing.T) {
	t.Parallel()
	store := sessionStore(t)
	r := newReplica(t, store, "unix:/r1.sock", func(c *sandboxd.Config) { c.MaxSessions = 2; c.PoolSize = 0 })
	for round := range 5 {
		oldest, newer := create(t, r.c, "alice"), create(t, r.c, "alice")
		run(t, r.c, oldest, "x = 1")
		run(t, r.c, newer, "x = 2")
		third := create(t, r.c, "alice")
		run(t, r.c, third, "x = 3")
		// A session whose sandbox was stopped to make room is a record in
		// the store only: this replica lists it no more.
		st := states(t, r.c)
		if s, ok := st[oldest]; ok && s != sandboxv1.SessionState_SESSION_STATE_STOPPED {
			t.Errorf("round %d: the session idle longest is %v, want its sandbox stopped", round, s)
		}
		if s, ok := st[newer]; !ok || s == sandboxv1.SessionState_SESSION_STATE_STOPPED {
			t.Fatalf("round %d: a second sandbox was stopped for one place (the newer session: listed %v, %v)", round, ok, s)
		}
		for _, id := range []string{oldest, newer, third} {
			if _, err := r.c.DestroySession(t.Context(), &sandboxv1.DestroySessionRequest{SessionId: id, Tenant: "alice"}); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// ResetSession starts a durable session afresh: its checkpoint goes too,
// so neither its own replica nor another brings the old state back.
func TestResetClearsTheCheckpoint(t *testing.T) {
	t.Parallel()
	store := sessionStore(t)
	a := newReplica(t, store, "unix:/a.sock", nil)
	b := newReplica(t, store, "unix:/b.sock", nil)
	id := create(t, a.c, "alice")
	run(t, a.c, id, setupState)
	if _, err := a.c.ResetSession(t.Context(), &sandboxv1.ResetSessionRequest{SessionId: id, Tenant: "alice"}); err != nil {
		t.Fatal(err)
	}
	got := run(t, a.c, id, "print('x' in globals())\ny = 7")
	if got.stdout != "False\n" || got.result.GetRestored() != nil {
		t.Fatalf("after a reset: stdout %q, restored %v (stderr %q)", got.stdout, got.result.GetRestored(), got.stderr)
	}
	// Reset where the session is only a record: after its replica stops,
	// another resets it.
	a.stop(t)
	if _, err := b.c.ResetSession(t.Context(), &sandboxv1.ResetSessionRequest{SessionId: id, Tenant: "alice"}); err != nil {
		t.Fatal(err)
	}
	got = run(t, b.c, id, "print('x' in globals(), 'y' in globals())")
	if got.stdout != "False False\n" || got.result.GetRestored() != nil {
		t.Fatalf("after a reset on another replica: stdout %q, restored %v (stderr %q)", got.stdout, got.result.GetRestored(), got.stderr)
	}
}

// A session is ended where it runs: DestroySession on a replica that does
// not hold it answers with where it is live, and leaves it alone; on its
// holder it ends it everywhere.
func TestDestroyIsSentWhereTheSessionIsLive(t *testing.T) {
	t.Parallel()
	store := sessionStore(t)
	a := newReplica(t, store, "unix:/a.sock", nil)
	b := newReplica(t, store, "unix:/b.sock", nil)
	id := create(t, a.c, "alice")
	run(t, a.c, id, "x = 5")
	_, err := b.c.DestroySession(t.Context(), &sandboxv1.DestroySessionRequest{SessionId: id, Tenant: "alice"})
	if status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("DestroySession on another replica: %v, want FAILED_PRECONDITION", err)
	}
	where := elsewhereOf(err)
	if where.GetAddress() != "unix:/a.sock" {
		t.Fatalf("SessionElsewhere = %v, want replica a's address", where)
	}
	if got := run(t, a.c, id, "print(x)"); got.stdout != "5\n" {
		t.Fatalf("the session after a refused destroy: %q (stderr %q)", got.stdout, got.stderr)
	}
	if _, err := a.c.DestroySession(t.Context(), &sandboxv1.DestroySessionRequest{SessionId: id, Tenant: "alice"}); err != nil {
		t.Fatal(err)
	}
	for name, rep := range map[string]*replica{"its replica": a, "another replica": b} {
		if _, err := execute(t.Context(), rep.c, &sandboxv1.ExecuteRequest{SessionId: id, Tenant: "alice", Code: "print(x)"}); status.Code(err) != codes.NotFound {
			t.Errorf("%s after DestroySession: %v, want NOT_FOUND", name, err)
		}
	}
}
