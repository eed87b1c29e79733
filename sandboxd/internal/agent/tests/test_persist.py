"""Memory helpers, save_tool and `import user_tools`."""

import unittest

from agenthost import Agent, FakeHost, server


class MemoryTest(unittest.TestCase):
    def setUp(self):
        self.host = FakeHost()
        self.a = Agent(self.host)

    def tearDown(self):
        self.a.close()

    def test_round_trip(self):
        r = self.a.exec(
            "print(save_memory('notes', {'a': [1, 2.5, None, True, 'é']}, metadata={'tag': 'x'}))\n"
            "print(load_memory('notes'))\n"
            "print(load_memory('missing'), load_memory('missing', default=[]))\n"
            "print(memory_exists('notes'), memory_exists('missing'))\n"
            "info = get_memory_info('notes'); print(info['metadata'], info['revision'])\n"
            "print(get_memory_info('missing'))\n"
            "save_memory('other', 1)\n"
            "print(sorted(m['key'] for m in list_memories()), any('value' in m for m in list_memories()))\n"
            "print(delete_memory('other'))\n"
            "print(delete_memory('other'))\n")
        self.assertEqual(r.stdout.splitlines(), [
            "Memory 'notes' saved.",
            "{'a': [1, 2.5, None, True, 'é']}",
            "None []",
            "True False",
            "{'tag': 'x'} 1",
            "None",
            "['notes', 'other'] False",
            "Memory 'other' deleted.",
            "Memory 'other' not found.",
        ], r)
        self.assertEqual(self.host.memory["notes"]["value"], {"a": [1, 2.5, None, True, "é"]})

    def test_validation(self):
        r = self.a.exec(
            "cases = [lambda: save_memory('k', {1, 2}), lambda: save_memory('k', {'d': object()}),\n"
            "         lambda: save_memory('k', float('nan')), lambda: save_memory('', 1),\n"
            "         lambda: save_memory(5, 1), lambda: save_memory('é' * 1025, 1),\n"
            "         lambda: save_memory('k', 1, metadata=[1]), lambda: load_memory(None),\n"
            "         lambda: update_memory('k', 3), lambda: save_memory('a\\ud800', 1),\n"
            "         lambda: save_memory('   ', 1), lambda: load_memory('\\t\\n')]\n"
            "for f in cases:\n"
            "    try:\n"
            "        f(); print('no error')\n"
            "    except Exception as e:\n"
            "        print(type(e).__name__ + ':', e)\n"
            "print(save_memory('é' * 1024, 1))\n")
        # Python 3.13's json names the value (": nan"), 3.11's does not.
        lines = [line.removesuffix(": nan") for line in r.stdout.splitlines()]
        self.assertEqual(lines, [
            "TypeError: value of type set is not JSON serialisable",
            "TypeError: value of type object is not JSON serialisable",
            "ValueError: value is not valid JSON: Out of range float values are not JSON compliant",
            "ValueError: Memory key cannot be empty: use a name such as 'notes' (surrounding whitespace is stripped)",
            "TypeError: memory key must be a str, not int",
            "ValueError: memory key is 2050 UTF-8 bytes; the limit is 2048 (keep the data in the value)",
            "TypeError: metadata must be a dict, not list",
            "TypeError: memory key must be a str, not NoneType",
            "TypeError: update_memory needs a callable, not int",
            "ValueError: memory key must be valid Unicode (it holds a lone surrogate)",
            "ValueError: Memory key cannot be empty: use a name such as 'notes' (surrounding whitespace is stripped)",
            "ValueError: Memory key cannot be empty: use a name such as 'notes' (surrounding whitespace is stripped)",
            "Memory '%s' saved." % ("é" * 1024),
        ], r)
        self.assertEqual(set(self.host.memory), {"é" * 1024})

    def test_keys_are_stripped(self):
        r = self.a.exec(
            "print(save_memory('  notes\\n', 1))\n"
            "print(load_memory('notes'), memory_exists(' notes'), get_memory_info('notes ')['key'])\n"
            "print(update_memory(' notes ', lambda v: v + 1), delete_memory('\\tnotes'))\n")
        self.assertEqual(r.stdout.splitlines(), ["Memory 'notes' saved.", "1 True notes", "2 Memory 'notes' deleted."], r)
        self.assertEqual({c["p"]["key"] for c in r.calls}, {"notes"})

    def test_update_memory(self):
        r = self.a.exec(
            "print(update_memory('list', lambda v: (v or []) + ['a']))\n"
            "print(update_memory('list', lambda v: v + ['b']))\n")
        self.assertEqual(r.stdout, "['a']\n['a', 'b']\n", r)
        self.assertEqual(self.host.memory["list"]["revision"], 2)
        updates = [c["p"] for c in r.calls if c["m"] == "memory.update"]
        self.assertEqual([u["revision"] for u in updates], [0, 1])

    def test_update_memory_retries_on_conflict(self):
        self.a.exec("save_memory('list', ['mine'], metadata={'keep': 1})")
        self.host.conflicts_left = 3
        r = self.a.exec("print(update_memory('list', lambda v: v + ['new']))")
        self.assertEqual(r.stdout, "['mine', 'other', 'other', 'other', 'new']\n", r)
        self.assertEqual(len([c for c in r.calls if c["m"] == "memory.update"]), 4)
        self.assertEqual(self.host.memory["list"]["metadata"], {"keep": 1})

    def test_update_memory_gives_up(self):
        # Endless conflicts: it keeps trying for UPDATE_PATIENCE seconds
        # (shortened here), pausing between tries, then says how often.
        self.host.conflicts_left = 10**6
        r = self.a.exec("import codeexec_persist\ncodeexec_persist.UPDATE_PATIENCE = 0.3\n"
                        "update_memory('n', lambda v: (v or []) + [1])")
        tries = len([c for c in r.calls if c["m"] == "memory.update"])
        self.assertEqual(r.error, "ConflictError: update_memory('n'): gave up after %d conflicting concurrent updates in 0.3 s" % tries)
        self.assertGreater(tries, 5)
        self.assertLess(tries, 1000)  # it paused between tries

    def test_update_memory_other_error_not_retried(self):
        orig = self.host.handle
        self.host.handle = lambda m, p: (False, "memoryd down") if m == "memory.update" else orig(m, p)
        r = self.a.exec("update_memory('n', lambda v: 1)")
        self.assertEqual(r.error, "MCPError: memoryd down")
        self.assertEqual(len([c for c in r.calls if c["m"] == "memory.update"]), 1)

    def test_update_memory_retries_on_the_code_not_the_words(self):
        # A conflict is a ConflictError, whatever its message says; a
        # message that merely mentions a conflict is not one.
        orig = self.host.handle
        replies = {"code": [("conflict", "revision moved"), ("conflict", "revision moved")],
                   "words": [("invalid_argument", "value conflicts with the schema")]}
        for case, errors in replies.items():
            with self.subTest(case):
                left = list(errors)
                self.host.handle = lambda m, p: (False, left.pop(0)) if m == "memory.update" and left else orig(m, p)
                r = self.a.exec("try:\n    print(update_memory('n', lambda v: 1))\n"
                                "except runtime.MCPError as e:\n    print(type(e).__name__, e.code, e)\n")
                tries = len([c for c in r.calls if c["m"] == "memory.update"])
                if case == "code":
                    self.assertEqual((r.stdout, tries), ("1\n", 3), r)
                else:
                    self.assertEqual((r.stdout, tries), ("InvalidArgumentError invalid_argument value conflicts "
                                                         "with the schema\n", 1), r)
        self.host.handle = orig


