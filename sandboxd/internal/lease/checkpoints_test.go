package lease

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/codeexec/codeexec/sandboxd/internal/channel"
)

func never(int64) bool { return false }

// A checkpoint is saved for the exec it follows, what could not be saved
// is said once per change, and a refusal is said once and kept as why
// the calls since the stored checkpoint would be lost.
func TestSaveSaysWhatItCouldNotSaveOnce(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	_, a := replica(t, store(t), "unix:/a.sock")
	l, err := a.Create(ctx, "t", nil)
	if err != nil {
		t.Fatal(err)
	}
	withFile, _ := json.Marshal(map[string]any{"v": 1, "values": map[string]any{"a": map[string]any{"chunk": "c1"}},
		"unsaved": []channel.LostName{{Name: "f", Type: "open file", Why: "it is open"}}})
	l.BeginCheckpoint(1)
	if ok, err := l.Save(ctx, &channel.Checkpoint{Exec: 1, Last: true, Manifest: withFile}, map[string][]byte{"c1": []byte("one")}, 1<<20, never); !ok || err != nil {
		t.Fatalf("Save: %v, %v", ok, err)
	}
	l.WaitCommits(time.Second) // returns at once: the one on its way is stored
	if got := l.TakeUncheckpointed(); len(got) != 1 || got[0].Name != "f" {
		t.Errorf("TakeUncheckpointed = %v, want f", got)
	}
	if got := l.TakeUncheckpointed(); got != nil {
		t.Errorf("TakeUncheckpointed again = %v, want nothing new", got)
	}
	if st, _, err := l.Checkpoint(ctx); err != nil || st.Seq != 1 {
		t.Errorf("Checkpoint: seq %d, %v; want the one saved, after 1 exec", st.Seq, err)
	}

	l.BeginCheckpoint(2)
	if ok, err := l.Save(ctx, &channel.Checkpoint{Exec: 2, Last: true, Error: "big (2.0 MiB) is over the cap"}, nil, 1<<20, never); ok || err != nil {
		t.Fatalf("Save of a refusal: %v, %v; want it not stored, and no error", ok, err)
	}
	if got := l.TakeNotDurable(); !strings.HasPrefix(got, "big (2.0 MiB) is over the cap; the session goes on") {
		t.Errorf("TakeNotDurable = %q, want the refusal and what it means", got)
	}
	if got := l.TakeNotDurable(); got != "" {
		t.Errorf("TakeNotDurable again = %q, want it said once", got)
	}
	l.Lost("the previous call timed out", true)
	if loss := l.TakeLoss(); loss.Reason != "the previous call timed out" || !loss.Interrupted || loss.RefusedWhy != "big (2.0 MiB) is over the cap" {
		t.Errorf("TakeLoss = %+v, want the reason, interrupted, and why the last checkpoint was refused", loss)
	}
	if loss := l.TakeLoss(); loss.Reason != "" || loss.Interrupted {
		t.Errorf("TakeLoss again = %+v, want it taken", loss)
	}
	if st, chunks, err := l.Checkpoint(ctx); err != nil || st.Seq != 1 || string(chunks["c1"]) != "one" {
		t.Errorf("Checkpoint after the refusal: seq %d, chunks %q, %v; want the one before it", st.Seq, chunks, err)
	}
}

// A checkpoint that never comes (its sandbox hung) holds a wait for it no
// longer than asked; one its sandbox's death cut short holds none.
func TestWaitCommitsIsBounded(t *testing.T) {
	t.Parallel()
	_, a := replica(t, store(t), "unix:/a.sock")
	l, err := a.Create(t.Context(), "t", nil)
	if err != nil {
		t.Fatal(err)
	}
	l.BeginCheckpoint(1)
	began := time.Now()
	l.WaitCommits(100 * time.Millisecond)
	if waited := time.Since(began); waited < 100*time.Millisecond {
		t.Errorf("WaitCommits returned after %s, before the checkpoint or its bound", waited)
	}
	l.BeginCheckpoint(2)
	l.FailCommits()
	l.WaitCommits(time.Hour) // returns at once, or the test times out
}

// Reset's Clear leaves an empty checkpoint that reflects every exec so
// far, and nothing to report; after a takeover it fails as lost, and so
// does a Save.
func TestClearAndTakeover(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	c := store(t)
	ra, a := replica(t, c, "unix:/a.sock")
	_, b := replica(t, c, "unix:/b.sock")
	l, err := a.Create(ctx, "t", nil)
	if err != nil {
		t.Fatal(err)
	}
	l.NoteRefused("too big")
	l.Lost("the previous call timed out", true)
	if err := l.Clear(ctx, 5); err != nil {
		t.Fatal(err)
	}
	if st, chunks, err := l.Checkpoint(ctx); err != nil || st.Seq != 5 || len(st.Manifest) != 0 || len(chunks) != 0 {
		t.Errorf("Checkpoint after Clear: seq %d, manifest %s, %d chunks, %v; want an empty one after 5 execs", st.Seq, st.Manifest, len(chunks), err)
	}
	if got, loss := l.TakeNotDurable(), l.TakeLoss(); got != "" || loss != (Loss{}) {
		t.Errorf("after Clear: not durable %q, loss %+v; want nothing to report", got, loss)
	}
	ra.Stop(ctx)
	if _, err := b.Claim(ctx, "t", l.Handle); err != nil {
		t.Fatal(err)
	}
	if err := l.Clear(ctx, 5); !errors.Is(err, ErrLost) {
		t.Errorf("Clear after a takeover: %v, want ErrLost", err)
	}
	l.BeginCheckpoint(6)
	if ok, err := l.Save(ctx, &channel.Checkpoint{Exec: 6, Last: true, Manifest: manifest()}, nil, 1<<20, never); ok || !errors.Is(err, ErrLost) {
		t.Errorf("Save after a takeover: %v, %v; want ErrLost", ok, err)
	}
}
