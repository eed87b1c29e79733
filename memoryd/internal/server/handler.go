package server

import (
	"context"
	"log/slog"
	"time"

	"google.golang.org/grpc/status"

	"github.com/codeexec/codeexec/memoryd/internal/store"
)

// handle runs one operation: it times it, maps its error to a status once
// and records the outcome.
func handle[T any](ctx context.Context, h *handler, op string, fn func() (T, error)) (T, error) {
	start := time.Now()
	resp, err := fn()
	err = toStatus(ctx, h.logger, op, err)
	h.metrics.opSeconds.WithLabelValues(op, status.Code(err).String()).Observe(time.Since(start).Seconds())
	if err != nil {
		var zero T
		return zero, err
	}
	return resp, nil
}

// handler is the state the Memory and Tools servers share.
type handler struct {
	store         store.Store
	logger        *slog.Logger
	metrics       *Metrics
	maxValueBytes int
	spoolDir      string
	quotas        Quotas
	locks         tenantLocks // see Quotas
}
