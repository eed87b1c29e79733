package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"github.com/mark3labs/mcp-go/mcp"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/codeexec/codeexec/discoveryd/internal/upstream"
	discoveryv1 "github.com/codeexec/codeexec/proto/gen/codeexec/discovery/v1"
	"github.com/codeexec/codeexec/services/logkeys"
)

// errInvalid marks bad request fields.
var errInvalid = errors.New("invalid argument")

// errNotKnown is a known_only request for a server whose tools are not
// known yet.
var errNotKnown = errors.New("tools not known yet")

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: %s", errInvalid, fmt.Sprintf(format, args...))
}

// named rejects a request that names no server.
func named(server string) error {
	if strings.TrimSpace(server) == "" {
		return invalid("server is empty; name one of the servers that ListServers returns")
	}
	return nil
}

// answer is an RPC's reply: resp, or err mapped to a status by toStatus.
func answer[T any](ctx context.Context, s *Server, method string, resp T, err error) (T, error) {
	if err != nil {
		var zero T
		return zero, s.toStatus(ctx, method, err)
	}
	return resp, nil
}

// toStatus translates an error into a gRPC status, once, in one place.
// The messages of domain errors are written for users and pass through;
// anything unexpected is logged and replaced by a generic message.
func (s *Server) toStatus(ctx context.Context, method string, err error) error {
	if ae, ok := errors.AsType[*ApprovalError](err); ok {
		st, derr := status.New(codes.FailedPrecondition, ae.Error()).WithDetails(&discoveryv1.ApprovalRequired{Server: ae.Server, Tool: ae.Tool, Reason: ae.Reason})
		if derr != nil {
			return status.Error(codes.FailedPrecondition, ae.Error())
		}
		return st.Err()
	}
	code := codes.Internal
	switch {
	case errors.Is(err, errRateLimited):
		code = codes.ResourceExhausted
	case errors.Is(err, errInvalid):
		code = codes.InvalidArgument
	case errors.Is(err, upstream.ErrUnknownServer), errors.Is(err, upstream.ErrUnknownTool):
		code = codes.NotFound
	case errors.Is(err, errNotKnown):
		code = codes.FailedPrecondition
	case errors.Is(err, upstream.ErrTimeout):
		code = codes.DeadlineExceeded
	case errors.Is(err, upstream.ErrStartFailed), errors.Is(err, upstream.ErrCrashed), errors.Is(err, upstream.ErrClosed):
		code = codes.Unavailable
	case errors.Is(err, upstream.ErrRejected):
		// The server is alive and refused the request; invalid params is
		// the caller's to fix, anything else is the server's state.
		code = codes.FailedPrecondition
		if errors.Is(err, mcp.ErrInvalidParams) {
			code = codes.InvalidArgument
		}
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return status.FromContextError(err).Err()
	}
	if code == codes.Internal {
		s.logger.ErrorContext(ctx, "discoveryd internal error", logkeys.GRPCMethod, method, logkeys.Error, err)
		return status.Error(codes.Internal, "discoveryd: internal error; see the discoveryd log")
	}
	s.logger.Log(ctx, slog.LevelDebug, "discoveryd request failed", logkeys.GRPCMethod, method, logkeys.Error, err)
	return status.Error(code, err.Error())
}