class ToolsTest(unittest.TestCase):
    def setUp(self):
        self.host = FakeHost()
        self.a = Agent(self.host)

    def tearDown(self):
        self.a.close()

    def test_save_tool_and_import_in_later_session(self):
        self.a.exec(
            "def double(x):\n"
            "    '''Doubles x.'''\n"
            "    return 2 * x\n"
            "if True:\n"
            "    def nested(y):\n"
            "        return y + 1\n")
        r = self.a.exec("print(save_tool(double))\nprint(save_tool(nested))")
        self.assertEqual(r.stdout, "Tool 'double' saved. It will be available in future sessions.\n"
                                   "Tool 'nested' saved. It will be available in future sessions.\n", r)
        self.assertEqual(self.host.tools["double"], {
            "name": "double", "docstring": "Doubles x.",
            "source": "def double(x):\n    '''Doubles x.'''\n    return 2 * x\n"})
        self.assertEqual(self.host.tools["nested"]["source"], "def nested(y):\n    return y + 1\n")
        # A tool that uses the runtime, and one that cannot load.
        self.host.tools["servers"] = {"name": "servers", "docstring": "",
                                      "source": "def servers():\n    save_memory('seen', 1)\n"
                                                "    return runtime.list_servers_sync(), mcp_fs\n"}
        self.host.tools["broken"] = {"name": "broken", "docstring": "", "source": "import not_a_module\n"}

        b = Agent(self.host)
        try:
            # Each tool's source runs when it is first used: the broken one
            # costs nothing until then, and says why it fails when used.
            r = b.exec(
                "import user_tools\n"
                "print(user_tools.double(21), user_tools.nested(1), user_tools.servers())\n"
                "print(user_tools.FAILED, sorted(user_tools.__all__))\n"
                "import inspect; print(inspect.getsource(user_tools.double).splitlines()[0])\n"
                "from user_tools import double\n"
                "try:\n"
                "    user_tools.broken\n"
                "except ImportError as e:\n"
                "    print(e)\n"
                "print(user_tools.FAILED, sorted(user_tools.__all__))\n", servers=[server("fs", ["t"])])
            self.assertTrue(r.ok, r)
            self.assertEqual(r.stdout, "42 2 (('fs',), <MCP server 'fs': 1 tools>)\n"
                                       "{} ['broken', 'double', 'nested', 'servers']\n"
                                       "def double(x):\n"
                                       "saved tool 'broken' failed to load: ModuleNotFoundError: No module named 'not_a_module'\n"
                                       "{'broken': \"ModuleNotFoundError: No module named 'not_a_module'\"} ['double', 'nested', 'servers']\n", r)
            self.assertEqual(r.stderr, "user_tools: tool 'broken' failed to load: "
                                       "ModuleNotFoundError: No module named 'not_a_module'\n")
            # Saving in this session updates the loaded module too.
            r = b.exec("def triple(x):\n    return 3 * x\nsave_tool(triple)\nprint(user_tools.triple(2))")
            self.assertEqual(r.stdout, "6\n", r)
        finally:
            b.close()

    def test_saved_tools_are_bare_names_in_a_new_session(self):
        def tool(name, body="    return %r\n"):
            self.host.tools[name] = {"name": name, "docstring": "",
                                     "source": "def %s(*a):\n" % name + body % name}
        for name in ("double", "load_memory", "len", "runtime", "mine", "_private", "gone"):
            tool(name)
        b = Agent(self.host)
        try:
            # The pool's warm-up exec binds nothing and asks for nothing.
            r = b.exec("pass")
            self.assertEqual(r.calls, [], r)
            r = b.exec("print(double(), load_memory.__module__, len('ab'), type(runtime).__name__)\n"
                       "print('_private' in globals(), mine())\n"
                       "mine = 'my own'\n"
                       "import user_tools\n"
                       "print(user_tools.len(), user_tools.load_memory(), double is user_tools.double)\n",
                       first=True)
            self.assertEqual(r.stdout.splitlines(), [
                "double codeexec_persist 2 module",
                "False mine",
                "len load_memory True",
            ], r)
            self.assertEqual([c["m"] for c in r.calls], ["tool.list"])
            # Later execs do not ask again, and keep the session's own names.
            r = b.exec("print(mine, double())")
            self.assertEqual((r.stdout, r.calls), ("my own double\n", []), r)
            # Deleting a tool takes its bare name away, not a rebound name.
            r = b.exec("print(runtime.delete_saved_tool('gone'), 'gone' in globals(), hasattr(user_tools, 'gone'))\n"
                       "print(runtime.delete_saved_tool('mine'), mine)\n")
            self.assertEqual(r.stdout.splitlines(), ["Tool 'gone' deleted. False False",
                                                     "Tool 'mine' deleted. my own"], r)
        finally:
            b.close()

    def test_a_tool_saved_elsewhere_imports_in_a_running_session(self):
        # user_tools is built once per sandbox; a tool another session saves
        # later is found when the code asks user_tools for it by name.
        self.host.tools["double"] = {"name": "double", "docstring": "", "source": "def double(x):\n    return 2 * x\n"}
        b = Agent(self.host)
        try:
            r = b.exec("import user_tools\nprint(user_tools.__all__)\n", first=True)
            self.assertEqual((r.stdout, [c["m"] for c in r.calls]), ("['double']\n", ["tool.list"]), r)
            self.host.tools["greet"] = {"name": "greet", "docstring": "", "source": "def greet():\n    return 'hi'\n"}
            r = b.exec("from user_tools import greet\n"
                       "print(greet(), user_tools.__all__, hasattr(user_tools, '_private'))\n"
                       "try:\n    user_tools.never_saved\nexcept AttributeError as e:\n    print(e)\n")
            self.assertEqual(r.stdout.splitlines(), ["hi ['double', 'greet'] False",
                                                     "module 'user_tools' has no attribute 'never_saved'"], r)
            # One list for greet, one for never_saved; none for a private name.
            self.assertEqual([c["m"] for c in r.calls], ["tool.list", "tool.list"], r)
            r = b.exec("print(user_tools.greet())")
            self.assertEqual((r.stdout, r.calls), ("hi\n", []), r)
        finally:
            b.close()

    def test_a_bare_name_saved_elsewhere_is_bound_after_its_name_error(self):
        # Bare names are bound at the first exec; a tool saved later by
        # another session is not among them. The NameError says so and
        # binds it, so the code works when run again.
        b = Agent(self.host)
        try:
            b.exec("import user_tools\nmine = 1", first=True)
            self.host.tools["greet"] = {"name": "greet", "docstring": "", "source": "def greet():\n    return 'hi'\n"}
            r = b.exec("print(greet())")
            self.assertIn("NameError: name 'greet' is not defined", r.stderr, r)
            self.assertIn("hint: greet is a tool saved after this session began (in another session or another "
                          "codeexec); it is bound now, so run the code again (it is also user_tools.greet)", r.stderr, r)
            r = b.exec("print(greet())")
            self.assertEqual((r.stdout, r.calls), ("hi\n", []), r)
            # A name no tool has gets the plain NameError, after one look.
            r = b.exec("print(nobody)")
            self.assertIn("NameError: name 'nobody' is not defined", r.stderr, r)
            self.assertNotIn("hint", r.stderr, r)
            self.assertEqual([c["m"] for c in r.calls], ["tool.list"], r)
        finally:
            b.close()

    def test_a_tool_runs_its_source_on_first_use_only(self):
        # A saved tool is definitions: its top-level statements run when a
        # session first uses it, once, not when the session starts.
        self.host.tools["greet"] = {"name": "greet", "docstring": "Says hello.", "source":
                                    "import time\nLOADS = globals().get('LOADS', 0) + 1\n"
                                    "def greet(name):\n    return 'hi %s %d' % (name, LOADS)\n"}
        b = Agent(self.host)
        try:
            r = b.exec("import user_tools\n"
                       "print('LOADS' in vars(user_tools), greet.__doc__, greet)\n", first=True)
            self.assertEqual(r.stdout, "False Says hello. <saved tool greet, loaded on first use>\n", r)
            r = b.exec("print(greet('a'), greet('b'), user_tools.greet('c'), user_tools.LOADS, type(greet).__name__)")
            self.assertEqual(r.stdout, "hi a 1 hi b 1 hi c 1 1 function\n", r)
        finally:
            b.close()

    def test_saved_tools_sent_with_the_first_exec(self):
        # sandboxd fetched them while it readied the sandbox: the agent
        # builds user_tools from the frame and asks for nothing.
        self.host.tools["stale"] = {"name": "stale", "docstring": "", "source": "def stale():\n    return 1\n"}
        sent = [{"name": "triple", "docstring": "", "source": "def triple(x):\n    return 3 * x\n"},
                {"name": "broken", "docstring": "", "source": "def broken(:\n"}]
        b = Agent(self.host)
        try:
            r = b.exec("import user_tools\n"
                       "print(triple(2), 'stale' in globals(), user_tools.__all__, sorted(user_tools.FAILED))\n"
                       "try:\n"
                       "    broken()\n"
                       "except ImportError:\n"
                       "    print(user_tools.__all__, sorted(user_tools.FAILED))\n",
                       first=True, saved_tools=sent)
            self.assertEqual((r.ok, r.stdout, r.calls), (True, "6 False ['triple', 'broken'] []\n['triple'] ['broken']\n", []), r)
            self.assertIn("user_tools: tool 'broken' failed to load: SyntaxError", r.stderr)
            # The sent list builds user_tools once; building it again asks.
            r = b.exec("import sys\n"
                       "del sys.modules['user_tools']\n"
                       "import user_tools\n"
                       "print(user_tools.__all__)\n")
            self.assertEqual((r.stdout, [c["m"] for c in r.calls]), ("['stale']\n", ["tool.list"]), r)
        finally:
            b.close()
        # An empty list means there are none: nothing bound, nothing asked.
        c = Agent(self.host)
        try:
            r = c.exec("import user_tools\nprint(user_tools.__all__, 'stale' in globals())\n", first=True, saved_tools=[])
            self.assertEqual((r.ok, r.stdout, r.calls), (True, "[] False\n", []), r)
        finally:
            c.close()

    def test_binding_without_memoryd_is_silent(self):
        host = FakeHost()
        host.handle = lambda m, p: (False, "memory and saved tools are not available in this deployment")
        a = Agent(host)
        try:
            r = a.exec("print('ran')", first=True)
            self.assertEqual((r.ok, r.stdout, r.stderr), (True, "ran\n", ""), r)
            r = a.exec("import user_tools")
            self.assertIn("not available in this deployment", r.error)
        finally:
            a.close()

    def test_save_tool_errors(self):
        r = self.a.exec(
            "f = lambda x: x\n"
            "for arg in (f, len, 3):\n"
            "    try:\n"
            "        save_tool(arg)\n"
            "    except Exception as e:\n"
            "        print(type(e).__name__ + ':', e)\n")
        self.assertEqual(r.stdout.splitlines(), [
            "ValueError: save_tool needs a named function (def), not '<lambda>'",
            "ValueError: save_tool expects a function (one defined with def), not builtin_function_or_method",
            "ValueError: save_tool expects a function (one defined with def), not int",
        ], r)

    def test_list_and_delete_saved_tools(self):
        r = self.a.exec(
            "def t1():\n    pass\n"
            "save_tool(t1)\n"
            "print([t['name'] for t in runtime.list_saved_tools()])\n"
            "print(runtime.delete_saved_tool('t1'))\n"
            "print(runtime.delete_saved_tool('t1'))\n")
        self.assertEqual(r.stdout, "['t1']\nTool 't1' deleted.\nTool 't1' not found.\n", r)

    def test_user_tools_unavailable(self):
        host = FakeHost()
        host.handle = lambda m, p: (False, "tool.list is not served")
        a = Agent(host)
        try:
            r = a.exec("import user_tools")
            self.assertEqual(r.error, "ImportError: cannot load user_tools: tool.list is not served")
        finally:
            a.close()


if __name__ == "__main__":
    unittest.main()
