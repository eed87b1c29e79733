package result

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"
)

func intp(n int) *int { return &n }

// TestUpstreamPayloads reproduces the exact payloads of upstream's
// tests/test_toon_responses.py (upstream-behaviour.md §7).
func TestUpstreamPayloads(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name           string
		payload        Payload
		mode           Mode
		wantText       string
		wantStructured string
		wantIsError    bool
	}{
		{
			name:           "success response uses toon block",
			payload:        Payload{Status: "success", Summary: "Success", ExitCode: intp(0), Stdout: []string{"line1", "line2"}},
			mode:           TOON,
			wantText:       "```toon\nstatus: success\nsummary: Success\nexitCode: 0\nstdout[2]: line1,line2\n```",
			wantStructured: `{"status":"success","summary":"Success","exitCode":0,"stdout":["line1","line2"]}`,
		},
		{
			name: "timeout response includes error details",
			payload: Payload{Status: "timeout", Summary: "Timeout: execution exceeded 5s",
				Stdout: []string{"partial"}, Stderr: []string{"warn"}, Error: "Execution exceeded 5s", TimeoutSeconds: 5},
			mode: TOON,
			wantText: "```toon\nstatus: timeout\nsummary: \"Timeout: execution exceeded 5s\"\nstdout[1]: partial\n" +
				"stderr[1]: warn\nerror: Execution exceeded 5s\ntimeoutSeconds: 5\n```",
			wantStructured: `{"status":"timeout","summary":"Timeout: execution exceeded 5s","stdout":["partial"],"stderr":["warn"],"error":"Execution exceeded 5s","timeoutSeconds":5}`,
			wantIsError:    true,
		},
		{
			name:           "validation error uses toon",
			payload:        Validation("Missing 'code' argument"),
			mode:           TOON,
			wantText:       "```toon\nstatus: validation_error\nsummary: Missing 'code' argument\nerror: Missing 'code' argument\n```",
			wantStructured: `{"status":"validation_error","summary":"Missing 'code' argument","error":"Missing 'code' argument"}`,
			wantIsError:    true,
		},
		{
			name:           "success response skips empty streams",
			payload:        FromOutcome(Outcome{Stdout: "only out\n", Result: okResult()}),
			mode:           TOON,
			wantText:       "```toon\nstatus: success\nsummary: Success\nexitCode: 0\nstdout[1]: only out\n```",
			wantStructured: `{"status":"success","summary":"Success","exitCode":0,"stdout":["only out"]}`,
		},
		{
			// test_compact_mode_drops_empty_tuple_output: a "()" line is
			// noise, so the call had no output.
			name:           "compact mode drops empty tuple output",
			payload:        FromOutcome(Outcome{Stdout: "()\n", Result: okResult()}),
			mode:           Compact,
			wantText:       "Success (no output)",
			wantStructured: `{"summary":"Success (no output)"}`,
		},
		{
			name:           "compact mode with no output",
			payload:        FromOutcome(Outcome{Result: okResult()}),
			mode:           Compact,
			wantText:       "Success (no output)",
			wantStructured: `{"summary":"Success (no output)"}`,
		},
		{
			name:           "empty error field is omitted",
			payload:        Payload{Status: "success", Summary: "Success", ExitCode: intp(0), Stdout: []string{"x"}, Error: ""},
			mode:           TOON,
			wantText:       "```toon\nstatus: success\nsummary: Success\nexitCode: 0\nstdout[1]: x\n```",
			wantStructured: `{"status":"success","summary":"Success","exitCode":0,"stdout":["x"]}`,
		},
		{
			name:           "default output mode renders plain text",
			payload:        FromOutcome(Outcome{Stdout: "alpha\nbeta\n", Result: okResult()}),
			mode:           Compact,
			wantText:       "alpha\nbeta",
			wantStructured: `{"stdout":["alpha","beta"]}`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			res := ToolResult(tt.payload, tt.mode)
			checkResult(t, res, tt.wantText, tt.wantStructured, tt.wantIsError)
		})
	}
}

func TestCompact(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name           string
		payload        Payload
		wantText       string
		wantStructured string
	}{
		{
			name:           "blank lines kept",
			payload:        FromOutcome(Outcome{Stdout: "a\n\nb\n\n", Result: okResult()}),
			wantText:       "a\n\nb\n",
			wantStructured: `{"stdout":["a","","b",""]}`,
		},
		{
			name:           "() lines dropped from both streams, whitespace-only lines kept",
			payload:        FromOutcome(Outcome{Stdout: "()\n  \n () \n(())\n", Stderr: "()\nwarn\n", Result: okResult()}),
			wantText:       "  \n(())\nstderr:\nwarn",
			wantStructured: `{"stdout":["  ","(())"],"stderr":["warn"]}`,
		},
		{
			name:           "unknown tool: the summary says it all",
			payload:        UnknownTool("nope"),
			wantText:       "status: error\nUnknown tool: nope",
			wantStructured: `{"status":"error","summary":"Unknown tool: nope","error":"Unknown tool: nope"}`,
		},
		{
			name:           "stdout and stderr",
			payload:        FromOutcome(Outcome{Stdout: "out\n", Stderr: "warn\n", Result: okResult()}),
			wantText:       "out\nstderr:\nwarn",
			wantStructured: `{"stdout":["out"],"stderr":["warn"]}`,
		},
		{
			name:           "stderr only keeps summary in structured",
			payload:        FromOutcome(Outcome{Stderr: "warn\n", Result: okResult()}),
			wantText:       "stderr:\nwarn",
			wantStructured: `{"summary":"Success","stderr":["warn"]}`,
		},
		{
			name:     "exception",
			payload:  FromOutcome(Outcome{Stderr: "Traceback...\nZeroDivisionError: division by zero\n", Result: errResult(1, "ZeroDivisionError: division by zero")}),
			wantText: "status: error\nexit: 1\nstderr:\nTraceback...\nZeroDivisionError: division by zero",
			wantStructured: `{"status":"error","summary":"Error: ZeroDivisionError: division by zero","exitCode":1,` +
				`"stderr":["Traceback...","ZeroDivisionError: division by zero"],"error":"ZeroDivisionError: division by zero"}`,
		},
		{
			// Upstream's _render_compact_output (L431-473): the summary,
			// then the error line, since the status is not "error".
			name:           "validation error",
			payload:        Validation("'servers' must be a list"),
			wantText:       "status: validation_error\n'servers' must be a list\nerror: 'servers' must be a list",
			wantStructured: `{"status":"validation_error","summary":"'servers' must be a list","error":"'servers' must be a list"}`,
		},
		{
			name:     "timeout with partial output",
			payload:  FromOutcome(Outcome{Stdout: "started\n", TimeoutSeconds: 5, Result: timeoutResult()}),
			wantText: "status: timeout\nstarted\nerror: Execution exceeded the 5s timeout. " + StateLostNote,
			wantStructured: `{"status":"timeout","summary":"Timeout: execution exceeded 5s","stdout":["started"],` +
				`"error":"Execution exceeded the 5s timeout. ` + StateLostNote + `","timeoutSeconds":5}`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			res := ToolResult(tt.payload, Compact)
			checkResult(t, res, tt.wantText, tt.wantStructured, tt.payload.IsError())
		})
	}
}

