package requestid

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"
)

func TestLogHandler(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	logger := slog.New(NewLogHandler(slog.NewTextHandler(&buf, nil))).With("service", "x")
	ctx := With(context.Background(), "abc123")
	for _, tc := range []struct {
		name string
		log  func()
		want string
	}{
		{"with context", func() { logger.InfoContext(ctx, "hello") }, "msg=hello service=x request.id=abc123\n"},
		{"already set", func() { logger.InfoContext(ctx, "hello", "request.id", "given") }, "msg=hello service=x request.id=given\n"},
		{"no id", func() { logger.InfoContext(context.Background(), "hello") }, "msg=hello service=x\n"},
		{"group", func() { logger.WithGroup("g").InfoContext(ctx, "hello", "k", 1) }, "msg=hello service=x g.k=1 g.request.id=abc123\n"},
	} {
		buf.Reset()
		tc.log()
		if got := buf.String(); !strings.HasSuffix(got, tc.want) {
			t.Errorf("%s: logged %q, want it to end with %q", tc.name, got, tc.want)
		}
	}
}
