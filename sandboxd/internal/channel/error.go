package channel

import (
	"errors"
	"fmt"
)

// Code says what kind of failure a failed Reply reports, so that the agent
// can raise a typed exception (a ConflictError for CodeConflict) instead of
// matching words in a message.
type Code string

// The codes of a failed reply. The broker maps gRPC statuses onto them in
// one place; the agent maps each onto an exception class.
const (
	// CodeNotFound: what the call names does not exist.
	CodeNotFound Code = "not_found"
	// CodeConflict: another writer got there first (memory.update's
	// revision moved); the whole read-modify-write may be retried.
	CodeConflict Code = "conflict"
	// CodeInvalidArgument: the call's parameters are wrong, whatever the
	// state of the world.
	CodeInvalidArgument Code = "invalid_argument"
	// CodeFailedPrecondition: the call is well formed but cannot be done
	// now: an MCP server refused it, or its exec is over.
	CodeFailedPrecondition Code = "failed_precondition"
	// CodePermissionDenied: the exec may not do this, such as calling a
	// server that is not loaded in it.
	CodePermissionDenied Code = "permission_denied"
	// CodeUnavailable: a service or MCP server is down, missing from this
	// deployment, or overloaded; a later try may work.
	CodeUnavailable Code = "unavailable"
	// CodeDeadlineExceeded: the answer did not come in time.
	CodeDeadlineExceeded Code = "deadline_exceeded"
	// CodeApprovalDeclined: a person asked to approve the tool call
	// declined it or dismissed the question.
	CodeApprovalDeclined Code = "approval_declined"
	// CodeApprovalUnavailable: the tool call needs a person's approval and
	// nobody could be asked (the client cannot show the question).
	CodeApprovalUnavailable Code = "approval_unavailable"
	// CodeLimitExceeded: the exec has made as many tool calls as it may.
	CodeLimitExceeded Code = "limit_exceeded"
	// CodeInternal: anything else; a bug somewhere.
	CodeInternal Code = "internal"
)

// Codes returns every Code, for the tests that hold the agent's exception
// classes to this list.
func Codes() []Code {
	return []Code{
		CodeNotFound, CodeConflict, CodeInvalidArgument, CodeFailedPrecondition,
		CodePermissionDenied, CodeUnavailable, CodeDeadlineExceeded, CodeInternal,
		CodeApprovalDeclined, CodeApprovalUnavailable, CodeLimitExceeded,
	}
}

// Error is why a call failed: a code for programs and a message for people.
type Error struct {
	Code    Code   `json:"code"`
	Message string `json:"message"`
}

// Error implements error; it is the message alone.
func (e *Error) Error() string { return e.Message }

// Errorf returns an *Error with code and a formatted message.
func Errorf(code Code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// AsError returns the *Error in err's chain, or err as a CodeInternal
// error: every failed reply has a code.
func AsError(err error) *Error {
	if e, ok := errors.AsType[*Error](err); ok {
		return e
	}
	return &Error{Code: CodeInternal, Message: err.Error()}
}
