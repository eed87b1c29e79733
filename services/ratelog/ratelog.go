// Package ratelog keeps a log that an untrusted peer can make write (a
// sandbox's frames, its stderr) from being flooded: each kind of record is
// written a few times, then at most once an interval, saying how many
// were left out, and its string values are cut short.
package ratelog

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"
)

// Defaults of a Limiter's zero fields.
const (
	DefaultBurst    = 5
	DefaultInterval = 10 * time.Second
	DefaultMaxValue = 200
)

// Limiter limits the records of each kind (its message) that pass
// through it. The zero value is ready to use; one Limiter serves one
// source (one sandbox), so that one's flood does not silence another.
type Limiter struct {
	// Burst records of a kind are written before the limit applies; then
	// one per Interval. MaxValue bounds a string value, in bytes.
	Burst    int
	Interval time.Duration
	MaxValue int
	// Now is the clock; tests replace it.
	Now func() time.Time

	mu    sync.Mutex
	kinds map[string]*kind
}

type kind struct {
	written, left int
	last          time.Time
}

// Log writes a record of msg at level through logger, unless its kind is
// over its limit: then it is counted, and the next one written says how
// many were left out ("suppressed"). String values longer than MaxValue
// are cut, saying how long they were.
func (l *Limiter) Log(ctx context.Context, logger *slog.Logger, level slog.Level, msg string, args ...any) {
	if !logger.Enabled(ctx, level) {
		return
	}
	left, ok := l.admit(msg)
	if !ok {
		return
	}
	r := slog.NewRecord(l.now(), level, msg, 0)
	r.Add(args...)
	out := slog.NewRecord(r.Time, level, msg, 0)
	r.Attrs(func(a slog.Attr) bool {
		out.AddAttrs(l.cut(a))
		return true
	})
	if left > 0 {
		out.AddAttrs(slog.Int("suppressed", left))
	}
	_ = logger.Handler().Handle(ctx, out)
}

// Warn is Log at slog.LevelWarn.
func (l *Limiter) Warn(ctx context.Context, logger *slog.Logger, msg string, args ...any) {
	l.Log(ctx, logger, slog.LevelWarn, msg, args...)
}

// admit counts a record of kind msg and reports whether to write it, with
// how many of its kind were left out since the last one written.
func (l *Limiter) admit(msg string) (left int, ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.kinds == nil {
		l.kinds = map[string]*kind{}
	}
	k := l.kinds[msg]
	if k == nil {
		k = &kind{}
		l.kinds[msg] = k
	}
	now := l.now()
	burst, interval := l.Burst, l.Interval
	if burst <= 0 {
		burst = DefaultBurst
	}
	if interval <= 0 {
		interval = DefaultInterval
	}
	if k.written >= burst && now.Sub(k.last) < interval {
		k.left++
		return 0, false
	}
	k.written++
	k.last = now
	left, k.left = k.left, 0
	return left, true
}

// cut shortens a's string values (in groups too) to MaxValue bytes.
func (l *Limiter) cut(a slog.Attr) slog.Attr {
	limit := l.MaxValue
	if limit <= 0 {
		limit = DefaultMaxValue
	}
	v := a.Value.Resolve()
	switch v.Kind() {
	case slog.KindString:
		if s := v.String(); len(s) > limit {
			return slog.String(a.Key, fmt.Sprintf("%s… (%d bytes)", s[:limit], len(s)))
		}
	case slog.KindGroup:
		var as []any
		for _, g := range v.Group() {
			as = append(as, l.cut(g))
		}
		return slog.Group(a.Key, as...)
	case slog.KindAny:
		if err, ok := v.Any().(error); ok {
			return l.cut(slog.String(a.Key, err.Error()))
		}
	default: // numbers, times, durations: short already
	}
	return slog.Attr{Key: a.Key, Value: v}
}

func (l *Limiter) now() time.Time {
	if l.Now != nil {
		return l.Now()
	}
	return time.Now()
}
