"""Start-up speed, the ready frame and the channel's descriptors."""

import os
import statistics
import subprocess
import time
import unittest

from agenthost import PYTHON, Agent


def _bare_first_byte():
    """Spawn to first stdout byte of a bare `python3 -I` (no agent)."""
    t0 = time.perf_counter()
    p = subprocess.Popen([PYTHON, "-I", "-c", "import os; os.write(1, b'x')"],
                         stdout=subprocess.PIPE, env={})
    p.stdout.read(1)
    t = time.perf_counter() - t0
    p.wait()
    p.stdout.close()
    return t


class StartupTest(unittest.TestCase):
    def test_ready_frame(self):
        a = Agent()
        try:
            self.assertEqual(a.ready["t"], "ready")
            self.assertEqual(a.ready["pid"], a.proc.pid)
            self.assertRegex(a.ready["python"], r"^3\.\d+\.\d+$")
        finally:
            a.close()

    def test_ready_overhead_under_10ms(self):
        bare, ready, first = [], [], []
        for _ in range(9):
            bare.append(_bare_first_byte())
            a = Agent()
            ready.append(a.ready_time)
            t0 = time.perf_counter()
            r = a.exec("print(1)")
            first.append(time.perf_counter() - t0)
            self.assertEqual(r.stdout, "1\n")
            a.close()
        b, rd, f = (statistics.median(x) * 1000 for x in (bare, ready, first))
        bm, rdm = min(bare) * 1000, min(ready) * 1000
        print("\nstartup: bare python to first byte median %.1f ms (min %.1f); agent to ready "
              "median %.1f ms (min %.1f); first exec print(1) round trip median %.1f ms"
              % (b, bm, rd, rdm, f))
        # Minimums are the least disturbed by other load on the machine.
        self.assertLess(rdm - bm, 10.0, "agent adds %.1f ms before ready" % (rdm - bm))

    def test_warm_agent_imports_little(self):
        a = Agent()
        try:
            r = a.exec("import sys\nprint([m for m in ('asyncio', 'json', 're', 'linecache', 'traceback', "
                       "'inspect', 'ast', 'enum') if m in sys.modules])")
            self.assertEqual(r.stdout, "[]\n")
            # Sources of earlier cells reach linecache when it is imported.
            r = a.exec("import linecache\nprint(linecache.getline('<cell-1>', 1), end='')")
            self.assertEqual(r.stdout, "import sys\n")
        finally:
            a.close()

    def test_asyncio_imported_only_when_needed(self):
        a = Agent()
        try:
            r = a.exec("import sys\nprint('asyncio' in sys.modules)")
            self.assertEqual(r.stdout, "False\n")
            # A sync helper does not need it either.
            r = a.exec("runtime.list_servers_sync(); save_memory('k', 1)\nprint('asyncio' in sys.modules)")
            self.assertEqual(r.stdout, "False\n", r)
            r = a.exec("await __import__('asyncio').sleep(0)\nprint('asyncio' in sys.modules)")
            self.assertEqual(r.stdout, "True\n")
        finally:
            a.close()


