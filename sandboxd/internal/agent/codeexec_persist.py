"""Memory helpers, save_tool, the `user_tools` importer and the saved
tools' bare names.

Everything is stored by sandboxd's backends (memoryd) through `memory.*` and
`tool.*` calls; nothing is written inside the sandbox. Inputs are checked
here so that mistakes fail fast with a precise message.
"""

import os
import sys
import time

import codeexec_carry
import codeexec_json
import codeexec_source
from codeexec_protocol import (DELETE_MEMORY, DELETE_SAVED_TOOL, LIST_MEMORIES, LIST_SAVED_TOOLS, LOAD_MEMORY,
                               SAVE_MEMORY, SAVE_TOOL, UPDATE_MEMORY, ConflictError, MCPError)

_chan = None  # the Channel, set by install()
_helpers = {}  # names given to the user_tools module (runtime, proxies, ...)
_ns = None  # the session namespace, set by bind_saved_tools()
_bound = {}  # saved tools bind_saved_tools() put into it, by name
_sent = None  # the saved tools a frame carried, until user_tools is built from them (see offered)
_finder = None  # (name, obj) -> source of the session's statement that made obj; set by the session

MAX_KEY_BYTES = 2048  # memoryd's limit (store.MaxKeyBytes)
# update_memory retries a conflicting write for this long. Many sessions
# (of many codeexec processes) may update one key at once; each retry
# waits a random while, growing up to UPDATE_MAX_PAUSE, so that they take
# turns rather than colliding again in step.
UPDATE_PATIENCE = 60.0
UPDATE_MAX_PAUSE = 0.05


def _key(key):
    """The key as stored: surrounding whitespace stripped, as upstream
    strips it, so " notes " and "notes" are one memory."""
    if not isinstance(key, str):
        raise TypeError("memory key must be a str, not %s" % type(key).__name__)
    key = key.strip()
    if not key:
        raise ValueError("Memory key cannot be empty: use a name such as 'notes' "
                         "(surrounding whitespace is stripped)")
    try:
        n = len(key.encode("utf-8"))
    except UnicodeEncodeError:
        raise ValueError("memory key must be valid Unicode (it holds a lone surrogate)") from None
    if n > MAX_KEY_BYTES:
        raise ValueError("memory key is %d UTF-8 bytes; the limit is %d (keep the data in the value)"
                         % (n, MAX_KEY_BYTES))
    return key


def _check_json(value, what):
    def reject(obj):
        raise TypeError("%s of type %s is not JSON serialisable" % (what, type(obj).__name__))

    try:
        codeexec_json.dumps(value, True, reject)
    except ValueError as exc:  # NaN/Infinity, circular references
        raise ValueError("%s is not valid JSON: %s" % (what, exc)) from None


def save_memory(key, value, *, metadata=None):
    """Stores a JSON value under key (with optional metadata dict)."""
    key = _key(key)
    _check_json(value, "value")
    p = {"key": key, "value": value}
    if metadata is not None:
        if not isinstance(metadata, dict):
            raise TypeError("metadata must be a dict, not %s" % type(metadata).__name__)
        _check_json(metadata, "metadata")
        p["metadata"] = metadata
    _chan.call_sync(SAVE_MEMORY, **p)
    return "Memory '%s' saved." % key


def get_memory_info(key):
    """The whole record (value, metadata, timestamps, revision) or None."""
    return _chan.call_sync(LOAD_MEMORY, key=_key(key))


def load_memory(key, *, default=None):
    """The value stored under key, or default when there is none."""
    rec = get_memory_info(key)
    if rec is None:
        return default
    return rec.get("value")


def memory_exists(key):
    """Whether key holds a value."""
    return get_memory_info(key) is not None


