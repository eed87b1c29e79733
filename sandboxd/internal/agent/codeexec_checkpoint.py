"""Checkpoints of a session's namespace, so that it outlives its sandbox.

A checkpoint holds what a fresh interpreter needs to rebuild the session
without running any of its code again:

- modules bound to names (`import math`, `import os.path as p`), by name;
- functions and classes the session defined, by their source text, found
  in the cells that defined them;
- every other value that pickle can save, one pickle per name.

Values are kept as chunks named by a hash of their pickle, so a checkpoint
after a small change stores only the names that changed: a 10 MiB table
defined once costs its bytes once. What cannot be saved (open files,
sockets, threads, generators, running tasks, ...) is listed by name, with
the reason, in the manifest.

Checkpoints are made and loaded only inside the session's own sandbox
(sandboxd stores the bytes and never unpickles them). Restoring re-imports
the modules, re-runs the session's def and class statements (their
decorators included) and unpickles the values: no other cell code runs.

Nothing here is imported before the first checkpoint, so it costs a new
sandbox nothing. A fork server, which has the agent imported, imports
SNAPSHOT_IMPORTS as well, once for all its sandboxes.
"""

import sys

VERSION = 1

# What snapshot imports: in a fresh interpreter about 9 ms, most of a
# session's first call, and a private copy of their objects in every
# sandbox that loads them itself.
SNAPSHOT_IMPORTS = ("hashlib", "pickle", "types")

# Types whose values cannot change in place: an unchanged id means an
# unchanged value, so their pickle is not made again.
_IMMUTABLE = (bytes, str, int, float, complex, bool, type(None), range, frozenset)


class TooLarge(Exception):
    """The namespace pickles to more than the checkpoint cap."""

    def __init__(self, size, cap, largest):
        self.size, self.cap, self.largest = size, cap, largest
        top = ", ".join("%s (%s)" % (n, _human(b)) for n, b in largest)
        super().__init__("the session's state is %s, over the %s checkpoint limit (largest: %s): "
                         "del what it no longer needs, or raise CODEEXEC_CHECKPOINT_BYTES"
                         % (_human(size), _human(cap), top))


# VALUE_CAP is the most one value's pickle may take: the store keeps each
# value as one chunk, and memoryd caps a chunk at 32 MiB (half its gRPC
# message limit).
VALUE_CAP = 32 << 20


class ValueTooLarge(TooLarge):
    """One value pickles to more than a chunk may hold."""

    def __init__(self, name, size, cap):
        self.size, self.cap, self.largest = size, cap, [(name, size)]
        Exception.__init__(self, "%s is %s pickled, over the %s one value may take in a checkpoint: "
                           "split it into smaller values, or del it if the session can do without it"
                           % (name, _human(size), _human(cap)))