class ChannelFdsTest(unittest.TestCase):
    def setUp(self):
        self.a = Agent()

    def tearDown(self):
        self.a.close()

    def test_stdio_descriptors(self):
        r = self.a.exec(
            "import os, stat\n"
            "print(os.readlink('/proc/self/fd/0'))\n"
            "print(stat.S_ISFIFO(os.fstat(1).st_mode), stat.S_ISFIFO(os.fstat(2).st_mode))\n"
            "print(repr(input.__call__ and __import__('sys').stdin.read()))\n")
        self.assertEqual(r.stdout, "/dev/null\nTrue True\n''\n", r)

    def test_channel_not_inherited_by_children(self):
        # A child that execs sees only fds 0, 1, 2 (+ the fd listdir opens).
        r = self.a.exec(
            "import subprocess, sys\n"
            "subprocess.run([sys.executable, '-c', "
            "'import os; print(len(os.listdir(\"/proc/self/fd\")))']);\n")
        self.assertEqual(r.stdout, "4\n", r)

    def test_channel_pipes_not_reachable_after_fork(self):
        ino_in = os.fstat(self.a.proc.stdin.fileno()).st_ino
        ino_out = os.fstat(self.a.proc.stdout.fileno()).st_ino
        code = (
            "import os\n"
            "def chan():\n"
            "    out = []\n"
            "    for fd in os.listdir('/proc/self/fd'):\n"
            "        try: link = os.readlink('/proc/self/fd/' + fd)\n"
            "        except OSError: continue\n"
            "        if link in ('pipe:[%d]', 'pipe:[%d]'): out.append(int(fd))\n"
            "    return out\n"
            "print('parent', len(chan()))\n"
            "pid = os.fork()\n"
            "if pid == 0:\n"
            "    try:\n"
            "        save_memory('k', 1)\n"
            "    except runtime.MCPError as e:\n"
            "        print('child', len(chan()), e, flush=True)\n"
            "    os._exit(0)\n"
            "os.waitpid(pid, 0)\n" % (ino_in, ino_out))
        r = self.a.exec(code)
        self.assertTrue(r.ok, r)
        self.assertIn("parent 2\n", r.stdout)
        self.assertIn("child 0 the sandbox channel is not available in a forked child process\n", r.stdout)
        # The session is intact afterwards.
        self.assertEqual(self.a.exec("print('still here')").stdout, "still here\n")

    def test_child_writing_frame_like_bytes_cannot_corrupt_channel(self):
        r = self.a.exec("import os\nos.system(\"printf '\\\\000\\\\000\\\\000\\\\005hello'\")\n"
                        "os.write(1, b'\\x00\\x00\\x00\\x07{\"t\":1}');\n")
        self.assertTrue(r.ok, r)
        self.assertEqual(r.stdout, "\x00\x00\x00\x05hello\x00\x00\x00\x07{\"t\":1}")

    def test_unknown_frames_ignored(self):
        # Only the types in the reader's table are read; the rest are skipped.
        self.a.send({"t": "bogus", "x": 1})
        self.a.send({"t": "done", "id": 1, "ok": True})  # a type only the agent sends
        self.a.send([1, 2])
        self.a.send("reply")
        self.a.send({"t": "reply", "id": 12345, "result": None})  # nobody waits
        self.assertEqual(self.a.exec("print(2)").stdout, "2\n")

    def test_agent_exits_when_channel_closes(self):
        self.a.proc.stdin.close()
        self.assertEqual(self.a.proc.wait(timeout=5), 0)

    def test_oversized_frame_is_protocol_error(self):
        self.a.send_raw((64 * 1024 * 1024 + 1).to_bytes(4, "big"))
        self.assertEqual(self.a.proc.wait(timeout=5), 2)
        time.sleep(0.1)
        self.assertIn(b"protocol error", self.a.diag)


    def test_bad_blob_frames_are_protocol_errors(self):
        # Each case is a frame's body; the agent refuses it and exits.
        js = b'{"t":"restore","last":true,"blobs":[{"id":"a","n":4}]}'
        for name, body in [
            ("blobs missing", b"\x00" + len(js).to_bytes(4, "big") + js + b"abc"),
            ("bytes after the blobs", b"\x00" + len(js).to_bytes(4, "big") + js + b"abcde"),
            ("JSON longer than the frame", b"\x00" + (1000).to_bytes(4, "big") + js),
            ("blobs in a frame of JSON alone", js),
        ]:
            with self.subTest(name):
                a = Agent()
                try:
                    a.send_raw(len(body).to_bytes(4, "big") + body)
                    self.assertEqual(a.proc.wait(timeout=5), 2)
                    time.sleep(0.1)
                    self.assertIn(b"protocol error: bad frame", a.diag)
                finally:
                    a.close()

    def test_blob_frame_restores_raw_bytes(self):
        # A chunk whose bytes include a zero byte and are not UTF-8 comes
        # through a restore intact.
        import hashlib
        import pickle

        value = bytes(range(256)) * 4
        data = pickle.dumps(value)
        cid = hashlib.blake2b(data, digest_size=16).hexdigest()
        manifest = {"v": 1, "values": {"v": {"chunk": cid, "bytes": len(data)}}}
        report = self.a.restore(manifest, {cid: data})
        self.assertEqual(report.get("restored"), ["v"], report)
        self.assertEqual(self.a.exec("print(v == bytes(range(256)) * 4)").stdout, "True\n")


if __name__ == "__main__":
    unittest.main()
