package runpython

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	sandboxv1 "github.com/codeexec/codeexec/proto/gen/codeexec/sandbox/v1"
)

// Progress grows from one notification to the next: output lines are
// steps, until the code reports its own progress, which is shifted by the
// steps sent; the code's report of its end always goes.
func TestProgressOnlyGrows(t *testing.T) {
	t.Parallel()
	type note struct {
		Progress, Total float64
		Message         string
	}
	var got []note
	e := &events{send: func(p, total float64, msg string) error {
		got = append(got, note{p, total, msg})
		return nil
	}}
	spaced := func() { e.last = time.Time{} } // as if progressInterval had passed
	e.output("first\nsecond\n")
	spaced()
	e.output("third")
	e.output("too soon")
	spaced()
	e.progress(&sandboxv1.Progress{Done: 0, Total: 10, Message: "start"}) // 2 of 12: no growth
	spaced()
	e.progress(&sandboxv1.Progress{Done: 1, Total: 10, Message: "one"})
	e.progress(&sandboxv1.Progress{Done: 2, Total: 10, Message: "too soon"})
	spaced()
	e.output("output once the code reports is not a step")
	e.progress(&sandboxv1.Progress{Done: 10, Total: 10, Message: "end"}) // the end, however soon
	want := []note{{1, 0, "second"}, {2, 0, "third"}, {3, 12, "one"}, {12, 12, "end"}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("notifications (-want +got):\n%s", diff)
	}
	var none *events
	none.output("x") // a call without a progressToken
	none.progress(&sandboxv1.Progress{Done: 1})
}
