package route

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	sandboxv1 "github.com/codeexec/codeexec/proto/gen/codeexec/sandbox/v1"
)

func TestSessionsAreSpreadAndPinned(t *testing.T) {
	t.Parallel()
	for _, policy := range []Policy{LeastLoaded, RoundRobin} {
		t.Run(string(policy), func(t *testing.T) {
			t.Parallel()
			fakes := []*fakeSandboxd{startFake(t), startFake(t), startFake(t)}
			b := newBalancer(t, Static([]string{fakes[0].addr, fakes[1].addr, fakes[2].addr}), policy)
			perReplica := map[string]int{}
			var ids []string
			for range 6 {
				id := create(t, b)
				ids = append(ids, id)
				addr, _ := b.ReplicaOf(id)
				perReplica[addr]++
			}
			for _, f := range fakes {
				if perReplica[f.addr] != 2 {
					t.Fatalf("6 sessions over 3 replicas: %v, want 2 each", perReplica)
				}
			}
			for _, id := range ids {
				got, err := run(t.Context(), b, id)
				if err != nil {
					t.Fatal(err)
				}
				if want, _, _ := strings.Cut(id, "#"); got != want {
					t.Fatalf("session %s ran on %s", id, got)
				}
			}
			list, err := b.ListSessions(t.Context(), &sandboxv1.ListSessionsRequest{})
			if err != nil || len(list.GetSessions()) != 6 {
				t.Fatalf("ListSessions = %d sessions, %v; want 6", len(list.GetSessions()), err)
			}
		})
	}
}

func TestLeastLoadedFillsTheEmptiestReplica(t *testing.T) {
	t.Parallel()
	a, c := startFake(t), startFake(t)
	b := newBalancer(t, Static([]string{a.addr, c.addr}), LeastLoaded)
	first := []string{create(t, b), create(t, b), create(t, b), create(t, b)}
	// Destroy both sessions on one replica: the next two go there.
	emptied, _ := b.ReplicaOf(first[0])
	for _, id := range first {
		if addr, _ := b.ReplicaOf(id); addr == emptied {
			if _, err := b.DestroySession(t.Context(), &sandboxv1.DestroySessionRequest{SessionId: id}); err != nil {
				t.Fatal(err)
			}
		}
	}
	for range 2 {
		if addr, _ := b.ReplicaOf(create(t, b)); addr != emptied {
			t.Fatalf("new session went to %s, want the emptier %s (replicas %+v)", addr, emptied, b.Replicas())
		}
	}
}

func TestDeadReplicaLosesItsSessionsOnly(t *testing.T) {
	t.Parallel()
	fakes := []*fakeSandboxd{startFake(t), startFake(t), startFake(t)}
	b := newBalancer(t, Static([]string{fakes[0].addr, fakes[1].addr, fakes[2].addr}), LeastLoaded)
	ids := []string{create(t, b), create(t, b), create(t, b)}
	dead := fakes[1]
	dead.srv.Stop()
	for _, id := range ids {
		_, err := run(t.Context(), b, id)
		onDead := strings.HasPrefix(id, dead.addr+"#")
		switch {
		case onDead && (status.Code(err) != codes.NotFound || !strings.Contains(err.Error(), "session lost: its sandbox replica "+dead.addr+" went away")):
			t.Fatalf("session on the dead replica: err = %v, want NotFound saying the session was lost", err)
		case !onDead && err != nil:
			t.Fatalf("session on a live replica failed: %v", err)
		}
	}
	// New sessions (the gateway's replacement) land on healthy replicas.
	for range 4 {
		id := create(t, b)
		if strings.HasPrefix(id, dead.addr) {
			t.Fatalf("a new session went to the dead replica")
		}
		if _, err := run(t.Context(), b, id); err != nil {
			t.Fatal(err)
		}
	}
	for _, r := range b.Replicas() {
		if r.Addr == dead.addr && r.Healthy {
			t.Fatalf("the dead replica is still marked healthy: %+v", b.Replicas())
		}
	}
}

// Durable sessions: when a session's replica dies, the very next call goes
// to a replica that takes it over, and later calls stay there.
func TestADeadReplicasSessionsMoveToOneThatTakesThem(t *testing.T) {
	t.Parallel()
	fakes := []*fakeSandboxd{startFake(t), startFake(t)}
	for _, f := range fakes {
		f.adopt = true
	}
	b := newBalancer(t, Static([]string{fakes[0].addr, fakes[1].addr}), LeastLoaded)
	var id string
	for id == "" || !strings.HasPrefix(id, fakes[0].addr+"#") {
		id = create(t, b)
	}
	fakes[0].srv.Stop()
	for i := range 3 {
		got, err := run(t.Context(), b, id)
		if err != nil || got != fakes[1].addr {
			t.Fatalf("call %d after its replica died: %q, %v; want it answered by %s", i, got, err, fakes[1].addr)
		}
	}
	for _, r := range b.Replicas() {
		if r.Addr == fakes[1].addr && r.Sessions < 1 {
			t.Errorf("the session is not counted on the replica that took it: %+v", b.Replicas())
		}
	}
}

