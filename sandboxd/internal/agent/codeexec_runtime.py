"""The functions of `mcp.runtime` and the metadata of the current exec.

Names and signatures follow upstream (reference/upstream-behaviour.md §3).
Discovery helpers marked sync answer from the metadata that came with the
current exec; the async ones ask sandboxd. Every failed request raises
MCPError (a subclass of it that names the reply's error code).
"""

import os

from codeexec_protocol import (CALL_TOOL, LIST_SERVERS, LIST_TOOLS, QUERY_TOOL_DOCS, SEARCH_TOOL_DOCS, MCPError,
                               PermissionDeniedError, ToolError, error_from, tool_error)

_chan = None  # the Channel, set by set_channel()
_servers = []  # normalised metadata of the servers allowed for this exec
_by_key = {}  # name and alias -> metadata
_discovered = []  # [{name, description}] for every configured server
_unloaded = {}  # name -> {source, reason} of a config entry discoveryd did not load


def _alias(meta, kind, where, taken):
    """meta's alias, as discoveryd made it. The agent has no alias rules of
    its own, so a missing or repeated one is sandboxd's bug, said plainly.
    kind is "server" or "tool"; where says whose tool (or nothing)."""
    name, alias = meta.get("name"), meta.get("alias")
    if not isinstance(alias, str) or not alias:
        _bad_metadata("%s %r%s came without an alias" % (kind, name, where))
    if alias in taken:
        _bad_metadata("%ss %r and %r%s came with one alias, %r" % (kind, taken[alias], name, where, alias))
    taken[alias] = name
    return alias


def _bad_metadata(problem):
    raise MCPError("sandboxd sent metadata in which %s; aliases come from discoveryd, so this is a bug "
                   "in codeexec" % problem)


def normalise(servers):
    """Copies exec metadata into a fixed shape, with discoveryd's aliases."""
    out, taken = [], {}
    for s in servers or ():
        if not isinstance(s, dict):
            continue
        name = str(s.get("name") or "")
        tools, ttaken = [], {}
        for t in s.get("tools") or ():
            if not isinstance(t, dict):
                continue
            schema = t.get("input_schema")
            tools.append({
                "name": str(t.get("name") or ""),
                "alias": _alias(t, "tool", " of server %r" % name, ttaken),
                "description": str(t.get("description") or ""),
                "input_schema": schema if schema is not None else {},
            })
        meta = {
            "name": name,
            "alias": _alias(s, "server", "", taken),
            "description": str(s.get("description") or ""),
            "cwd": s.get("cwd"),
            "tools": tools,
        }
        err = s.get("error")
        if isinstance(err, dict):  # its tools could not be listed: {code, message}
            meta["error"] = {"code": err.get("code"), "message": str(err.get("message") or "")}
        out.append(meta)
    return out


def _copy(meta):
    d = dict(meta)
    d["tools"] = [dict(t) for t in meta["tools"]]
    if "error" in meta:
        d["error"] = dict(meta["error"])
    return d


def load_error(meta):
    """The exception a call to meta's server would raise, when its tools
    could not be listed for this exec (it failed to start); else None."""
    err = meta.get("error")
    if err is None:
        return None
    return error_from(LIST_TOOLS.name, err)


def _server(name):
    meta = _by_key.get(name)
    if meta is None:
        why = _unloaded.get(name)
        if why is not None:  # listing it in servers=[...] fails too: say what keeps it out
            raise MCPError("Server %r is not available: its config entry in %s was not loaded: %s"
                           % (name, why["source"], why["reason"]))
        loaded = ", ".join(m["name"] for m in _servers) or "none"
        raise MCPError(
            "Server %r is not loaded in this call (loaded: %s). "
            "List it in run_python's servers=[...] to use it." % (name, loaded)
        )
    exc = load_error(meta)
    if exc is not None:
        raise exc
    return meta


# --- async, answered by sandboxd ----------------------------------------------


def _arguments(arguments):
    if arguments is None:
        return {}
    if not isinstance(arguments, dict):
        raise MCPError("Arguments must be an object (dict), not %s" % type(arguments).__name__)
    return arguments


