"""Running code: the persistent namespace, await, errors and exits."""

import os
import re
import signal
import time
import unittest

from agenthost import Agent, FakeHost, server


class ExecTest(unittest.TestCase):
    def setUp(self):
        self.a = Agent()

    def tearDown(self):
        self.a.close()

    def test_namespace_persists(self):
        self.assertTrue(self.a.exec("x = 41\nimport math\ndef inc(v):\n    return v + 1").ok)
        r = self.a.exec("print(inc(x), math.pi > 3)")
        self.assertEqual(r.stdout, "42 True\n")

    def test_main_module(self):
        r = self.a.exec(
            "import sys, pickle, dataclasses\n"
            "print(__name__, sys.modules['__main__'].__dict__ is globals())\n"
            "@dataclasses.dataclass\n"
            "class P:\n"
            "    x: 'int'\n"
            "print(pickle.loads(pickle.dumps(P(3))))\n"
            "if __name__ == '__main__':\n"
            "    print('main guard runs')\n")
        self.assertEqual(r.stdout, "__main__ True\nP(x=3)\nmain guard runs\n", r)

    def test_top_level_await_and_persistent_loop(self):
        r = self.a.exec(
            "import asyncio\n"
            "loop = asyncio.get_running_loop()\n"
            "async def later():\n"
            "    await asyncio.sleep(0.05)\n"
            "    return 'task result'\n"
            "task = asyncio.ensure_future(later())\n"
            "print(await asyncio.sleep(0, 'awaited'))\n")
        self.assertEqual(r.stdout, "awaited\n", r)
        r = self.a.exec("print(asyncio.get_running_loop() is loop, await task)")
        self.assertEqual(r.stdout, "True task result\n", r)
        # Once asyncio is in use every cell runs in the loop, as in Jupyter.
        r = self.a.exec("print(asyncio.get_running_loop() is loop)")
        self.assertEqual(r.stdout, "True\n", r)
        r = self.a.exec("print(asyncio.run(asyncio.sleep(0, 'ran')))")
        self.assertEqual(r.error, "RuntimeError: asyncio.run() cannot be called from a running event loop")
        self.assertIn("hint: cells run inside the session's event loop; use top-level `await main()`", r.stderr)

    def test_task_made_in_sync_cell_awaited_later(self):
        self.a.exec("import asyncio\nasync def f():\n    await asyncio.sleep(0.01)\n    return 7\n")
        r = self.a.exec("task = asyncio.get_running_loop().create_task(f())")
        self.assertTrue(r.ok, r)
        self.assertEqual(self.a.exec("print(await task)").stdout, "7\n")
        # A task progresses while later cells run in the loop.
        r = self.a.exec("t2 = asyncio.create_task(asyncio.sleep(0.05, 'bg'))")
        self.assertTrue(r.ok, r)
        r = self.a.exec("await asyncio.sleep(0.1)\nprint(t2.done(), t2.result())")
        self.assertEqual(r.stdout, "True bg\n")

    def test_asyncio_run_works_before_asyncio_is_in_use(self):
        r = self.a.exec("import asyncio\nprint(asyncio.run(asyncio.sleep(0, 'ran')))")
        self.assertEqual(r.stdout, "ran\n", r)

    def test_exception(self):
        self.a.exec("def boom(d):\n    return 1 / d\n")
        r = self.a.exec("y = 2\nboom(0)\n")
        self.assertEqual((r.ok, r.exit, r.error), (False, 1, "ZeroDivisionError: division by zero"))
        # Python 3.13 also marks the call in the caller's line ("~~~~^^^"),
        # 3.11 does not: lines of markers alone are left out.
        markers = re.compile(r"(?m)^ *[~^]+\n")
        self.assertEqual(
            markers.sub("", r.stderr),
            "Traceback (most recent call last):\n"
            '  File "<cell-2>", line 2, in <module>\n'
            "    boom(0)\n"
            '  File "<cell-1>", line 2, in boom\n'
            "    return 1 / d\n"
            "ZeroDivisionError: division by zero\n")
        self.assertEqual(self.a.exec("print(y)").stdout, "2\n")

    def test_exception_in_async_code_shows_only_user_frames(self):
        r = self.a.exec("import asyncio\nasync def f():\n    await asyncio.sleep(0)\n"
                        "    raise ValueError('bad\\nthing')\nawait f()\n")
        self.assertEqual((r.ok, r.exit, r.error), (False, 1, "ValueError: bad thing"))
        self.assertNotIn("asyncio", r.stderr)
        self.assertNotIn("codeexec", r.stderr)
        self.assertIn('File "<cell-1>", line 5, in <module>\n    await f()\n', r.stderr)
        self.assertIn('line 4, in f\n    raise ValueError', r.stderr)

    def test_agent_frames_hidden_for_mcp_errors(self):
        r = self.a.exec("await mcp_srv.missing_tool(a=1)", servers=[])
        self.assertFalse(r.ok)
        self.assertEqual(r.error, "NameError: name 'mcp_srv' is not defined")
        self.a.host.handle = lambda m, p: (False, "upstream exploded")
        r = self.a.exec("await mcp_srv.tool(a=1)", servers=[server("srv", ["tool"])])
        # A failed tool call is a ToolError (an MCPError) whatever its code.
        self.assertEqual(r.error, "ToolError: upstream exploded")
        self.assertEqual(r.stderr, 'Traceback (most recent call last):\n  File "<cell-2>", line 1, in <module>\n'
                         "    await mcp_srv.tool(a=1)\nmcp.runtime.ToolError: upstream exploded\n")

    def test_chained_exception(self):
        r = self.a.exec("try:\n    {}['k']\nexcept KeyError as e:\n    raise RuntimeError('wrapped') from e\n")
        self.assertEqual(r.error, "RuntimeError: wrapped")
        self.assertIn("KeyError: 'k'\n\nThe above exception was the direct cause", r.stderr)
        self.assertNotIn("codeexec", r.stderr)

    def test_syntax_error(self):
        r = self.a.exec("x = (\n")
        self.assertEqual((r.ok, r.exit), (False, 1))
        self.assertTrue(r.error.startswith("SyntaxError: "), r.error)
        self.assertIn('File "<cell-1>", line 1\n    x = (\n', r.stderr)
        self.assertNotIn("Traceback", r.stderr)

    def test_system_exit(self):
        self.a.exec("kept = 'yes'")
        cases = [
            ("import sys; sys.exit()", True, 0, "", ""),
            ("import sys; sys.exit(0)", True, 0, "", ""),
            ("raise SystemExit(3)", False, 3, "SystemExit: 3", ""),
            ("exit(4)", False, 4, "SystemExit: 4", ""),
            ("import sys; sys.exit('bye')", False, 1, "SystemExit: bye", "bye\n"),
            ("import sys; sys.exit(2 ** 40)", False, 1, "SystemExit: 1099511627776", ""),
            ("import sys; sys.exit(True)", False, 1, "SystemExit: True", ""),
        ]
        for code, ok, ex, err, stderr in cases:
            with self.subTest(code=code):
                r = self.a.exec(code)
                self.assertEqual((r.ok, r.exit, r.error, r.stderr), (ok, ex, err, stderr))
        self.assertEqual(self.a.exec("print(kept)").stdout, "yes\n")
        r = self.a.exec("import asyncio\nawait asyncio.sleep(0)\nraise SystemExit(5)")
        self.assertEqual((r.ok, r.exit), (False, 5))
        r = self.a.exec("raise SystemExit(6)")  # a sync cell run inside the loop
        self.assertEqual((r.ok, r.exit), (False, 6))
        r = self.a.exec("1/0")
        self.assertEqual(r.stderr.count("File"), 1, r)
        self.assertEqual(self.a.exec("print(kept)").stdout, "yes\n")

    def test_forked_child_that_returns_ends(self):
        r = self.a.exec(
            "import os, sys\n"
            "pid = os.fork()\n"
            "if pid == 0:\n"
            "    print('in child')\n"
            "    sys.exit(3)\n"
            "_, status = os.waitpid(pid, 0)\n"
            "print('child exit', os.waitstatus_to_exitcode(status))\n"
            "pid = os.fork()\n"
            "if pid == 0:\n"
            "    raise ValueError('child failed')\n"
            "_, status = os.waitpid(pid, 0)\n"
            "print('child exit', os.waitstatus_to_exitcode(status))\n"
            "pid = os.fork()\n"
            "if pid == 0:\n"
            "    pass  # falls off the end of the cell\n"
            "else:\n"
            "    _, status = os.waitpid(pid, 0)\n"
            "    print('child exit', os.waitstatus_to_exitcode(status))\n", timeout=20)
        self.assertTrue(r.ok, r)
        self.assertEqual(r.stdout, "in child\nchild exit 3\nchild exit 1\nchild exit 0\n")
        self.assertIn("ValueError: child failed", r.stderr)
        self.assertEqual(self.a.exec("print('parent fine')").stdout, "parent fine\n")

    def test_keyboard_interrupt_is_an_exception(self):
        r = self.a.exec("raise KeyboardInterrupt")
        self.assertEqual((r.ok, r.exit, r.error), (False, 1, "KeyboardInterrupt"))
        self.assertEqual(self.a.exec("print('alive')").stdout, "alive\n")

    def test_getsource_across_cells(self):
        self.a.exec("def helper(a, b):\n    '''Adds.'''\n    return a + b\n")
        r = self.a.exec("import inspect\nprint(inspect.getsource(helper), end='')")
        self.assertEqual(r.stdout, "def helper(a, b):\n    '''Adds.'''\n    return a + b\n")

    def test_workspace_imports(self):
        r = self.a.exec("open('mymod.py', 'w').write('V = 7\\n')\nimport mymod\nprint(mymod.V)")
        self.assertEqual(r.stdout, "7\n", r)

    def test_no_bytecode_written(self):
        r = self.a.exec("import sys; print(sys.dont_write_bytecode)")
        self.assertEqual(r.stdout, "True\n")

    def test_agent_modules_not_importable_as_user_names(self):
        r = self.a.exec("import sys\nprint(any('codeexec' in p or p.endswith('agent') for p in sys.path[1:]))")
        self.assertEqual(r.stdout, "False\n", r)


