package broker

import (
	"errors"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/codeexec/codeexec/sandboxd/internal/channel"
)

// codeOf maps the gRPC codes of discoveryd and memoryd onto channel
// codes. A code not listed is CodeInternal.
var codeOf = map[codes.Code]channel.Code{
	codes.NotFound:           channel.CodeNotFound,
	codes.Aborted:            channel.CodeConflict, // memoryd: the revision moved
	codes.AlreadyExists:      channel.CodeConflict,
	codes.InvalidArgument:    channel.CodeInvalidArgument,
	codes.OutOfRange:         channel.CodeInvalidArgument,
	codes.FailedPrecondition: channel.CodeFailedPrecondition, // discoveryd: the MCP server refused the request
	codes.PermissionDenied:   channel.CodePermissionDenied,
	codes.Unauthenticated:    channel.CodePermissionDenied,
	codes.Unavailable:        channel.CodeUnavailable,
	codes.ResourceExhausted:  channel.CodeFailedPrecondition, // memoryd: the tenant is at a quota; retrying cannot help
	codes.Canceled:           channel.CodeUnavailable,
	codes.DeadlineExceeded:   channel.CodeDeadlineExceeded,
}

// callError gives a handler's error its code. It is the one place where a
// call's gRPC status becomes a channel code. Errors the broker makes
// itself carry their code already; the message of a status passes on as
// the text the code sees.
func callError(err error) error {
	if e, ok := errors.AsType[*channel.Error](err); ok {
		return e
	}
	st, ok := status.FromError(err)
	if !ok {
		st = status.FromContextError(err) // Unknown for anything but a context error
	}
	code, ok := codeOf[st.Code()]
	if !ok {
		code = channel.CodeInternal
	}
	msg := st.Message()
	switch st.Code() {
	case codes.DeadlineExceeded:
		msg = "timed out: " + msg
	case codes.Unavailable:
		msg = "unavailable: " + msg
	default:
		// The code says the rest.
	}
	return &channel.Error{Code: code, Message: msg}
}
