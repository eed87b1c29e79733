package result

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	sandboxv1 "github.com/codeexec/codeexec/proto/gen/codeexec/sandbox/v1"
)

// FuzzToolResult builds results from arbitrary outcomes (any output, any
// final status, truncation, notices, or an RPC error instead of a result)
// and renders each in both modes. It must not panic; the payload keeps
// every output line in order; the compact text shows every stdout and
// stderr line; the compact structuredContent agrees with the full (TOON)
// payload on every field it keeps and drops only the happy defaults; the
// TOON text has one line per field; and both modes agree on isError.
func FuzzToolResult(f *testing.F) {
	f.Add("hello\n", "", "", uint8(1), int32(0), uint64(0), uint64(0), false, int32(0), "", false)
	f.Add("a\n\nb\r\n()\n", "Traceback\nValueError: x\n", "ValueError: x", uint8(2), int32(1), uint64(0), uint64(0), false, int32(0), "", false)
	f.Add("partial", "warn", "", uint8(3), int32(0), uint64(5), uint64(0), true, int32(5), "session lost", false)
	f.Add("", "", "killed", uint8(4), int32(137), uint64(0), uint64(1234567), true, int32(0), "", false)
	f.Add("out\n", "", "connection refused", uint8(0), int32(codes.Unavailable), uint64(0), uint64(0), false, int32(0), "", true)
	f.Add("", "", "", uint8(0), int32(0), uint64(0), uint64(0), false, int32(0), "", false)
	f.Fuzz(func(t *testing.T, stdout, stderr, errText string, st uint8, exit int32, outDropped, errDropped uint64,
		stateLost bool, timeout int32, notice string, rpcErr bool) {
		o := Outcome{Stdout: stdout, Stderr: stderr, TimeoutSeconds: 30, Servers: []string{"s"}, OutputCapBytes: 1 << 10}
		if notice != "" {
			o.Notices = []string{notice}
		}
		if rpcErr {
			o.Err = status.Error(codes.Code(uint32(exit)%17), errText)
		} else {
			o.Result = &sandboxv1.ExecResult{
				Status: sandboxv1.ExecStatus(st % 5), ExitCode: exit, Error: errText, StateLost: stateLost,
				StdoutDroppedBytes: outDropped, StderrDroppedBytes: errDropped,
				Timeout: durationpb.New(time.Duration(timeout) * time.Second),
			}
		}
		p := FromOutcome(o)
		if out := Lines(stdout); len(p.Stdout) < len(out) || !slices.Equal(p.Stdout[:len(out)], out) {
			t.Fatalf("stdout %q became %q", out, p.Stdout)
		}
		n := len(o.Notices)
		if errLines := Lines(stderr); len(p.Stderr) < n+len(errLines) || !slices.Equal(p.Stderr[n:n+len(errLines)], errLines) {
			t.Fatalf("stderr %q after %d notices became %q", errLines, n, p.Stderr)
		}

		compact, full := ToolResult(p, Compact), ToolResult(p, TOON)
		if compact.IsError != full.IsError || compact.IsError != (p.Status != StatusSuccess) {
			t.Errorf("isError: compact %v, toon %v, status %q", compact.IsError, full.IsError, p.Status)
		}
		text := textOf(t, compact)
		if text == "" {
			t.Error("empty compact text")
		}
		for name, lines := range map[string][]string{"stdout": p.Stdout, "stderr": p.Stderr} {
			if len(lines) > 0 && !strings.Contains(text, strings.Join(lines, "\n")) {
				t.Errorf("the compact text lost %s lines %q:\n%s", name, lines, text)
			}
		}
		agree(t, compact.StructuredContent, full.StructuredContent)

		toonText := textOf(t, full)
		body, ok := strings.CutPrefix(toonText, "```toon\n")
		body, ok2 := strings.CutSuffix(body, "\n```")
		if !ok || !ok2 {
			t.Fatalf("TOON text is not one fenced block: %q", toonText)
		}
		if got, want := len(strings.Split(body, "\n")), len(p.fields()); got != want {
			t.Errorf("TOON text has %d lines for %d fields:\n%s", got, want, body)
		}
		for name, lines := range map[string][]string{"stdout": p.Stdout, "stderr": p.Stderr} {
			if head := fmt.Sprintf("\n%s[%d]: ", name, len(lines)); len(lines) > 0 && !strings.Contains("\n"+body, head) {
				t.Errorf("TOON text lacks %q:\n%s", head, body)
			}
		}
	})
}

func textOf(t *testing.T, r *mcp.CallToolResult) string {
	t.Helper()
	if len(r.Content) != 1 {
		t.Fatalf("%d contents, want one text", len(r.Content))
	}
	c, ok := r.Content[0].(mcp.TextContent)
	if !ok {
		t.Fatalf("content %T, want text", r.Content[0])
	}
	return c.Text
}

// agree checks that the compact structuredContent keeps the full
// payload's fields unchanged, leaving out only a success status, a zero
// exit code and the summary of a success that printed something.
func agree(t *testing.T, compact, full any) {
	t.Helper()
	c, f := asMap(t, compact), asMap(t, full)
	for k, v := range c {
		if fv, ok := f[k]; !ok || fmt.Sprint(fv) != fmt.Sprint(v) {
			t.Errorf("compact %s = %v, full payload %v", k, v, fv)
		}
	}
	for k, v := range f {
		if _, kept := c[k]; kept {
			continue
		}
		success := f["status"] == StatusSuccess
		switch {
		case k == "status" && v == StatusSuccess:
		case k == "exitCode" && v == 0.0:
		case k == "summary" && success && f["stdout"] != nil:
		default:
			t.Errorf("compact mode dropped %s = %v", k, v)
		}
	}
}

func asMap(t *testing.T, v any) map[string]any {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m
}
