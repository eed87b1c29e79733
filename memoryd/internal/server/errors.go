package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/codeexec/codeexec/memoryd/internal/store"
	"github.com/codeexec/codeexec/services/logkeys"
)

// logKeyOp names the memoryd operation (memory.save, tool.list, ...) in
// logs; it matches the op label of the latency histogram.
const logKeyOp = "memory.op"

// toStatus turns a domain error into a gRPC status. It is the only place
// where memoryd picks status codes. Domain errors carry messages written
// for clients and pass through; anything else is logged once and hidden
// behind a generic message.
func toStatus(ctx context.Context, logger *slog.Logger, op string, err error) error {
	if err == nil {
		return nil
	}
	switch {
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return status.FromContextError(err).Err()
	case errors.Is(err, store.ErrNotFound):
		return status.Error(codes.NotFound, err.Error())
	case errors.Is(err, store.ErrInvalid):
		return status.Error(codes.InvalidArgument, err.Error())
	case errors.Is(err, store.ErrTooLarge):
		// A value over the cap is bad input, not a full server: retrying
		// cannot help, so InvalidArgument rather than ResourceExhausted.
		// (The shared store's protocol carries it as ResourceExhausted,
		// only to tell it from ErrInvalid; see shared.sentinelCodes.)
		return status.Error(codes.InvalidArgument, err.Error())
	case errors.Is(err, errQuota):
		return status.Error(codes.ResourceExhausted, err.Error())
	case errors.Is(err, store.ErrConflict):
		// Aborted is gRPC's code for a failed optimistic-concurrency
		// check: the client should retry the whole read-modify-write.
		return status.Error(codes.Aborted, err.Error())
	case errors.Is(err, store.ErrClosed):
		return status.Error(codes.Unavailable, "memoryd is shutting down")
	case errors.Is(err, store.ErrUnavailable):
		return status.Error(codes.Unavailable, err.Error())
	default:
		logger.ErrorContext(ctx, "memoryd request failed", slog.String(logKeyOp, op), slog.Any(logkeys.Error, err))
		return status.Error(codes.Internal, "memoryd internal error; see the memoryd log")
	}
}

// wrapNotFound gives a bare store.ErrNotFound a message that names the
// missing record.
func wrapNotFound(err error, what, key string) error {
	if errors.Is(err, store.ErrNotFound) {
		return fmt.Errorf("%w: no %s %q in this tenant", store.ErrNotFound, what, key)
	}
	return err
}
