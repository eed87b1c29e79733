"""The synthetic `mcp` package, `mcp.servers.<alias>` and `mcp_<alias>` proxies.

`mcp` is put straight into sys.modules, so it shadows any installed `mcp`
package. The server modules and proxies are rebuilt from every exec's
metadata, so they name exactly the servers allowed for that exec.
"""

import os
import sys

import codeexec_json
import codeexec_protocol
import codeexec_runtime as rt

# The longest "NAME=value" string that execve passes to a new program
# (Linux's MAX_ARG_STRLEN, 32 pages): a longer variable would make every
# subprocess the code starts fail with E2BIG.
ENV_LIMIT = 32 * 4096 - 1


# RAISE_ON_ERROR is the keyword that asks one proxy call to return a failed
# result as a dict instead of raising ToolError; a tool whose schema has an
# argument of that name gets it as an argument (runtime.call_tool's
# raise_on_error still applies to such a tool).
RAISE_ON_ERROR = "raise_on_error"


def _tool_function(server, tool, alias, module, doc, schema=None):
    props = schema.get("properties") if isinstance(schema, dict) else None
    own = isinstance(props, dict) and RAISE_ON_ERROR in props

    async def call(*args, **kwargs):
        raise_on_error = None
        if not own and RAISE_ON_ERROR in kwargs:
            raise_on_error = kwargs.pop(RAISE_ON_ERROR)
        if args:
            if len(args) != 1 or kwargs or not isinstance(args[0], dict):
                raise TypeError("%s() takes keyword arguments (or one dict of arguments)" % alias)
            kwargs = args[0]
        return await rt.call_tool(server, tool, kwargs, raise_on_error=raise_on_error)

    call.__name__ = call.__qualname__ = alias
    call.__module__ = module
    call.__doc__ = doc or None
    return call


class MCPServerProxy:
    """`mcp_<alias>`: `await mcp_x.<tool>(**kwargs)` calls a tool on server x.

    Every public attribute except list_tools is a tool (by alias, else by
    name), so the proxy has no other public attributes that could hide one.
    """

    def __init__(self, meta):
        self._meta = meta
        self._fns = {}

    async def list_tools(self):
        """Lists this server's tools live."""
        return await rt.list_tools(self._meta["name"])

    def __getattr__(self, attr):
        if attr.startswith("__"):
            raise AttributeError(attr)
        fn = self._fns.get(attr)
        if fn is None:
            tool = None
            for t in self._meta["tools"]:
                if t["alias"] == attr:
                    tool = t
                    break
            if tool is None:
                for t in self._meta["tools"]:
                    if t["name"] == attr:
                        tool = t
                        break
            name = tool["name"] if tool else attr
            doc = tool["description"] if tool else ""
            schema = tool["input_schema"] if tool else None
            fn = _tool_function(self._meta["name"], name, attr, "mcp_" + self._meta["alias"], doc, schema)
            self._fns[attr] = fn
        return fn

    def __dir__(self):
        return sorted({"list_tools"} | {t["alias"] for t in self._meta["tools"]})

    def __repr__(self):
        exc = rt.load_error(self._meta)
        if exc is not None:
            return "<MCP server %r: failed to load (%s: %s)>" % (self._meta["name"], type(exc).__name__, exc)
        return "<MCP server %r: %d tools>" % (self._meta["name"], len(self._meta["tools"]))


class UnloadedServer:
    """`mcp_<alias>` of a configured server that this call did not load:
    any use raises the error that says how to load it (and why it would
    fail, if it is broken), where a bare NameError would say nothing."""

    def __init__(self, name):
        self._name = name

    def __getattr__(self, attr):
        if attr.startswith("__"):
            raise AttributeError(attr)
        raise rt.not_loaded(self._name, attr)

    def __dir__(self):
        return []

    def __repr__(self):
        return "<MCP server %r: not loaded in this call>" % self._name


def unloaded_proxies(loaded):
    """mcp_<alias> -> UnloadedServer for every configured server (and
    config entry that was not loaded) whose proxy is not in loaded."""
    out = {}
    for d in rt.discovered_servers_meta():
        key = "mcp_" + d["alias"] if d["alias"] else None
        if key and key not in loaded and d["name"] not in rt.list_servers_sync():
            out[key] = UnloadedServer(d["name"])
    return out


def _server_module(meta):
    modname = "mcp.servers." + meta["alias"]
    mod = type(sys)(modname, meta["description"] or None)
    mod.TOOLS = [dict(t) for t in meta["tools"]]
    mod.TOOL_MAP = {t["alias"]: t for t in mod.TOOLS}
    names = []
    for t in meta["tools"]:
        setattr(mod, t["alias"], _tool_function(meta["name"], t["name"], t["alias"], modname, t["description"],
                                                t["input_schema"]))
        names.append(t["alias"])
    mod.__all__ = names + ["TOOLS", "TOOL_MAP"]
    if rt.load_error(meta) is not None:
        mod.__getattr__ = _failed_server_getattr(meta, modname)
    return mod


