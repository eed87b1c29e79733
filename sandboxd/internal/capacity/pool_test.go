package capacity_test

import (
	"context"
	"testing"
	"time"

	"github.com/codeexec/codeexec/sandboxd/internal/capacity"
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
	sb, err := p.Take(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if !sb.Alive() || sb.SessionStarted() {
		t.Errorf("a pooled sandbox: alive %v, session started %v; want a live one that no session ran in (its warm-up exec does not count)", sb.Alive(), sb.SessionStarted())
	}
	sb.FirstExecDone()
	waitFor(t, "the pool to fill again", func() bool { return p.Len() == 1 })

	empty := newPool(t, 0)
	if sb, err := empty.Take(t.Context()); err != nil || !sb.Alive() {
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