def update_memory(key, fn):
    """Atomically replaces key's value with fn(current) (None when missing).

    If another writer changed the value meanwhile, fn is applied again to the
    new value. Returns the stored value.
    """
    key = _key(key)
    if not callable(fn):
        raise TypeError("update_memory needs a callable, not %s" % type(fn).__name__)
    began = time.monotonic()
    attempt = 0
    while True:
        rec = _chan.call_sync(LOAD_MEMORY, key=key)
        current = None if rec is None else rec.get("value")
        revision = 0 if rec is None else rec.get("revision", 0)
        value = fn(current)
        _check_json(value, "value")
        try:
            _chan.call_sync(UPDATE_MEMORY, key=key, value=value, revision=revision)
            return value
        except ConflictError:
            pass  # another writer was first: apply fn to its value
        attempt += 1
        if time.monotonic() - began > UPDATE_PATIENCE:
            raise ConflictError("update_memory(%r): gave up after %d conflicting concurrent updates in %g s"
                           % (key, attempt, UPDATE_PATIENCE))
        # os.urandom rather than random: importing random costs every
        # sandbox's start, and this path only runs under contention.
        jitter = int.from_bytes(os.urandom(2), "big") / 65536.0
        time.sleep(jitter * min(UPDATE_MAX_PAUSE, 0.001 * (1 << min(attempt, 6))))


def delete_memory(key):
    """Deletes key."""
    key = _key(key)
    res = _chan.call_sync(DELETE_MEMORY, key=key)
    deleted = res.get("deleted") if isinstance(res, dict) else bool(res)
    return ("Memory '%s' deleted." if deleted else "Memory '%s' not found.") % key


def list_memories():
    """Every stored record, without values."""
    return _chan.call_sync(LIST_MEMORIES)


# --- saved tools ------------------------------------------------------------------


def set_source_finder(finder):
    """Sets how save_tool finds the source of the session's classes and
    functions that a tool needs."""
    global _finder
    _finder = finder


def save_tool(func):
    """Saves a function's source so `import user_tools` has it in later
    sessions, with what it needs: the modules it uses, and the constants,
    functions and classes of the session it names. What cannot be carried
    is refused here, by name."""
    import inspect
    import textwrap

    if not inspect.isfunction(func):
        raise ValueError("save_tool expects a function (one defined with def), not %s"
                         % type(func).__name__)
    name = func.__name__
    if not name.isidentifier():
        raise ValueError("save_tool needs a named function (def), not %r" % name)
    try:
        source = inspect.getsource(func)
    except (OSError, TypeError) as exc:
        raise ValueError("cannot get the source of %s: %s" % (name, exc)) from None
    source = textwrap.dedent(source)
    try:
        source = codeexec_carry.carried_source(func, source, dict(_helpers), _finder)
    except codeexec_carry.CannotCarry as exc:
        raise ValueError("save_tool(%s) refused: %s" % (name, exc)) from None
    docstring = inspect.getdoc(func) or ""
    _chan.call_sync(SAVE_TOOL, name=name, source=source, docstring=docstring)
    mod = sys.modules.get("user_tools")
    if mod is not None and getattr(mod, "__loader__", None) is _LOADER:
        _pending(mod).pop(name, None)
        setattr(mod, name, func)
    return "Tool '%s' saved. It will be available in future sessions." % name


def list_saved_tools():
    """Saved tools: [{name, docstring, source}, ...]."""
    return _chan.call_sync(LIST_SAVED_TOOLS)


def delete_saved_tool(name):
    """Deletes a saved tool. In this session it also goes from user_tools,
    and its bare name goes unless the code rebound that name."""
    if not isinstance(name, str) or not name:
        raise TypeError("tool name must be a non-empty str")
    res = _chan.call_sync(DELETE_SAVED_TOOL, name=name)
    deleted = res.get("deleted") if isinstance(res, dict) else bool(res)
    mod = sys.modules.get("user_tools")
    if deleted and mod is not None and getattr(mod, "__loader__", None) is _LOADER:
        _pending(mod).pop(name, None)
        if name in getattr(mod, "__all__", ()):
            mod.__all__ = [n for n in mod.__all__ if n != name]
            mod.__dict__.pop(name, None)
    if deleted and name in _bound:
        obj = _bound.pop(name)
        if _ns is not None and _ns.get(name) is obj:
            del _ns[name]
    return ("Tool '%s' deleted." if deleted else "Tool '%s' not found.") % name


def bound_tool(name):
    """The saved tool bind_saved_tools put under name, or None."""
    return _bound.get(name)


