package sandboxd_test

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	sandboxv1 "github.com/codeexec/codeexec/proto/gen/codeexec/sandbox/v1"
	sessionstorev1 "github.com/codeexec/codeexec/proto/gen/codeexec/sessionstore/v1"
)

// cuttable is a connection to the session store that can be cut: while it
// is, every call fails as a call to a store that is down does.
type cuttable struct {
	grpc.ClientConnInterface
	cut atomic.Bool
}

func (c *cuttable) Invoke(ctx context.Context, method string, args, reply any, opts ...grpc.CallOption) error {
	if c.cut.Load() {
		return status.Error(codes.Unavailable, "the memory database did not answer (cut by the test)")
	}
	return c.ClientConnInterface.Invoke(ctx, method, args, reply, opts...)
}

func (c *cuttable) NewStream(ctx context.Context, desc *grpc.StreamDesc, method string, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	if c.cut.Load() {
		return nil, status.Error(codes.Unavailable, "the memory database did not answer (cut by the test)")
	}
	return c.ClientConnInterface.NewStream(ctx, desc, method, opts...)
}

// newCuttableReplica is newReplica whose session store can be cut.
func newCuttableReplica(t *testing.T, store *grpc.ClientConn, addr string) (*replica, *cuttable) {
	t.Helper()
	c := &cuttable{ClientConnInterface: store}
	r := newReplicaWrapped(t, store, addr, nil, func(sessionstorev1.SessionStoreServiceClient) sessionstorev1.SessionStoreServiceClient {
		return sessionstorev1.NewSessionStoreServiceClient(c)
	})
	return r, c
}

