"""SIGINT that interrupts user code but never the agent's own machinery.

Python raises KeyboardInterrupt wherever the main thread happens to be. In
the agent that could leave half a frame on the channel, a lock held, or an
exec without its `done`. So the agent's SIGINT handler looks at the stack:
if user code (a cell, a saved tool, or anything they call) is on top, it
raises as usual; if agent code is, it only records the interrupt, and the
agent delivers it when it hands control back to user code.

Waits that should be interruptible (a call waiting for its reply, the event
loop running a cell) are marked with mark_interruptible.
"""

import os
from _signal import SIGINT, signal
from _thread import allocate_lock

_AGENT_PREFIX = os.path.dirname(os.path.abspath(__file__)) + os.sep
_boundaries = set()  # code objects of agent functions that may be interrupted
_pending = False


def mark_interruptible(fn):
    """Lets SIGINT raise KeyboardInterrupt while fn's frame is on top of
    the agent part of the stack. fn must be safe to abandon at any point."""
    _boundaries.add(fn.__code__)
    return fn


def _on_sigint(signum, frame):
    global _pending
    f = frame
    while f is not None:
        code = f.f_code
        name = code.co_filename
        if name.startswith("<cell-") or name.startswith("<user_tools:") or code in _boundaries:
            raise KeyboardInterrupt
        if name.startswith(_AGENT_PREFIX):
            break
        f = f.f_back
    _pending = True


def clear():
    """Forgets an interrupt that arrived while no user code ran."""
    global _pending
    _pending = False


def deliver():
    """Raises a recorded interrupt; call where control returns to user code."""
    global _pending
    if _pending:
        _pending = False
        raise KeyboardInterrupt


def install():
    signal(SIGINT, _on_sigint)


class Flag:
    """A one-shot event built on a raw lock, so an exception raised while
    waiting can never leave it broken (threading.Event can be)."""

    __slots__ = ("lock",)

    def __init__(self):
        self.lock = allocate_lock()
        self.lock.acquire()

    def set(self):
        try:
            self.lock.release()
        except RuntimeError:
            pass  # already set

    def wait(self, timeout=-1):
        if self.lock.acquire(True, timeout):
            self.lock.release()
            return True
        return False

    def is_set(self):
        return not self.lock.locked()