def _human(n):
    for unit in ("bytes", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return ("%d %s" % (n, unit)) if unit == "bytes" else ("%.1f %s" % (n, unit))
        n /= 1024.0


def _what(obj):
    """A short name for an unsaveable value's kind."""
    import types

    kinds = [
        (types.GeneratorType, "generator"), (types.CoroutineType, "coroutine"),
        (types.AsyncGeneratorType, "async generator"), (types.FrameType, "frame"),
    ]
    for t, name in kinds:
        if isinstance(obj, t):
            return name
    mod = type(obj).__module__
    name = type(obj).__qualname__
    if mod in ("_io", "io") or hasattr(obj, "fileno") and hasattr(obj, "read"):
        return "open file (%s)" % name
    if mod == "socket" or name == "socket":
        return "socket"
    if mod in ("threading", "_thread"):
        return "thread object (%s)" % name
    if mod.startswith("asyncio") or mod == "_asyncio":
        return "asyncio object (%s)" % name
    return name if mod == "builtins" else "%s.%s" % (mod, name)


# How deep, and how many items of each container, _culprit looks.
_CULPRIT_DEPTH = 6
_CULPRIT_ITEMS = 1000


def _unpicklable(obj, pickle):
    """What an unpicklable value is, naming the part that cannot be pickled
    when it is a container or an object holding one: "dict; open file
    (TextIOWrapper) at ['conn']", not just "dict"."""
    found = _culprit(obj, pickle, 0)
    if found is None:
        return _what(obj)
    path, part = found
    return "%s; %s at %s" % (_what(obj), _what(part), path)


def _culprit(obj, pickle, depth):
    """(path, value) of the first item or attribute of obj that cannot be
    pickled, looking into it (depth-first, bounded), or None."""
    if depth >= _CULPRIT_DEPTH:
        return None
    if isinstance(obj, dict):
        items = (("[%r]" % (k,), v) for k, v in obj.items())
    elif isinstance(obj, (list, tuple)):
        items = (("[%d]" % i, v) for i, v in enumerate(obj))
    elif isinstance(obj, (set, frozenset)):
        items = (("{...}", v) for v in obj)
    else:
        attrs = getattr(obj, "__dict__", None)
        if not isinstance(attrs, dict) or isinstance(obj, type):
            return None
        items = (("." + str(k), v) for k, v in attrs.items())
    for n, (path, v) in enumerate(items):
        if n >= _CULPRIT_ITEMS:
            return None
        try:
            pickle.dumps(v, protocol=5)
        except Exception:  # noqa: BLE001 - this is the one that fails
            deeper = _culprit(v, pickle, depth + 1)
            if deeper is None:
                return path, v
            return path + deeper[0], deeper[1]
    return None


class Definitions:
    """Finds the source of the session's top-level def and class statements.

    Each cell's source is parsed (lazily, at the first checkpoint) for def,
    async def and class statements at its top level, looking into if, for,
    while, with and try blocks but not into function or class bodies, and
    for `name = lambda ...` assignments.
    """

    def __init__(self):
        self._cells = []  # [(filename, source)], in order
        self._parsed = 0
        self._defs = {}  # name -> [(cell index, first line, kind, source)]

    def add_cell(self, filename, source):
        self._cells.append((filename, source))

    def _parse(self):
        import ast

        while self._parsed < len(self._cells):
            idx = self._parsed
            self._parsed += 1
            filename, source = self._cells[idx]
            try:
                tree = ast.parse(source, filename)
            except SyntaxError:
                continue
            lines = source.splitlines(True)
            for node in self._top_level(tree.body, ast):
                kind = None
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    kind, name = "function", node.name
                elif isinstance(node, ast.ClassDef):
                    kind, name = "class", node.name
                elif (isinstance(node, ast.Assign) and len(node.targets) == 1
                      and isinstance(node.targets[0], ast.Name) and isinstance(node.value, ast.Lambda)):
                    kind, name = "lambda", node.targets[0].id
                if kind is None:
                    continue
                first = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", ())])
                text = self._dedent("".join(lines[first - 1:node.end_lineno]))
                self._defs.setdefault(name, []).append((idx, first, kind, text, filename))

    @staticmethod
    def _top_level(body, ast):
        for node in body:
            yield node
            if isinstance(node, (ast.If, ast.For, ast.AsyncFor, ast.While, ast.With, ast.AsyncWith)):
                yield from Definitions._top_level(node.body, ast)
                yield from Definitions._top_level(getattr(node, "orelse", []), ast)
            elif isinstance(node, ast.Try) or type(node).__name__ == "TryStar":
                for part in (node.body, node.orelse, node.finalbody):
                    yield from Definitions._top_level(part, ast)
                for h in node.handlers:
                    yield from Definitions._top_level(h.body, ast)

    @staticmethod
    def _dedent(text):
        import textwrap

        return textwrap.dedent(text)

    def source_of(self, name, obj):
        """(kind, source, order) of the statement that made obj, or None."""
        self._parse()
        defs = self._defs.get(name)
        if not defs:
            return None
        if isinstance(obj, type):
            # A class has no code object to point at its statement; take the
            # latest class statement of that name.
            for idx, first, kind, text, _ in reversed(defs):
                if kind == "class" and obj.__qualname__ == name:
                    return kind, text, (idx, first)
            return None
        code = getattr(_unwrap(obj), "__code__", None)
        if code is None:
            return None
        for idx, first, kind, text, filename in reversed(defs):
            if filename != code.co_filename or kind == "class":
                continue
            if kind == "lambda" and obj.__name__ == "<lambda>" and code.co_firstlineno == first:
                return kind, text, (idx, first)
            if kind == "function" and code.co_firstlineno == first:
                return kind, text, (idx, first)
        return None


class Checkpointer:
    """Makes checkpoints of one namespace.

    skip(name, obj) says which entries belong to the agent (helpers,
    proxies) rather than to the session.
    """

    def __init__(self, ns, skip, definitions, cap):
        self.ns = ns
        self.skip = skip
        self.defs = definitions
        self.cap = cap
        self.value_cap = VALUE_CAP
        self._cache = {}  # name -> (obj, chunk id, size) for immutable values
        self.stored = set()  # chunk ids the store holds already
        # The workspace (codeexec_workspace.Workspace) and its cap; without
        # a cap the checkpoint holds no files.
        self.workspace = None
        self.workspace_cap = 0

    def snapshot(self):
        """Returns (manifest, new chunks {id: bytes}). Raises TooLarge."""
        import hashlib
        import pickle
        import types

        modules, defs, values, unsaved = [], [], {}, []
        chunks = {}
        sizes = []
        total = 0
        cache = {}
        for name, obj in list(self.ns.items()):
            if name.startswith("__") and name.endswith("__") or self.skip(name, obj):
                continue
            if isinstance(obj, types.ModuleType):
                if sys.modules.get(obj.__name__) is obj:
                    modules.append([name, obj.__name__])
                else:
                    unsaved.append({"name": name, "type": "module", "why": "not an imported module"})
                continue
            if self._session_made(obj):
                found = self.defs.source_of(name, obj)
                if found is not None:
                    kind, text, order = found
                    defs.append({"name": name, "kind": kind, "source": text, "order": list(order)})
                    continue
                if not isinstance(obj, type) and getattr(obj, "__name__", "") == "<lambda>":
                    unsaved.append({"name": name, "type": "lambda",
                                    "why": "its source was not found; define it with def to keep it"})
                    continue
            prev = self._cache.get(name)
            if isinstance(obj, _IMMUTABLE) and prev is not None and prev[0] is obj and prev[1] in self.stored:
                # The same object, stored already: no need to pickle it.
                cid, size = prev[1], prev[2]
            else:
                try:
                    data = pickle.dumps(obj, protocol=5)
                except Exception as exc:  # noqa: BLE001 - anything unpicklable is reported, not raised
                    unsaved.append({"name": name, "type": _unpicklable(obj, pickle), "why": _one_line(exc)})
                    continue
                cid = hashlib.blake2b(data, digest_size=16).hexdigest()
                size = len(data)
                if size > self.value_cap:
                    raise ValueTooLarge(name, size, self.value_cap)
                if cid not in self.stored:
                    chunks[cid] = data
            if isinstance(obj, _IMMUTABLE):
                cache[name] = (obj, cid, size)
            values[name] = {"chunk": cid, "bytes": size}
            total += size
            sizes.append((size, name))
        if total > self.cap:
            sizes.sort(reverse=True)
            raise TooLarge(total, self.cap, [(n, b) for b, n in sizes[:3]])
        self._cache = cache
        defs.sort(key=lambda d: d["order"])
        manifest = {"v": VERSION, "modules": modules, "defs": defs, "values": values, "bytes": total}
        if self.workspace is not None and self.workspace_cap > 0:
            part, size, lost = self.workspace.snapshot(self.workspace_cap, self.stored, chunks)
            part["bytes"] = size
            manifest["workspace"] = part
            unsaved.extend(lost)
        manifest["unsaved"] = sorted(unsaved, key=lambda u: u["name"])
        return manifest, chunks

    def committed(self, manifest):
        """Records that the store now holds the manifest's chunks."""
        self.stored = chunk_ids(manifest)

    @staticmethod
    def _session_made(obj):
        return getattr(obj, "__module__", None) == "__main__" and (
            isinstance(obj, type) or hasattr(_unwrap(obj), "__code__"))


def chunk_ids(manifest):
    """Every chunk id a manifest names: its values' and its files'."""
    import codeexec_workspace

    ids = {v["chunk"] for v in (manifest or {}).get("values", {}).values()}
    return ids | codeexec_workspace.chunk_ids((manifest or {}).get("workspace"))


def _unwrap(obj):
    """The function a decorator wrapped (functools.wraps sets __wrapped__)."""
    for _ in range(100):
        inner = getattr(obj, "__wrapped__", None)
        if inner is None:
            return obj
        obj = inner
    return obj


def _one_line(exc):
    msg = " ".join(str(exc).split())
    return "%s: %s" % (type(exc).__name__, msg) if msg else type(exc).__name__


def restore(ns, manifest, chunks, on_source=None, workspace=None):
    """Rebuilds ns from a checkpoint. chunks maps chunk id to bytes.

    on_source(filename, source) is called before each definition runs, so
    that the caller can register its source (for tracebacks, inspect and
    the next checkpoint). The files of the checkpoint's workspace are
    written back first, into workspace (a codeexec_workspace.Workspace).
    Returns a report: {"restored": [names], "files": [paths], "failed":
    [{"name", "why"}], "unsaved": the manifest's unsaved list}.
    """
    import importlib
    import pickle

    if manifest.get("v") != VERSION:
        raise ValueError("checkpoint version %r is not supported (this agent reads %d)" % (manifest.get("v"), VERSION))
    restored, failed, files = [], [], []
    if workspace is not None and manifest.get("workspace"):
        files, failed = workspace.restore(manifest["workspace"], chunks)
    for name, modname in manifest.get("modules", ()):
        try:
            ns[name] = importlib.import_module(modname)
            restored.append(name)
        except Exception as exc:  # noqa: BLE001
            failed.append({"name": name, "why": "import %s: %s" % (modname, _one_line(exc))})
    pending_defs = list(manifest.get("defs", ()))
    values = dict(manifest.get("values", {}))

    def run_defs(defs):
        left = []
        for d in defs:
            filename = "<restored-%s>" % d["name"]
            try:
                if on_source is not None:
                    on_source(filename, d["source"])
                exec(compile(d["source"], filename, "exec", dont_inherit=True), ns)
                restored.append(d["name"])
            except NameError:
                left.append(d)  # may need a value: try again after them
            except Exception as exc:  # noqa: BLE001
                failed.append({"name": d["name"], "why": _one_line(exc)})
        return left

    def load_values(names):
        left = []
        for name in names:
            v = values[name]
            data = chunks.get(v["chunk"])
            if data is None:
                failed.append({"name": name, "why": "its saved value is missing"})
                continue
            try:
                ns[name] = pickle.loads(data)
                restored.append(name)
            except (AttributeError, NameError, ImportError):
                left.append(name)  # may need a def that needed a value
            except Exception as exc:  # noqa: BLE001
                failed.append({"name": name, "why": _one_line(exc)})
        return left

    pending_defs = run_defs(pending_defs)
    pending_values = load_values(list(values))
    if pending_defs:
        pending_defs = run_defs(pending_defs)
    if pending_values:
        pending_values = load_values(pending_values)
    for d in pending_defs:
        failed.append({"name": d["name"], "why": "its definition needs a name that was not restored"})
    for name in pending_values:
        failed.append({"name": name, "why": "its value refers to a definition that was not restored"})
    return {"restored": sorted(restored), "files": files, "failed": failed,
            "unsaved": list(manifest.get("unsaved", ()))}
