package server

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/codeexec/codeexec/sandboxd/internal/session"
)

// A failure sandboxd has no code for is logged with its cause, and the
// caller gets INTERNAL without it; classified errors keep their message.
func TestToStatusHidesInternalCauses(t *testing.T) {
	t.Parallel()
	var logs bytes.Buffer
	s := &server{logger: slog.New(slog.NewTextHandler(&logs, nil))}
	const cause = "start sandbox: open /var/lib/codeexec/envs/abc/rootfs: permission denied"
	err := s.toStatus(t.Context(), errors.New(cause))
	if status.Code(err) != codes.Internal || strings.Contains(status.Convert(err).Message(), "/var/lib") {
		t.Errorf("toStatus sent %v: want INTERNAL without the cause", err)
	}
	if !strings.Contains(logs.String(), "permission denied") {
		t.Errorf("the log lacks the cause: %s", logs.String())
	}
	err = s.toStatus(t.Context(), fmt.Errorf("%w: session abc", session.ErrNotFound))
	if status.Code(err) != codes.NotFound || status.Convert(err).Message() != "session abc" {
		t.Errorf("toStatus(ErrNotFound) = %v, want NotFound with its message", err)
	}
}