func checkResult(t *testing.T, res *mcp.CallToolResult, wantText, wantStructured string, wantIsError bool) {
	t.Helper()
	if len(res.Content) != 1 {
		t.Fatalf("got %d contents, want 1", len(res.Content))
	}
	tc, ok := res.Content[0].(mcp.TextContent)
	if !ok {
		t.Fatalf("content is %T, want TextContent", res.Content[0])
	}
	if tc.Text != wantText {
		t.Errorf("text =\n%q\nwant\n%q", tc.Text, wantText)
	}
	got, err := json.Marshal(res.StructuredContent)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != wantStructured {
		t.Errorf("structured =\n%s\nwant\n%s", got, wantStructured)
	}
	if res.IsError != wantIsError {
		t.Errorf("isError = %v, want %v", res.IsError, wantIsError)
	}
}

func TestParseMode(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in    string
		want  Mode
		known bool
	}{
		{"", Compact, true}, {"compact", Compact, true}, {" COMPACT ", Compact, true}, {"toon", TOON, true}, {"Toon", TOON, true},
		{"json", TOON, false}, {"compct", TOON, false},
	} {
		if got, known := ParseMode(tc.in); got != tc.want || known != tc.known {
			t.Errorf("ParseMode(%q) = %v, %v; want %v, %v", tc.in, got, known, tc.want, tc.known)
		}
	}
}

// A result carries structuredContent only when it adds little: not with
// images (Claude Code would show the model structuredContent alone and
// drop them), not past StructuredTextLimit (the text would reach a model
// twice). Either way the text and the images are in content.
func TestStructuredContentOnlyWhenSmall(t *testing.T) {
	t.Parallel()
	img := Image{MIME: "image/png", Data: []byte("\x89PNG"), Width: 4, Height: 3}
	tests := []struct {
		name           string
		payload        Payload
		wantStructured bool
		wantContent    []string
	}{
		{"small text", Payload{Status: StatusSuccess, Stdout: []string{"hi"}}, true, []string{"text"}},
		{"an image", Payload{Status: StatusSuccess, Summary: "Success", Images: []Image{img}}, false, []string{"text", "image"}},
		{"text over the limit", Payload{Status: StatusSuccess, Stdout: []string{strings.Repeat("x", StructuredTextLimit+1)}}, false, []string{"text"}},
		{"text at the limit", Payload{Status: StatusSuccess, Stdout: []string{strings.Repeat("x", StructuredTextLimit)}}, true, []string{"text"}},
	}
	for _, tt := range tests {
		for _, mode := range []Mode{Compact, TOON} {
			t.Run(tt.name+"/"+mode.String(), func(t *testing.T) {
				t.Parallel()
				res := ToolResult(tt.payload, mode)
				var kinds []string
				for _, c := range res.Content {
					switch c := c.(type) {
					case mcp.TextContent:
						kinds = append(kinds, "text")
					case mcp.ImageContent:
						kinds = append(kinds, "image")
						if c.MIMEType != "image/png" || c.Data != "iVBORw==" {
							t.Errorf("image content %q %q", c.MIMEType, c.Data)
						}
					}
				}
				if strings.Join(kinds, ",") != strings.Join(tt.wantContent, ",") {
					t.Errorf("content %v, want %v", kinds, tt.wantContent)
				}
				small := len(res.Content[0].(mcp.TextContent).Text) <= StructuredTextLimit
				if want := tt.wantStructured && small; (res.StructuredContent != nil) != want {
					t.Errorf("structuredContent present = %v, want %v", res.StructuredContent != nil, want)
				}
			})
		}
	}
}

func TestImagesAreNamedInTheText(t *testing.T) {
	t.Parallel()
	p := FromOutcome(Outcome{Result: okResult(), Images: []Image{
		{MIME: "image/png", Data: []byte("a"), Width: 400, Height: 300},
		{MIME: "image/jpeg", Data: []byte("b"), Width: 10, Height: 20},
	}})
	got := ToolResult(p, Compact).Content[0].(mcp.TextContent).Text
	if got != "Success\n[2 images: 400x300 png, 10x20 jpeg]" {
		t.Errorf("text %q", got)
	}
}
