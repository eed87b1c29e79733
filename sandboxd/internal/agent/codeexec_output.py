"""Capture of fds 1 and 2 and the end-of-exec fence.

Every exec gets two fresh pipes, dup2'd onto fds 1 and 2 before user code
runs; one reader thread per pipe turns what it reads into `out` frames for
that exec. At the end of the exec the main thread writes a marker into each
pipe and waits until the reader has reached it. A pipe is FIFO, so
everything written before the marker belongs to the exec; whatever else
arrives (a background thread before the next exec, a child process still
running) is drained and dropped until the last writer closes the pipe. A child
started by one exec keeps the pipe of that exec, so its later output can
never land in another exec's result.

The marker carries a random per-exec token, so user output cannot fake it,
and is shorter than PIPE_BUF, so its write is never interleaved with other
writers' bytes. It is written through a private duplicate of the pipe's
write end, so the fence works even if user code closes or moves fd 1/2.
"""

import codecs
import os

import codeexec_budget
from _thread import allocate_lock, start_new_thread
from time import monotonic, sleep

from codeexec_interrupt import Flag

READ_SIZE = 1 << 16
# How long a call waits for its reader threads when the pids limit refuses
# them: the children that the call before forked (a fork bomb's) may still
# be ending, and each takes its slot with it.
THREAD_WAIT = 2.0
_PREFIX = b"\x00\x1b[codeexec-fence:"

_open_fds = set()  # every pipe end we own, closed in forked children


def _held_back(buf, marker):
    """Length of the longest tail of buf that could begin marker."""
    n = min(len(buf), len(marker) - 1)
    first = marker[0]
    while n > 0:
        i = buf.find(first, len(buf) - n)
        if i < 0:
            return 0
        n = len(buf) - i
        if marker.startswith(buf[i:]):
            return n
        n -= 1
    return 0


def _close(fd):
    _open_fds.discard(fd)
    try:
        os.close(fd)
    except OSError:
        pass


class _Pipe:
    """One exec's pipe for one stream, and its reader thread."""

    def __init__(self, name, exec_id, limit, channel, spill=None):
        self.name = name
        self._spill = spill  # a codeexec_budget.Spill when the exec has a budget
        self.exec_id = exec_id
        self.rfd, self.wfd = os.pipe()  # both close-on-exec
        _open_fds.update((self.rfd, self.wfd))
        self._channel = channel
        self._limit = limit
        self._sent = 0
        self.dropped = 0
        self._decoder = codecs.getincrementaldecoder("utf-8")("replace")
        self._marker = None  # set once by the main thread, read by the reader
        self._abandoned = False
        self.reached = Flag()
        try:
            start_new_thread(self._read_loop, ())
        except BaseException:  # the pids limit can refuse a thread
            _close(self.rfd)
            _close(self.wfd)
            raise

    def abandon(self):
        """Drops everything this pipe carries (its exec failed to start)."""
        self._abandoned = True
        self.reached.set()
        _close(self.wfd)

    def end(self, token):
        """Writes the end marker; wait on self.reached afterwards."""
        marker = _PREFIX + token + b"]\x00"
        # Set before the write: a reader that sees the marker's bytes has
        # already been able to see this attribute.
        self._marker = marker
        try:
            os.write(self.wfd, marker)
        except OSError:
            self.reached.set()

    def close_private(self):
        _close(self.wfd)

    def _read_loop(self):
        buf = b""
        while True:
            try:
                data = os.read(self.rfd, READ_SIZE)
            except InterruptedError:
                continue
            except OSError:
                data = b""
            if not data:
                self._finish()  # only if every writer closed before the fence
                _close(self.rfd)
                return
            if self._abandoned:
                _drainer().add(self.rfd)
                return
            buf = buf + data if buf else data
            marker = self._marker
            if marker is None:
                self._emit(buf)
                buf = b""
                continue
            i = buf.find(marker)
            if i >= 0:
                self._emit(buf[:i])
                self._finish()
                # What follows belongs to no exec. Children of this exec may
                # keep writing for a long time: one shared thread drains all
                # such pipes rather than one thread each.
                _drainer().add(self.rfd)
                return
            keep = _held_back(buf, marker)
            self._emit(buf[: len(buf) - keep])
            buf = buf[len(buf) - keep:]

    def _finish(self):
        if self.reached.is_set():
            return
        if self._spill is not None:
            rest = self._decoder.decode(b"", True)
            self._send(self._spill.take(rest.encode("utf-8", "surrogateescape"), rest))
            self._send(self._spill.finish())
        else:
            self._forward(self._decoder.decode(b"", True))
        self.reached.set()

    def _emit(self, data):
        if not data:
            return
        if self._spill is not None:
            text = self._decoder.decode(data)
            self._send(self._spill.take(data, text))
            return
        if self._limit and self._sent >= self._limit:
            self.dropped += len(data)  # over the cap: not even decoded
            return
        self._forward(self._decoder.decode(data))

    def _forward(self, text):
        if self._limit and text:
            # The cap counts UTF-8 bytes of the text sent, as sandboxd does.
            raw = text.encode("utf-8")
            room = self._limit - self._sent
            if len(raw) > room:
                cut = max(room, 0)
                while cut > 0 and (raw[cut] & 0xC0) == 0x80:
                    cut -= 1  # do not cut a character in half
                self.dropped += len(raw) - cut
                self._sent = self._limit
                text = raw[:cut].decode("utf-8")
            else:
                self._sent += len(raw)
        if text:
            self._send(text)

    def _send(self, text):
        if not text:
            return
        # A read is at most 64 KiB, but replacement characters (3 bytes each
        # for 1 bad byte) can make its text longer; split to keep the limit.
        if len(text) > READ_SIZE // 3 and len(text.encode("utf-8")) > READ_SIZE:
            step = READ_SIZE // 3
            for i in range(0, len(text), step):
                self._send(text[i:i + step])
            return
        try:
            self._channel.send_out(self.exec_id, self.name, text)
        except Exception:  # noqa: BLE001 - a lost channel ends the agent via the channel reader
            pass


