"""The channel's message types as the agent sees them (docs/PROTOCOL.md).

The Go side of this contract is sandboxd/internal/channel. Here: the call
methods and their parameters (one Method each, as Go has one Request type
each), the exec frame, and the exceptions a failed call raises, one per
error code of a failed `reply`.

A new call method is one Method below and one channel.Request in Go;
TestAgentMatchesTheChannel (sandboxd/internal/agent) holds the two lists
to each other.
"""


class Method:
    """One call method: the `m` of its call frames and the parameters its
    `p` holds; those in `optional` may be left out."""

    __slots__ = ("name", "required", "optional")

    def __init__(self, name, required=(), optional=()):
        self.name = name
        self.required = tuple(required)
        self.optional = tuple(optional)

    def params(self, given):
        """given (a dict of parameters), checked. A missing or unknown
        parameter is a bug in the agent, so it fails before anything is
        sent."""
        missing = [k for k in self.required if k not in given]
        unknown = [k for k in given if k not in self.required and k not in self.optional]
        if missing or unknown:
            raise TypeError("%s: missing parameters %s, unknown parameters %s" % (self.name, missing, unknown))
        return given

    def __repr__(self):
        return "<call method %s>" % self.name


LIST_SERVERS = Method("list_servers")
LIST_TOOLS = Method("list_tools", ("server",))
CALL_TOOL = Method("call_tool", ("server", "tool", "arguments"))
QUERY_TOOL_DOCS = Method("query_tool_docs", ("server", "detail"), ("tool",))
SEARCH_TOOL_DOCS = Method("search_tool_docs", ("query", "limit", "detail"))
SAVE_MEMORY = Method("memory.save", ("key", "value"), ("metadata",))
LOAD_MEMORY = Method("memory.load", ("key",))
UPDATE_MEMORY = Method("memory.update", ("key", "value", "revision"))
DELETE_MEMORY = Method("memory.delete", ("key",))
LIST_MEMORIES = Method("memory.list")
SAVE_TOOL = Method("tool.save", ("name", "source", "docstring"))
LIST_SAVED_TOOLS = Method("tool.list")
DELETE_SAVED_TOOL = Method("tool.delete", ("name",))

METHODS = {m.name: m for m in (
    LIST_SERVERS, LIST_TOOLS, CALL_TOOL, QUERY_TOOL_DOCS, SEARCH_TOOL_DOCS, SAVE_MEMORY, LOAD_MEMORY,
    UPDATE_MEMORY, DELETE_MEMORY, LIST_MEMORIES, SAVE_TOOL, LIST_SAVED_TOOLS, DELETE_SAVED_TOOL)}


class Exec:
    """An `exec` frame: code to run and what it may use."""

    __slots__ = ("id", "code", "servers", "discovered", "unloaded", "limit", "first", "saved_tools", "checkpoint",
                 "display", "budget", "workspace")

    def __init__(self, msg):
        self.id = msg.get("id")
        self.code = msg.get("code") or ""
        self.servers = msg.get("servers") or []
        self.discovered = msg.get("discovered") or []
        self.unloaded = msg.get("unloaded") or []
        try:
            self.limit = max(0, int(msg.get("limit") or 0))
        except (TypeError, ValueError):
            self.limit = 0
        self.first = bool(msg.get("first"))
        # saved_tools, on a first exec, are the tenant's saved tools as
        # tool.list gives them; None (absent) means ask with tool.list.
        saved = msg.get("saved_tools")
        self.saved_tools = saved if isinstance(saved, list) else None
        # checkpoint, when positive, asks for a checkpoint of the session
        # after the exec, of at most that many bytes (docs/PROTOCOL.md).
        try:
            self.checkpoint = max(0, int(msg.get("checkpoint") or 0))
        except (TypeError, ValueError):
            self.checkpoint = 0
        # display bounds the images the exec sends (codeexec_display.Limits);
        # budget, when positive, bounds the characters of output sent
        # (codeexec_output), the rest kept in a file in the workspace.
        self.display = msg.get("display") if isinstance(msg.get("display"), dict) else None
        budget = msg.get("budget")
        self.budget = budget if type(budget) is int and budget > 0 else 0
        # workspace, with checkpoint, caps the bytes of the workspace's
        # files the checkpoint holds; 0 keeps no files.
        ws = msg.get("workspace")
        self.workspace = ws if type(ws) is int and ws > 0 else 0


