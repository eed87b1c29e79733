"""sys.stdout and sys.stderr for user code.

Both are line-buffered text streams on fds 1 and 2, so they interleave
sanely with child processes writing to the same descriptors. They also keep
a background thread of an earlier exec out of the current exec's output: a
write from a thread that was already running when the current exec started
is dropped (docs/PROTOCOL.md), and its tool calls are refused
(of_current_exec). A thread-pool worker outlives the exec that made its
pool, which the next exec routinely uses: its writes and calls belong to
the exec that submitted the work item it runs (the items are tagged when
submitted, see _tag_work_items).
"""

import io
import sys

_muted = frozenset()  # threads alive when the current exec started
_exec = 0  # counts execs: what a work item is tagged with


def _may_write():
    threading = sys.modules.get("threading")  # _muted is empty without it
    if threading is None:
        return True
    t = threading.current_thread()
    # A pool's worker acts for the exec that submitted the item it runs,
    # whenever the worker was started.
    item = getattr(t, "_codeexec_exec", None)
    if item is not None:
        return item == _exec
    return t not in _muted


def of_current_exec():
    """Whether the calling thread acts for the exec that runs now: False
    for a thread an earlier exec started, or a pool's worker running an
    item an earlier exec submitted, whose tool calls are then refused
    rather than made under this exec's servers."""
    return not _muted or _may_write()


def _tag_work_items():
    """Makes concurrent.futures' thread pools (asyncio.to_thread's too)
    tag each work item with the exec that submits it, and their workers
    act for that exec while they run it. Done once the module is loaded;
    items submitted earlier carry no tag (install sees to it that none
    are)."""
    pool = sys.modules.get("concurrent.futures.thread")
    if pool is None or getattr(pool._WorkItem, "_codeexec_tagged", False):
        return
    threading = sys.modules["threading"]  # concurrent.futures imports it

    class _WorkItem(pool._WorkItem):
        _codeexec_tagged = True

        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            self.codeexec_exec = _exec if of_current_exec() else -1

        def run(self, *args, **kwargs):
            t = threading.current_thread()
            t._codeexec_exec = self.codeexec_exec
            try:
                return super().run(*args, **kwargs)
            finally:
                t._codeexec_exec = None

    pool._WorkItem = _WorkItem


class _TagOnImport:
    """A one-shot meta path finder: tags work items (_tag_work_items) as
    soon as concurrent.futures.thread is imported, before any is made."""

    NAME = "concurrent.futures.thread"

    @classmethod
    def find_spec(cls, name, path=None, target=None):
        if name != cls.NAME:
            return None
        import importlib.util

        try:
            sys.meta_path.remove(cls)
        except ValueError:
            pass  # user code rebuilt sys.meta_path; the hook is gone all the same
        spec = importlib.util.find_spec(name)
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        run = spec.loader.exec_module

        def exec_module(module):
            run(module)
            _tag_work_items()

        spec.loader.exec_module = exec_module
        return spec


class _Stream(io.TextIOWrapper):
    def write(self, s):
        if _muted and isinstance(s, str) and not _may_write():
            return len(s)
        return super().write(s)


def _open(fd):
    raw = io.FileIO(fd, "w", closefd=False)
    return _Stream(io.BufferedWriter(raw), encoding="utf-8", errors="backslashreplace",
                   line_buffering=True)


def begin_exec():
    """Mutes every thread but the main one that is running now.

    Only threads that user code started can write to sys.stdout, and user
    code starts them through `threading` (the agent's own threads use
    `_thread`, so the agent need not import `threading`): until something
    imports it there is nothing to mute.
    """
    global _muted, _exec
    _exec += 1
    threading = sys.modules.get("threading")
    if threading is None:
        _muted = frozenset()
        return
    main = threading.main_thread()
    _muted = frozenset(t for t in threading.enumerate() if t is not main)
    _tag_work_items()


def install():
    sys.stdout = sys.__stdout__ = _open(1)
    sys.stderr = sys.__stderr__ = _open(2)
    if _TagOnImport.NAME in sys.modules:
        _tag_work_items()
    else:
        sys.meta_path.insert(0, _TagOnImport)


def fix():
    """Restores our streams where user code closed them or set them to
    None. A stream the user put in place of sys.stdout is left alone."""
    for name, fd in (("stdout", 1), ("stderr", 2)):
        dunder = "__%s__" % name
        f = getattr(sys, dunder, None)
        if not isinstance(f, _Stream) or f.closed:
            f = _open(fd)
            setattr(sys, dunder, f)
        cur = getattr(sys, name, None)
        if cur is None or getattr(cur, "closed", False):
            setattr(sys, name, f)


def flush():
    for f in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__):
        try:
            f.flush()
        except Exception:  # noqa: BLE001 - user code may have closed or replaced them
            pass
