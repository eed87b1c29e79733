"""Keeps a forked sandbox off the pages it shares with the fork server.

A page the sandbox writes is copied into it; what it only reads stays
shared. Two kinds of write are the sandbox's without it asking:

- Reference counts. Python 3.12+ leaves the counts of immortal objects
  alone (PEP 683), but only the interpreter's static objects are
  immortal: every module, function, code object, type and dict that the
  server preloaded and a sandbox touches would have its count written,
  and with it its page copied. The server never frees what it preloaded
  (it only forks), so immortalize() makes all of it immortal, as
  Cinder's immortalize_heap did.
- New objects. pymalloc hands out the free slots of the pools it already
  uses first, and those lie on the server's pages. fill_pools() takes
  them all in the server, so a sandbox's objects start pools of its own.
"""

import ctypes
import gc
import os
import sys

_CODE = type(compile("", "", "exec"))
# The low 32 bits of a reference count, which Py_INCREF and Py_DECREF
# test: at or above 2**31 the object is immortal and they leave it. None
# carries this build's immortal value (0xFFFFFFFF on 3.12 and 3.13).
_REFCNT = ctypes.c_uint32
_OFFSET = 4 if sys.byteorder == "big" else 0
_IMMORTAL = _REFCNT.from_address(id(None) + _OFFSET).value
_IMMORTAL_MIN = 1 << 31


def supported():
    """Whether this interpreter leaves immortal objects' counts unwritten:
    CPython 3.12 or later, 64-bit, with the GIL (a free-threaded build
    keeps its counts elsewhere)."""
    return (sys.implementation.name == "cpython" and sys.version_info >= (3, 12)
            and "t" not in getattr(sys, "abiflags", "")
            and sys.maxsize > 2**32 and _IMMORTAL >= _IMMORTAL_MIN)


def immortalize():
    """Makes every object the collector tracks, and every object they
    reach, immortal; returns how many it changed (0 where unsupported).
    Call it once the server holds what it keeps, before gc.freeze()."""
    if not supported():
        return 0
    n = 0
    stack = gc.get_objects()
    referents = gc.get_referents
    while stack:
        o = stack.pop()
        count = _REFCNT.from_address(id(o) + _OFFSET)
        if count.value >= _IMMORTAL_MIN:
            continue  # immortal already, and so its referents were seen
        count.value = _IMMORTAL
        n += 1
        if type(o) is _CODE:
            # Code has no traverse: what it holds is in these.
            stack += (o.co_consts, o.co_names, o.co_filename, o.co_name, o.co_qualname,
                      o.co_linetable, o.co_exceptiontable)
        else:
            stack += referents(o)
    return n


def free_blocks():
    """pymalloc's free slots in the pools it uses, by block size:
    {size: count}. sys._debugmallocstats is the only report of them; an
    interpreter without pymalloc, or whose report reads otherwise, gives
    {}."""
    if not hasattr(sys, "_debugmallocstats"):
        return {}
    r, w = os.pipe()
    saved = os.dup(2)
    try:
        os.dup2(w, 2)
        sys._debugmallocstats()
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(w)
    with os.fdopen(r, "rb") as f:
        report = f.read().decode(errors="replace")
    out, rows = {}, False
    for line in report.splitlines():
        f = line.split()
        if f[:1] == ["-----"]:
            rows = True  # "class size num pools blocks in use avail blocks"
        elif rows and len(f) == 5 and all(x.isdigit() for x in f):
            out[int(f[1])] = int(f[4])
        elif rows:
            break
    return out


def fill_pools():
    """Takes every free slot of the pools pymalloc uses with an object of
    that slot's size, and returns them: the caller keeps them for as long
    as it forks."""
    keep = []
    for size, free in sorted(free_blocks().items()):
        if size == 16:
            keep += [object() for _ in range(free)]
        elif size == 32:
            keep += [(1 << 29) + i for i in range(free)]  # an int of one digit: 28 bytes
        else:
            n = size - sys.getsizeof(b"")  # bytes of n take exactly size
            keep += [bytes(n) for _ in range(free)]
    return keep
