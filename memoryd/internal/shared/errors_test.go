package shared

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/codeexec/codeexec/memoryd/internal/store"
)

// Every store sentinel crosses the shared protocol and comes back as
// itself, with its message; anything else is logged by the owner and
// not sent.
func TestStoreErrorsCrossTheSocket(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		err  error
		code codes.Code
		is   error
		// same: the caller gets the owner's message.
		same bool
	}{
		{fmt.Errorf("%w: no memory %q", store.ErrNotFound, "k"), codes.NotFound, store.ErrNotFound, true},
		{fmt.Errorf("%w: revision 3, not 2", store.ErrConflict), codes.Aborted, store.ErrConflict, true},
		{fmt.Errorf("%w: bad key", store.ErrInvalid), codes.InvalidArgument, store.ErrInvalid, true},
		{fmt.Errorf("%w: 9 MiB over 8", store.ErrTooLarge), codes.ResourceExhausted, store.ErrTooLarge, true},
		{fmt.Errorf("put: %w", context.DeadlineExceeded), codes.DeadlineExceeded, context.DeadlineExceeded, false},
		{store.ErrClosed, codes.Unavailable, errRetry, false},
	} {
		t.Run(tc.code.String(), func(t *testing.T) {
			t.Parallel()
			sent := storeStatus(t.Context(), slog.New(slog.DiscardHandler), tc.err)
			if status.Code(sent) != tc.code {
				t.Fatalf("storeStatus(%v) = %v, want %v", tc.err, sent, tc.code)
			}
			got := answer(sent)
			if !errors.Is(got, tc.is) {
				t.Errorf("answer(%v) = %v, want an error that is %v", sent, got, tc.is)
			}
			if tc.same && got.Error() != tc.err.Error() {
				t.Errorf("answer(%v) says %q, want the owner's %q", sent, got, tc.err)
			}
		})
	}
	t.Run("internal", func(t *testing.T) {
		t.Parallel()
		var logs bytes.Buffer
		const cause = "bbolt: page 7 out of range in /home/u/.local/state/codeexec/codeexec.db"
		sent := storeStatus(t.Context(), slog.New(slog.NewTextHandler(&logs, nil)), errors.New(cause))
		if status.Code(sent) != codes.Internal || strings.Contains(status.Convert(sent).Message(), "bbolt") {
			t.Errorf("storeStatus sent %v: want INTERNAL without the cause", sent)
		}
		if !strings.Contains(logs.String(), "page 7 out of range") {
			t.Errorf("the owner's log lacks the cause: %s", logs.String())
		}
	})
}
