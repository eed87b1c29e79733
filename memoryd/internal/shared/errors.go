package shared

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/codeexec/codeexec/memoryd/internal/store"
	"github.com/codeexec/codeexec/services/logkeys"
)

// sentinelCodes is the shared protocol's one map between the store's
// sentinel errors and status codes, read one way by the owner (storeStatus)
// and the other by its callers (fromStatus). The codes are an encoding, not
// an answer to a client: each sentinel has a code of its own, so that the
// caller gets the very sentinel back and its memoryd handlers pick the
// status their client sees, as over a local store. That is why ErrTooLarge
// travels here as RESOURCE_EXHAUSTED, though the memory API answers it
// INVALID_ARGUMENT (memoryd/internal/server/errors.go): INVALID_ARGUMENT
// already stands for ErrInvalid.
var sentinelCodes = []struct {
	sentinel error
	code     codes.Code
}{
	{store.ErrNotFound, codes.NotFound},
	{store.ErrConflict, codes.Aborted},
	{store.ErrInvalid, codes.InvalidArgument},
	{store.ErrTooLarge, codes.ResourceExhausted},
}

// storeStatus is the owner's answer for a store error. UNAVAILABLE is kept
// for "no owner got this": a closing owner's callers retry on the next.
// Any other failure is logged here and named only by the owner's PID.
func storeStatus(ctx context.Context, logger *slog.Logger, err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return status.FromContextError(err).Err()
	}
	for _, sc := range sentinelCodes {
		if errors.Is(err, sc.sentinel) {
			return status.Error(sc.code, err.Error())
		}
	}
	if errors.Is(err, store.ErrClosed) {
		return status.Error(codes.Unavailable, "the owner of the database is closing it")
	}
	logger.ErrorContext(ctx, "shared store request failed", slog.Any(logkeys.Error, err))
	return status.Errorf(codes.Internal, "the owner of the database (codeexec pid %d) failed; see its log", os.Getpid())
}

// remoteError keeps the owner's message and unwraps to the store sentinel
// its code stands for.
type remoteError struct {
	sentinel error
	msg      string
}

func (e *remoteError) Error() string { return e.msg }
func (e *remoteError) Unwrap() error { return e.sentinel }

// fromStatus maps the owner's answer back to what a local store returns.
func fromStatus(err error) error {
	st, ok := status.FromError(err)
	if !ok {
		return err
	}
	for _, sc := range sentinelCodes {
		if st.Code() == sc.code {
			return &remoteError{sc.sentinel, st.Message()}
		}
	}
	switch st.Code() {
	case codes.Canceled:
		return context.Canceled
	case codes.DeadlineExceeded:
		return context.DeadlineExceeded
	default:
		return fmt.Errorf("shared memory store: %s", st.Message())
	}
}

// answer maps one attempt's error: UNAVAILABLE (no owner, or the owner
// died handling the call) becomes errRetry, the rest what a local store
// would return.
func answer(err error) error {
	if err == nil {
		return nil
	}
	if status.Code(err) == codes.Unavailable {
		// The status stays text: wrapped, it would be found again by
		// status.FromError and mapped as the caller's own failure.
		return fmt.Errorf("%w: %v", errRetry, err) //nolint:errorlint // see above
	}
	return fromStatus(err)
}
