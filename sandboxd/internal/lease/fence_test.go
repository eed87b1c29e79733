package lease

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	sessionstorev1 "github.com/codeexec/codeexec/proto/gen/codeexec/sessionstore/v1"
)

// fast is a lease timing that fences in a fifth of a second, so that the
// fence's cases take that long instead of the default's seconds.
var fast = Timing{Beat: 20 * time.Millisecond, Lease: 400 * time.Millisecond, FenceAfter: 200 * time.Millisecond, Skew: 50 * time.Millisecond, BeatTimeout: 100 * time.Millisecond}

// cuttable is a connection to the session store that can be cut: while it
// is, every call fails as a call to a store that is down does.
type cuttable struct {
	grpc.ClientConnInterface
	cut atomic.Bool
}

func (c *cuttable) Invoke(ctx context.Context, method string, args, reply any, opts ...grpc.CallOption) error {
	if c.cut.Load() {
		return status.Error(codes.Unavailable, "the store did not answer (cut by the test)")
	}
	return c.ClientConnInterface.Invoke(ctx, method, args, reply, opts...)
}

func (c *cuttable) NewStream(ctx context.Context, desc *grpc.StreamDesc, method string, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	if c.cut.Load() {
		return nil, status.Error(codes.Unavailable, "the store did not answer (cut by the test)")
	}
	return c.ClientConnInterface.NewStream(ctx, desc, method, opts...)
}

// pausable is a sandbox as a fence sees it.
type pausable struct {
	mu             sync.Mutex
	paused, dead   bool
	pauseErr       error
	pauses, resume int
}

func (p *pausable) Pause() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.pauseErr != nil {
		return p.pauseErr
	}
	p.paused, p.pauses = true, p.pauses+1
	return nil
}

func (p *pausable) Resume() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.paused, p.resume = false, p.resume+1
	return nil
}

func (p *pausable) Alive() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return !p.dead
}

func (p *pausable) isPaused() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.paused
}

// owner is a session as its lease's fence sees it.
type owner struct {
	sb      *pausable
	mu      sync.Mutex
	dropped []string
}

func (o *owner) Sandbox() Pausable { return o.sb }

func (o *owner) Drop(why string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.dropped = append(o.dropped, why)
	o.sb.mu.Lock()
	o.sb.dead = true
	o.sb.mu.Unlock()
}

func (o *owner) StopSandbox() {}

func (o *owner) drops() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]string(nil), o.dropped...)
}

// fenced is a replica on a store that can be cut, with the fast timing,
// a fence over the leases it makes, and one session it holds.
type fenced struct {
	link    *cuttable
	replica *Replica
	store   *Store
	lease   *Lease
	owner   *owner
}

