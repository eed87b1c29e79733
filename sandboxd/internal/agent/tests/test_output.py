"""Output capture: `out` frames, UTF-8 handling, the cap and the fence."""

import time
import unittest

from agenthost import Agent


class OutputTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.a = Agent()

    @classmethod
    def tearDownClass(cls):
        cls.a.close()

    def test_blank_lines_preserved(self):
        r = self.a.exec("print('a\\n\\n\\nb')\nprint()\nprint('  ')\nprint('()')\n")
        self.assertEqual(r.stdout, "a\n\n\nb\n\n  \n()\n")

    def test_partial_line_flushed_at_end(self):
        r = self.a.exec("print('x', end='')\nimport sys; sys.stderr.write('y');")
        self.assertEqual((r.stdout, r.stderr), ("x", "y"))

    def test_multibyte_split_across_reads(self):
        r = self.a.exec(
            "import os, time\n"
            "b = 'héllo€ 😀'.encode()\n"
            "for i in range(len(b)):\n"
            "    os.write(1, b[i:i+1]); time.sleep(0.02)\n")
        self.assertEqual(r.stdout, "héllo€ 😀")
        self.assertGreater(len(r.chunks), 1)

    def test_invalid_utf8_replaced(self):
        r = self.a.exec("import os\nos.write(1, b'a\\xffb\\xe2\\x82');\n")
        self.assertEqual(r.stdout, "a\ufffdb\ufffd")

    def test_chunks_at_most_64k(self):
        r = self.a.exec("print('é' * 300000)")
        self.assertEqual(r.stdout, "é" * 300000 + "\n")
        for s, d in r.chunks:
            self.assertLessEqual(len(d.encode()), 65536)

    def test_chunks_at_most_64k_with_replacement_chars(self):
        r = self.a.exec("import os\nos.write(1, b'\\xff' * 200000);")
        self.assertEqual(r.stdout, "\ufffd" * 200000)
        for s, d in r.chunks:
            self.assertLessEqual(len(d.encode()), 65536)

    def test_interleaving_with_children(self):
        r = self.a.exec(
            "import os, subprocess, sys\n"
            "print('a')\n"
            "os.system('echo b')\n"
            "print('c')\n"
            "subprocess.run(['sh', '-c', 'echo d; echo e >&2'])\n"
            "print('f')\n"
            "print('g', file=sys.stderr)\n")
        self.assertEqual(r.stdout, "a\nb\nc\nd\nf\n")
        self.assertEqual(r.stderr, "e\ng\n")

    def test_late_output_belongs_to_no_exec(self):
        r = self.a.exec(
            "import threading, time, subprocess\n"
            "threading.Timer(0.3, lambda: print('late thread')).start()\n"
            "subprocess.Popen(['sh', '-c', 'sleep 0.3; echo late child'])\n"
            "print('now')\n")
        self.assertEqual(r.stdout, "now\n")
        # Written while no exec runs: dropped. (The harness also fails on any
        # `out` that arrives after its exec's done or names another exec.)
        time.sleep(0.6)
        r = self.a.exec("print('second')")
        self.assertEqual(r.stdout, "second\n")

    def test_background_thread_never_reaches_later_exec(self):
        r = self.a.exec(
            "import threading, time, sys\n"
            "def chatter():\n"
            "    for i in range(60):\n"
            "        print('background', i, flush=True)\n"
            "        sys.stderr.write('bg err\\n')\n"
            "        time.sleep(0.01)\n"
            "threading.Thread(target=chatter, daemon=True).start()\n"
            "print('first')")
        self.assertTrue(r.ok, r)
        for _ in range(5):
            r = self.a.exec("import time; time.sleep(0.05); print('next')")
            self.assertEqual((r.stdout, r.stderr), ("next\n", ""))

    def test_child_of_earlier_exec_never_reaches_later_exec(self):
        r = self.a.exec("import subprocess\n"
                        "subprocess.Popen(['sh', '-c', 'for i in 1 2 3 4 5 6; do echo spam; sleep 0.1; done'])")
        self.assertTrue(r.ok, r)  # the first "spam" may or may not make it into this exec
        r = self.a.exec("import time; time.sleep(0.8); print('mine')")
        self.assertEqual(r.stdout, "mine\n")

    def test_lingering_children_do_not_cost_threads(self):
        # Pipes kept open by children of ended execs are drained by one thread.
        a = Agent()
        try:
            # The readers of the exec before a count set their exec's end
            # and then exit, so a count can still see them: under load, it
            # did (7 threads where 6 were due). The least of 20 counts over
            # 0.2 s leaves such a passing thread out.
            count = ("import os, time\n"
                     "n = []\n"
                     "for _ in range(20):\n"
                     "    n.append(len(os.listdir('/proc/self/task')))\n"
                     "    time.sleep(0.01)\n"
                     "print(min(n), len(os.listdir('/proc/self/fd')))")
            threads0, fds0 = map(int, a.exec(count).stdout.split())
            for _ in range(40):
                a.exec("import subprocess\nsubprocess.Popen(['sh', '-c', 'sleep 1; echo late'])")
            threads, _ = map(int, a.exec(count).stdout.split())
            self.assertLessEqual(threads, threads0 + 1)  # + the drain thread
            time.sleep(1.5)
            a.exec("pass")
            _, fds = map(int, a.exec(count).stdout.split())
            # + the drain wake pipe, + the previous exec's pipes if not yet drained
            self.assertLessEqual(fds, fds0 + 4)
        finally:
            a.close()

    def test_thread_pool_output_goes_to_running_exec(self):
        # A thread pool made in one exec is routinely used by later ones.
        self.a.exec("from concurrent.futures import ThreadPoolExecutor\npool = ThreadPoolExecutor(2)\n"
                    "pool.submit(print, 'warm').result()")
        r = self.a.exec("pool.submit(print, 'from pool').result()")
        self.assertEqual(r.stdout, "from pool\n")
        r = self.a.exec("import asyncio\nawait asyncio.to_thread(print, 'to_thread')")
        self.assertEqual(r.stdout, "to_thread\n")
        r = self.a.exec("await asyncio.to_thread(print, 'to_thread again')")
        self.assertEqual(r.stdout, "to_thread again\n")

    def test_thread_pool_item_of_earlier_exec_never_reaches_later_exec(self):
        # The pool's worker lives on; the item it still runs is the first
        # exec's, whose output stays out of the second, while the second's
        # own items on the same pool (and asyncio.to_thread's) are its.
        r = self.a.exec(
            "import asyncio, sys, threading, time\n"
            "from concurrent.futures import ThreadPoolExecutor\n"
            "pool, go = ThreadPoolExecutor(2), threading.Event()\n"
            "def chatter():\n"
            "    go.wait()\n"
            "    for i in range(30):\n"
            "        print('background', i, flush=True)\n"
            "        time.sleep(0.01)\n"
            "    return 'done'\n"
            "left = [pool.submit(chatter), asyncio.get_event_loop().run_in_executor(None, chatter)]\n"
            "print('first')")
        self.assertEqual(r.stdout, "first\n")
        r = self.a.exec("go.set()\ntime.sleep(0.1)\npool.submit(print, 'pooled').result()\n"
                        "await asyncio.to_thread(print, 'to_thread')\n"
                        "print(left[0].result(), 'main')")
        self.assertEqual((r.stdout, r.stderr), ("pooled\nto_thread\ndone main\n", ""))

    def test_thread_started_in_exec_writes_to_it(self):
        r = self.a.exec("import threading\nt = threading.Thread(target=print, args=('mine',))\n"
                        "t.start(); t.join()")
        self.assertEqual(r.stdout, "mine\n")

    def test_user_closing_or_moving_stdout(self):
        r = self.a.exec("import sys; print('before'); sys.stdout.close()")
        self.assertTrue(r.ok, r)
        self.assertEqual(r.stdout, "before\n")
        r = self.a.exec("import os; os.close(1); os.dup2(os.open('/dev/null', os.O_WRONLY), 2)")
        self.assertTrue(r.ok, r)
        r = self.a.exec("import os; print('back'); os.system('echo child; echo e >&2');")
        self.assertEqual((r.stdout, r.stderr), ("back\nchild\n", "e\n"))

    def test_fake_marker_text_is_plain_output(self):
        r = self.a.exec("import os; os.write(1, b'\\x00\\x1b[codeexec-fence:abc:E]\\x00 ok');")
        self.assertEqual(r.stdout, "\x00\x1b[codeexec-fence:abc:E]\x00 ok")

    def test_frames_stay_whole_under_concurrent_senders(self):
        # Two output readers and four calling threads share the channel.
        r = self.a.exec(
            "import sys, threading\n"
            "def work(n):\n"
            "    for i in range(50):\n"
            "        save_memory('t%d-%d' % (n, i), 'v' * 5000)\n"
            "        print('out', n, i, 'x' * 3000)\n"
            "        print('err', n, i, 'y' * 3000, file=sys.stderr)\n"
            "ts = [threading.Thread(target=work, args=(n,)) for n in range(4)]\n"
            "[t.start() for t in ts]; [t.join() for t in ts];\n")
        self.assertTrue(r.ok, r)
        self.assertEqual(len(r.stdout.splitlines()), 200)
        self.assertEqual(len(r.stderr.splitlines()), 200)
        self.assertEqual(len([c for c in r.calls if c["m"] == "memory.save"]), 200)

    def test_huge_line_capped(self):
        t0 = time.monotonic()
        r = self.a.exec("print('x' * 50_000_000)\nprint('é' * 10, file=__import__('sys').stderr)",
                        limit=1 << 20, timeout=60)
        self.assertLess(time.monotonic() - t0, 30)
        self.assertTrue(r.ok, r.error)
        self.assertEqual(len(r.stdout), 1 << 20)
        self.assertEqual(r.dropped, {"stdout": 50_000_001 - (1 << 20), "stderr": 0})
        self.assertEqual(r.stderr, "é" * 10 + "\n")
        # The cap is per exec.
        self.assertEqual(self.a.exec("print('ok')", limit=1 << 20).stdout, "ok\n")

    def test_cap_counts_bytes_sent(self):
        # Invalid bytes become U+FFFD (3 bytes each); the cap counts what is sent.
        r = self.a.exec("import os\nos.write(1, b'\\xff' * 10);", limit=7)
        self.assertEqual(r.stdout, "\ufffd\ufffd")
        self.assertEqual(r.dropped["stdout"], 30 - 6)

    def test_cap_does_not_split_characters(self):
        r = self.a.exec("print('é' * 10)", limit=5)
        self.assertEqual(r.stdout, "éé")
        self.assertEqual(r.dropped["stdout"], 21 - 4)

    def test_huge_line_uncapped(self):
        r = self.a.exec("print('y' * 50_000_000)", timeout=90)
        self.assertTrue(r.ok, r.error)
        self.assertEqual(len(r.stdout), 50_000_001)
        self.assertEqual(r.dropped, {"stdout": 0, "stderr": 0})


if __name__ == "__main__":
    unittest.main()
