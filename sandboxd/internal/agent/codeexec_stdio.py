"""sys.stdout and sys.stderr for user code.

Both are line-buffered text streams on fds 1 and 2, so they interleave
sanely with child processes writing to the same descriptors. They also keep
a background thread of an earlier exec out of the current exec's output: a
write from a thread that was already running when the current exec started
is dropped (docs/PROTOCOL.md), and its tool calls are refused
(of_current_exec). Thread-pool workers are exempt, because a pool made by
one exec is routinely used by the next and its work is then the current
exec's.
"""

import io
import sys

_muted = frozenset()  # threads alive when the current exec started


def _may_write():
    threading = sys.modules.get("threading")  # _muted is empty without it
    if threading is None:
        return True
    t = threading.current_thread()
    if t not in _muted:
        return True
    pool = sys.modules.get("concurrent.futures.thread")
    return pool is not None and getattr(t, "_target", None) is pool._worker


def of_current_exec():
    """Whether the calling thread acts for the exec that runs now: False
    for a thread an earlier exec started (but a thread-pool worker), whose
    tool calls are then refused rather than made under this exec's
    servers."""
    return not _muted or _may_write()


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
    global _muted
    threading = sys.modules.get("threading")
    if threading is None:
        _muted = frozenset()
        return
    main = threading.main_thread()
    _muted = frozenset(t for t in threading.enumerate() if t is not main)


def install():
    sys.stdout = sys.__stdout__ = _open(1)
    sys.stderr = sys.__stderr__ = _open(2)


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
