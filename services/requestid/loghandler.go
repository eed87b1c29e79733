package requestid

import (
	"context"
	"log/slog"

	"github.com/codeexec/codeexec/services/logkeys"
)

// LogHandler adds the context's request ID to every record logged with a
// context (InfoContext, LogAttrs, …), so that each line of one MCP call
// can be found in every service's logs. Records that already carry the
// key are left alone.
type LogHandler struct {
	slog.Handler
}

// NewLogHandler wraps h.
func NewLogHandler(h slog.Handler) *LogHandler { return &LogHandler{Handler: h} }

// Handle implements slog.Handler.
func (h *LogHandler) Handle(ctx context.Context, r slog.Record) error {
	if id := From(ctx); id != "" {
		has := false
		r.Attrs(func(a slog.Attr) bool {
			has = a.Key == logkeys.RequestID
			return !has
		})
		if !has {
			r = r.Clone()
			r.AddAttrs(slog.String(logkeys.RequestID, id))
		}
	}
	return h.Handler.Handle(ctx, r)
}

// WithAttrs implements slog.Handler.
func (h *LogHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return &LogHandler{Handler: h.Handler.WithAttrs(as)}
}

// WithGroup implements slog.Handler.
func (h *LogHandler) WithGroup(name string) slog.Handler {
	return &LogHandler{Handler: h.Handler.WithGroup(name)}
}
