"""The sandbox says what happened: failed tool calls raise, servers not
loaded say how to load them, saved tools carry what they need, and the
network says it is not there."""

import json
import unittest

from agenthost import Agent, FakeHost, server

FS = server("filesystem", ["read_text_file"])
EV = server("everything", ["echo"])


class ErrorHost(FakeHost):
    """A server whose read_text_file fails as the reference server does,
    and whose "refuse" tool gets a JSON-RPC error."""

    def handle(self, m, p):
        if m == "call_tool" and p["tool"] == "read_text_file" and p["arguments"].get("path") == "/not/allowed":
            return True, {"content": [{"type": "text", "text": "Access denied - path outside allowed directories"}],
                          "structuredContent": {"reason": "denied"}, "isError": True}
        if m == "call_tool" and p["tool"] == "refuse":
            return False, ("invalid_argument", "MCP error -32602: bad params")
        return super().handle(m, p)


class ToolErrorTest(unittest.TestCase):
    def setUp(self):
        self.host = ErrorHost()
        self.host.allowed = ["filesystem"]
        self.a = Agent(self.host)

    def tearDown(self):
        self.a.close()

    def test_is_error_raises_tool_error(self):
        r = self.a.exec(
            "try:\n"
            "    await mcp_filesystem.read_text_file(path='/not/allowed')\n"
            "except runtime.ToolError as e:\n"
            "    print(type(e).__name__, isinstance(e, runtime.MCPError), e.code)\n"
            "    print(e.server, e.tool, e.message, e.structured_content, e.result['isError'])\n"
            "try:\n"
            "    runtime.call_tool_sync('filesystem', 'read_text_file', {'path': '/not/allowed'})\n"
            "except runtime.ToolError as e:\n"
            "    print('sync', e)\n"
            "try:\n"
            "    await mcp_filesystem.refuse()\n"
            "except runtime.InvalidArgumentError as e:\n"
            "    print(type(e).__name__, isinstance(e, runtime.ToolError), e.server, e.tool, e.code)\n"
            "print(await mcp_filesystem.read_text_file(path='/ok'))\n",
            servers=[FS])
        self.assertTrue(r.ok, r)
        self.assertEqual(r.stdout.splitlines(), [
            "ToolError True tool_error",
            "filesystem read_text_file Access denied - path outside allowed directories {'reason': 'denied'} True",
            "sync tool 'read_text_file' of server 'filesystem' failed: Access denied - path outside allowed "
            "directories",
            "InvalidArgumentError True filesystem refuse invalid_argument",
            "{'content': [{'type': 'text', 'text': '{\"server\": \"filesystem\", \"tool\": \"read_text_file\", "
            "\"arguments\": {\"path\": \"/ok\"}}'}]}",
        ])

    def test_uncaught_tool_error_fails_the_run(self):
        r = self.a.exec("res = await mcp_filesystem.read_text_file(path='/not/allowed')\nprint('carried on')\n",
                        servers=[FS])
        self.assertFalse(r.ok, r)
        self.assertNotIn("carried on", r.stdout)
        self.assertIn("ToolError: tool 'read_text_file' of server 'filesystem' failed: Access denied", r.stderr)

    def test_opt_out_returns_the_dict(self):
        r = self.a.exec(
            "res = await mcp_filesystem.read_text_file(path='/not/allowed', raise_on_error=False)\n"
            "print(res['isError'], res['content'][0]['text'])\n"
            "res = await runtime.call_tool('filesystem', 'read_text_file', {'path': '/not/allowed'},"
            " raise_on_error=False)\n"
            "print(res['isError'])\n"
            "import os\n"
            "os.environ['MCP_BRIDGE_TOOL_ERRORS'] = 'return'\n"
            "print((await mcp_filesystem.read_text_file(path='/not/allowed'))['isError'])\n"
            "os.environ['MCP_BRIDGE_TOOL_ERRORS'] = 'sometimes'\n"
            "try:\n"
            "    await mcp_filesystem.read_text_file(path='/not/allowed')\n"
            "except ValueError as e:\n"
            "    print(e)\n",
            servers=[FS])
        self.assertTrue(r.ok, r)
        self.assertEqual(r.stdout.splitlines(), [
            "True Access denied - path outside allowed directories", "True", "True",
            "MCP_BRIDGE_TOOL_ERRORS is 'sometimes'; it accepts \"raise\" (failed tool calls raise ToolError, the "
            "default) or \"return\" (they return the CallToolResult dict, as upstream did)"])
        # The keyword is not sent to the tool.
        self.assertEqual(self.host_calls(r), [{"path": "/not/allowed"}] * 3)

    def host_calls(self, r):
        return [c["p"]["arguments"] for c in r.calls if c["m"] == "call_tool"][:3]