// waitPaused calls the session, idle on c, with a short timeout until the
// replica answers that it is paused (the replica has fenced itself), and
// returns that answer's message.
func waitPaused(t *testing.T, c sandboxv1.SandboxServiceClient, id string) string {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		_, err := execute(ctx, c, &sandboxv1.ExecuteRequest{SessionId: id, Tenant: "alice", Code: "pass", Timeout: durationpb.New(time.Second)})
		cancel()
		if status.Code(err) == codes.Aborted {
			return status.Convert(err).Message()
		}
		if err != nil {
			t.Fatalf("a call while the store is cut: %v, want it to run or be ABORTED", err)
		}
		if time.Now().After(deadline) {
			t.Fatal("the replica did not fence itself within a minute of losing the store")
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// A replica that loses the session store pauses its sandboxes instead of
// stopping them. A store that nobody reaches (a database restart) lets no
// replica take the session, so when it is back the session runs on where
// it was: the call in flight finishes with its result, the state is the
// same, nothing is restored. A call while paused waits for its timeout
// and says what happened and what to do.
func TestFencedReplicaPausesAndResumes(t *testing.T) {
	t.Parallel()
	store := sessionStore(t)
	a, link := newCuttableReplica(t, store, "unix:/a.sock")
	id := create(t, a.c, "alice")
	run(t, a.c, id, setupState)

	// A call that sleeps in short steps and reports its longest step: a
	// sandbox paused during one of them shows a step as long as the pause.
	type outcome struct {
		r   *execResult
		err error
	}
	inFlight := make(chan outcome, 1)
	go func() {
		r, err := execute(t.Context(), a.c, &sandboxv1.ExecuteRequest{SessionId: id, Tenant: "alice", Timeout: durationpb.New(2 * time.Minute), Code: `
import time
longest, last = 0.0, time.monotonic()
for _ in range(300):
    time.sleep(0.05)
    now = time.monotonic()
    longest, last = max(longest, now - last), now
x += 1
print("done", x, round(longest))`})
		inFlight <- outcome{r, err}
	}()
	// The store goes away while the call runs its 15 s: after 4 s without
	// a heartbeat the replica fences itself, pausing the sandbox, and
	// 10 s on the store is back.
	time.Sleep(500 * time.Millisecond)
	link.cut.Store(true)
	// A session made while the store is down is not in it: no other
	// replica can take it, so it runs on through the fence.
	other := create(t, a.c, "alice")
	time.Sleep(6 * time.Second)
	if r := run(t, a.c, other, "y = 5\nprint(y)"); r.stdout != "5\n" {
		t.Errorf("a session the store never recorded, while fenced: %q (stderr %q)", r.stdout, r.stderr)
	}
	time.Sleep(4 * time.Second)
	link.cut.Store(false)

	got := <-inFlight
	if got.err != nil {
		t.Fatalf("the call in flight across the store's outage: %v", got.err)
	}
	res := got.r.result
	if res.GetStatus() != sandboxv1.ExecStatus_EXEC_STATUS_OK || res.GetRestored() != nil {
		t.Fatalf("the call in flight: status %v, restored %v, error %q; want it to finish in its sandbox", res.GetStatus(), res.GetRestored(), res.GetError())
	}
	var x, longest int
	if _, err := fmt.Sscanf(got.r.stdout, "done %d %d", &x, &longest); err != nil || x != 42 {
		t.Fatalf("the call in flight printed %q, want done 42 and its longest step", got.r.stdout)
	}
	// Its sandbox was stopped from the fence to the store's return, 5 s
	// or more; a 50 ms sleep that ran on would not take two seconds.
	if longest < 2 {
		t.Errorf("the longest 50 ms step of the call in flight took %d s: its sandbox was not paused", longest)
	}
	if r := run(t, a.c, other, "print(y)"); r.stdout != "5\n" {
		t.Errorf("the session the store never recorded, after the outage: %q (stderr %q)", r.stdout, r.stderr)
	}
	after := run(t, a.c, id, checkState)
	if after.stdout != "42 43 42 Box [42]\n" || after.result.GetRestored() != nil {
		t.Errorf("after the outage: %q, restored %v; want the state as the call left it, not restored", after.stdout, after.result.GetRestored())
	}
}

// A replica that lost the store for longer than its lease loses its
// sessions to a replica that still reaches it: that one restores the
// session from its checkpoint, and once the first replica reaches the
// store again it stops its paused sandbox rather than run it beside the
// new one, and sends calls for the session there.
func TestPausedSessionTakenOverIsStopped(t *testing.T) {
	t.Parallel()
	store := sessionStore(t)
	a, link := newCuttableReplica(t, store, "unix:/a.sock")
	b := newReplica(t, store, "unix:/b.sock", nil)
	id := create(t, a.c, "alice")
	run(t, a.c, id, setupState)
	// A call waits for the checkpoint of the one before: the state is in
	// the store before it is cut.
	run(t, a.c, id, "pass")

	link.cut.Store(true)
	msg := waitPaused(t, a.c, id)
	for _, want := range []string{"has not reached the session store for", "paused with its state kept", "retry"} {
		if !strings.Contains(msg, want) {
			t.Errorf("a call to a paused session: %q, want it to say %q", msg, want)
		}
	}
	// b takes the session once a's lease has lapsed. Until then it says
	// where the session is (FAILED_PRECONDITION); or ABORTED, retry, while
	// it has fenced itself: the store took none of its heartbeats for 4 s,
	// which on a loaded machine a few slow writes of the store's file
	// make (a run of this package failed so; heartbeats slowed by 2.5 s
	// fail it every time). That says nothing of the takeover, which b
	// still has to make within the minute.
	deadline := time.Now().Add(time.Minute)
	var got *execResult
	for {
		r, err := execute(t.Context(), b.c, &sandboxv1.ExecuteRequest{SessionId: id, Tenant: "alice", Code: checkState, Timeout: durationpb.New(20 * time.Second)})
		if err == nil {
			got = r
			break
		}
		if code := status.Code(err); code != codes.FailedPrecondition && code != codes.Aborted || time.Now().After(deadline) {
			t.Fatalf("replica b while a is cut off: %v, want it to take the session once a's lease lapsed", err)
		}
		time.Sleep(500 * time.Millisecond)
	}
	if got.stdout != wantState {
		t.Fatalf("on replica b: %q (stderr %q)", got.stdout, got.stderr)
	}
	wantRestored(t, got.result, "", false)

	link.cut.Store(false)
	deadline = time.Now().Add(time.Minute)
	for {
		_, err := execute(t.Context(), a.c, &sandboxv1.ExecuteRequest{SessionId: id, Tenant: "alice", Code: "print(x)", Timeout: durationpb.New(5 * time.Second)})
		if where := elsewhereOf(err); where.GetAddress() == "unix:/b.sock" {
			break
		}
		if err == nil || time.Now().After(deadline) {
			t.Fatalf("replica a once it reaches the store again: %v, want it to send the call to b", err)
		}
		time.Sleep(500 * time.Millisecond)
	}
	list, err := a.c.ListSessions(t.Context(), &sandboxv1.ListSessionsRequest{Tenant: "alice"})
	if err != nil || len(list.GetSessions()) != 0 {
		t.Errorf("replica a still lists %v (%v) after the session moved to b", list.GetSessions(), err)
	}
	if r := run(t, b.c, id, "x += 1\nprint(x)"); r.stdout != "42\n" {
		t.Errorf("the session on b after a came back: %q", r.stdout)
	}
}

// A call whose timeout runs out while its sandbox is paused ends as a
// timeout that says so; the session comes back from its checkpoint once
// the store does.
func TestCallTimesOutWhilePaused(t *testing.T) {
	t.Parallel()
	store := sessionStore(t)
	a, link := newCuttableReplica(t, store, "unix:/a.sock")
	id := create(t, a.c, "alice")
	run(t, a.c, id, setupState)
	run(t, a.c, id, "pass") // the setup's checkpoint is stored

	done := make(chan *execResult, 1)
	go func() {
		r, err := execute(t.Context(), a.c, &sandboxv1.ExecuteRequest{SessionId: id, Tenant: "alice", Code: "import time\ntime.sleep(60)", Timeout: durationpb.New(15 * time.Second)})
		if err != nil {
			t.Errorf("the call that runs out of time while paused: %v", err)
		}
		done <- r
	}()
	time.Sleep(500 * time.Millisecond)
	link.cut.Store(true)
	r := <-done
	if r == nil {
		return
	}
	res := r.result
	if res.GetStatus() != sandboxv1.ExecStatus_EXEC_STATUS_TIMEOUT || !strings.Contains(res.GetError(), "paused since this sandbox replica lost the session store") {
		t.Fatalf("status %v, error %q; want a timeout that says the sandbox was paused", res.GetStatus(), res.GetError())
	}
	// The session has no sandbox now, and the store is still cut: a call
	// starts none (another replica may be taking the session over), it
	// waits and says so.
	_, err := execute(t.Context(), a.c, &sandboxv1.ExecuteRequest{SessionId: id, Tenant: "alice", Code: "print('ran while fenced')", Timeout: durationpb.New(2 * time.Second)})
	if status.Code(err) != codes.Aborted || !strings.Contains(status.Convert(err).Message(), "retry") {
		t.Fatalf("a call while the store is still cut: %v, want ABORTED saying to retry", err)
	}
	link.cut.Store(false)
	deadline := time.Now().Add(time.Minute)
	for {
		got, err := execute(t.Context(), a.c, &sandboxv1.ExecuteRequest{SessionId: id, Tenant: "alice", Code: checkState, Timeout: durationpb.New(20 * time.Second)})
		if err == nil {
			if got.stdout != wantState {
				t.Fatalf("after the store came back: %q (stderr %q)", got.stdout, got.stderr)
			}
			wantRestored(t, got.result, "timed out", true)
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the session after the store came back: %v", err)
		}
		time.Sleep(500 * time.Millisecond)
	}
}