// When the replica asked to take a dead replica's session is gone too, the
// next one is asked.
func TestASessionMovesPastSeveralDeadReplicas(t *testing.T) {
	t.Parallel()
	fakes := []*fakeSandboxd{startFake(t), startFake(t), startFake(t)}
	for _, f := range fakes {
		f.adopt = true
	}
	b := newBalancer(t, Static([]string{fakes[0].addr, fakes[1].addr, fakes[2].addr}), LeastLoaded)
	var id string
	for id == "" || !strings.HasPrefix(id, fakes[0].addr+"#") {
		id = create(t, b)
	}
	fakes[0].srv.Stop()
	fakes[1].srv.Stop()
	got, err := run(t.Context(), b, id)
	if err != nil || got != fakes[2].addr {
		t.Fatalf("after two replicas died: %q, %v; want it answered by %s", got, err, fakes[2].addr)
	}
}

func TestHealthCheckNoticesADeadReplica(t *testing.T) {
	t.Parallel()
	a, c := startFake(t), startFake(t)
	b := newBalancer(t, Static([]string{a.addr, c.addr}), LeastLoaded)
	idA, idC := create(t, b), create(t, b)
	if strings.HasPrefix(idA, c.addr) {
		idA, idC = idC, idA
	}
	a.srv.Stop()
	if err := b.refresh(t.Context()); err != nil {
		t.Fatal(err)
	}
	if _, err := b.GetSession(t.Context(), &sandboxv1.GetSessionRequest{SessionId: idA}); status.Code(err) != codes.NotFound || !strings.Contains(err.Error(), "stopped answering health checks") {
		t.Fatalf("after a failed health check: %v", err)
	}
	if _, err := run(t.Context(), b, idC); err != nil {
		t.Fatalf("the healthy replica's session: %v", err)
	}
}

func TestDNSReresolution(t *testing.T) {
	t.Parallel()
	a, c := startFake(t), startFake(t)
	// The loopback fakes differ by port, so the resolver returns whole
	// addresses; DNS itself is tested in TestDNSResolver.
	var mu sync.Mutex
	current := []string{a.addr, c.addr}
	resolve := func(context.Context) ([]string, error) {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), current...), nil
	}
	b := newBalancer(t, resolve, RoundRobin)
	ids := []string{create(t, b), create(t, b)}
	mu.Lock()
	current = []string{c.addr} // a scaled away
	mu.Unlock()
	if err := b.refresh(t.Context()); err != nil {
		t.Fatal(err)
	}
	for _, id := range ids {
		_, err := run(t.Context(), b, id)
		if strings.HasPrefix(id, a.addr) {
			if status.Code(err) != codes.NotFound || !strings.Contains(err.Error(), "no longer resolves") {
				t.Fatalf("session on the removed replica: %v", err)
			}
		} else if err != nil {
			t.Fatal(err)
		}
	}
	if got := b.Replicas(); len(got) != 1 || got[0].Addr != c.addr {
		t.Fatalf("replicas after re-resolution: %+v", got)
	}
}

func TestNewFailsWithoutReplicas(t *testing.T) {
	t.Parallel()
	_, err := NewBalancer(t.Context(), Config{Resolve: Static(nil), Dial: dialTest}, slog.New(slog.DiscardHandler))
	if err == nil || !strings.Contains(err.Error(), "no addresses") {
		t.Fatalf("New with no replicas: %v", err)
	}
	if _, err := NewBalancer(t.Context(), Config{Resolve: Static([]string{"a:1"}), Dial: dialTest, Policy: "random"}, slog.New(slog.DiscardHandler)); err == nil {
		t.Fatal("an unknown policy was accepted")
	}
}

// A replica dropped by re-resolution while a call on it waits: closing its
// connection fails the call with Canceled, which must read as a lost session.
func TestCallInFlightWhenItsReplicaIsDropped(t *testing.T) {
	t.Parallel()
	a, c := startFake(t), startFake(t)
	a.block, c.block = make(chan struct{}), make(chan struct{})
	defer close(a.block)
	defer close(c.block)
	var mu sync.Mutex
	current := []string{a.addr, c.addr}
	resolve := func(context.Context) ([]string, error) {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), current...), nil
	}
	b := newBalancer(t, resolve, RoundRobin)
	id := create(t, b)
	victim, _ := b.ReplicaOf(id)
	errc := make(chan error, 1)
	go func() { _, err := run(t.Context(), b, id); errc <- err }()
	time.Sleep(200 * time.Millisecond) // the call is waiting in the fake
	mu.Lock()
	if victim == a.addr {
		current = []string{c.addr}
	} else {
		current = []string{a.addr}
	}
	mu.Unlock()
	if err := b.refresh(t.Context()); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-errc:
		if status.Code(err) != codes.NotFound || !strings.Contains(err.Error(), "session lost") {
			t.Fatalf("the call in flight got %v, want NotFound saying the session was lost", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the call in flight did not end when its replica was dropped")
	}
}