class UnloadedServerTest(unittest.TestCase):
    def setUp(self):
        self.host = FakeHost()
        self.host.allowed = ["filesystem"]
        self.a = Agent(self.host)

    def tearDown(self):
        self.a.close()

    def discovered(self):
        return [{"name": "filesystem", "description": "", "alias": "filesystem"},
                {"name": "everything", "description": "", "alias": "everything"},
                {"name": "broken-one", "description": "", "alias": "broken_one", "failed": "exit status 1"}]

    def test_unloaded_server_names_say_how_to_load(self):
        r = self.a.exec(
            "print(mcp_everything)\n"
            "for name in ('mcp_everything', 'mcp_broken_one', 'mcp_gone'):\n"
            "    try:\n"
            "        await globals()[name].echo(message='hi')\n"
            "    except Exception as e:\n"
            "        print(type(e).__name__, isinstance(e, runtime.ToolError), e)\n",
            servers=[FS], discovered=self.discovered(),
            unloaded=[{"name": "gone", "source": "/x/.mcp.json", "reason": "no command"}])
        self.assertTrue(r.ok, r)
        self.assertEqual(r.stdout.splitlines(), [
            "<MCP server 'everything': not loaded in this call>",
            "PermissionDeniedError True Server 'everything' is not available: it is not loaded in this call "
            "(loaded: \"filesystem\"); pass servers=[\"filesystem\", \"everything\"] to run_python",
            "PermissionDeniedError True Server 'broken-one' is not available: it is not loaded in this call "
            "(loaded: \"filesystem\"); pass servers=[\"filesystem\", \"broken-one\"] to run_python; note that its "
            "last start failed: exit status 1",
            "PermissionDeniedError True Server 'gone' is not available: its config entry in /x/.mcp.json was not "
            "loaded (no command), so servers=[\"filesystem\", \"gone\"] would fail too",
        ])
        self.assertEqual([c for c in r.calls if c["m"] == "call_tool"], [])

    def test_loading_it_later_replaces_the_stub_and_own_names_are_kept(self):
        self.a.exec("mcp_everything = 'mine'", servers=[FS], discovered=self.discovered())
        r = self.a.exec("print(mcp_everything)", servers=[FS], discovered=self.discovered())
        self.assertEqual(r.stdout, "mine\n", r)
        self.a.exec("del mcp_everything", servers=[FS], discovered=self.discovered())
        self.host.allowed = ["everything"]
        r = self.a.exec("print(mcp_everything, 'mcp_filesystem' in globals())\n"
                        "print(type(mcp_filesystem).__name__)\n",
                        servers=[EV], discovered=self.discovered())
        self.assertEqual(r.stdout, "<MCP server 'everything': 1 tools> True\nUnloadedServer\n", r)

    def test_saved_tool_using_an_unloaded_server_says_so(self):
        self.host.tools["echo_it"] = {"name": "echo_it", "docstring": "", "source":
                                      "async def echo_it(m):\n    return await mcp_everything.echo(message=m)\n"}
        r = self.a.exec("import user_tools\n"
                        "try:\n"
                        "    await user_tools.echo_it('x')\n"
                        "except runtime.MCPError as e:\n"
                        "    print(e)\n", servers=[FS], discovered=self.discovered())
        self.assertEqual(r.stdout, "Server 'everything' is not available: it is not loaded in this call "
                                   "(loaded: \"filesystem\"); pass servers=[\"filesystem\", \"everything\"] to "
                                   "run_python\n", r)


