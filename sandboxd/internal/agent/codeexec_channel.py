"""The framed channel between the agent and sandboxd (docs/PROTOCOL.md).

A frame is a 4-byte big-endian length and that many bytes of UTF-8 JSON;
a blob frame (checkpoint and restore chunks) is a zero byte, the JSON's
length, the JSON, then the raw bytes its "blobs" list names.
One reader thread reads frames and hands each to the handler of its type
(`Channel._handlers`): `exec` frames are queued for the main thread,
`reply` frames wake whoever made the matching `call`. Any thread may send;
a lock keeps frames whole. Each frame the agent sends has its own method
here (send_out, call_sync/call_async, send_done; `ready` is written by
agent.py before this module is imported).
"""

import os
from _queue import SimpleQueue
from _thread import allocate_lock, get_ident, start_new_thread
from itertools import count

import codeexec_interrupt
import codeexec_json
import codeexec_protocol
import codeexec_stdio
from codeexec_interrupt import Flag
from codeexec_protocol import MCPError

MAX_FRAME = 64 << 20


def _write_all(fd, data):
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        view = view[n:]


def encode_blob_frame(obj, blobs):
    """The parts of a blob frame's body: obj, with a "blobs" list naming
    blobs [(id, bytes-like)], and the blobs after it. With no blobs, a
    frame of JSON alone."""
    if not blobs:
        return [codeexec_json.dumps(obj).encode("utf-8")]
    obj = dict(obj, blobs=[{"id": cid, "n": len(data)} for cid, data in blobs])
    js = codeexec_json.dumps(obj).encode("utf-8")
    return [b"\x00" + len(js).to_bytes(4, "big"), js] + [data for _, data in blobs]


def decode_frame(body):
    """Parses a frame's body. A blob frame's blobs come as msg["blobs"],
    {id: memoryview into body}. Raises ValueError for a bad frame."""
    if body[:1] != b"\x00":
        msg = codeexec_json.loads(body)
        if isinstance(msg, dict) and msg.get("blobs"):
            raise ValueError("blobs listed in a frame of JSON alone")
        return msg
    if len(body) < 5:
        raise ValueError("blob frame too short for its JSON length")
    n = int.from_bytes(body[1:5], "big")
    if n > len(body) - 5:
        raise ValueError("blob frame announces %d bytes of JSON, holds %d" % (n, len(body) - 5))
    msg = codeexec_json.loads(body[5:5 + n])
    tail = memoryview(body)[5 + n:]
    listed = msg.get("blobs") if isinstance(msg, dict) else None
    if not isinstance(listed, list):
        raise ValueError("a blob frame without its blobs list")
    blobs, off = {}, 0
    for b in listed:
        cid, size = (b.get("id"), b.get("n")) if isinstance(b, dict) else (None, None)
        if not isinstance(cid, str) or not isinstance(size, int) or size < 0 or off + size > len(tail):
            raise ValueError("bad blob entry %r for %d bytes of blobs" % (b, len(tail)))
        blobs[cid] = tail[off:off + size]
        off += size
    if off != len(tail):
        raise ValueError("%d bytes of blobs after the last one listed" % (len(tail) - off))
    msg["blobs"] = blobs
    return msg


def diag(fd, text):
    """Writes one line to the diagnostics stream (the original fd 2)."""
    try:
        _write_all(fd, ("codeexec agent: %s\n" % text).encode("utf-8", "replace"))
    except OSError:
        pass


