package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"
)

// fakeEngine is an Engine whose Check returns checkErr; it records Close.
type fakeEngine struct {
	name     string
	checkErr error
	closed   bool
}

func (f *fakeEngine) Name() string                                  { return f.name }
func (f *fakeEngine) Check(context.Context) error                   { return f.checkErr }
func (f *fakeEngine) Prepare(context.Context, string, string) error { return nil }
func (f *fakeEngine) CheckLimits(Limits) error                      { return nil }
func (f *fakeEngine) Start(context.Context, Spec) (Process, error)  { return nil, errors.New("fake") }
func (f *fakeEngine) Close() error                                  { f.closed = true; return nil }

func TestSelect(t *testing.T) {
	t.Parallel()
	unavailable := func(what string) error { return fmt.Errorf("%w: %s", ErrUnavailable, what) }
	tests := []struct {
		name    string
		runtime string
		engines []*fakeEngine
		want    string // the chosen engine, or "" for an error
		wantErr []string
		closed  []string // engines Select must have closed
	}{
		{"named", "b", []*fakeEngine{{name: "a"}, {name: "b"}}, "b", nil, nil},
		{"named fails its check", "a", []*fakeEngine{{name: "a", checkErr: unavailable("no a")}, {name: "b"}},
			"", []string{"no a"}, []string{"a"}},
		{"unknown", "c", []*fakeEngine{{name: "a"}}, "", []string{"unknown runtime c"}, nil},
		{"first that works", "", []*fakeEngine{{name: "a", checkErr: unavailable("no a")}, {name: "b"}, {name: "c"}},
			"b", nil, []string{"a"}},
		{"none works", "", []*fakeEngine{{name: "a", checkErr: unavailable("install a")}, {name: "b", checkErr: unavailable("start b")}},
			"", []string{"no sandbox runtime works here", "What each said: a: install a; b: start b"}, []string{"a", "b"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var cands []Candidate
			for _, e := range tc.engines {
				cands = append(cands, Candidate{Name: e.name, New: func() (Engine, error) { return e, nil }})
			}
			eng, err := Select(t.Context(), tc.runtime, cands, slog.New(slog.DiscardHandler))
			switch {
			case tc.want != "" && (err != nil || eng.Name() != tc.want):
				t.Fatalf("Select = %v, %v; want %s", eng, err, tc.want)
			case tc.want == "" && err == nil:
				t.Fatalf("Select = %s, want an error", eng.Name())
			}
			for _, w := range tc.wantErr {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
			for _, e := range tc.engines {
				want := slices.Contains(tc.closed, e.name)
				if e.closed != want {
					t.Errorf("%s closed = %v, want %v", e.name, e.closed, want)
				}
			}
		})
	}
}

// TestSelectSaysWhatItPassedOver: a detected runtime that is not the first
// candidate is logged with what each one before it said.
func TestSelectSaysWhatItPassedOver(t *testing.T) {
	t.Parallel()
	var logs strings.Builder
	a, b := &fakeEngine{name: "a", checkErr: fmt.Errorf("%w: a refused --cpus 8", ErrUnavailable)}, &fakeEngine{name: "b"}
	cands := []Candidate{{Name: "a", New: func() (Engine, error) { return a, nil }}, {Name: "b", New: func() (Engine, error) { return b, nil }}}
	eng, err := Select(t.Context(), "", cands, slog.New(slog.NewTextHandler(&logs, nil)))
	if err != nil || eng.Name() != "b" {
		t.Fatalf("Select = %v, %v; want b", eng, err)
	}
	if got := logs.String(); !strings.Contains(got, "level=WARN") || !strings.Contains(got, "runtime=b") || !strings.Contains(got, "a: a refused --cpus 8") {
		t.Fatalf("log = %q, want a warning naming b and what a said", got)
	}
}
