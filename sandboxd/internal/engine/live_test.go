package engine

import (
	"testing"
	"time"
)

type fakeProc struct{ done chan struct{} }

func (p *fakeProc) Done() <-chan struct{} { return p.done }

func TestLive(t *testing.T) {
	t.Parallel()
	var l Live[*fakeProc]
	running, exits := &fakeProc{make(chan struct{})}, &fakeProc{make(chan struct{})}
	if !l.Add(running) || !l.Add(exits) {
		t.Fatal("Add before Close refused")
	}
	close(exits.done)
	deadline := time.Now().Add(10 * time.Second)
	for {
		l.mu.Lock()
		n := len(l.procs)
		l.mu.Unlock()
		if n == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d sandboxes in the set after one exited, want 1", n)
		}
		time.Sleep(time.Millisecond)
	}
	if l.Closed() {
		t.Error("Closed before Close")
	}
	live, first := l.Close()
	if !first || len(live) != 1 || live[0] != running {
		t.Errorf("Close = %v, %v; want the running sandbox, true", live, first)
	}
	if !l.Closed() {
		t.Error("not Closed after Close")
	}
	if l.Add(&fakeProc{make(chan struct{})}) {
		t.Error("Add after Close accepted")
	}
	if live, first := l.Close(); first || live != nil {
		t.Errorf("second Close = %v, %v; want nil, false", live, first)
	}
}
