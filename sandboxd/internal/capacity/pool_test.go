package capacity_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/codeexec/codeexec/sandboxd/internal/capacity"
	"github.com/codeexec/codeexec/sandboxd/internal/engine"
	"github.com/codeexec/codeexec/sandboxd/internal/engine/enginetest"
	"github.com/codeexec/codeexec/sandboxd/internal/metrics"
)

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// The pool keeps Size sandboxes started and warmed up; a session takes
// one at once, and the pool fills again after the session's first exec.
// Without a ready one, Take starts one.
func TestPoolKeepsSandboxesReady(t *testing.T) {
	t.Parallel()
	p := newPool(t, 1)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { defer close(done); p.Run(ctx) }()
	defer func() { cancel(); <-done }()
	waitFor(t, "the pool to fill", func() bool { return p.Len() == 1 })
	sb, err := p.Take(t.Context(), "t")
	if err != nil {
		t.Fatal(err)
	}
	if !sb.Alive() || sb.SessionStarted() {
		t.Errorf("a pooled sandbox: alive %v, session started %v; want a live one that no session ran in (its warm-up exec does not count)", sb.Alive(), sb.SessionStarted())
	}
	sb.FirstExecDone()
	waitFor(t, "the pool to fill again", func() bool { return p.Len() == 1 })

	empty := newPool(t, 0)
	if sb, err := empty.Take(t.Context(), "t"); err != nil || !sb.Alive() {
		t.Errorf("Take from an empty pool: %v", err)
	}
}

// The reaper stops the sandboxes of sessions idle for longer than Idle,
// keeping a session the store keeps (Evict) and ending any other (Drop);
// a session running a call, used lately or held by a fence is left.
func TestReaperStopsIdleSandboxes(t *testing.T) {
	t.Parallel()
	old := time.Now().Add(-time.Hour)
	for _, durable := range []bool{true, false} {
		idle := &session{id: "idle", u: capacity.Usage{LastUsed: old}}
		running := &session{id: "running", u: capacity.Usage{LastUsed: old, Running: true}}
		held := &session{id: "held", u: capacity.Usage{LastUsed: old, Held: true}}
		recent := &session{id: "recent", u: capacity.Usage{LastUsed: time.Now().Add(time.Hour)}}
		ss := &sessions{all: []*session{idle, running, held, recent}}
		r := &capacity.Reaper{Idle: 400 * time.Millisecond, Durable: durable, Sessions: ss.list, Metrics: metrics.New(nil), Logger: enginetest.Logger(t)}
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan struct{})
		go func() { defer close(done); r.Run(ctx) }()
		waitFor(t, "the reaper to reap", func() bool { e, d := idle.counts(); return e+d > 0 })
		cancel()
		<-done
		if e, d := idle.counts(); durable && (e != 1 || d != 0) || !durable && (e != 0 || d != 1) {
			t.Errorf("durable %v: the idle session was evicted %d and dropped %d times", durable, e, d)
		}
		for _, s := range []*session{running, held, recent} {
			if e, d := s.counts(); e+d != 0 {
				t.Errorf("durable %v: %s was evicted %d and dropped %d times, want left alone", durable, s.id, e, d)
			}
		}
	}
}

// startRecorder is an engine that records each start's mounts, and
// counts the starts for a session (not the pool's, which are warm).
type startRecorder struct {
	engine.Engine
	mu     sync.Mutex
	mounts [][]engine.Mount
	cold   int
}

func (r *startRecorder) Start(ctx context.Context, spec engine.Spec) (engine.Process, error) {
	r.mu.Lock()
	r.mounts = append(r.mounts, spec.Mounts)
	if !spec.Warm {
		r.cold++
	}
	r.mu.Unlock()
	return r.Engine.Start(ctx, spec)
}

func (r *startRecorder) last() ([]engine.Mount, int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.mounts[len(r.mounts)-1], r.cold
}

// A tenant with mounts of its own gets a sandbox started with them after
// the operator's, never a pooled one (which lacks them); another tenant
// takes from the pool, with the operator's alone.
func TestTenantMountsStartTheirOwnSandbox(t *testing.T) {
	t.Parallel()
	dir, argv, env := enginetest.Agent(t)
	all := []engine.Mount{{Host: "/srv/shared", Sandbox: "/mnt/shared"}}
	own := []engine.Mount{{Host: "/srv/alice", Sandbox: "/mnt/alice", Writable: true}}
	rec := &startRecorder{Engine: enginetest.NewDirect(t)}
	p := capacity.NewPool(capacity.PoolConfig{
		Engine: rec, AgentDir: dir, Argv: argv, Env: env, Size: 1, StartTimeout: 30 * time.Second,
		Mounts: all, TenantMounts: map[string][]engine.Mount{"alice": own},
	}, metrics.New(nil), enginetest.Logger(t))
	t.Cleanup(p.Close)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { defer close(done); p.Run(ctx) }()
	defer func() { cancel(); <-done }()
	waitFor(t, "the pool to fill", func() bool { return p.Len() == 1 })
	if _, err := p.Take(t.Context(), "alice"); err != nil {
		t.Fatal(err)
	}
	got, cold := rec.last()
	if want := append(slices.Clone(all), own...); !slices.Equal(got, want) || cold != 1 {
		t.Errorf("alice's sandbox started with mounts %v (%d started for sessions); want %v, started for her", got, cold, want)
	}
	if _, err := p.Take(t.Context(), "bob"); err != nil {
		t.Fatal(err)
	}
	if _, cold := rec.last(); cold != 1 {
		t.Errorf("bob's sandbox was started for him, not taken from the pool")
	}
	waitFor(t, "the pool to fill again", func() bool { return p.Len() == 1 })
	if got, _ := rec.last(); !slices.Equal(got, all) {
		t.Errorf("the pool's sandboxes start with mounts %v; want the operator's alone, %v", got, all)
	}
}
