package tick

import (
	"testing"
	"time"
)

func TestEvery(t *testing.T) {
	t.Parallel()
	stop := make(chan struct{})
	calls := 0
	done := make(chan struct{})
	go func() {
		defer close(done)
		Every(stop, time.Millisecond, func() {
			calls++
			if calls == 3 {
				close(stop)
			}
		})
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Every did not return after stop was closed")
	}
	// A tick due as stop closes may still win the select, as it would in
	// a bare ticker loop, so a call or two more is fine.
	if calls < 3 {
		t.Errorf("fn ran %d times before Every returned, want at least 3", calls)
	}
}

func TestEveryStopsBeforeTheFirstTick(t *testing.T) {
	t.Parallel()
	stop := make(chan struct{})
	close(stop)
	Every(stop, time.Hour, func() { t.Error("fn ran after stop was closed") })
}