func newFenced(t *testing.T, conn grpc.ClientConnInterface) *fenced {
	t.Helper()
	f := &fenced{link: &cuttable{ClientConnInterface: conn}, owner: &owner{sb: &pausable{}}}
	c := sessionstorev1.NewSessionStoreServiceClient(f.link)
	f.replica = NewReplica(c, "unix:/a.sock", slog.New(slog.DiscardHandler))
	f.replica.Timing = fast
	f.store = NewStore(c, f.replica, time.Hour)
	fence := NewFence(f.replica, func() []*Lease { return []*Lease{f.lease} }, slog.New(slog.DiscardHandler))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	t.Cleanup(func() { cancel(); <-done; f.replica.Stop(context.Background()) })
	go func() { defer close(done); fence.Run(ctx) }()
	fence.Start(ctx)
	if err := f.replica.Ready(t.Context()); err != nil {
		t.Fatal(err)
	}
	var err error
	if f.lease, err = f.store.Create(t.Context(), "t", nil); err != nil {
		t.Fatal(err)
	}
	f.lease.SetOwner(f.owner)
	return f
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// A replica cut off from the store holds its sessions: their sandboxes
// are paused and their calls wait, then fail with ErrPaused saying why.
// When the store answers again and nobody took the session meanwhile, the
// session resumes where it was, its record rewritten unchanged.
func TestFenceHoldsAndResumes(t *testing.T) {
	t.Parallel()
	a := newFenced(t, storeConn(t))
	a.link.cut.Store(true)
	waitFor(t, "the fence to pause the session's sandbox", func() bool { return a.lease.Held() && a.owner.sb.isPaused() })
	err := a.lease.WaitSettled(t.Context(), time.Now().Add(50*time.Millisecond))
	if !errors.Is(err, ErrPaused) || !strings.Contains(err.Error(), "has not reached the session store for") {
		t.Fatalf("a call for the held session: %v, want ErrPaused saying why", err)
	}
	if _, err := a.store.Create(t.Context(), "t", nil); !errors.Is(err, ErrFenced) {
		t.Errorf("a session made while fenced: %v, want ErrFenced", err)
	}
	a.link.cut.Store(false)
	if err := a.lease.WaitSettled(t.Context(), time.Now().Add(20*time.Second)); err != nil {
		t.Fatalf("once the store is back: %v, want the session settled", err)
	}
	if a.owner.sb.isPaused() || a.owner.sb.resume != 1 || len(a.owner.drops()) != 0 {
		t.Errorf("after settling: paused %v, resumed %d times, dropped %q; want it resumed once and kept", a.owner.sb.isPaused(), a.owner.sb.resume, a.owner.drops())
	}
	if err := a.store.Commit(t.Context(), a.lease, manifest("c1"), map[string][]byte{"c1": []byte("x")}, 1, 0); err != nil {
		t.Errorf("a commit after settling: %v, want the session still this replica's", err)
	}
}

// A session that another replica took over while this one was cut off
// lives on there: once the store answers this replica again, its fence
// drops the session here, telling a call in flight why, and its commits
// fail as lost.
func TestFenceDropsASessionTakenOver(t *testing.T) {
	t.Parallel()
	conn := storeConn(t)
	a := newFenced(t, conn)
	_, b := replica(t, sessionstorev1.NewSessionStoreServiceClient(conn), "unix:/b.sock")
	a.link.cut.Store(true)
	waitFor(t, "the fence to pause the session's sandbox", a.owner.sb.isPaused)
	var taken *Lease
	waitFor(t, "b to take the session once a's lease lapsed", func() bool {
		var err error
		taken, err = b.Claim(t.Context(), "t", a.lease.Handle)
		return err == nil
	})
	if taken.Before.Owner != a.replica.ID {
		t.Errorf("b took the session from %q, want a", taken.Before.Owner)
	}
	a.link.cut.Store(false)
	waitFor(t, "a to drop the session", func() bool { return len(a.owner.drops()) > 0 })
	if got := a.owner.drops(); len(got) != 1 || !strings.Contains(got[0], "taken over by another sandbox replica") {
		t.Errorf("a dropped the session saying %q, want once, that it was taken over", got)
	}
	if a.lease.Held() {
		t.Error("the dropped session is still held: its calls would wait")
	}
	if err := a.store.Commit(t.Context(), a.lease, manifest("c1"), map[string][]byte{"c1": []byte("x")}, 1, 0); !errors.Is(err, ErrLost) {
		t.Errorf("a's commit after the takeover: %v, want ErrLost", err)
	}
}

// A sandbox that cannot be paused is stopped when its replica fences: its
// session is dropped here, to be taken from the store again.
func TestFenceDropsASandboxItCannotPause(t *testing.T) {
	t.Parallel()
	a := newFenced(t, storeConn(t))
	a.owner.sb.pauseErr = errors.New("this engine has no freezer")
	a.link.cut.Store(true)
	waitFor(t, "a to drop the session", func() bool { return len(a.owner.drops()) > 0 })
	if got := a.owner.drops(); len(got) != 1 || got[0] != "" {
		t.Errorf("dropped %q, want once, with no reason for a call (it has none)", got)
	}
}
