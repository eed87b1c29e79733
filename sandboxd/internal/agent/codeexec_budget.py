"""The output budget: a result sized for a model, the rest kept in a file.

With a budget of B characters (the exec frame's `budget`), an exec sends
the first B/2 characters of its output (stdout and stderr together, as
they come) and the last B/4 of each stream, with a marker between them
that counts what was left out and names the file in the workspace that
holds the whole stream, so that the next call can read or grep it. The
file is written only once a stream goes over its share: a call within
the budget writes nothing. Only the files of the last KEEP_CALLS calls
that spilled are kept, and one file holds at most FILE_CAP bytes, so
the files cannot take the workspace.
"""

import os
from _thread import allocate_lock
from time import strftime

DIR = os.path.join(".codeexec", "output")
KEEP_CALLS = 3
FILE_CAP = 64 << 20


class Shared:
    """The head of the budget, shared by both streams of one exec."""

    def __init__(self, budget, workdir, exec_id):
        self.left = budget // 2
        self.tail = budget // 4
        self.workdir = workdir
        self.exec_id = exec_id
        self._lock = allocate_lock()
        self._stamp = None

    def take(self, n):
        """Takes up to n characters of the head; returns how many."""
        with self._lock:
            k = min(n, self.left)
            self.left -= k
            return k

    def path(self, stream):
        """The file of this exec's stream, relative to the workspace, the
        same stamp for both streams."""
        with self._lock:
            if self._stamp is None:
                self._stamp = "%s-%d" % (strftime("%Y%m%d-%H%M%S"), self.exec_id)
                _prune(os.path.join(self.workdir, DIR))
            return os.path.join(DIR, "%s.%s" % (self._stamp, stream))


def _prune(folder):
    """Leaves the files of the newest KEEP_CALLS - 1 calls, so that with
    the new one there are KEEP_CALLS."""
    try:
        names = os.listdir(folder)
    except OSError:
        return
    stamps = sorted({n.rsplit(".", 1)[0] for n in names}, reverse=True)
    for old in stamps[KEEP_CALLS - 1:]:
        for n in names:
            if n.rsplit(".", 1)[0] == old:
                try:
                    os.unlink(os.path.join(folder, n))
                except OSError:
                    pass


class Spill:
    """One stream's share: the text to send now, and, past the head, the
    file and the tail."""

    def __init__(self, stream, shared):
        self.stream = stream
        self.shared = shared
        self.head_raw = []  # the raw bytes sent so far, for the file
        self.spilling = False
        self.fd = -1
        self.rel = ""
        self.written = 0
        self.error = ""
        self.tail = []
        self.tail_len = 0
        self.omitted = 0

    def take(self, raw, text):
        """raw is what the stream read, text its decoding; returns the part
        of text to send now."""
        if not self.spilling:
            k = self.shared.take(len(text))
            if k == len(text):
                self.head_raw.append(raw)
                return text
            self._start()
            self._write(b"".join(self.head_raw))
            self.head_raw = None
            self._write(raw)
            self._keep(text[k:])
            return text[:k]
        self._write(raw)
        self._keep(text)
        return ""

    def finish(self):
        """The marker and the tail, once the stream has ended; "" when the
        stream stayed within its share."""
        if not self.spilling:
            return ""
        if self.fd >= 0:
            try:
                os.close(self.fd)
            except OSError:
                pass
            self.fd = -1
        where = "/workspace/" + self.rel if self.rel else ""
        if self.error:
            kept = "the file %s holds only its first %s bytes (%s)" % (where, format(self.written, ","), self.error) \
                if where else "it could not be kept in a file (%s)" % self.error
        else:
            kept = "the whole %s of this call is in %s; read or grep it in the next call" % (self.stream, where)
        # On a line of its own: the head usually ends mid-line.
        return "\n[… %s characters of %s left out: %s …]\n%s" % (
            format(self.omitted, ","), self.stream, kept, "".join(self.tail))

    def _start(self):
        self.spilling = True
        rel = self.shared.path(self.stream)
        full = os.path.join(self.shared.workdir, rel)
        try:
            os.makedirs(os.path.dirname(full), exist_ok=True)
            self.fd = os.open(full, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
            self.rel = rel
        except OSError as exc:
            self.error = exc.strerror or str(exc)

    def _write(self, data):
        if self.fd < 0 or not data:
            return
        if self.written + len(data) > FILE_CAP:
            data = data[:FILE_CAP - self.written]
            self.error = "the file is capped at %d MiB" % (FILE_CAP >> 20)
        try:
            while data:
                n = os.write(self.fd, data)
                self.written += n
                data = data[n:]
        except OSError as exc:
            self.error = exc.strerror or str(exc)
        if self.error:
            os.close(self.fd)
            self.fd = -1

    def _keep(self, text):
        if not text:
            return
        self.tail.append(text)
        self.tail_len += len(text)
        limit = self.shared.tail
        while self.tail_len > limit and self.tail:
            over = self.tail_len - limit
            first = self.tail[0]
            if len(first) <= over:
                self.tail.pop(0)
                self.tail_len -= len(first)
                self.omitted += len(first)
            else:
                self.tail[0] = first[over:]
                self.tail_len -= over
                self.omitted += over