class Channel:
    """Owns the two channel descriptors and the table of pending calls."""

    def __init__(self, rfd, wfd, diag_fd):
        self._rfd = rfd
        self._wfd = wfd
        self.diag_fd = diag_fd
        self._wlock = allocate_lock()
        self._main = get_ident()  # Channel is made on the main thread
        self._wq = SimpleQueue()  # frames the main thread hands to the writer thread
        start_new_thread(self._write_loop, (self._wq,))
        self._forked = False
        self._ids = count(1)
        self._waiters = {}
        self.execs = SimpleQueue()  # codeexec_protocol.Exec, for the main thread
        self.exec_id = 0
        # What the reader does with each type of frame; frames of other
        # types are ignored. A new type sandboxd sends is one entry here.
        self._handlers = {
            "exec": lambda msg: self.execs.put(codeexec_protocol.Exec(msg)),
            "reply": self._dispatch_reply,
            "restore": self._gather_restore,
            "checkpointed": lambda msg: self.on_checkpointed(msg),
        }
        self._restore = None  # the restore being gathered
        # on_checkpointed(msg) hears sandboxd's answer to a checkpoint, on
        # the reader thread; the session sets it.
        self.on_checkpointed = lambda msg: None

    # --- sending -------------------------------------------------------

    def send(self, obj, ascii=True):
        self._send_parts([codeexec_json.dumps(obj, ascii).encode("utf-8")])

    def send_blobs(self, obj, blobs):
        """Sends obj as a blob frame carrying blobs, [(id, bytes-like)]."""
        self._send_parts(encode_blob_frame(obj, blobs))

    def _send_parts(self, parts):
        size = sum(len(p) for p in parts)
        if size > MAX_FRAME:
            raise MCPError(
                "message of %d bytes is larger than the channel's %d-byte frame limit"
                % (size, MAX_FRAME)
            )
        if self._forked:
            raise MCPError("the sandbox channel is not available in a forked child process")
        if get_ident() != self._main:
            self._write(parts)
            return
        # The main thread is where KeyboardInterrupt lands; raised between two
        # os.write calls it would leave half a frame and break the channel.
        # So the main thread hands the frame to a writer thread and waits.
        box = []
        done = Flag()
        self._wq.put((parts, done, box))
        interrupted = None
        while True:
            try:
                done.wait()
                break
            except KeyboardInterrupt as exc:  # only if user code replaced our SIGINT handler
                interrupted = exc
        if box:
            raise box[0]
        if interrupted is not None:
            raise interrupted

    def _write(self, parts):
        with self._wlock:
            _write_all(self._wfd, sum(len(p) for p in parts).to_bytes(4, "big"))
            for p in parts:
                _write_all(self._wfd, p)

    def _write_loop(self, q):
        while True:
            parts, done, box = q.get()
            try:
                self._write(parts)
            except BaseException as exc:  # noqa: BLE001 - handed back to the sender
                box.append(exc)
            done.set()

    def send_out(self, exec_id, stream, text):
        # Text comes from a UTF-8 decoder, so it holds no lone surrogates and
        # can be sent without \u escapes (smaller, faster).
        self.send({"t": "out", "id": exec_id, "s": stream, "d": text}, ascii=False)

    def send_display(self, exec_id, mime, width, height, data):
        """Sends an image of exec exec_id: its bytes travel as the frame's
        one blob, "image"."""
        self.send_blobs({"t": "display", "id": exec_id, "mime": mime, "w": width, "h": height},
                        [("image", data)])

    def send_done(self, exec_id, ok, exit_code, error, dropped, end=False, files=((), 0)):
        """Ends exec exec_id: nothing more is sent for it. end asks sandboxd
        to end the session (runtime.end_session()); files are the files of
        /workspace/out the exec made or changed, and how many more."""
        frame = {"t": "done", "id": exec_id, "ok": ok, "exit": exit_code, "error": error, "dropped": dropped}
        if end:
            frame["end"] = True
        if files[0]:
            frame["files"] = list(files[0])
        if files[1]:
            frame["files_more"] = files[1]
        self.send(frame)

    # Checkpoint chunks travel raw, as blobs; this many bytes of them go in
    # one frame. One chunk may be larger, up to codeexec_checkpoint.VALUE_CAP
    # (32 MiB), still well under MAX_FRAME.
    CHUNK_FRAME_BYTES = 24 << 20

    def send_checkpoint(self, exec_id, manifest, chunks, error=""):
        """Sends the checkpoint taken after exec exec_id: its chunks, in as
        many frames as they need, then the manifest in the last; or, with
        error, why no checkpoint could be taken."""
        batch, size = [], 0
        for cid, data in chunks.items():
            if batch and size + len(data) > self.CHUNK_FRAME_BYTES:
                self.send_blobs({"t": "checkpoint", "id": exec_id}, batch)
                batch, size = [], 0
            batch.append((cid, data))
            size += len(data)
        frame = {"t": "checkpoint", "id": exec_id, "last": True}
        if error:
            frame["error"] = error
        else:
            frame["manifest"] = manifest
        self.send_blobs(frame, batch)

    def send_restored(self, report):
        """Answers a restore with what came back and what did not."""
        self.send({"t": "restored", "report": report})

    def _gather_restore(self, msg):
        if self._restore is None:
            self._restore = codeexec_protocol.Restore()
        if self._restore.add(msg):
            done, self._restore = self._restore, None
            self.execs.put(done)

    # --- calls -----------------------------------------------------------

    def _register(self, waiter):
        cid = next(self._ids)  # atomic: itertools.count is C code
        self._waiters[cid] = waiter
        return cid

    def _send_call(self, cid, method, params):
        # A thread of an earlier exec gets no exec: sandboxd refuses its
        # call, which may not use the servers the current exec names.
        exec_id = self.exec_id if codeexec_stdio.of_current_exec() else 0
        frame = {"t": "call", "id": cid, "exec": exec_id, "m": method.name, "p": params}
        try:
            self.send(frame)
        except (TypeError, ValueError) as exc:
            self._waiters.pop(cid, None)
            raise TypeError("%s: parameters must be JSON serialisable: %s" % (method.name, exc)) from None
        except OSError as exc:
            self._waiters.pop(cid, None)
            raise MCPError("%s: the channel to sandboxd is closed (%s)" % (method.name, exc)) from None
        except BaseException:
            self._waiters.pop(cid, None)
            raise

    def call_sync(self, method, **params):
        """Sends a call of method (a codeexec_protocol.Method) and blocks
        this thread until its reply arrives."""
        params = method.params(params)
        flag = Flag()
        box = []
        cid = self._register((flag, box))
        self._send_call(cid, method, params)
        try:
            _wait_for_reply(flag)
        finally:
            self._waiters.pop(cid, None)
        codeexec_interrupt.deliver()
        return _unpack(method, box[0])

    async def call_async(self, method, **params):
        """Sends a call of method and awaits its reply; other tasks keep
        running."""
        import asyncio

        params = method.params(params)
        loop = asyncio.get_running_loop()
        fut = loop.create_future()
        cid = self._register((loop, fut))
        self._send_call(cid, method, params)
        try:
            reply = await fut
        finally:
            self._waiters.pop(cid, None)
        codeexec_interrupt.deliver()
        return _unpack(method, reply)

    # --- receiving -------------------------------------------------------

    def _dispatch_reply(self, msg):
        waiter = self._waiters.pop(msg.get("id"), None)
        if waiter is None:
            return
        a, b = waiter
        if isinstance(a, Flag):
            b.append(msg)
            a.set()
            return
        try:
            a.call_soon_threadsafe(_resolve, b, msg)
        except RuntimeError:
            pass  # the loop was closed by user code; nobody is waiting any more

    def read_loop(self):
        """Reads frames until sandboxd closes the channel, then exits."""
        code = 0
        try:
            f = open(self._rfd, "rb", buffering=1 << 16, closefd=False)
            while True:
                head = f.read(4)
                if len(head) < 4:
                    break
                n = int.from_bytes(head, "big")
                if n > MAX_FRAME:
                    diag(self.diag_fd, "protocol error: frame of %d bytes exceeds %d" % (n, MAX_FRAME))
                    code = 2
                    break
                body = f.read(n)
                if len(body) < n:
                    break
                try:
                    msg = decode_frame(body)
                except ValueError as exc:
                    diag(self.diag_fd, "protocol error: bad frame: %s" % exc)
                    code = 2
                    break
                handle = self._handlers.get(msg.get("t")) if isinstance(msg, dict) else None
                if handle is not None:
                    handle(msg)
        except BaseException as exc:  # noqa: BLE001 - the agent must not outlive its channel
            diag(self.diag_fd, "channel reader failed: %r" % (exc,))
            code = 2
        # sandboxd is gone (or broke the protocol): nothing can be reported
        # any more, so end the sandbox now.
        os._exit(code)

    def after_fork_in_child(self):
        self._forked = True
        self._wlock = allocate_lock()
        for fd in (self._rfd, self._wfd, self.diag_fd):
            try:
                os.close(fd)
            except OSError:
                pass


@codeexec_interrupt.mark_interruptible
def _wait_for_reply(flag):
    # Ctrl-C may abandon a call that waits for its reply; the late reply is
    # then dropped. The lock is used directly so that this frame is on top
    # while waiting (the SIGINT handler looks at the top frames).
    flag.lock.acquire()
    flag.lock.release()


def _resolve(fut, msg):
    if not fut.done():
        fut.set_result(msg)


def _unpack(method, msg):
    err = msg.get("error")
    if err is None:
        return msg.get("result")
    raise codeexec_protocol.error_from(method.name, err)