# TOOL_ERRORS_ENV is the setting for code written for upstream, whose tool
# calls returned a failed result as a dict: "return" makes them do so
# again; "raise" (the default) raises ToolError. sandboxd sets it from its
# --tool-errors flag, and code may set os.environ[TOOL_ERRORS_ENV] itself.
TOOL_ERRORS_ENV = "MCP_BRIDGE_TOOL_ERRORS"


def _raises(raise_on_error):
    """Whether a failed result raises: the call's raise_on_error, else the
    TOOL_ERRORS_ENV setting."""
    if raise_on_error is not None:
        return bool(raise_on_error)
    mode = os.environ.get(TOOL_ERRORS_ENV, "").strip().lower()
    if mode in ("", "raise"):
        return True
    if mode == "return":
        return False
    raise ValueError("%s is %r; it accepts \"raise\" (failed tool calls raise ToolError, the default) "
                     "or \"return\" (they return the CallToolResult dict, as upstream did)" % (TOOL_ERRORS_ENV, mode))


def error_text(result):
    """The text of a failed CallToolResult's content, for the message."""
    parts = []
    for c in result.get("content") or ():
        if isinstance(c, dict) and c.get("type") == "text" and c.get("text"):
            parts.append(str(c["text"]))
    return "\n".join(parts) or "the tool reported an error without a message"


def checked(server, tool, result, raise_on_error):
    """result, or ToolError when the server marked it isError and the call
    raises on errors."""
    if isinstance(result, dict) and result.get("isError") is True and _raises(raise_on_error):
        text = error_text(result)
        err = ToolError("tool %r of server %r failed: %s" % (tool, server, text), server, tool,
                        result.get("structuredContent"), result)
        err.message = text
        raise err
    return result


async def call_tool(server, tool, arguments=None, *, raise_on_error=None):
    """Calls `tool` on `server`; returns the CallToolResult as a dict. A
    failed call raises ToolError (also for isError results, unless
    raise_on_error=False or the MCP_BRIDGE_TOOL_ERRORS setting is
    "return")."""
    try:
        res = await _chan.call_async(CALL_TOOL, server=server, tool=tool, arguments=_arguments(arguments))
    except MCPError as exc:
        raise tool_error(exc, server, tool) from None
    return checked(server, tool, res, raise_on_error)


def call_tool_sync(server, tool, arguments=None, *, raise_on_error=None):
    """call_tool for code that is not async: blocks until the result."""
    try:
        res = _chan.call_sync(CALL_TOOL, server=server, tool=tool, arguments=_arguments(arguments))
    except MCPError as exc:
        raise tool_error(exc, server, tool) from None
    return checked(server, tool, res, raise_on_error)


def not_loaded(name, tool=None):
    """The error for using a configured server not loaded in this call
    (by its mcp_<alias> name or in a saved tool): how to load it, and why
    it would fail if it is broken."""
    d = next((d for d in _discovered if d["name"] == name), None)
    names = [m["name"] for m in _servers] + [name]
    load = "servers=[%s]" % ", ".join(_quoted(n) for n in names)
    # In the broker's words (names.go), which a kept proxy's call gets.
    if len(names) > 1:
        where = "it is not loaded in this call (loaded: %s)" % ", ".join(_quoted(n) for n in names[:-1])
    else:
        where = "no servers are loaded in this call"
    msg = "Server %r is not available: %s; pass %s to run_python" % (name, where, load)
    if d is not None and d.get("failed"):
        msg += "; note that its last start failed: %s" % d["failed"]
    why = _unloaded.get(name)
    if why is not None:
        msg = ("Server %r is not available: its config entry in %s was not loaded (%s), so %s would fail too"
               % (name, why["source"], why["reason"], load))
    err = PermissionDeniedError(msg)
    return tool_error(err, name, tool or "") if tool else err


