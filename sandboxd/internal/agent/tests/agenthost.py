"""Test side of the channel: spawns the real agent and speaks frames to it.

FakeHost plays sandboxd's part for `call` frames: discovery, tool calls,
memory (with revisions and conflicts) and saved tools, all in memory.
"""

import json
import os
import queue
import subprocess
import tempfile
import threading
import time

AGENT_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
AGENT = os.path.join(AGENT_DIR, "agent.py")
PYTHON = "/usr/bin/python3"


def encode(obj, blobs=None):
    """A frame of obj; with blobs {id: bytes}, a blob frame as sandboxd
    writes it (docs/PROTOCOL.md), the blobs in id order."""
    if not blobs:
        body = json.dumps(obj).encode()
    else:
        ids = sorted(blobs)
        js = json.dumps(dict(obj, blobs=[{"id": i, "n": len(blobs[i])} for i in ids])).encode()
        body = b"\x00" + len(js).to_bytes(4, "big") + js + b"".join(blobs[i] for i in ids)
    return len(body).to_bytes(4, "big") + body


def read_frame(f):
    """The next frame's message; a blob frame's blobs as msg["blobs"],
    {id: bytes}, checked as sandboxd checks them."""
    head = f.read(4)
    if len(head) < 4:
        return None
    n = int.from_bytes(head, "big")
    body = f.read(n)
    assert len(body) == n, "short frame"
    if body[:1] != b"\x00":
        msg = json.loads(body)
        assert "blobs" not in msg, "blobs listed in a frame of JSON alone: %r" % msg
        return msg
    jn = int.from_bytes(body[1:5], "big")
    msg = json.loads(body[5:5 + jn])
    tail, blobs, off = body[5 + jn:], {}, 0
    for b in msg["blobs"]:
        blobs[b["id"]] = tail[off:off + b["n"]]
        off += b["n"]
    assert off == len(tail), "blob bytes do not match the list"
    msg["blobs"] = blobs
    return msg


class Result:
    def __init__(self, done, chunks, calls, displays=()):
        self.done = done
        self.chunks = chunks  # [(stream, text)] in arrival order
        self.calls = calls
        self.displays = list(displays)  # display frames, the image as msg["blobs"]["image"]
        self.ok = done["ok"]
        self.exit = done["exit"]
        self.error = done.get("error", "")
        self.dropped = done.get("dropped", {})
        self.stdout = "".join(d for s, d in chunks if s == "stdout")
        self.stderr = "".join(d for s, d in chunks if s == "stderr")

    def __repr__(self):
        return "Result(ok=%r exit=%r error=%r stdout=%r stderr=%r)" % (
            self.ok, self.exit, self.error, self.stdout[:2000], self.stderr[:2000])


def server(name, tools=(), alias=None, **extra):
    """Server metadata as sandboxd sends it. Aliases are discoveryd's there;
    here the server's is alias (default: the name) and a tool's is its name,
    or the second of a (name, alias) pair, or a dict's own "alias"."""
    def tool(t):
        if isinstance(t, dict):
            return dict({"alias": t["name"]}, **t)
        tname, talias = t if isinstance(t, tuple) else (t, t)
        return {"name": tname, "alias": talias, "description": "the %s tool" % tname,
                "input_schema": {"type": "object"}}

    d = {"name": name, "alias": alias or name, "description": "%s server" % name, "cwd": "/srv/" + name,
         "tools": [tool(t) for t in tools]}
    d.update(extra)
    return d


