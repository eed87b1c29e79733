"""The channel's message types on the agent's side: call methods and their
parameters, the exec frame, error codes and the exceptions they raise."""

import sys
import unittest

from agenthost import AGENT_DIR, Agent, FakeHost, server

sys.path.insert(0, AGENT_DIR)
import codeexec_protocol as protocol  # noqa: E402 - the agent's own module, imported here for unit tests

# Every error code of docs/PROTOCOL.md and the exception it raises.
CODES = {
    "not_found": "NotFoundError",
    "conflict": "ConflictError",
    "invalid_argument": "InvalidArgumentError",
    "failed_precondition": "FailedPreconditionError",
    "permission_denied": "PermissionDeniedError",
    "unavailable": "UnavailableError",
    "deadline_exceeded": "DeadlineExceededError",
    "internal": "MCPError",
    "approval_declined": "ApprovalDeclinedError",
    "approval_unavailable": "ApprovalUnavailableError",
    "limit_exceeded": "LimitExceededError",
}


class FailingHost(FakeHost):
    """Fails list_servers with the error in its `fail` attribute."""

    fail = None

    def handle(self, m, p):
        if m == "list_servers":
            return False, self.fail
        return super().handle(m, p)


class ErrorCodeTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.host = FailingHost()
        cls.a = Agent(cls.host)

    @classmethod
    def tearDownClass(cls):
        cls.a.close()

    def raised(self, fail):
        """What the code sees when list_servers fails with fail."""
        self.host.fail = fail
        r = self.a.exec(
            "try:\n"
            "    await runtime.list_servers()\n"
            "except runtime.MCPError as e:\n"
            "    print(type(e).__name__, type(e).__module__, e.code, isinstance(e, RuntimeError), '|', e)\n")
        self.assertTrue(r.ok, r)
        return r.stdout.rstrip("\n")

    def test_each_code_raises_its_class(self):
        for code, name in CODES.items():
            with self.subTest(code):
                self.assertEqual(self.raised((code, "it failed")), "%s mcp.runtime %s True | it failed" % (name, code))

    def test_classes_are_in_runtime(self):
        r = self.a.exec(
            "import mcp.runtime\n"
            "names = %r\n"
            "print(all(issubclass(getattr(runtime, n), runtime.MCPError) and n in mcp.runtime.__all__ for n in names))\n"
            "print(sorted(getattr(runtime, n).code for n in names))\n" % sorted(set(CODES.values())))
        self.assertEqual(r.stdout, "True\n%s\n" % sorted(CODES), r)

    def test_unknown_code_is_an_mcperror_that_keeps_it(self):
        self.assertEqual(self.raised(("quota_exceeded", "over quota")), "MCPError mcp.runtime quota_exceeded True | over quota")

    def test_missing_message_names_the_method(self):
        self.assertEqual(self.raised(("not_found", "")),
                         "NotFoundError mcp.runtime not_found True | list_servers failed without an error message")

    def test_uncaught_error_names_its_class(self):
        self.host.fail = ("deadline_exceeded", "timed out: no answer within 3s")
        r = self.a.exec("await runtime.list_servers()")
        self.assertEqual(r.error, "DeadlineExceededError: timed out: no answer within 3s", r)
        self.assertTrue(r.stderr.endswith("mcp.runtime.DeadlineExceededError: timed out: no answer within 3s\n"), r)


class MethodTest(unittest.TestCase):
    def test_params_are_checked(self):
        m = protocol.QUERY_TOOL_DOCS
        self.assertEqual(m.params({"server": "s", "detail": "full"}), {"server": "s", "detail": "full"})
        self.assertEqual(m.params({"server": "s", "detail": "full", "tool": "t"})["tool"], "t")
        for bad, want in (({"server": "s"}, "missing parameters ['detail'], unknown parameters []"),
                          ({"server": "s", "detail": "full", "tol": "t"}, "missing parameters [], unknown parameters ['tol']")):
            with self.assertRaises(TypeError) as cm:
                m.params(bad)
            self.assertEqual(str(cm.exception), "query_tool_docs: " + want)

    def test_table(self):
        self.assertEqual(len(protocol.METHODS), 13)
        for name, m in protocol.METHODS.items():
            self.assertEqual(name, m.name)
            self.assertFalse(set(m.required) & set(m.optional), m)

    def test_calls_send_the_methods_parameters(self):
        # Every helper that asks sandboxd sends its method's parameters,
        # checked against the table before the frame goes out.
        a = Agent()
        try:
            r = a.exec(
                "import asyncio\n"
                "save_memory('k', 1, metadata={'a': 1}); load_memory('k'); update_memory('k', lambda v: v + 1)\n"
                "delete_memory('k'); list_memories()\n"
                "def f():\n    'doc'\n\n"
                "save_tool(f); runtime.list_saved_tools(); runtime.delete_saved_tool('f')\n"
                "await runtime.list_servers(); await runtime.list_tools('fs')\n"
                "await runtime.call_tool('fs', 'read', {}); await runtime.query_tool_docs('fs', 't')\n"
                "await runtime.search_tool_docs('x'); runtime.search_tool_docs_sync('x')\n",
                servers=[{"name": "fs", "alias": "fs", "tools": []}])
            self.assertTrue(r.ok, r)
            seen = set()
            for c in r.calls:
                m = protocol.METHODS[c["m"]]
                self.assertEqual(m.params(c["p"]), c["p"])
                seen.add(c["m"])
            self.assertEqual(seen, set(protocol.METHODS))
        finally:
            a.close()


class ExecTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.a = Agent()

    @classmethod
    def tearDownClass(cls):
        cls.a.close()

    def test_missing_or_repeated_alias_is_a_clear_error(self):
        t = {"name": "get", "description": "", "input_schema": {}}
        for servers, want in (
                ([{"name": "a-b", "tools": []}], "server 'a-b' came without an alias"),
                ([{"name": "a-b", "alias": "", "tools": []}], "server 'a-b' came without an alias"),
                ([{"name": "fs", "alias": "fs", "tools": [t]}], "tool 'get' of server 'fs' came without an alias"),
                ([server("a-b", alias="a_b"), server("a.b", alias="a_b")], "servers 'a-b' and 'a.b' came with one alias, 'a_b'"),
                ([server("fs", [("Get", "get"), ("get", "get")])], "tools 'Get' and 'get' of server 'fs' came with one alias, 'get'")):
            with self.subTest(want):
                r = self.a.exec("print('ran')", servers=servers)
                self.assertFalse(r.ok, r)
                self.assertEqual(r.stdout, "", r)
                self.assertEqual(r.error, "MCPError: sandboxd sent metadata in which %s; aliases come from "
                                 "discoveryd, so this is a bug in codeexec" % want, r)
        # The next exec with sound metadata runs as usual.
        self.assertEqual(self.a.exec("print(LOADED_MCP_SERVERS)", servers=[server("filesystem")]).stdout, "('filesystem',)\n")

    def test_fields(self):
        tools = [{"name": "f", "docstring": "", "source": "def f():\n    pass\n"}]
        e = protocol.Exec({"t": "exec", "id": 4, "code": "x = 1", "servers": [{"name": "a"}],
                           "discovered": [{"name": "a", "description": ""}], "limit": 10, "first": True,
                           "saved_tools": tools})
        self.assertEqual((e.id, e.code, e.servers, e.discovered, e.limit, e.first, e.saved_tools),
                         (4, "x = 1", [{"name": "a"}], [{"name": "a", "description": ""}], 10, True, tools))

    def test_missing_and_odd_fields(self):
        for msg in ({"t": "exec", "id": 1}, {"t": "exec", "id": 1, "servers": None, "limit": "lots"},
                    {"t": "exec", "id": 1, "limit": -5, "code": None}):
            e = protocol.Exec(msg)
            self.assertEqual((e.code, e.servers, e.discovered, e.limit, e.first, e.saved_tools),
                             ("", [], [], 0, False, None), msg)
        # saved_tools that are not a list are not taken: the agent asks.
        for saved in (None, {"name": "f"}, "f", 3):
            self.assertIsNone(protocol.Exec({"t": "exec", "id": 1, "saved_tools": saved}).saved_tools, saved)

    def test_restore_gathers_frames_and_the_saved_tools(self):
        tools = [{"name": "f", "docstring": "", "source": "def f():\n    pass\n"}]
        r = protocol.Restore()
        # saved_tools count on the last frame only, as its manifest does.
        self.assertFalse(r.add({"t": "restore", "blobs": {"c1": b"a"}, "saved_tools": tools}))
        self.assertTrue(r.add({"t": "restore", "blobs": {"c2": b"b"}, "last": True, "manifest": {"v": 1}, "saved_tools": tools}))
        self.assertEqual((r.manifest, r.chunks, r.saved_tools), ({"v": 1}, {"c1": b"a", "c2": b"b"}, tools))
        for saved in (None, {"name": "f"}, "f"):
            r = protocol.Restore()
            r.add({"t": "restore", "last": True, "saved_tools": saved})
            self.assertIsNone(r.saved_tools, saved)
        # A list on an earlier frame is not taken.
        r = protocol.Restore()
        r.add({"t": "restore", "blobs": {"c1": b"a"}, "saved_tools": tools})
        r.add({"t": "restore", "last": True, "manifest": {"v": 1}})
        self.assertIsNone(r.saved_tools)


if __name__ == "__main__":
    unittest.main()