def discovered_servers_meta():
    """Every configured server's {name, description, alias, failed}, and
    each config entry that was not loaded as {name, alias} (its alias made
    as discoveryd makes them, for want of one from it)."""
    out = [dict(d) for d in _discovered]
    for name in _unloaded:
        alias = "".join(c if c.isascii() and c.isalnum() else "_" for c in name.lower())
        out.append({"name": name, "description": "", "alias": alias, "failed": ""})
    return out


def _quoted(name):
    import json

    return json.dumps(name)


async def list_tools(server):
    """Lists `server`'s tools live from the server."""
    return list(await _chan.call_async(LIST_TOOLS, server=server) or ())


async def list_servers():
    """Names of the servers allowed for this call, as sandboxd sees them."""
    return tuple(await _chan.call_async(LIST_SERVERS) or ())


def _detail(detail):
    if detail not in ("summary", "full"):
        raise ValueError("detail must be 'summary' or 'full', not %r" % (detail,))
    return detail


async def query_tool_docs(server, tool=None, detail="summary"):
    """Docs for a server's tools (one dict when `tool` names exactly one).
    A server this call did not load is answered from what is known of its
    tools (its last listing, kept across processes) without starting it;
    one never listed raises the error that says how to load it."""
    p = {"server": server, "detail": _detail(detail)}
    if tool is not None:
        p["tool"] = tool
    docs = await _chan.call_async(QUERY_TOOL_DOCS, **p)
    if tool is not None and isinstance(docs, list) and len(docs) == 1:
        return docs[0]
    return docs


def _limit(limit):
    if isinstance(limit, bool) or not isinstance(limit, int):
        raise TypeError("limit must be an int, not %s" % type(limit).__name__)
    return max(1, min(20, limit))


class ToolDocs(list):
    """A search result: a list of docs (upstream's shape) that also says how
    many tools matched in all (`total`), whether the list was cut to the
    limit (`truncated`), and which servers could not be searched because
    they had not listed their tools yet (`unindexed`). Each doc's `match`
    says in a few words why the search returned it ("exact name",
    "name: screenshot (for picture)", "name: get; ranked up by meaning",
    or, when the search model found it without a word in common, "meaning
    only: no word in common with the query"), so that a weak hit shows as
    one."""

    def __init__(self, docs=(), total=None, truncated=False, unindexed=()):
        super().__init__(docs)
        self.total = len(self) if total is None else total
        self.truncated = bool(truncated)
        self.unindexed = tuple(unindexed or ())


ToolDocs.__module__ = "mcp.runtime"


def _search_params(query, limit, detail):
    return {"query": str(query), "limit": _limit(limit), "detail": _detail(detail)}


def _tool_docs(res):
    if isinstance(res, dict):
        return ToolDocs(res.get("results") or [], res.get("total"), res.get("truncated"), res.get("unindexed"))
    return ToolDocs(res or [])


async def search_tool_docs(query, *, limit=5, detail="summary"):
    """Searches the docs of every configured server's tools. Each hit says
    whether its server is loaded in this call (`loaded`) and the argument
    that loads it (`loadWith`, e.g. 'servers=["github"]')."""
    return _tool_docs(await _chan.call_async(SEARCH_TOOL_DOCS, **_search_params(query, limit, detail)))


# --- sync, answered from this exec's metadata ------------------------------------


def list_servers_sync():
    """Names of the servers loaded for this call."""
    return tuple(m["name"] for m in _servers)


def list_tools_sync(server=None):
    """Tools of a loaded server: ({name, alias, description, input_schema}, ...).
    A server that failed to load raises what the async list_tools would."""
    if server is None:
        raise MCPError("list_tools_sync needs a server name; loaded: %s"
                       % (", ".join(list_servers_sync()) or "none"))
    return tuple(dict(t) for t in _server(server)["tools"])


def discovered_servers(detailed=False):
    """Every configured server (loaded or not): names, or {name, description}."""
    if detailed:
        return tuple({"name": d["name"], "description": d["description"]} for d in _discovered)
    return tuple(d["name"] for d in _discovered)


def describe_server(name):
    """Metadata of a loaded server: {name, alias, description, cwd, tools}.
    A server that failed to load raises the error its calls get."""
    return _copy(_server(name))