def _failed_server_getattr(meta, modname):
    """The __getattr__ (PEP 562) of a module whose server failed to load:
    `mcp.servers.<alias>.<tool>`, and `from mcp.servers.<alias> import
    <tool>`, raise the error a call to the server raises, which says why,
    instead of an AttributeError or ImportError that reads as if the tool
    did not exist. Private and dunder names are plain AttributeErrors, as
    the import system and introspection expect."""

    def __getattr__(name):
        if name.startswith("_"):
            raise AttributeError("module %r has no attribute %r" % (modname, name))
        exc = rt.load_error(meta)
        err = type(exc)("server %r failed to load, so %s has no tool %r: %s" % (meta["name"], modname, name, exc))
        err.code = exc.code
        raise err

    return __getattr__


_mcp = None
_servers_pkg = None


def install(chan, extra):
    """Creates the synthetic `mcp`, `mcp.runtime` and `mcp.servers` modules.

    extra maps further runtime names (memory and tool helpers) to functions.
    Returns the runtime module.
    """
    global _mcp, _servers_pkg
    rt.set_channel(chan)
    mod = type(sys)
    _mcp = mod("mcp", "codeexec's in-sandbox MCP bridge (shadows any installed mcp package).")
    _mcp.__path__ = []
    runtime = mod("mcp.runtime", "Discovery, tool calls, memory and saved tools.")
    names = list(rt.RUNTIME_NAMES)
    for n in names:
        setattr(runtime, n, getattr(rt, n))
    for cls in codeexec_protocol.EXPORTED:  # MCPError, one subclass per error code, ToolError
        setattr(runtime, cls.__name__, cls)
        names.append(cls.__name__)
    for n, fn in extra.items():
        setattr(runtime, n, fn)
        names.append(n)
    runtime.__all__ = names
    _servers_pkg = mod("mcp.servers", "One module per server loaded for this call.")
    _servers_pkg.__path__ = []
    _mcp.runtime = runtime
    _mcp.servers = _servers_pkg
    _mcp.__all__ = ["runtime", "servers"]
    sys.modules["mcp"] = _mcp
    sys.modules["mcp.runtime"] = runtime
    sys.modules["mcp.servers"] = _servers_pkg
    return runtime


def _fitting(name, *shapes):
    """The JSON of the first of shapes (functions giving JSON values, the
    last one an empty value) that fits in one environment variable called
    name."""
    for shape in shapes:
        text = codeexec_json.dumps(shape())
        if len(name) + 1 + len(text) <= ENV_LIMIT:
            break
    return text


def export_env(metas, discovered):
    """Sets MCP_AVAILABLE_SERVERS (the loaded servers' metadata) and
    MCP_DISCOVERED_SERVERS ({name: description} of every configured
    server) as upstream sets them, for this exec and its subprocesses.

    A catalogue too large for one variable loses input schemas first, then
    descriptions; runtime.list_loaded_server_metadata() and
    runtime.discovered_servers(detailed=True) always have everything.
    """
    def lean(keep):
        return lambda: [dict(m, tools=[{k: t[k] for k in keep} for t in m["tools"]]) for m in metas]

    os.environ["MCP_AVAILABLE_SERVERS"] = _fitting(
        "MCP_AVAILABLE_SERVERS", lambda: metas, lean(("name", "alias", "description")), lean(("name", "alias")),
        lambda: [{"name": m["name"], "alias": m["alias"]} for m in metas], list)
    os.environ["MCP_DISCOVERED_SERVERS"] = _fitting(
        "MCP_DISCOVERED_SERVERS", lambda: {d["name"]: d["description"] for d in discovered},
        lambda: dict.fromkeys((d["name"] for d in discovered), ""), dict)


# The names of the mcp.servers.<alias> modules configure put in sys.modules.
_server_modules = []


def configure(servers, discovered, unloaded=()):
    """Applies one exec's metadata; returns the new proxies by alias.

    `mcp.servers.<alias>` modules of servers no longer allowed are removed.
    """
    metas = rt.set_metadata(servers, discovered, unloaded)
    export_env(metas, rt.discovered_servers(detailed=True))
    # The modules this made before, not a scan of sys.modules: a forked
    # sandbox shares the fork server's thousands of module names, and
    # reading each one writes its reference count, copying its page.
    while _server_modules:
        sys.modules.pop(_server_modules.pop(), None)
    for key in [k for k in vars(_servers_pkg) if not k.startswith("__")]:
        delattr(_servers_pkg, key)
    proxies = {}
    for m in metas:
        smod = _server_module(m)
        sys.modules[smod.__name__] = smod
        _server_modules.append(smod.__name__)
        setattr(_servers_pkg, m["alias"], smod)
        proxies[m["alias"]] = MCPServerProxy(m)
    _servers_pkg.__all__ = [m["alias"] for m in metas]
    return proxies