class InterruptTest(unittest.TestCase):
    def setUp(self):
        self.a = Agent()

    def tearDown(self):
        self.a.close()

    def interrupt_during(self, code):
        eid = self.a.start(code)
        self.a.wait_for_output(eid, "start")
        time.sleep(0.1)
        os.kill(self.a.proc.pid, signal.SIGINT)
        return self.a.wait(eid)

    def test_sigint_interrupts_sync_code(self):
        r = self.interrupt_during("import time\nprint('start')\ntime.sleep(10)\nprint('not reached')")
        self.assertEqual((r.ok, r.exit, r.error, r.stdout), (False, 1, "KeyboardInterrupt", "start\n"))
        self.assertIn('File "<cell-1>", line 3', r.stderr)
        self.assertEqual(self.a.exec("print('alive')").stdout, "alive\n")

    def test_sigint_interrupts_async_code_for_good(self):
        r = self.interrupt_during("import asyncio\nprint('start')\nawait asyncio.sleep(1)\nprint('resumed')")
        self.assertEqual((r.ok, r.error, r.stdout), (False, "KeyboardInterrupt", "start\n"))
        self.assertNotIn("asyncio", r.stderr)
        # The interrupted cell must not resume inside a later exec.
        r = self.a.exec("await asyncio.sleep(1.2)\nprint('later')")
        self.assertEqual(r.stdout, "later\n")

    def test_sigint_interrupts_a_waiting_call(self):
        class NeverHost(FakeHost):
            def on_call(self, agent, msg):
                # call_tool and anything about key "never" go unanswered
                if msg["m"] != "call_tool" and msg["p"].get("key") != "never":
                    FakeHost.on_call(self, agent, msg)

        a = Agent(NeverHost())
        try:
            srv = [server("s", ["t"])]
            for code in ("import asyncio\nprint('start')\nawait mcp_s.t()",
                         "print('start')\nsave_memory('k', 1)\nimport asyncio\nawait mcp_s.t()",
                         "print('start')\nload_memory('never')"):
                eid = a.start(code, servers=srv)
                a.wait_for_output(eid, "start")
                time.sleep(0.2)
                os.kill(a.proc.pid, signal.SIGINT)
                r = a.wait(eid)
                self.assertEqual((r.ok, r.error), (False, "KeyboardInterrupt"), r)
                self.assertNotIn("codeexec", r.stderr)
                self.assertNotIn("asyncio", r.stderr)
            self.assertEqual(a.exec("print(load_memory('k'))").stdout, "1\n")
        finally:
            a.close()

    def test_sigint_between_execs(self):
        self.a.exec("pass")
        os.kill(self.a.proc.pid, signal.SIGINT)
        time.sleep(0.2)
        self.assertEqual(self.a.exec("print('alive')").stdout, "alive\n")

    def test_sigint_storm_never_breaks_frames(self):
        # SIGINTs land in the main thread while it sends big call frames,
        # waits for replies and runs the fence.
        storm = ("import os, signal, threading, time\n"
                 "def storm():\n"
                 "    end = time.monotonic() + 1.5\n"
                 "    while time.monotonic() < end:\n"
                 "        os.kill(os.getpid(), signal.SIGINT)\n"
                 "        time.sleep(0.0005)\n"
                 "threading.Thread(target=storm).start()\n")
        loops = ("stop = time.monotonic() + 1.7\n"
                 "while time.monotonic() < stop:\n"
                 "    try:\n"
                 "        save_memory('k', 'x' * 300000)\n"
                 "        print('saved')\n"
                 "    except KeyboardInterrupt:\n"
                 "        pass\n")
        for _ in range(3):
            r = self.a.exec(storm + loops, timeout=60)
            self.assertIn(r.error, ("", "KeyboardInterrupt"), r)
            time.sleep(1.6)
            r = self.a.exec("print('channel intact')")
            self.assertEqual(r.stdout, "channel intact\n", r)

    def test_threads_refused_for_a_moment(self):
        # As after a fork bomb, whose children fill the pids limit until
        # they have ended: the next call's reader threads are refused for a
        # moment, and the call waits for them instead of losing its output.
        self.a.exec(
            "import codeexec_output, time\n"
            "_real = codeexec_output.start_new_thread\n"
            "_until = time.monotonic() + 0.3\n"
            "def _refuse(f, a):\n"
            "    if time.monotonic() < _until:\n"
            "        raise RuntimeError(\"can't start new thread\")\n"
            "    codeexec_output.start_new_thread = _real\n"
            "    return _real(f, a)\n"
            "codeexec_output.start_new_thread = _refuse\n")
        r = self.a.exec("print('alive')")
        self.assertEqual((r.stdout, r.stderr), ("alive\n", ""), r)

    def test_out_of_descriptors(self):
        r = self.a.exec(
            "import os, resource\n"
            "resource.setrlimit(resource.RLIMIT_NOFILE, (64, 64))\n"
            "hog = []\n"
            "try:\n"
            "    while True: hog.append(os.open('/dev/null', os.O_RDONLY))\n"
            "except OSError:\n"
            "    pass\n")
        self.assertTrue(r.ok, r)
        r = self.a.exec("for fd in hog: os.close(fd)\nprint('freed')")
        self.assertTrue(r.ok, r)
        self.assertIn("cannot capture the output of this call", r.stderr)
        self.assertEqual(self.a.exec("print('back')").stdout, "back\n")


if __name__ == "__main__":
    unittest.main()