def list_loaded_server_metadata():
    """Metadata of every loaded server; one that failed to load has no
    tools and an `error` ({code, message}) saying why."""
    return tuple(_copy(m) for m in _servers)


def _doc(meta, tool, detail):
    doc = {"server": meta["name"], "serverAlias": meta["alias"],
           "tool": tool["name"], "toolAlias": tool["alias"]}
    if tool["description"]:
        doc["description"] = tool["description"]
    if detail == "full":
        doc["inputSchema"] = tool["input_schema"]
    return doc


def query_tool_docs_sync(server, tool=None, detail="summary"):
    """Docs of a loaded server's tools, from this call's metadata: a list,
    with one doc when `tool` names one (by name or alias, any case). Unlike
    the async form, which returns that one doc itself, as upstream does.
    A server that failed to load raises what the async form would."""
    detail = _detail(detail)
    meta = _server(server)
    if tool is None:
        return [_doc(meta, t, detail) for t in meta["tools"]]
    if not isinstance(tool, str):
        raise MCPError("'tool' must be a string when provided, not %s" % type(tool).__name__)
    want = tool.lower()
    for t in meta["tools"]:
        if t["alias"].lower() == want or t["name"].lower() == want:
            return [_doc(meta, t, detail)]
    raise MCPError("Tool %r not found on server %r (tools: %s)"
                   % (tool, meta["name"], ", ".join(t["name"] for t in meta["tools"]) or "none"))


def search_tool_docs_sync(query, *, limit=5, detail="summary"):
    """Like search_tool_docs, and with the same answer: the search spans
    every configured server, so sandboxd answers it too."""
    return _tool_docs(_chan.call_sync(SEARCH_TOOL_DOCS, **_search_params(query, limit, detail)))


_end = [False]  # set by end_session() during an exec


def end_session():
    """Ends this session once the current call finishes: its sandbox stops,
    its checkpoint is deleted and its handle is no longer known. The next
    call without a handle starts a new session."""
    _end[0] = True


def take_end():
    """Whether the exec that just ran asked to end its session (once)."""
    ended, _end[0] = _end[0], False
    return ended


_progress_sent = [0.0]  # when the last progress frame went out (monotonic)

# PROGRESS_EVERY spaces progress frames out: a loop that reports on every
# item must not flood the channel, and the client sees a few a second at
# most anyway. A report of the end (done == total) always goes.
PROGRESS_EVERY = 0.1


def progress(done, total=None, message=""):
    """Reports how far the current call has got, to a client that asked
    for progress (MCP notifications/progress): done of total (None when
    unknown) in any unit, and a short message. done should grow from one
    report to the next; a report that does not is not passed on."""
    if isinstance(done, bool) or not isinstance(done, (int, float)):
        raise TypeError("progress(done, total=None, message=''): done must be a number, not %s" % type(done).__name__)
    if total is not None and (isinstance(total, bool) or not isinstance(total, (int, float))):
        raise TypeError("progress(): total must be a number or None, not %s" % type(total).__name__)
    if not isinstance(message, str):
        raise TypeError("progress(): message must be a string, not %s" % type(message).__name__)
    import time
    now = time.monotonic()
    final = total is not None and done >= total
    if not final and now - _progress_sent[0] < PROGRESS_EVERY:
        return
    frame = {"t": "progress", "id": _chan.exec_id, "done": float(done), "msg": message[:200]}
    if total is not None:
        frame["total"] = float(total)
    try:
        _chan.send(frame)
    except (TypeError, ValueError):
        raise ValueError("progress(): done and total must be finite numbers") from None
    _progress_sent[0] = now


def capability_summary():
    """A short manual of the sandbox."""
    loaded = ", ".join(m["name"] + (" (failed to load: %s)" % m["error"]["message"] if "error" in m else "")
                       for m in _servers) or "none"
    known = ", ".join(discovered_servers()) or "none"
    return _MANUAL % {"loaded": loaded, "known": known}