def bind_late(name):
    """Binds a tool saved after the session's first exec (by another
    session, or another codeexec on the same memory) to its bare name,
    after code used that name and got a NameError. Returns whether it
    did: the caller then says so, since the failed code must run again.
    A name the session holds, or one no saved tool has, is left alone."""
    if _ns is None or not isinstance(name, str) or name.startswith("_") or not name.isidentifier() or name in _ns:
        return False
    mod = sys.modules.get("user_tools")
    if mod is None or getattr(mod, "__loader__", None) is not _LOADER:
        return False
    try:
        obj = getattr(mod, name)  # asks for the saved tools (see _saved_since)
    except Exception:  # noqa: BLE001 - not saved, or it failed to load (which it printed)
        return False
    _ns[name] = _bound[name] = obj
    return True


def bind_saved_tools(ns, sent=None):
    """Makes every saved tool callable by its bare name in ns, as upstream's
    GUIDE promises ("import or call directly"). Called once, before a
    session's first code runs in a sandbox, so tools saved or deleted in
    other sessions apply from their next session on. sent are the saved
    tools the exec frame carried (None: ask sandboxd with tool.list).

    A saved tool is definitions, run when it is first used: each name is
    bound to a _LazyTool, and no tool's source runs now.

    A name that is taken is left alone: the helpers, `runtime`, builtins
    (a tool called `open` would hide the real one) and anything the session
    defines later win over a saved tool, which stays at user_tools.<name>.
    """
    global _ns
    _ns = ns
    try:
        with offered(sent):
            mod = __import__("user_tools")
    except Exception:  # noqa: BLE001 - no memoryd here; `import user_tools` says why
        return
    builtins = ns.get("__builtins__") or {}
    pending = _pending(mod)
    for name in getattr(mod, "__all__", ()):
        if name.startswith("_") or name in ns or name in builtins:
            continue
        if name in pending:
            ns[name] = _bound[name] = _LazyTool(mod, name, pending[name].get("docstring"))
        elif name in mod.__dict__:
            ns[name] = _bound[name] = mod.__dict__[name]


class _LazyTool:
    """A saved tool bound to its bare name before its first use. Calling
    it, or asking it for an attribute it lacks, runs the tool's source in
    user_tools (once) and puts the function in its place."""

    def __init__(self, mod, name, doc):
        self._mod = mod
        self.__name__ = self.__qualname__ = name
        self.__doc__ = doc or None

    def _load(self):
        name = self.__name__
        fn = getattr(self._mod, name)  # runs the source (user_tools.__getattr__)
        if _ns is not None and _ns.get(name) is self:
            _ns[name] = fn
        if _bound.get(name) is self:
            _bound[name] = fn
        return fn

    def __call__(self, *args, **kwargs):
        return self._load()(*args, **kwargs)

    def __getattr__(self, attr):
        if attr.startswith("__") and attr.endswith("__") and attr not in ("__wrapped__", "__code__", "__defaults__",
                                                                         "__kwdefaults__", "__annotations__",
                                                                         "__signature__", "__module__", "__dict__"):
            raise AttributeError(attr)
        return getattr(self._load(), attr)

    def __repr__(self):
        return "<saved tool %s, loaded on first use>" % self.__name__

    def __reduce__(self):
        return (saved_tool, (self.__name__,))


def saved_tool(name):
    """The saved tool name, loaded: what a checkpoint of a _LazyTool
    brings back."""
    return getattr(__import__("user_tools"), name)


_PENDING = "_codeexec_pending"  # user_tools' saved tools not loaded yet, by name


def _pending(mod):
    return mod.__dict__.setdefault(_PENDING, {})


class offered:
    """While the block runs, a build of user_tools takes sent, the saved
    tools a frame carried, instead of asking with tool.list (None: it
    asks). After it, a build asks afresh."""

    def __init__(self, sent):
        self._sent = sent

    def __enter__(self):
        global _sent
        _sent = self._sent

    def __exit__(self, *exc):
        global _sent
        _sent = None


