"""The channel's message types as the agent sees them (docs/PROTOCOL.md).

The Go side of this contract is sandboxd/internal/channel. Here: the
exceptions a failed call raises, one per error code of a failed `reply`.
"""


class MCPError(RuntimeError):
    """A request to sandboxd (tool call, discovery, memory) failed.

    `code` says what kind of failure it was; the subclasses below carry
    one code each, so `except runtime.ConflictError` catches one kind while
    `except runtime.MCPError` still catches them all. A failure of the
    "internal" code, or of a code this agent does not know, is an MCPError
    itself.
    """

    code = "internal"


def _kind(name, code, doc):
    """A subclass of MCPError for one error code."""
    return type(name, (MCPError,), {"code": code, "__doc__": doc})


# One class per error code of a failed reply (docs/PROTOCOL.md#errors).
NotFoundError = _kind("NotFoundError", "not_found", "What the call names does not exist.")
ConflictError = _kind("ConflictError", "conflict", "Another writer got there first (update_memory retries on it).")
InvalidArgumentError = _kind("InvalidArgumentError", "invalid_argument",
                             "The call's arguments are wrong, whatever the state of the world.")
FailedPreconditionError = _kind("FailedPreconditionError", "failed_precondition",
                                "The call cannot be done now: the MCP server refused it, or the "
                                "run_python call that made it has finished.")
PermissionDeniedError = _kind("PermissionDeniedError", "permission_denied",
                              "This call may not do that, such as use a server it did not load.")
UnavailableError = _kind("UnavailableError", "unavailable",
                         "A service or MCP server is down or missing; a later try may work.")
DeadlineExceededError = _kind("DeadlineExceededError", "deadline_exceeded", "The answer did not come in time.")

ERRORS = (MCPError, NotFoundError, ConflictError, InvalidArgumentError, FailedPreconditionError,
          PermissionDeniedError, UnavailableError, DeadlineExceededError)
_BY_CODE = {cls.code: cls for cls in ERRORS}

for _cls in ERRORS:
    _cls.__module__ = "mcp.runtime"  # where user code finds them


def error_from(method, err):
    """The exception for a failed reply's `error` ({code, message})."""
    if isinstance(err, dict):
        code, message = err.get("code"), err.get("message")
    else:  # not a protocol sandboxd speaks, but say what came
        code, message = None, err
    cls = _BY_CODE.get(code, MCPError)
    exc = cls(str(message or "%s failed without an error message" % method))
    if isinstance(code, str) and cls is MCPError:
        exc.code = code
    return exc
