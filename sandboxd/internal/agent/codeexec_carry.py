"""What save_tool carries with a function, so that it runs in any later
session: the modules its code uses, the constants and the session's own
functions and classes it names (with what those need in turn), each as a
line or a definition put before the function's own source.

A name it cannot carry (an open file, an object of the session's, a
closure's variable, a name that is not defined) makes save_tool refuse,
naming it, rather than save a tool that fails later with a NameError.
"""

import sys

CO_OPTIMIZED = 0x1  # inspect.CO_OPTIMIZED: the code of a function, not of a module or class body
# A constant is carried as its repr up to this size; a larger one is data,
# which belongs in memory (save_memory), not in a tool's source.
MAX_CONSTANT_CHARS = 64 << 10
_LITERALS = (int, float, complex, str, bytes, bool, type(None))


class CannotCarry(ValueError):
    """save_tool cannot carry something the function needs."""


def _names(code, top, need, maybe):
    """Adds the global names code (and the code nested in it) reads: to
    need where a missing one is an error, to maybe where it may be local
    to a class body."""
    import dis

    where = need if top or code.co_flags & CO_OPTIMIZED else maybe
    for ins in dis.get_instructions(code):
        if ins.opname in ("LOAD_GLOBAL", "LOAD_NAME", "LOAD_FROM_DICT_OR_GLOBALS"):
            (need if ins.opname == "LOAD_GLOBAL" else where).setdefault(ins.argval, None)
    for c in code.co_consts:
        if hasattr(c, "co_code"):
            _names(c, False, need, maybe)


def _literal(v, depth=0):
    if isinstance(v, _LITERALS):
        return type(v) in _LITERALS
    if depth > 20 or type(v) not in (tuple, list, dict, set, frozenset):
        return False
    if type(v) is dict:
        return all(_literal(k, depth + 1) and _literal(x, depth + 1) for k, x in v.items())
    return all(_literal(x, depth + 1) for x in v)


def _constant(name, v):
    """`name = <repr>` for a literal value whose repr reads back as it, or None."""
    if not _literal(v):
        return None
    text = repr(v)
    if len(text) > MAX_CONSTANT_CHARS:
        raise CannotCarry("%s is a constant of %d characters, over the %d save_tool carries in a tool's source: "
                          "keep it with save_memory and load_memory it in the tool"
                          % (name, len(text), MAX_CONSTANT_CHARS))
    try:
        same = eval(text, {"__builtins__": {}}) == v  # noqa: S307 - the repr of a literal, made here
    except Exception:  # noqa: BLE001 - float('nan'), inf: no literal reads back
        same = False
    return "%s = %s" % (name, text) if same else None


def _importable(name, v):
    """An import statement that binds name to v, or None."""
    if type(v) is type(sys):
        mod = getattr(v, "__name__", None)
        if not isinstance(mod, str) or sys.modules.get(mod) is not v or mod == "__main__":
            return None
        if mod == name:
            return "import %s" % mod
        return "import %s as %s" % (mod, name)
    mod, qual = getattr(v, "__module__", None), getattr(v, "__qualname__", None)
    if not isinstance(mod, str) or not isinstance(qual, str) or mod in ("__main__", "builtins") or "<" in qual:
        return None
    obj = sys.modules.get(mod)
    for part in qual.split("."):
        obj = getattr(obj, part, None)
    if obj is not v or "." in qual:
        return None
    return "from %s import %s" % (mod, qual) + ("" if qual == name else " as %s" % name)


class _Carrier:
    def __init__(self, func, available, finder):
        self.func = func
        self.globals = func.__globals__
        builtins = self.globals.get("__builtins__", {})
        self.builtins = builtins if isinstance(builtins, dict) else vars(builtins)
        self.available = available  # name -> object the user_tools module has
        self.lines = []  # imports and constants, in order
        self.defs = []  # sources of the session's functions and classes it needs
        self.done = {func.__name__}
        self.finder = finder  # (name, obj) -> source of the session's statement that made obj, or None

    def source_of(self, name, obj):
        import inspect
        import textwrap

        if getattr(obj, "__name__", None) == "<lambda>":
            raise CannotCarry("%s is a lambda; define it with def so that save_tool can carry it" % name)
        if getattr(obj, "__code__", None) is not None and obj.__code__.co_freevars:
            raise CannotCarry("%s uses %s of the function around it (a closure); save_tool carries top-level "
                              "functions only" % (name, ", ".join(obj.__code__.co_freevars)))
        if getattr(obj, "__name__", name) != name:
            raise CannotCarry("%s is %s under another name; save_tool carries it under its own name only"
                              % (name, obj.__name__))
        src = self.finder(name, obj) if self.finder is not None else None
        if src is None:
            try:
                src = textwrap.dedent(inspect.getsource(obj))
            except (OSError, TypeError) as exc:
                raise CannotCarry("cannot get the source of %s: %s" % (name, exc)) from None
        return src

    def needs(self, src, what):
        """Carries what the code of src (a def or class statement) names."""
        need, maybe = {}, {}
        _names(compile(src, "<save_tool>", "exec", dont_inherit=True), True, need, maybe)
        for name in list(need) + list(maybe):
            if name in self.done:
                continue
            self.done.add(name)
            self.carry(name, what, name in need)

    def carry(self, name, what, required):
        g = self.globals
        if name.startswith("__") and name.endswith("__"):
            return  # __name__, __builtins__ ...: every module has its own
        if name not in g:
            if name in self.builtins or name in self.available or not required:
                return
            raise CannotCarry("%s uses %s, which is not defined in this session; define it (or import it) "
                              "before saving" % (what, name))
        v = g[name]
        if self.available.get(name) is v or getattr(v, "__module__", None) == "user_tools":
            return  # a helper, a proxy or another saved tool: user_tools has it
        stmt = _importable(name, v) or _constant(name, v)
        if stmt is not None:
            self.lines.append(stmt)
            return
        if getattr(v, "__module__", None) == "__main__" and (isinstance(v, type) or hasattr(v, "__code__")):
            src = self.source_of(name, v)
            self.needs(src, name)
            self.defs.append(src)
            return
        raise CannotCarry("%s uses %s, a %s, which save_tool cannot carry: only modules, constants "
                          "(numbers, strings, and lists, tuples, dicts and sets of them) and functions and "
                          "classes defined in the session are; create it inside the function instead"
                          % (what, name, type(v).__name__))


def carried_source(func, source, available, finder=None):
    """source (func's own, dedented) with what it needs put before it.
    available maps the names the user_tools module has (helpers, proxies,
    runtime) to their objects; finder(name, obj) finds the source of a
    session's class or function. Raises CannotCarry."""
    if func.__code__.co_freevars:
        raise CannotCarry("%s uses %s of the function around it (a closure); save_tool carries top-level "
                          "functions only" % (func.__name__, ", ".join(func.__code__.co_freevars)))
    c = _Carrier(func, available, finder)
    c.needs(source, func.__name__)
    if not c.lines and not c.defs:
        return source
    head = "# Carried by save_tool: the names %s uses.\n" % func.__name__
    parts = [head + "".join(line + "\n" for line in c.lines)] if c.lines else [head]
    parts.extend(d if d.endswith("\n") else d + "\n" for d in c.defs)
    parts.append(source)
    return "\n".join(parts)