class FakeHost:
    """Answers calls like sandboxd would. Subclass and override to vary."""

    def __init__(self):
        self.memory = {}
        self.tools = {}
        self.conflicts_left = 0  # memory.update fails this many times with a conflict
        self.allowed = []

    def handle(self, m, p):
        """Returns (ok, result-or-error); an error is (code, message), or a
        message alone for the code "internal"."""
        if m == "list_servers":
            return True, list(self.allowed)
        if m == "list_tools":
            return True, [{"name": "echo", "inputSchema": {"type": "object"}}]
        if m == "call_tool":
            if p["server"] not in self.allowed:
                return False, ("permission_denied", "Server '%s' is not available; allowed: %s" % (p["server"], self.allowed))
            return True, {"content": [{"type": "text", "text": json.dumps(
                {"server": p["server"], "tool": p["tool"], "arguments": p["arguments"]})}]}
        if m == "query_tool_docs":
            return True, [{"server": p["server"], "tool": p.get("tool", "echo"), "detail": p["detail"]}]
        if m == "search_tool_docs":
            return True, {"results": [{"query": p["query"], "limit": p["limit"], "match": "name: " + p["query"]}],
                          "total": 1, "truncated": False}
        if m == "memory.save":
            old = self.memory.get(p["key"])
            rev = old["revision"] + 1 if old else 1
            self.memory[p["key"]] = {"key": p["key"], "value": p["value"],
                                     "metadata": p.get("metadata") or {}, "revision": rev}
            return True, self.memory[p["key"]]
        if m == "memory.load":
            return True, self.memory.get(p["key"])
        if m == "memory.update":
            old = self.memory.get(p["key"])
            if self.conflicts_left:
                self.conflicts_left -= 1
                # someone else wrote meanwhile
                base = old["value"] if old else []
                self.memory[p["key"]] = {"key": p["key"], "value": base + ["other"] if isinstance(base, list) else base,
                                         "metadata": (old or {}).get("metadata", {}),
                                         "revision": (old["revision"] if old else 0) + 1}
                return False, ("conflict", "memory: revision moved on %r" % p["key"])
            have = old["revision"] if old else 0
            if have != p["revision"]:
                return False, ("conflict", "revision %d, not %d" % (have, p["revision"]))
            self.memory[p["key"]] = {"key": p["key"], "value": p["value"],
                                     "metadata": (old or {}).get("metadata", {}), "revision": have + 1}
            return True, self.memory[p["key"]]
        if m == "memory.delete":
            return True, {"deleted": self.memory.pop(p["key"], None) is not None}
        if m == "memory.list":
            return True, [{k: v for k, v in r.items() if k != "value"} for r in self.memory.values()]
        if m == "tool.save":
            self.tools[p["name"]] = dict(p)
            return True, {"name": p["name"]}
        if m == "tool.list":
            return True, list(self.tools.values())
        if m == "tool.delete":
            return True, {"deleted": self.tools.pop(p["name"], None) is not None}
        return False, ("invalid_argument", "method %s is not served" % m)

    def on_call(self, agent, msg):
        ok, res = self.handle(msg["m"], msg["p"])
        agent.reply(msg["id"], ok, res)


