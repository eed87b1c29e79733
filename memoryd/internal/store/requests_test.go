package store

import (
	"errors"
	"testing"
	"time"
)

// A write sent twice with one request ID is applied once, and the retry
// answers as the first attempt did: a compare-and-swap succeeds instead of
// failing on its own first write, and a delete still says it deleted.
func TestRetriedWritesApplyOnce(t *testing.T) {
	t.Parallel()
	eachStore(t, testRetriedWritesApplyOnce)
}

func testRetriedWritesApplyOnce(t *testing.T, open opener) {
	b := open(t, nil)
	ctx := t.Context()
	id := NewRequestID(time.Now())
	w := Write{Value: []byte("1"), CheckRevision: true, Revision: 0, RequestID: id}
	first, err := b.Put(ctx, "t", KindMemory, "n", w)
	if err != nil {
		t.Fatal(err)
	}
	again, err := b.Put(ctx, "t", KindMemory, "n", w)
	if err != nil {
		t.Fatalf("retried compare-and-swap: %v", err)
	}
	if again.Revision != first.Revision || string(again.Value) != "1" {
		t.Errorf("retry answered %+v, want %+v", again, first)
	}
	cur, _ := b.Get(ctx, "t", KindMemory, "n")
	if cur.Revision != 1 {
		t.Errorf("revision after a retried write: %d, want 1", cur.Revision)
	}
	// Another write since: the retry still succeeds, with the first
	// attempt's revision, and does not undo the later write.
	if _, err := b.Put(ctx, "t", KindMemory, "n", Write{Value: []byte("5")}); err != nil {
		t.Fatal(err)
	}
	if late, err := b.Put(ctx, "t", KindMemory, "n", w); err != nil || late.Revision != 1 {
		t.Errorf("late retry: %+v, %v", late, err)
	}
	if got, _ := b.Get(ctx, "t", KindMemory, "n"); string(got.Value) != "5" {
		t.Errorf("a late retry overwrote a later write: %s", got.Value)
	}
	// The same ID for another key is refused.
	if _, err := b.Put(ctx, "t", KindMemory, "other", w); !errors.Is(err, ErrInvalid) {
		t.Errorf("request ID reused for another key: %v", err)
	}
	del := NewRequestID(time.Now())
	for i := range 2 {
		deleted, err := b.Delete(ctx, "t", KindMemory, "n", del)
		if err != nil || !deleted {
			t.Errorf("delete attempt %d: %v, %v; want true both times", i, deleted, err)
		}
	}
	if _, err := b.Put(ctx, "t", KindMemory, "n", Write{Value: []byte("1"), RequestID: []byte("short")}); !errors.Is(err, ErrInvalid) {
		t.Errorf("a 5-byte request ID: %v", err)
	}
}
