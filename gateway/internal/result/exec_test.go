package result

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	sandboxv1 "github.com/codeexec/codeexec/proto/gen/codeexec/sandbox/v1"
)

func okResult() *sandboxv1.ExecResult {
	return &sandboxv1.ExecResult{Status: sandboxv1.ExecStatus_EXEC_STATUS_OK}
}

func errResult(code int32, msg string) *sandboxv1.ExecResult {
	return &sandboxv1.ExecResult{Status: sandboxv1.ExecStatus_EXEC_STATUS_ERROR, ExitCode: code, Error: msg}
}

func timeoutResult() *sandboxv1.ExecResult {
	return &sandboxv1.ExecResult{Status: sandboxv1.ExecStatus_EXEC_STATUS_TIMEOUT, StateLost: true}
}

func TestFromOutcome(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name        string
		in          Outcome
		wantStatus  string
		wantSummary string
		wantError   string // substring
		wantStdout  []string
		wantStderr  []string
		wantExit    *int
		wantTimeout float64
	}{
		{name: "ok", in: Outcome{Stdout: "hi\n", Result: okResult()}, wantStatus: "success", wantSummary: "Success",
			wantStdout: []string{"hi"}, wantExit: intp(0)},
		{name: "sys.exit without message", in: Outcome{Result: errResult(3, "")}, wantStatus: "error",
			wantSummary: "Error: exited with code 3", wantError: "exited with code 3", wantExit: intp(3)},
		{name: "timeout uses the effective timeout", in: Outcome{TimeoutSeconds: 5, Result: &sandboxv1.ExecResult{
			Status: sandboxv1.ExecStatus_EXEC_STATUS_TIMEOUT, Timeout: durationpb.New(7 * time.Second)}},
			wantStatus: "timeout", wantSummary: "Timeout: execution exceeded 7s", wantError: "state", wantTimeout: 7},
		{name: "killed", in: Outcome{Result: &sandboxv1.ExecResult{Status: sandboxv1.ExecStatus_EXEC_STATUS_KILLED,
			Error: "out of memory", ExitCode: 137, StateLost: true}},
			wantStatus: "error", wantSummary: "Sandbox stopped: out of memory",
			wantError: "out of memory. The sandbox was stopped and the session state", wantExit: intp(137)},
		{name: "truncated", in: Outcome{Stdout: "x\n", OutputCapBytes: 1 << 20, Result: &sandboxv1.ExecResult{
			Status: sandboxv1.ExecStatus_EXEC_STATUS_OK, StdoutDroppedBytes: 1234567, StderrDroppedBytes: 5}},
			wantStatus: "success", wantSummary: "Success", wantExit: intp(0),
			wantStdout: []string{"x", "[output truncated: 1,234,567 bytes dropped — the cap is 1,048,576 bytes; write large data to a file in /workspace or return a summary]"},
			wantStderr: []string{"[output truncated: 5 bytes dropped — the cap is 1,048,576 bytes; write large data to a file in /workspace or return a summary]"}},
		{name: "notice opens stderr", in: Outcome{Stderr: "w\n", Notices: []string{"session lost"}, Result: okResult()},
			wantStatus: "success", wantSummary: "Success", wantExit: intp(0), wantStderr: []string{"[session lost]", "w"}},
		{name: "invalid argument passes through", in: Outcome{Err: status.Error(codes.InvalidArgument, "unknown MCP server: nope")},
			wantStatus: "error", wantSummary: "Sandbox error: unknown MCP server: nope", wantError: "unknown MCP server: nope"},
		{name: "unavailable", in: Outcome{Stdout: "part\n", Err: status.Error(codes.Unavailable, "connection refused")},
			wantStatus: "error", wantSummary: "Sandbox error: the sandbox service is unreachable (connection refused)",
			wantError: "unreachable", wantStdout: []string{"part"}},
		{name: "full", in: Outcome{Err: status.Error(codes.ResourceExhausted, "too many sessions")},
			wantStatus: "error", wantSummary: "Sandbox error: the sandbox service is at capacity (too many sessions); retry shortly"},
		{name: "message over the gRPC limit", in: Outcome{Err: status.Error(codes.ResourceExhausted, "trying to send message larger than max (73400377 vs. 67108864)")},
			wantStatus: "error", wantSummary: "Sandbox error: the call is too large for the sandbox service (trying to send message larger than max (73400377 vs. 67108864)); retrying will not help",
			wantError: "/workspace"},
		{name: "plain error", in: Outcome{Err: errors.New("boom")}, wantStatus: "error", wantSummary: "Sandbox error: boom"},
		{name: "unspecified status", in: Outcome{Result: &sandboxv1.ExecResult{}}, wantStatus: "error", wantError: "no status"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p := FromOutcome(tt.in)
			if p.Status != tt.wantStatus {
				t.Errorf("status = %q, want %q", p.Status, tt.wantStatus)
			}
			if tt.wantSummary != "" && !strings.HasPrefix(p.Summary, tt.wantSummary) {
				t.Errorf("summary = %q, want prefix %q", p.Summary, tt.wantSummary)
			}
			if !strings.Contains(p.Error, tt.wantError) {
				t.Errorf("error = %q, want it to contain %q", p.Error, tt.wantError)
			}
			if !slices.Equal(p.Stdout, tt.wantStdout) {
				t.Errorf("stdout = %q, want %q", p.Stdout, tt.wantStdout)
			}
			if !slices.Equal(p.Stderr, tt.wantStderr) {
				t.Errorf("stderr = %q, want %q", p.Stderr, tt.wantStderr)
			}
			if (p.ExitCode == nil) != (tt.wantExit == nil) || (p.ExitCode != nil && *p.ExitCode != *tt.wantExit) {
				t.Errorf("exitCode = %v, want %v", p.ExitCode, tt.wantExit)
			}
			if p.TimeoutSeconds != tt.wantTimeout {
				t.Errorf("timeoutSeconds = %g, want %g", p.TimeoutSeconds, tt.wantTimeout)
			}
		})
	}
}