_MANUAL = """--- PYTHON SANDBOX MANUAL ---
Persistent Python session (like a Jupyter kernel): variables, imports and
functions survive between run_python calls. Top-level `await` works.

Servers loaded now: %(loaded)s
Configured servers: %(known)s
Servers must be listed in EVERY call: run_python(code, servers=["name", ...]).
Only listed servers get proxies; the set is rebuilt on each call.

Discover (sync helpers read this call's metadata, async ones ask the host):
  runtime.discovered_servers(detailed=True)    every configured server
  runtime.list_servers_sync()                  servers loaded for this call
  runtime.list_tools_sync("server")            name, alias, description, schema
  runtime.search_tool_docs_sync("words", limit=5, detail="summary"|"full")
      every configured server; a hit's loadWith is the servers=[...] to pass
  runtime.query_tool_docs_sync("server", tool=None, detail="full")
  runtime.describe_server("server")            includes the server's cwd

Call tools (async; a result is a CallToolResult dict):
  res = await mcp_<alias>.<tool_alias>(arg=value); res["content"][0]["text"]
  await runtime.call_tool("server", "tool", {"arg": value})
  A failed call (isError too) raises runtime.ToolError (.server .tool
  .message .structured_content); raise_on_error=False returns the dict.
  Arguments are checked against the tool's schema first.
  asyncio.gather(...) runs calls concurrently. Failures raise runtime.MCPError
  subclasses by kind (e.code): NotFoundError, UnavailableError, ...
  from mcp.servers.<alias> import *   one async function per tool.

Long runs: a call still running at the yield time returns "running";
code="" waits for it, cancel=True stops it.
  runtime.progress(done, total=None, message="")   tell the client

Sessions: variables, imports, functions, classes and /workspace files are
checkpointed after each call and come back after a timeout or crash.
  runtime.end_session()    end this session and delete its checkpoint

Memory (JSON values, kept across sessions):
  save_memory(key, value, *, metadata=None)  load_memory(key, *, default=None)
  update_memory(key, fn)  (atomic: retried on concurrent change)
  delete_memory(key)  list_memories()  memory_exists(key)  get_memory_info(key)

Saved tools (kept across sessions):
  save_tool(func)   then in any later session: func(...) or import user_tools
  It carries the imports, constants and helpers func uses.
  runtime.list_saved_tools()   runtime.delete_saved_tool(name)

Limits (defaults): no network (MCP servers reach out); read-only root;
512 MiB of memory, 128 processes, a 30 s timeout of at most 3600 s. A
result keeps the head and tail of 40,000 characters of output, the whole
in the file its marker names. /workspace (128 MiB) is checkpointed,
/tmp is not. The last expression is shown (a
trailing ; hides it); display(x) and figures come back as images,
/workspace/out files as resources; host mounts are under /mnt.
"""


def set_metadata(servers, discovered, unloaded=()):
    """Applies one exec's metadata; returns the normalised servers."""
    global _servers, _by_key, _discovered, _unloaded
    _servers = normalise(servers)
    by_key = {}
    for m in _servers:
        by_key.setdefault(m["alias"], m)
    for m in _servers:
        by_key[m["name"]] = m
    _by_key = by_key
    _discovered = [
        {"name": str(d.get("name") or ""), "description": str(d.get("description") or ""),
         "alias": str(d.get("alias") or ""), "failed": str(d.get("failed") or "")}
        for d in (discovered or ()) if isinstance(d, dict)
    ]
    _unloaded = {
        str(u.get("name") or ""): {"source": str(u.get("source") or ""), "reason": str(u.get("reason") or "")}
        for u in (unloaded or ()) if isinstance(u, dict)
    }
    return _servers


RUNTIME_NAMES = (
    "call_tool", "call_tool_sync", "list_tools", "list_tools_sync", "list_servers",
    "list_servers_sync", "discovered_servers", "describe_server",
    "list_loaded_server_metadata", "query_tool_docs", "query_tool_docs_sync",
    "search_tool_docs", "search_tool_docs_sync", "capability_summary", "ToolDocs", "end_session",
    "progress",
)


def set_channel(chan):
    global _chan
    _chan = chan