class Restore:
    """The `restore` frames of one restore, gathered: a checkpoint's
    manifest and its chunks (the frames' blobs, several frames when
    large)."""

    __slots__ = ("manifest", "chunks", "saved_tools")

    def __init__(self):
        self.manifest = None
        self.chunks = {}
        # As Exec's: the saved tools for a checkpoint that holds
        # user_tools; None (absent) means ask with tool.list.
        self.saved_tools = None

    def add(self, msg):
        """Adds one frame; True when it was the last."""
        self.chunks.update(msg.get("blobs") or {})
        if msg.get("last"):
            self.manifest = msg.get("manifest")
            saved = msg.get("saved_tools")
            self.saved_tools = saved if isinstance(saved, list) else None
            return True
        return False


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


class ApprovalError(PermissionDeniedError):
    """A tool call that needs a person's approval did not get it: the
    subclasses say whether the person said no or could not be asked."""


ApprovalDeclinedError = type("ApprovalDeclinedError", (ApprovalError,), {
    "code": "approval_declined",
    "__doc__": "The person asked to approve the tool call declined it, or dismissed the question."})
ApprovalUnavailableError = type("ApprovalUnavailableError", (ApprovalError,), {
    "code": "approval_unavailable",
    "__doc__": "The tool call needs a person's approval and nobody could be asked; the message says how to allow it."})
LimitExceededError = _kind("LimitExceededError", "limit_exceeded",
                           "The run_python call has made as many tool calls as it may; the message names the limit.")

ERRORS = (MCPError, NotFoundError, ConflictError, InvalidArgumentError, FailedPreconditionError,
          PermissionDeniedError, UnavailableError, DeadlineExceededError, ApprovalDeclinedError,
          ApprovalUnavailableError, LimitExceededError)
_BY_CODE = {cls.code: cls for cls in ERRORS}


class ToolError(MCPError):
    """A tool call failed: the MCP server answered with isError: true
    (code "tool_error"), refused the call with a JSON-RPC error, or the
    call could not be made (bad arguments, server not loaded or down).

    server, tool and message say which call failed and why;
    structured_content is the result's structuredContent (None when it
    had none) and result the whole CallToolResult dict (None when there
    was no result). A failure with a code of its own is also an instance
    of that code's class, so `except runtime.InvalidArgumentError` still
    catches a bad argument.
    """

    code = "tool_error"

    def __init__(self, message, server="", tool="", structured_content=None, result=None):
        super().__init__(message)
        self.server = server
        self.tool = tool
        self.message = message
        self.structured_content = structured_content
        self.result = result


_TOOL_KINDS = {}  # code class -> its subclass that is also a ToolError


def tool_error(exc, server, tool):
    """exc, a failed call_tool reply's MCPError, as a ToolError that is
    also of exc's class (an InvalidArgumentError stays one)."""
    if isinstance(exc, ToolError):
        return exc
    cls = type(exc)
    kind = ToolError if cls is MCPError else _TOOL_KINDS.get(cls)
    if kind is None:
        kind = _TOOL_KINDS[cls] = type(cls.__name__, (cls, ToolError), {"__doc__": cls.__doc__,
                                                                       "__module__": "mcp.runtime"})
    err = kind(str(exc), server, tool)
    err.code = exc.code
    return err


# What mcp.runtime exports: the classes of the channel's error codes, and
# ToolError, whose "tool_error" code is the agent's own (an isError result).
EXPORTED = ERRORS + (ApprovalError, ToolError)
for _cls in EXPORTED:
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
