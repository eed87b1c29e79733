package bench

import (
	"strings"
	"testing"
	"time"

	"github.com/codeexec/codeexec/services/flagenv"
)

// defaults returns the settings the flags give when none is set.
func defaults(t *testing.T) Settings {
	t.Helper()
	var s Settings
	fs := flagenv.New("bench", func(string) string { return "" })
	Bind(fs, &s)
	if err := fs.Err(); err != nil {
		t.Fatal(err)
	}
	return s
}

func TestCheckRefusesCountsWithoutASample(t *testing.T) {
	if err := defaults(t).check(); err != nil {
		t.Fatalf("the defaults are refused: %v", err)
	}
	zeroFirst := defaults(t)
	zeroFirst.FirstSessions = 0
	if err := zeroFirst.check(); err != nil {
		t.Errorf("--first-sessions 0, which skips its rows, is refused: %v", err)
	}
	for _, tc := range []struct {
		set  func(*Settings)
		want string
	}{
		{func(s *Settings) { s.Spawns = 0 }, "--spawns 0: give a whole number of at least 1"},
		{func(s *Settings) { s.Warm = -1 }, "--warm -1: give a whole number of at least 1"},
		{func(s *Settings) { s.Fresh = 0 }, "--fresh 0: give a whole number of at least 1"},
		{func(s *Settings) { s.Sessions = 0 }, "--sessions 0: give"},
		{func(s *Settings) { s.PerSession = 0 }, "--execs 0: give"},
		{func(s *Settings) { s.Burst = 0 }, "--burst 0: give"},
		{func(s *Settings) { s.IdleSessions = 0 }, "--idle-sessions 0: give"},
		{func(s *Settings) { s.Idle = 0 }, "--idle 0: give"},
		{func(s *Settings) { s.FirstSessions = -1 }, "--first-sessions -1: give 0 (to skip its rows) or more"},
	} {
		s := defaults(t)
		tc.set(&s)
		err := s.check()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("got %v, want an error containing %q", err, tc.want)
		}
		// Run refuses them before it measures anything.
		if err := Run(t.Context(), s, &strings.Builder{}); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Run: got %v, want an error containing %q", err, tc.want)
		}
	}
	short := defaults(t)
	short.FreshGap = time.Millisecond
	if err := Run(t.Context(), short, &strings.Builder{}); err == nil || !strings.Contains(err.Error(), "--fresh-gap 1ms is too short") {
		t.Errorf("--fresh-gap 1ms: got %v", err)
	}
}