class Agent:
    def __init__(self, host=None, agent_path=AGENT, cwd=None, argv=None):
        self.host = host or FakeHost()
        self._tmp = None
        if cwd is None:
            self._tmp = tempfile.TemporaryDirectory()
            cwd = self._tmp.name
        self.cwd = cwd
        self.t0 = time.perf_counter()
        self.proc = subprocess.Popen(argv or [PYTHON, "-I", agent_path], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=cwd, env={})
        self.frames = queue.Queue()
        self.calls = []
        self._wlock = threading.Lock()
        self._next = 0
        self._early = []  # output consumed by wait_for_output
        self._calls_mark = 0
        self.diag = b""
        threading.Thread(target=self._read, daemon=True).start()
        self._diag_thread = threading.Thread(target=self._read_diag, daemon=True)
        self._diag_thread.start()
        self.ready = self.frames.get(timeout=20)
        self.ready_time = self.ready_at - self.t0

    def _read(self):
        first = True
        while True:
            msg = read_frame(self.proc.stdout)
            if first:
                self.ready_at = time.perf_counter()
                first = False
            if msg is None:
                self.frames.put(None)
                return
            if msg.get("t") == "call":
                self.calls.append(msg)
                self.host.on_call(self, msg)
            else:
                self.frames.put(msg)

    def _read_diag(self):
        for line in self.proc.stderr:
            self.diag += line

    def send(self, obj, blobs=None):
        with self._wlock:
            self.proc.stdin.write(encode(obj, blobs))
            self.proc.stdin.flush()

    def send_raw(self, data):
        with self._wlock:
            self.proc.stdin.write(data)
            self.proc.stdin.flush()

    def reply(self, cid, ok, res):
        if ok:
            self.send({"t": "reply", "id": cid, "result": res})
            return
        code, message = res if isinstance(res, tuple) else ("internal", res)
        self.send({"t": "reply", "id": cid, "error": {"code": code, "message": message}})

    def start(self, code, servers=(), discovered=None, limit=0, first=False, checkpoint=0, saved_tools=None,
              unloaded=None, display=None, budget=0, workspace=0):
        self._next += 1
        if discovered is None:
            discovered = [{"name": s["name"], "description": s.get("description", "")} for s in servers]
        self.host.allowed = [s["name"] for s in servers]
        self._calls_mark = len(self.calls)  # before the exec can make calls
        msg = {"t": "exec", "id": self._next, "code": code, "servers": list(servers),
               "discovered": discovered, "limit": limit}
        if first:
            msg["first"] = True
        if saved_tools is not None:
            msg["saved_tools"] = list(saved_tools)
        if checkpoint:
            msg["checkpoint"] = checkpoint
        if unloaded is not None:
            msg["unloaded"] = list(unloaded)
        if display is not None:
            msg["display"] = display
        if budget:
            msg["budget"] = budget
        if workspace:
            msg["workspace"] = workspace
        self.send(msg)
        return self._next

    def wait_for_output(self, exec_id, text, timeout=30):
        """Consumes frames until exec_id's output contains text (kept for wait)."""
        deadline = time.monotonic() + timeout
        while text not in "".join(d for _, d in self._early):
            msg = self.frames.get(timeout=max(0.01, deadline - time.monotonic()))
            if msg is None or msg["t"] != "out" or msg["id"] != exec_id:
                raise AssertionError("expected output of exec %r, got %r" % (exec_id, msg))
            self._early.append((msg["s"], msg["d"]))

    def wait(self, exec_id, timeout=60):
        chunks, self._early = self._early, []
        displays = []
        progress = []
        ncalls = self._calls_mark
        deadline = time.monotonic() + timeout
        while True:
            msg = self.frames.get(timeout=max(0.01, deadline - time.monotonic()))
            if msg is None:
                raise AssertionError("agent exited; diag=%r" % self.diag)
            if msg["t"] == "out":
                assert msg["id"] == exec_id, "out for exec %r during exec %r: %r" % (msg["id"], exec_id, msg)
                chunks.append((msg["s"], msg["d"]))
            elif msg["t"] == "display":
                assert msg["id"] == exec_id, msg
                displays.append(msg)
            elif msg["t"] == "progress":
                progress.append(msg)
            elif msg["t"] == "done":
                assert msg["id"] == exec_id, msg
                r = Result(msg, chunks, self.calls[ncalls:], displays)
                r.progress = progress
                return r

    def exec(self, code, servers=(), discovered=None, limit=0, timeout=60, first=False, checkpoint=0, saved_tools=None,
             unloaded=None, display=None, budget=0, workspace=0):
        return self.wait(self.start(code, servers, discovered, limit, first, checkpoint, saved_tools, unloaded,
                                    display, budget, workspace), timeout)

    def wait_checkpoint(self, exec_id, timeout=60):
        """Gathers the checkpoint frames after exec_id's done: (manifest,
        {chunk id: bytes}, error, number of frames)."""
        chunks, frames = {}, 0
        deadline = time.monotonic() + timeout
        while True:
            msg = self.frames.get(timeout=max(0.01, deadline - time.monotonic()))
            if msg is None:
                raise AssertionError("agent exited; diag=%r" % self.diag)
            assert msg["t"] == "checkpoint" and msg["id"] == exec_id, msg
            frames += 1
            chunks.update(msg.get("blobs") or {})
            if msg.get("last"):
                return msg.get("manifest"), chunks, msg.get("error", ""), frames

    def ack_checkpoint(self, exec_id, ok=True):
        self.send({"t": "checkpointed", "id": exec_id, "ok": ok})

    def restore(self, manifest, chunks, timeout=60, saved_tools=None):
        """Sends a checkpoint to restore and returns the agent's report;
        the calls the restore made are in calls."""
        msg = {"t": "restore", "manifest": manifest, "last": True}
        if saved_tools is not None:
            msg["saved_tools"] = list(saved_tools)
        self.send(msg, chunks)
        deadline = time.monotonic() + timeout
        msg = self.frames.get(timeout=max(0.01, deadline - time.monotonic()))
        assert msg is not None and msg["t"] == "restored", msg
        return msg["report"]

    def close(self):
        try:
            self.proc.stdin.close()
        except OSError:
            pass
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.proc.stdout.close()
        self._diag_thread.join(5)
        self.proc.stderr.close()
        if self._tmp:
            self._tmp.cleanup()