class SaveToolCarriesTest(unittest.TestCase):
    def setUp(self):
        self.host = FakeHost()
        self.a = Agent(self.host)

    def tearDown(self):
        self.a.close()

    def test_modules_constants_and_helpers_are_carried(self):
        r = self.a.exec(
            "import re\n"
            "import os.path as osp\n"
            "from json import dumps as js\n"
            "SEP = '-'\n"
            "LIMITS = {'max': 3, 'words': ('a', 'b')}\n"
            "class Box:\n"
            "    def __init__(self, v):\n"
            "        self.v = v\n"
            "def clean(s):\n"
            "    return re.sub(r'[^a-z0-9]+', SEP, s.lower()).strip(SEP)\n"
            "def slug(s, n=LIMITS['max']):\n"
            "    return Box(clean(s)).v, osp.basename('/a/b'), js(n), LIMITS['words']\n"
            "print(save_tool(slug))\n")
        self.assertTrue(r.ok, r)
        src = self.host.tools["slug"]["source"]
        self.assertIn("import re\n", src)
        self.assertIn("import posixpath as osp\n", src)
        self.assertIn("from json import dumps as js\n", src)
        self.assertIn("SEP = '-'\n", src)
        self.assertIn("def clean(s):", src)
        self.assertIn("class Box:", src)
        b = Agent(self.host)  # a new process
        try:
            r = b.exec("import user_tools\nprint(user_tools.slug('Hello World!'))\nprint(slug('A b'))\n",
                       first=True)
            self.assertEqual(r.stdout, "('hello-world', 'b', '3', ('a', 'b'))\n('a-b', 'b', '3', ('a', 'b'))\n", r)
        finally:
            b.close()

    def test_what_cannot_be_carried_is_refused_by_name(self):
        r = self.a.exec(
            "import threading\n"
            "lock = threading.Lock()\n"
            "def uses_lock():\n"
            "    with lock:\n"
            "        return 1\n"
            "def uses_undefined():\n"
            "    return not_defined_anywhere\n"
            "def outer():\n"
            "    k = 1\n"
            "    def inner():\n"
            "        return k\n"
            "    return inner\n"
            "for f in (uses_lock, uses_undefined, outer()):\n"
            "    try:\n"
            "        save_tool(f)\n"
            "    except ValueError as e:\n"
            "        print(e)\n"
            "def fine(x):\n"
            "    return len(x) + len(runtime.list_servers_sync()) + save_memory.__code__.co_argcount\n"
            "print(save_tool(fine))\n")
        self.assertTrue(r.ok, r)
        lines = r.stdout.splitlines()
        self.assertEqual(len(lines), 4, r)
        self.assertRegex(lines[0], r"^save_tool\(uses_lock\) refused: uses_lock uses lock, a lock, which save_tool "
                                   r"cannot carry")
        self.assertEqual(lines[1], "save_tool(uses_undefined) refused: uses_undefined uses not_defined_anywhere, "
                                   "which is not defined in this session; define it (or import it) before saving")
        self.assertEqual(lines[2], "save_tool(inner) refused: inner uses k of the function around it (a closure); "
                                   "save_tool carries top-level functions only")
        self.assertEqual(lines[3], "Tool 'fine' saved. It will be available in future sessions.")
        self.assertEqual(self.host.tools["fine"]["source"].splitlines()[0], "def fine(x):")
        self.assertNotIn("uses_lock", self.host.tools)


class NoNetworkTest(unittest.TestCase):
    def setUp(self):
        self.a = Agent(FakeHost())

    def tearDown(self):
        self.a.close()

    def test_network_attempts_say_there_is_none(self):
        r = self.a.exec(
            "import socket, urllib.request, urllib.error\n"
            "try:\n"
            "    urllib.request.urlopen('http://example.com', timeout=30)\n"
            "except urllib.error.URLError as e:\n"
            "    print(e.reason)\n"
            "try:\n"
            "    socket.create_connection(('198.51.100.7', 443), timeout=30)\n"
            "except OSError as e:\n"
            "    print(e.errno, e.strerror)\n"
            "srv = socket.socket(); srv.bind(('127.0.0.1', 0)); srv.listen()\n"
            "c = socket.create_connection(srv.getsockname()); print('loopback works')\n"
            "print(socket.getaddrinfo('localhost', 1)[0][4][0] in ('127.0.0.1', '::1'))\n")
        self.assertTrue(r.ok, r)
        lines = r.stdout.splitlines()
        self.assertEqual(len(lines), 4, r)
        self.assertEqual(lines[0], "[Errno -2] the sandbox has no network, so 'example.com' cannot be reached; MCP "
                                   "servers reach the outside: load one with run_python(code, servers=[\"name\"]) "
                                   "and call its tools (runtime.search_tool_docs(\"fetch a web page\") finds one)")
        self.assertTrue(lines[1].startswith("101 the sandbox has no network, so 198.51.100.7 port 443 cannot be "
                                            "reached; MCP servers reach the outside"), lines[1])
        self.assertEqual(lines[2:], ["loopback works", "True"])


if __name__ == "__main__":
    unittest.main()