class _Drainer:
    """Reads and drops everything from pipes whose exec has ended, until
    their last writer closes them, with one thread for all of them."""

    def __init__(self):
        import select

        self._select = select
        self._wake_r, self._wake_w = os.pipe()
        _open_fds.update((self._wake_r, self._wake_w))
        self._new = []
        self._poll = select.poll()
        self._poll.register(self._wake_r, select.POLLIN)
        start_new_thread(self._loop, ())

    def add(self, fd):
        self._new.append(fd)
        os.write(self._wake_w, b"x")

    def _loop(self):
        while True:
            for fd, _ in self._poll.poll():
                if fd == self._wake_r:
                    os.read(self._wake_r, 4096)
                    while self._new:
                        self._poll.register(self._new.pop(), self._select.POLLIN)
                    continue
                try:
                    data = os.read(fd, READ_SIZE)
                except OSError:
                    data = b""
                if not data:
                    self._poll.unregister(fd)
                    _close(fd)


_the_drainer = None
_drainer_lock = allocate_lock()


def _drainer():
    global _the_drainer
    with _drainer_lock:  # only reader threads get here, never the main thread
        if _the_drainer is None:
            _the_drainer = _Drainer()
        return _the_drainer


class Capture:
    """Captures fds 1 and 2 for one exec at a time."""

    def __init__(self, channel):
        self._channel = channel
        self._pipes = ()
        # The output budget's files go under the agent's first working
        # directory (/workspace), wherever the code has moved since.
        self._workdir = os.getcwd()

    def begin(self, exec_id, limit, budget=0):
        """Points fds 1 and 2 at fresh pipes for exec_id, waiting up to
        THREAD_WAIT for the threads that read them."""
        deadline = None
        while True:
            try:
                return self._begin(exec_id, limit, budget)
            except RuntimeError:  # no thread: the pids limit is full
                now = monotonic()
                deadline = deadline or now + THREAD_WAIT
                if now >= deadline:
                    raise
                sleep(0.02)

    def _begin(self, exec_id, limit, budget):
        self._pipes = ()
        pipes = []
        # With a budget, it bounds what is sent and the cap does not apply:
        # nothing is lost, the rest is in the budget's file.
        shared = codeexec_budget.Shared(budget, self._workdir, exec_id) if budget else None
        if shared is not None:
            limit = 0
        try:
            for fd, name in ((1, "stdout"), (2, "stderr")):
                spill = codeexec_budget.Spill(name, shared) if shared is not None else None
                p = _Pipe(name, exec_id, limit, self._channel, spill)
                pipes.append(p)
                os.dup2(p.wfd, fd)
        except (OSError, RuntimeError):
            for p in pipes:
                p.abandon()
            try:
                null = os.open(os.devnull, os.O_WRONLY)
                os.dup2(null, 1)
                os.dup2(null, 2)
                os.close(null)
            except OSError:
                pass
            raise
        self._pipes = tuple(pipes)

    def end(self, token, timeout):
        """The fence: returns {stream: dropped bytes} once all output is sent.

        Returns the names of streams whose reader did not reach the marker in
        time as a second value (should never happen).
        """
        for p in self._pipes:
            p.end(token)
        late = []
        for p in self._pipes:
            if not _wait(p.reached, timeout):
                late.append(p.name)
            p.close_private()
        dropped = {"stdout": 0, "stderr": 0}
        dropped.update((p.name, p.dropped) for p in self._pipes)
        return dropped, late

    @staticmethod
    def after_fork_in_child():
        for fd in list(_open_fds):
            _close(fd)


def _wait(event, timeout):
    while True:
        try:
            return event.wait(timeout)
        except KeyboardInterrupt:
            continue  # a stray SIGINT must not break the fence
