package flight

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"
)

type ev struct {
	text     string
	progress bool
}

func newRun() *Run[ev, string] {
	_, cancel := context.WithCancelCause(context.Background())
	return New[ev, string](7, time.Minute, cancel, func(prev, next ev) bool { return prev.progress && next.progress })
}

// collect follows f and returns the texts it sent with the outcome.
func collect(t *testing.T, f *Run[ev, string], yield time.Duration, o Opts[ev]) ([]string, Outcome[string]) {
	t.Helper()
	var got []string
	out, err := f.Follow(t.Context(), func(e ev) error { got = append(got, e.text); return nil }, yield, o)
	if err != nil {
		t.Fatal(err)
	}
	return got, out
}

func TestYieldThenAttachTakesTheRest(t *testing.T) {
	f := newRun()
	f.Add(ev{text: "a"})
	got, out := collect(t, f, 10*time.Millisecond, Opts[ev]{})
	if !out.Running || !slices.Equal(got, []string{"a"}) {
		t.Fatalf("first call: sent %q, outcome %+v; want [a] and running", got, out)
	}
	if ended, _ := f.WaitTurn(t.Context(), time.Hour); ended {
		t.Fatal("WaitTurn says a run that yielded ended")
	}
	f.Add(ev{text: "b"})
	res := "done"
	f.End(&res, nil)
	got, out = collect(t, f, time.Minute, Opts[ev]{})
	if out.Running || out.Res == nil || *out.Res != "done" || !slices.Equal(got, []string{"b"}) {
		t.Fatalf("attach: sent %q, outcome %+v; want [b] and the result", got, out)
	}
	if !f.ResultTaken() {
		t.Error("the result was delivered but not taken")
	}
	// A replay sends everything again and takes nothing.
	got, _ = collect(t, f, time.Minute, Opts[ev]{Replay: true})
	if !slices.Equal(got, []string{"a", "b"}) {
		t.Errorf("replay sent %q, want [a b]", got)
	}
}

func TestProgressUnreadIsReplaced(t *testing.T) {
	f := newRun()
	f.Add(ev{text: "p1", progress: true})
	f.Add(ev{text: "p2", progress: true})
	f.Add(ev{text: "out"})
	f.Add(ev{text: "p3", progress: true})
	f.End(new(string), nil)
	got, _ := collect(t, f, time.Minute, Opts[ev]{})
	if !slices.Equal(got, []string{"p2", "out", "p3"}) {
		t.Errorf("sent %q, want [p2 out p3]", got)
	}
}

func TestNewerFollowerSupersedes(t *testing.T) {
	f := newRun()
	f.Add(ev{text: "x"})
	following := make(chan struct{})
	first := make(chan Outcome[string], 1)
	go func() {
		out, _ := f.Follow(context.Background(), func(ev) error { close(following); return nil }, time.Hour, Opts[ev]{})
		first <- out
	}()
	<-following // the first follower has attached
	second, err := f.Follow(t.Context(), nil, time.Millisecond, Opts[ev]{})
	if err != nil || !second.Running {
		t.Fatalf("the second follower got %+v, %v; want running", second, err)
	}
	select {
	case out := <-first:
		if !out.Running || out.Note == "" {
			t.Fatalf("the first follower got %+v; want running, superseded", out)
		}
	case <-time.After(time.Minute):
		t.Fatal("the first follower was not told that a newer call attached")
	}
}

func TestRunErrorAndSkip(t *testing.T) {
	f := newRun()
	f.Add(ev{text: "question"})
	f.Add(ev{text: "kept"})
	boom := errors.New("boom")
	f.End(nil, boom)
	got, out := collect(t, f, time.Minute, Opts[ev]{Skip: func(e ev, ended bool) bool { return ended && e.text == "question" }})
	if !errors.Is(out.Err, boom) || !slices.Equal(got, []string{"kept"}) {
		t.Fatalf("sent %q, outcome %+v; want [kept] and boom", got, out)
	}
	if ended, err := f.WaitTurn(t.Context(), 0); !ended || err != nil {
		t.Errorf("WaitTurn on an ended run = %v, %v", ended, err)
	}
}

func TestQuestionsAnsweredOnce(t *testing.T) {
	var qs Questions[string, int]
	a, doneA := qs.Ask("a", "first?")
	_, doneB := qs.Ask("b", "second?")
	if got := qs.Waiting(); !slices.Equal(got, []string{"first?", "second?"}) {
		t.Fatalf("waiting %q, want the two in the order asked", got)
	}
	if !qs.Answer("a", 1) || qs.Answer("a", 2) {
		t.Fatal("a question took no answer, or a second one")
	}
	if got := <-a; got != 1 {
		t.Errorf("the answer was %d, want 1", got)
	}
	doneA()
	doneB()
	if qs.Has("b") || qs.Answer("b", 3) || len(qs.Waiting()) != 0 {
		t.Error("a question still waits after its asker gave up")
	}
}
