package mcpfix

import (
	"bytes"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestPendingHoldsAtMostItsLimit: past its limit a request is not noted,
// and its answer passes as it is; an answer forgets its request, which
// makes room again.
func TestPendingHoldsAtMostItsLimit(t *testing.T) {
	t.Parallel()
	p := newPending[string](2)
	p.Add("1", "a")
	p.Add("2", "b")
	p.Add("3", "c")
	if d := cmp.Diff(map[string]string{"1": "a", "2": "b"}, p.All()); d != "" {
		t.Errorf("noted (-want +got):\n%s", d)
	}
	var buf bytes.Buffer
	w := editAnswers(&buf, p, func(_ []byte, v string) ([]byte, bool) {
		return []byte(`{"noted":"` + v + `"}`), true
	})
	for _, msg := range []string{`{"id":3,"result":{}}`, `{"id":1,"result":{}}`, `{"id":1,"result":{}}`} {
		if n, err := w.Write([]byte(msg + "\n")); err != nil || n != len(msg)+1 {
			t.Fatalf("Write(%s) = %d, %v", msg, n, err)
		}
	}
	p.Add("3", "c")
	if d := cmp.Diff(map[string]string{"2": "b", "3": "c"}, p.All()); d != "" {
		t.Errorf("noted after an answer (-want +got):\n%s", d)
	}
	want := `{"id":3,"result":{}}` + "\n" + `{"noted":"a"}` + "\n" + `{"id":1,"result":{}}` + "\n"
	if d := cmp.Diff(want, buf.String()); d != "" {
		t.Errorf("written (-want +got):\n%s", d)
	}
}

// TestAnswersPassesWhatItDoesNotEdit: a Write of anything but one whole
// line, a request, and an answer edit declines pass as they are; an
// answer edit drops writes nothing; a failed write of an edited answer
// is the Write's error.
func TestAnswersPassesWhatItDoesNotEdit(t *testing.T) {
	t.Parallel()
	p := newPending[bool](8)
	for _, id := range []string{"1", "2", "3", `"s"`} {
		p.Add(id, id == "2")
	}
	var buf bytes.Buffer
	w := editAnswers(&buf, p, func(msg []byte, drop bool) ([]byte, bool) {
		if drop {
			return nil, true
		}
		if bytes.Contains(msg, []byte(`"keep"`)) {
			return nil, false
		}
		return []byte(`{"edited":true}`), true
	})
	for _, msg := range []string{
		`{"id":1,"result":{}}`,                 // part of a line
		`{"id":1,"result":{}}` + "\n{}\n",      // two lines
		`{"id":1,"method":"ping"}` + "\n",      // a request
		`{"id":2,"result":{}}` + "\n",          // dropped
		`{"id":3,"result":"keep"}` + "\n",      // declined
		`{"id":"s","error":{"code":1}}` + "\n", // edited
		`{"id":"s","error":{"code":1}}` + "\n", // no longer pending
	} {
		if n, err := w.Write([]byte(msg)); err != nil || n != len(msg) {
			t.Fatalf("Write(%q) = %d, %v", msg, n, err)
		}
	}
	want := `{"id":1,"result":{}}` + `{"id":1,"result":{}}` + "\n{}\n" + `{"id":1,"method":"ping"}` + "\n" +
		`{"id":3,"result":"keep"}` + "\n" + `{"edited":true}` + "\n" + `{"id":"s","error":{"code":1}}` + "\n"
	if d := cmp.Diff(want, buf.String()); d != "" {
		t.Errorf("written (-want +got):\n%s", d)
	}
	if d := cmp.Diff(map[string]bool{"1": false}, p.All()); d != "" {
		t.Errorf("still pending (-want +got):\n%s", d)
	}

	boom := errors.New("boom")
	p.Add("4", false)
	w = editAnswers(failing{boom}, p, func([]byte, bool) ([]byte, bool) { return []byte(`{}`), true })
	if n, err := w.Write([]byte(`{"id":4,"result":{}}` + "\n")); n != 0 || !errors.Is(err, boom) {
		t.Errorf("Write of an edited answer to a failing writer = %d, %v; want 0, boom", n, err)
	}
}

type failing struct{ err error }

func (f failing) Write([]byte) (int, error) { return 0, f.err }