class _UserToolsLoader:
    """Builds `user_tools` from the saved tools, one source at a time."""

    def create_module(self, spec):
        return None

    def exec_module(self, module):
        global _sent
        tools, _sent = _sent, None
        if tools is None:
            try:
                tools = _chan.call_sync(LIST_SAVED_TOOLS)
            except MCPError as exc:
                raise ImportError("cannot load user_tools: %s" % exc, name="user_tools") from None
        ns = module.__dict__
        ns.update(_helpers)
        module.FAILED = {}
        module.__all__ = []
        # Definitions, each run when first used (module.__getattr__): a
        # tool's top-level statements cost a session nothing until then.
        pending = _pending(module)
        for t in tools or ():
            name = t.get("name")
            if isinstance(name, str) and name.isidentifier() and not name.startswith("_"):
                pending[name] = t
                # A tool named as a helper is user_tools.<name>, as when
                # its source ran over the helper.
                ns.pop(name, None)
                if name not in module.__all__:
                    module.__all__.append(name)
        module.__getattr__ = _saved_since(module)
        module.__dir__ = lambda: sorted(set(ns) | set(pending))


def _load_tool(module, t):
    """Runs saved tool t's source in module, and lists it in __all__, or
    in FAILED with why it did not load (and out of __all__)."""
    name = str(t.get("name") or "?")
    source = t.get("source") or ""
    filename = "<user_tools:%s>" % name
    codeexec_source.register(filename, source)
    try:
        exec(compile(source, filename, "exec", dont_inherit=True), module.__dict__)
    except (Exception, SystemExit) as exc:  # noqa: BLE001 - one bad tool must not hide the others
        msg = str(exc).replace("\n", " ")
        module.FAILED[name] = "%s: %s" % (type(exc).__name__, msg) if msg else type(exc).__name__
        print("user_tools: tool %r failed to load: %s" % (name, module.FAILED[name]), file=sys.stderr)
        if name in module.__all__:
            module.__all__ = [n for n in module.__all__ if n != name]
        return
    module.FAILED.pop(name, None)
    if name not in module.__all__:
        module.__all__.append(name)


def _saved_since(module):
    """The module's __getattr__ (PEP 562), asked for a name it lacks: a
    tool saved after the module was built, in another session or another
    codeexec, is looked for among the saved tools and loaded. So
    `from user_tools import greet` works in a session that was running
    when another saved greet."""

    def __getattr__(name):
        t = _pending(module).pop(name, None)
        if t is not None:  # a saved tool's first use: its source runs now
            _load_tool(module, t)
            if name in module.__dict__:
                return module.__dict__[name]
            raise ImportError("saved tool %r failed to load: %s" % (name, module.FAILED.get(name, "?")),
                              name="user_tools")
        if not name.startswith("_") and name.isidentifier():
            try:
                tools = _chan.call_sync(LIST_SAVED_TOOLS)
            except MCPError:
                tools = ()  # outside an exec, or no memoryd: as if not saved
            for t in tools or ():
                if t.get("name") == name:
                    _load_tool(module, t)
                    if name in module.__dict__:
                        return module.__dict__[name]
        raise AttributeError("module 'user_tools' has no attribute %r" % name)

    return __getattr__


_LOADER = _UserToolsLoader()


class _UserToolsFinder:
    """A sys.meta_path finder that serves `user_tools` from sandboxd."""

    @staticmethod
    def find_spec(fullname, path=None, target=None):
        if fullname != "user_tools":
            return None
        from importlib.machinery import ModuleSpec

        return ModuleSpec("user_tools", _LOADER, origin="codeexec saved tools")


def install(chan):
    """Installs the user_tools finder; returns the helpers by name."""
    global _chan
    _chan = chan
    sys.meta_path.insert(0, _UserToolsFinder)
    return {
        "save_memory": save_memory,
        "load_memory": load_memory,
        "update_memory": update_memory,
        "delete_memory": delete_memory,
        "list_memories": list_memories,
        "memory_exists": memory_exists,
        "get_memory_info": get_memory_info,
        "save_tool": save_tool,
        "list_saved_tools": list_saved_tools,
        "delete_saved_tool": delete_saved_tool,
    }


def set_helpers(helpers):
    """Names the user_tools module sees (kept current on every exec): the
    helpers, `runtime`, and this exec's proxies."""
    _helpers.clear()
    _helpers.update(helpers)
    mod = sys.modules.get("user_tools")
    if mod is not None and getattr(mod, "__loader__", None) is _LOADER:
        for k in [k for k in vars(mod) if k.startswith("mcp_")]:
            if k not in helpers:
                delattr(mod, k)
        mod.__dict__.update(helpers)
