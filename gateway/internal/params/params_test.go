package params

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	t.Parallel()
	lim := Limits{DefaultSeconds: 30, MaxSeconds: 120}
	tests := []struct {
		name        string
		args        map[string]any
		wantMsg     string
		wantTimeout float64
		wantServers []string
	}{
		{name: "no args", args: nil, wantMsg: MsgMissingCode},
		{name: "blank code", args: map[string]any{"code": " \n\t"}, wantMsg: MsgMissingCode},
		{name: "null code", args: map[string]any{"code": nil}, wantMsg: MsgMissingCode},
		{name: "empty code waits", args: map[string]any{"code": ""}, wantTimeout: 30},
		{name: "cancel", args: map[string]any{"code": "", "cancel": true}, wantTimeout: 30},
		{name: "cancel with code", args: map[string]any{"code": "x", "cancel": true}, wantMsg: MsgCancelWithCode},
		{name: "cancel not a boolean", args: map[string]any{"code": "", "cancel": "yes"}, wantMsg: MsgCancelNotBool},
		{name: "code a number", args: map[string]any{"code": 5.0}, wantMsg: "'code' must be a string of Python source, not a number"},
		{name: "code a boolean", args: map[string]any{"code": true}, wantMsg: "'code' must be a string of Python source, not a boolean"},
		{name: "code a list", args: map[string]any{"code": []any{"print(1)"}}, wantMsg: "'code' must be a string of Python source, not an array"},
		{name: "code an object", args: map[string]any{"code": map[string]any{}}, wantMsg: "'code' must be a string of Python source, not an object"},
		{name: "defaults", args: map[string]any{"code": "x"}, wantTimeout: 30},
		{name: "null servers and timeout", args: map[string]any{"code": "x", "servers": nil, "timeout": nil}, wantTimeout: 30},
		{name: "servers string", args: map[string]any{"code": "x", "servers": "github"}, wantMsg: MsgServersNotList},
		{name: "servers object", args: map[string]any{"code": "x", "servers": map[string]any{}}, wantMsg: MsgServersNotList},
		{name: "servers coerced", args: map[string]any{"code": "x", "servers": []any{"a", 1.0, true, 2.5}},
			wantTimeout: 30, wantServers: []string{"a", "1", "True", "2.5"}},
		{name: "go string slice", args: map[string]any{"code": "x", "servers": []string{"a"}}, wantTimeout: 30, wantServers: []string{"a"}},
		{name: "timeout int", args: map[string]any{"code": "x", "timeout": 5}, wantTimeout: 5},
		{name: "timeout integral float", args: map[string]any{"code": "x", "timeout": 5.0}, wantTimeout: 5},
		{name: "timeout json number", args: map[string]any{"code": "x", "timeout": json.Number("7")}, wantTimeout: 7},
		{name: "timeout fraction", args: map[string]any{"code": "x", "timeout": 2.5}, wantTimeout: 2.5},
		{name: "timeout the maximum", args: map[string]any{"code": "x", "timeout": 120}, wantTimeout: 120},
		{name: "timeout one", args: map[string]any{"code": "x", "timeout": 1}, wantTimeout: 1},
		{name: "timeout bool", args: map[string]any{"code": "x", "timeout": true}, wantMsg: "'timeout' must be a number of seconds from 1 to 120 (fractions accepted), not a boolean"},
		{name: "timeout string", args: map[string]any{"code": "x", "timeout": "5"}, wantMsg: "'timeout' must be a number of seconds from 1 to 120 (fractions accepted), not the string \"5\""},
		{name: "timeout above the maximum", args: map[string]any{"code": "x", "timeout": 100000}, wantMsg: "'timeout' must be a number of seconds from 1 to 120 (fractions accepted), not 100000"},
		{name: "timeout huge", args: map[string]any{"code": "x", "timeout": 1e300}, wantMsg: "'timeout' must be a number of seconds from 1 to 120 (fractions accepted), not 1e+300"},
		{name: "timeout zero", args: map[string]any{"code": "x", "timeout": 0}, wantMsg: "'timeout' must be a number of seconds from 1 to 120 (fractions accepted), not 0"},
		{name: "timeout negative", args: map[string]any{"code": "x", "timeout": -5.0}, wantMsg: "'timeout' must be a number of seconds from 1 to 120 (fractions accepted), not -5"},
		{name: "timeout below one", args: map[string]any{"code": "x", "timeout": 0.5}, wantMsg: "'timeout' must be a number of seconds from 1 to 120 (fractions accepted), not 0.5"},
		{name: "unknown argument", args: map[string]any{"code": "x", "timeout_seconds": 5}, wantMsg: "run_python does not take \"timeout_seconds\"; it accepts: code, servers, timeout, session, cancel"},
		{name: "unknown arguments", args: map[string]any{"code": "x", "b": 1, "a": 2}, wantMsg: "run_python does not take \"a\", \"b\"; it accepts: code, servers, timeout, session, cancel"},
		{name: "a handle", args: map[string]any{"code": "x", "session": " 0f3a9c2e1b7d4e6f8a0b1c2d3e4f5a6b "}, wantTimeout: 30},
		{name: "a handle with a slash", args: map[string]any{"code": "x", "session": "not a handle / at all"},
			wantMsg: "'session' holds the character U+0020 at byte 3, which no session handle has; pass the handle an earlier result gave (structuredContent.session: letters, digits, '-', '_' and '.'), or leave 'session' out to start a new session"},
		{name: "a handle with NUL", args: map[string]any{"code": "x", "session": "ab\x00cd"},
			wantMsg: "'session' holds the character U+0000 at byte 2, which no session handle has; pass the handle an earlier result gave (structuredContent.session: letters, digits, '-', '_' and '.'), or leave 'session' out to start a new session"},
		{name: "a handle with a slash only", args: map[string]any{"code": "x", "session": "ab/cd"},
			wantMsg: "'session' holds '/' at byte 2, which no session handle has; pass the handle an earlier result gave (structuredContent.session: letters, digits, '-', '_' and '.'), or leave 'session' out to start a new session"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p, msg, ok := Parse(tt.args, lim)
			if msg != tt.wantMsg || ok != (tt.wantMsg == "") {
				t.Fatalf("Parse() msg=%q ok=%v, want msg=%q", msg, ok, tt.wantMsg)
			}
			if !ok {
				return
			}
			if got := p.Timeout.Seconds(); got != tt.wantTimeout {
				t.Errorf("timeout = %gs, want %gs", got, tt.wantTimeout)
			}
			if !slices.Equal(p.Servers, tt.wantServers) {
				t.Errorf("servers = %q, want %q", p.Servers, tt.wantServers)
			}
		})
	}
}

func TestParseCodeSize(t *testing.T) {
	t.Parallel()
	lim := Limits{DefaultSeconds: 30, MaxSeconds: 120}
	for _, tc := range []struct {
		name   string
		size   int
		wantOK bool
	}{
		{name: "at the limit", size: MaxCodeBytes, wantOK: true},
		{name: "one byte over", size: MaxCodeBytes + 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, msg, ok := Parse(map[string]any{"code": "x" + strings.Repeat(" ", tc.size-1)}, lim)
			if ok != tc.wantOK {
				t.Fatalf("Parse(%d bytes of code) ok=%v msg=%q, want ok=%v", tc.size, ok, msg, tc.wantOK)
			}
			if want := fmt.Sprintf("'code' is %d bytes; run_python accepts at most %d bytes (63 MiB)", tc.size, MaxCodeBytes); !ok && !strings.HasPrefix(msg, want) {
				t.Errorf("msg = %q, want it to begin %q", msg, want)
			}
		})
	}
}