func TestLines(t *testing.T) {
	t.Parallel()
	tests := map[string][]string{
		"":            nil,
		"a":           {"a"},
		"a\n":         {"a"},
		"a\n\n":       {"a", ""},
		"\n":          {""},
		"a\r\nb\r\n":  {"a", "b"},
		"()\n":        nil,
		"a\n ()\t\n":  {"a"},
		"(1,)\n()x\n": {"(1,)", "()x"},
		"  \n\t\n":    {"  ", "\t"},
	}
	for in, want := range tests {
		if got := Lines(in); !slices.Equal(got, want) {
			t.Errorf("Lines(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestThousands(t *testing.T) {
	t.Parallel()
	for n, want := range map[uint64]string{0: "0", 999: "999", 1000: "1,000", 1234567: "1,234,567", 100000: "100,000"} {
		if got := thousands(n); got != want {
			t.Errorf("thousands(%d) = %q, want %q", n, got, want)
		}
	}
}

func TestRestoreNotice(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name string
		r    *sandboxv1.RestoreReport
		want string
	}{
		{"all came back", &sandboxv1.RestoreReport{Reason: "idle", Names: []string{"x"}, Calls: 3},
			"restored the session from its checkpoint (idle): x"},
		{"one call missed, one rolled back", &sandboxv1.RestoreReport{Reason: "crash", Names: []string{"x"}, Calls: 1, Missed: 1, MissedWhy: "too big", RolledBack: true},
			"restored the session from its checkpoint (crash): x; the effects of the call after that checkpoint are gone too, as its checkpoint was not stored (too big); the interrupted call's effects were rolled back"},
		{"an empty checkpoint and calls missed", &sandboxv1.RestoreReport{Reason: "crash", Calls: 2, Missed: 3},
			"restored the session from its checkpoint (crash): nothing to restore; the effects of the 3 calls after that checkpoint are gone too, as none of their checkpoints was stored"},
		{"no checkpoint, one call", &sandboxv1.RestoreReport{Reason: "crash", Missed: 1, MissedWhy: "too big", RolledBack: true},
			"the session's sandbox was replaced (crash) before any checkpoint of it was stored: the effects of its earlier call are gone and it starts fresh (too big)"},
		{"another environment", &sandboxv1.RestoreReport{Reason: "idle", Names: []string{"df"}, Calls: 2, Environment: "the checkpoint was made in environment a and is restored into b: +toolz 1.0.0"},
			"restored the session from its checkpoint (idle): df; the checkpoint was made in environment a and is restored into b: +toolz 1.0.0"},
		{"names and files", &sandboxv1.RestoreReport{Reason: "timeout", Names: []string{"x"}, Files: []string{"/workspace/a.txt", "/workspace/out/b.png"}, Calls: 2,
			Lost: []*sandboxv1.LostName{{Name: "/workspace/big.bin", Kind: "file of 300.0 MiB"}}},
			"restored the session from its checkpoint (timeout): x; files /workspace/a.txt, /workspace/out/b.png; not restored: /workspace/big.bin (file of 300.0 MiB)"},
		{"files alone", &sandboxv1.RestoreReport{Files: []string{"/workspace/a.txt"}, Calls: 1},
			"restored the session from its checkpoint: files /workspace/a.txt"},
		{"no checkpoint, calls", &sandboxv1.RestoreReport{Missed: 4},
			"the session's sandbox was replaced before any checkpoint of it was stored: the effects of its 4 earlier calls are gone and it starts fresh"},
		{"a checkpoint that could not be restored", &sandboxv1.RestoreReport{Reason: "it blocked", Fresh: true, Calls: 5},
			"the session's sandbox was replaced, and its checkpoint could not be restored (it blocked): the session started fresh, its earlier state is gone, and so is the checkpoint"},
	} {
		if got := RestoreNotice(tt.r); got != tt.want {
			t.Errorf("%s:\n got %s\nwant %s", tt.name, got, tt.want)
		}
	}
}
