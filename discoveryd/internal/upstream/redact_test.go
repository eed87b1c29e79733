package upstream

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"testing"
)

func TestRedactURLs(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ in, want string }{
		{`server "x" at https://u:p@h:8080/mcp?api_key=K&v=: transport error: Post "https://u:***@h:8080/mcp?api_key=K&v=": EOF`,
			`server "x" at https://***@h:8080/mcp?api_key=***&v=: transport error: Post "https://***@h:8080/mcp?api_key=***&v=": EOF`},
		{"token only https://ghp_TOKEN@api.example.com/mcp/", "token only https://***@api.example.com/mcp/"},
		{"no secrets http://127.0.0.1:3000/mcp, then more.", "no secrets http://127.0.0.1:3000/mcp, then more."},
		{"fragment and flag https://h/sse?debug#tok", "fragment and flag https://h/sse?debug#***"},
		{"unparsable https://u:p@h:port/x?k=v", "unparsable https://***@h:port/…"},
		{"no URL at all: api_key=K", "no URL at all: api_key=K"},
	} {
		if got := redactURLs(tc.in); got != tc.want {
			t.Errorf("redactURLs(%q)\n = %q\nwant %q", tc.in, got, tc.want)
		}
	}
	inner := errors.New(`Post "https://h/mcp?key=S": EOF`)
	err := redact(errWrap(inner))
	if !errors.Is(err, ErrStartFailed) || !errors.Is(err, inner) || strings.Contains(err.Error(), "S\"") {
		t.Errorf("redact(%v) = %v: want the secret hidden and errors.Is to see both errors", inner, err)
	}
	var buf bytes.Buffer
	logger := slog.New(redactingHandler{slog.NewTextHandler(&buf, nil)}).With("url", "https://h/?key=S1")
	logger.Error("failed https://h/?key=S2", "err", inner, slog.Group("x", "u", "https://u@h/"))
	if out := buf.String(); strings.Contains(out, "S1") || strings.Contains(out, "S2") || strings.Contains(out, "key=S") || strings.Contains(out, "u@h") {
		t.Errorf("the log shows a secret: %s", out)
	}
}

func errWrap(err error) error { return errors.Join(ErrStartFailed, err) }
