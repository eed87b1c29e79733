package ratelog

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"
)

func TestLimiter(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{
		ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
			if a.Key == slog.TimeKey {
				return slog.Attr{}
			}
			return a
		},
	})).With("sandbox.id", "s1")
	now := time.Unix(0, 0)
	l := &Limiter{Burst: 2, Interval: time.Second, MaxValue: 8, Now: func() time.Time { return now }}
	ctx := context.Background()
	for range 5 {
		l.Warn(ctx, logger, "odd frame", "type", strings.Repeat("x", 20))
	}
	l.Warn(ctx, logger, "other", "error", errors.New("0123456789"))
	now = now.Add(time.Second)
	l.Warn(ctx, logger, "odd frame", "type", "short")
	l.Warn(ctx, logger, "odd frame", "type", "short")
	want := `level=WARN msg="odd frame" sandbox.id=s1 type="xxxxxxxx… (20 bytes)"
level=WARN msg="odd frame" sandbox.id=s1 type="xxxxxxxx… (20 bytes)"
level=WARN msg=other sandbox.id=s1 error="01234567… (10 bytes)"
level=WARN msg="odd frame" sandbox.id=s1 type=short suppressed=3
`
	if got := buf.String(); got != want {
		t.Errorf("log:\n%s\nwant:\n%s", got, want)
	}
}

func TestLimiterSkipsDisabledLevels(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelWarn}))
	var l Limiter
	for range 10 {
		l.Log(context.Background(), logger, slog.LevelDebug, "line", "line", "x")
	}
	l.Warn(context.Background(), logger, "line", "line", "x")
	if got := strings.Count(buf.String(), "msg=line"); got != 1 || strings.Contains(buf.String(), "suppressed") {
		t.Errorf("log %q: want one warning, nothing suppressed (debug records are not counted)", buf.String())
	}
}
