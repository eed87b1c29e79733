// Package result turns the outcome of a run_python call into the MCP tool
// result that upstream produces (upstream-behaviour.md §1.2): a payload with
// upstream's field names, rendered as compact text or as a TOON block, plus
// structuredContent.
package result

import (
	"strconv"
	"strings"

	"github.com/codeexec/codeexec/gateway/internal/toon"
)

// Statuses, as upstream names them.
const (
	StatusSuccess         = "success"
	StatusError           = "error"
	StatusTimeout         = "timeout"
	StatusValidationError = "validation_error"
	// StatusRunning: the call yielded and its code runs on; StatusIdle:
	// a wait found nothing running; StatusInterrupted: the run in flight
	// was cancelled or lost, and the session restored.
	StatusRunning     = "running"
	StatusIdle        = "idle"
	StatusInterrupted = "interrupted"
)

// Payload is the full result of one call. Empty fields are left out when it
// is encoded, as upstream drops None and empty strings and lists.
type Payload struct {
	// Status is one of the Status constants.
	Status string `json:"status,omitempty"`
	// Summary is a one-line description such as "Success".
	Summary string `json:"summary,omitempty"`
	// ExitCode is set when the code ran to an exit status.
	ExitCode *int `json:"exitCode,omitempty"`
	// Servers lists the MCP servers the call could use.
	Servers []string `json:"servers,omitempty"`
	// Stdout holds the standard output, one element per line.
	Stdout []string `json:"stdout,omitempty"`
	// Stderr holds the standard error, one element per line.
	Stderr []string `json:"stderr,omitempty"`
	// Error says what went wrong.
	Error string `json:"error,omitempty"`
	// TimeoutSeconds is the timeout that expired, for status timeout.
	TimeoutSeconds float64 `json:"timeoutSeconds,omitempty"`
	// Session is the handle of the session the call ran in, for clients
	// that continue sessions by handle (MCP 2026-07-28, or a call that
	// named one). Legacy session-based calls leave it empty.
	Session string `json:"session,omitempty"`
	// NewSession marks the first call of a session, whose text then
	// carries one line with the handle. It is not part of the JSON.
	NewSession bool `json:"-"`
	// Images go into the result as image content, not into the JSON.
	Images []Image `json:"-"`
	// Links are resource links to files under /workspace/out, and
	// FilesLine names those files in the text.
	Links     []Link `json:"-"`
	FilesLine string `json:"-"`
}

// Image is one image a call showed.
type Image struct {
	// MIME is "image/png" or "image/jpeg".
	MIME string
	// Data is the encoded image.
	Data []byte
	// Width and Height are in pixels.
	Width, Height int
}

// IsError reports whether the MCP result must carry isError: true.
func (p Payload) IsError() bool {
	return p.Status != StatusSuccess && p.Status != StatusRunning && p.Status != StatusIdle
}

// fields lists the non-empty fields in upstream's order, for TOON.
func (p Payload) fields() []toon.Field {
	var f []toon.Field
	add := func(key string, v any, present bool) {
		if present {
			f = append(f, toon.Field{Key: key, Value: v})
		}
	}
	add("status", p.Status, p.Status != "")
	add("summary", p.Summary, p.Summary != "")
	if p.ExitCode != nil {
		add("exitCode", *p.ExitCode, true)
	}
	add("servers", p.Servers, len(p.Servers) > 0)
	add("stdout", p.Stdout, len(p.Stdout) > 0)
	add("stderr", p.Stderr, len(p.Stderr) > 0)
	add("error", p.Error, p.Error != "")
	add("timeoutSeconds", p.TimeoutSeconds, p.TimeoutSeconds != 0)
	add("session", p.Session, p.Session != "")
	return f
}

// noiseLine is the output line upstream drops as noise (its
// _NOISE_STREAM_TOKENS): the repr of an empty tuple, which helpers such as
// list_servers() print when there is nothing to list.
const noiseLine = "()"

// Lines splits output text into lines. As upstream does, a line that reads
// "()" (around white space) is dropped. Unlike upstream, which also drops
// blank and whitespace-only lines, every other line is kept verbatim: only
// the single newline that ends the text is removed, and CRLF counts as one
// newline. Empty text gives no lines.
func Lines(text string) []string {
	if text == "" {
		return nil
	}
	text = strings.TrimSuffix(text, "\n")
	var lines []string
	for _, l := range strings.Split(text, "\n") {
		l = strings.TrimSuffix(l, "\r")
		if strings.TrimSpace(l) == noiseLine {
			continue
		}
		lines = append(lines, l)
	}
	return lines
}

// TruncationNote is the line appended to a stream whose output the sandbox
// cut short. capBytes may be zero when the cap is unknown.
func TruncationNote(dropped uint64, capBytes int64) string {
	var b strings.Builder
	b.WriteString("[output truncated: ")
	b.WriteString(thousands(dropped))
	b.WriteString(" bytes dropped")
	if capBytes > 0 {
		b.WriteString(" — the cap is ")
		b.WriteString(thousands(uint64(capBytes)))
		b.WriteString(" bytes")
	}
	b.WriteString("; write large data to a file in /workspace or return a summary]")
	return b.String()
}

// thousands formats n with comma separators, e.g. 1,234,567.
func thousands(n uint64) string {
	s := strconv.FormatUint(n, 10)
	if len(s) <= 3 {
		return s
	}
	var b strings.Builder
	lead := len(s) % 3
	if lead > 0 {
		b.WriteString(s[:lead])
	}
	for i := lead; i < len(s); i += 3 {
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		b.WriteString(s[i : i+3])
	}
	return b.String()
}
