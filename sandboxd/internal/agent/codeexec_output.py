"""Capture of fds 1 and 2 and the end-of-exec fence.

fds 1 and 2 are pipes owned by the agent. One reader thread per pipe turns
what it reads into `out` frames for the exec that is running. Exec
boundaries are marked in the byte stream itself: at the start of an exec the
main thread writes a START marker into each pipe, and at its end an END
marker, then waits until the reader has reached it. Because a pipe is FIFO,
everything written before the END marker belongs to the exec, and anything
read outside a START..END pair (a background thread, a child still running
after `done`) belongs to no exec and is dropped.

Markers carry a random per-exec token, so user output cannot fake one, and
are shorter than PIPE_BUF, so a marker write is never interleaved with other
writers' bytes.
"""

import codecs
import os
import threading
from collections import deque

READ_SIZE = 1 << 16
_PREFIX = b"\x00\x1b[codeexec-fence:"


class _Marker:
    __slots__ = ("data", "start", "exec_id", "limit", "event", "dropped")

    def __init__(self, token, start, exec_id, limit):
        self.data = _PREFIX + token + (b":S]\x00" if start else b":E]\x00")
        self.start = start
        self.exec_id = exec_id
        self.limit = limit
        self.event = threading.Event()
        self.dropped = 0


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


class Stream:
    """One captured descriptor (1 or 2) and its reader thread."""

    def __init__(self, name, rfd, wfd, channel):
        self.name = name
        self._rfd = rfd
        # A private duplicate of the write end: markers go through it, so the
        # fence works even if user code closes or redirects fd 1/2.
        self._wfd = wfd
        self._channel = channel
        self._lock = threading.Lock()
        self._markers = deque()
        self._active = None  # exec id whose output is being forwarded
        self._limit = 0
        self._sent = 0
        self._dropped = 0
        self._decoder = None

    def restore_fd(self, fd):
        """Points fd back at this stream's pipe (user code may have moved it)."""
        try:
            os.dup2(self._wfd, fd)
        except OSError:
            pass

    def start(self):
        t = threading.Thread(target=self._read_loop, name="codeexec-" + self.name, daemon=True)
        t.start()

    def _push(self, marker):
        with self._lock:
            self._markers.append(marker)
        os.write(self._wfd, marker.data)

    def begin(self, token, exec_id, limit):
        """Marks the start of exec_id's output (called before user code runs)."""
        self._push(_Marker(token, True, exec_id, limit))

    def end(self, token):
        """Writes the END marker; returns it so the caller can wait on it."""
        marker = _Marker(token, False, None, 0)
        self._push(marker)
        return marker

    # --- reader thread ---------------------------------------------------

    def _read_loop(self):
        buf = b""
        while True:
            try:
                data = os.read(self._rfd, READ_SIZE)
            except InterruptedError:
                continue
            except OSError:
                return
            if not data:
                return
            buf = buf + data if buf else data
            while True:
                with self._lock:
                    marker = self._markers[0] if self._markers else None
                if marker is None:
                    self._emit(buf)
                    buf = b""
                    break
                i = buf.find(marker.data)
                if i >= 0:
                    self._emit(buf[:i])
                    buf = buf[i + len(marker.data):]
                    with self._lock:
                        self._markers.popleft()
                    self._transition(marker)
                    continue
                keep = _held_back(buf, marker.data)
                self._emit(buf[: len(buf) - keep])
                buf = buf[len(buf) - keep:]
                break

    def _transition(self, marker):
        if marker.start:
            self._active = marker.exec_id
            self._limit = marker.limit
            self._sent = 0
            self._dropped = 0
            self._decoder = codecs.getincrementaldecoder("utf-8")("replace")
            return
        if self._active is not None:
            tail = self._decoder.decode(b"", True)
            if tail:
                self._send(tail)
        marker.dropped = self._dropped
        self._active = None
        self._decoder = None
        marker.event.set()

    def _emit(self, data):
        if not data or self._active is None:
            return
        if self._limit:
            room = self._limit - self._sent
            if len(data) > room:
                cut = max(room, 0)
                # Do not cut a UTF-8 sequence in half.
                while 0 < cut < len(data) and (data[cut] & 0xC0) == 0x80:
                    cut -= 1
                self._dropped += len(data) - cut
                data = data[:cut]
                # Once the cap is reached nothing more is forwarded.
                self._sent = self._limit
                if not data:
                    return
            else:
                self._sent += len(data)
        text = self._decoder.decode(data)
        if text:
            self._send(text)

    def _send(self, text):
        try:
            self._channel.send_out(self._active, self.name, text)
        except Exception:  # noqa: BLE001 - a lost channel ends the agent via the channel reader
            pass

    def after_fork_in_child(self):
        for fd in (self._rfd, self._wfd):
            try:
                os.close(fd)
            except OSError:
                pass
