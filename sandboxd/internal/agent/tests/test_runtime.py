"""The in-sandbox API: globals, proxies, aliases, mcp.runtime and calls."""

import threading
import time
import unittest

from agenthost import Agent, FakeHost, server

FS = server("filesystem", ["read_file", "write_file"])
# With the aliases discoveryd gives these names.
GH = server("GitHub-Server.v2", [("Get-Issue", "get_issue"), ("class", "class_"), ("2fa", "_2fa"),
                                 ("get_issue", "get_issue_2")], alias="github_server_v2")


class GlobalsTest(unittest.TestCase):
    def setUp(self):
        self.a = Agent()

    def tearDown(self):
        self.a.close()

    def test_globals(self):
        r = self.a.exec(
            "import mcp, mcp.runtime\n"
            "from mcp import runtime as rt\n"
            "print(runtime is mcp.runtime is rt, type(runtime).__name__)\n"
            "print(sorted(mcp_servers), LOADED_MCP_SERVERS)\n"
            "print(mcp_filesystem, mcp_github_server_v2)\n"
            "for n in ('save_memory', 'load_memory', 'update_memory', 'delete_memory', 'list_memories',\n"
            "          'memory_exists', 'get_memory_info', 'save_tool'):\n"
            "    assert callable(globals()[n]) and getattr(runtime, n) is globals()[n], n\n"
            "print(issubclass(runtime.MCPError, RuntimeError))\n",
            servers=[FS, GH])
        self.assertEqual(r.stdout,
                         "True module\n"
                         "['GitHub-Server.v2', 'filesystem'] ('filesystem', 'GitHub-Server.v2')\n"
                         "<MCP server 'filesystem': 2 tools> <MCP server 'GitHub-Server.v2': 4 tools>\n"
                         "True\n", r)

    def test_mcp_shadows_real_package(self):
        r = self.a.exec("import mcp\nprint(mcp.__all__)\ntry:\n    import mcp.client\n"
                        "except ImportError as e:\n    print(type(e).__name__)\n")
        self.assertEqual(r.stdout, "['runtime', 'servers']\nModuleNotFoundError\n", r)

    def test_proxies_rebuilt_every_exec(self):
        self.a.exec("pass", servers=[FS, GH])
        r = self.a.exec(
            "import sys\n"
            "print(sorted(k for k in globals() if k.startswith('mcp_')))\n"
            "print(LOADED_MCP_SERVERS, sorted(k for k in sys.modules if k.startswith('mcp.servers.')))\n"
            "import mcp.servers\nprint(hasattr(mcp.servers, 'filesystem'))\n",
            servers=[GH])
        self.assertEqual(r.stdout,
                         "['mcp_github_server_v2', 'mcp_servers']\n"
                         "('GitHub-Server.v2',) ['mcp.servers.github_server_v2']\n"
                         "False\n", r)
        # A user variable that happens to be called mcp_<x> is left alone.
        self.a.exec("mcp_mine = 5", servers=[FS])
        r = self.a.exec("print(mcp_mine, 'mcp_filesystem' in globals())", servers=[])
        self.assertEqual(r.stdout, "5 False\n")

    def test_upstream_environment(self):
        disc = [{"name": "filesystem", "description": "files"}, {"name": "idle", "description": ""}]
        code = ("import json, os, subprocess\n"
                "a = json.loads(os.environ['MCP_AVAILABLE_SERVERS'])\n"
                "print([(m['name'], m['alias'], [t['name'] for t in m['tools']]) for m in a])\n"
                "print(a[0]['tools'][0]['input_schema'] if a else None)\n"
                "print(json.loads(os.environ['MCP_DISCOVERED_SERVERS']))\n"
                "out = subprocess.run(['/bin/sh', '-c', 'echo \"$MCP_DISCOVERED_SERVERS\"'], capture_output=True, text=True)\n"
                "print(out.stdout.strip())\n")
        r = self.a.exec(code, servers=[FS], discovered=disc)
        self.assertEqual(r.stdout.splitlines(), [
            "[('filesystem', 'filesystem', ['read_file', 'write_file'])]",
            "{'type': 'object'}",
            "{'filesystem': 'files', 'idle': ''}",
            '{"filesystem":"files","idle":""}',
        ], r)
        # The next exec's servers replace them.
        r = self.a.exec(code, servers=[], discovered=disc)
        self.assertEqual(r.stdout.splitlines()[0], "[]", r)

    def test_upstream_environment_fits_in_one_variable(self):
        # 2,000 tools with 1 KiB schemas: far past the 128 KiB a variable
        # may hold, so the schemas are left out and subprocesses still run.
        schema = {"type": "object", "description": "x" * 1024}
        big = server("big", [{"name": "t%d" % i, "description": "tool %d" % i, "input_schema": schema}
                             for i in range(2000)])
        r = self.a.exec(
            "import json, os, subprocess\n"
            "v = os.environ['MCP_AVAILABLE_SERVERS']\n"
            "a = json.loads(v)\n"
            "print(len(v) < 128 * 1024, len(a[0]['tools']), sorted(a[0]['tools'][0]))\n"
            "print(len(runtime.list_loaded_server_metadata()[0]['tools'][0]['input_schema']['description']))\n"
            "print(subprocess.run(['/bin/true']).returncode)\n", servers=[big])
        self.assertEqual(r.stdout.splitlines(), ["True 2000 ['alias', 'description', 'name']", "1024", "0"], r)

    def test_aliases_from_sandboxd_are_kept(self):
        # The agent has no alias rules: it uses discoveryd's, as sent.
        s = server("weird", [{"name": "t", "alias": "tee", "description": "", "input_schema": {}},
                             ("class", "class_")], alias="w")
        r = self.a.exec("print(LOADED_MCP_SERVERS, dir(mcp_w), runtime.describe_server('w')['alias'])\n"
                        "import mcp.servers.w\nprint(sorted(mcp.servers.w.TOOL_MAP))", servers=[s])
        self.assertEqual(r.stdout, "('weird',) ['class_', 'list_tools', 'tee'] w\n['class_', 'tee']\n", r)

    def test_server_modules(self):
        r = self.a.exec(
            "from mcp.servers.github_server_v2 import *\n"
            "import mcp.servers.github_server_v2 as m\n"
            "print(sorted(m.__all__))\n"
            "print(sorted(TOOL_MAP), [t['name'] for t in TOOLS])\n"
            "print(get_issue.__doc__)\n"
            "res = await class_(n=1)\n"
            "print(res['content'][0]['text'])\n", servers=[GH])
        self.assertEqual(r.stdout,
                         "['TOOLS', 'TOOL_MAP', '_2fa', 'class_', 'get_issue', 'get_issue_2']\n"
                         "['_2fa', 'class_', 'get_issue', 'get_issue_2'] ['Get-Issue', 'class', '2fa', 'get_issue']\n"
                         "the Get-Issue tool\n"
                         '{"server": "GitHub-Server.v2", "tool": "class", "arguments": {"n": 1}}\n', r)


class ProgressTest(unittest.TestCase):
    def setUp(self):
        self.a = Agent()

    def tearDown(self):
        self.a.close()

    def test_progress_frames_are_spaced_out_and_the_end_goes(self):
        r = self.a.exec(
            "for i in range(1000):\n"
            "    runtime.progress(i, 999, 'item %d' % i)\n")
        self.assertTrue(r.ok, r)
        self.assertLess(len(r.progress), 10, r.progress)  # ten a second at most
        self.assertEqual(r.progress[0], {"t": "progress", "id": r.done["id"], "done": 0.0, "total": 999.0, "msg": "item 0"})
        self.assertEqual(r.progress[-1]["done"], 999.0)

    def test_progress_checks_its_arguments(self):
        r = self.a.exec(
            "for args in (('1',), (1, 'x'), (True,), (1, None, 5)):\n"
            "    try:\n"
            "        runtime.progress(*args)\n"
            "    except TypeError as e:\n"
            "        print(e)\n"
            "try:\n"
            "    runtime.progress(float('nan'))\n"
            "except ValueError as e:\n"
            "    print(e)\n"
            "runtime.progress(3, message='x' * 500)\n")
        self.assertTrue(r.ok, r)
        self.assertEqual(r.stdout.splitlines(), [
            "progress(done, total=None, message=''): done must be a number, not str",
            "progress(): total must be a number or None, not str",
            "progress(done, total=None, message=''): done must be a number, not bool",
            "progress(): message must be a string, not int",
            "progress(): done and total must be finite numbers",
        ])
        self.assertEqual(len(r.progress), 1)
        self.assertEqual(len(r.progress[0]["msg"]), 200)


class CallTest(unittest.TestCase):
    def setUp(self):
        self.a = Agent()

    def tearDown(self):
        self.a.close()

    def test_proxy_call(self):
        r = self.a.exec(
            "import json\n"
            "res = await mcp_filesystem.read_file(path='/x')\n"
            "print(res['content'][0]['text'])\n"
            "res = await mcp_filesystem.read_file({'path': '/y'})\n"
            "print(res['content'][0]['text'])\n"
            "res = await runtime.call_tool('filesystem', 'write_file', {'p': 1})\n"
            "print(json.loads(res['content'][0]['text'])['tool'])\n"
            "print((await mcp_filesystem.list_tools())[0]['name'])\n",
            servers=[FS])
        self.assertTrue(r.ok, r)
        self.assertEqual(r.stdout.splitlines()[:2], [
            '{"server": "filesystem", "tool": "read_file", "arguments": {"path": "/x"}}',
            '{"server": "filesystem", "tool": "read_file", "arguments": {"path": "/y"}}'])
        self.assertEqual([c["m"] for c in r.calls], ["call_tool", "call_tool", "call_tool", "list_tools"])
        self.assertEqual(r.calls[0]["exec"], 1)

    def test_thread_of_an_earlier_exec_calls_under_no_exec(self):
        # A thread the first exec (no servers) left waiting makes its call
        # while the second (with filesystem) runs: its frame names no exec,
        # so that sandboxd refuses it rather than allow the second's
        # servers. A thread-pool worker acts for the exec that runs now.
        r = self.a.exec(
            "import asyncio, threading, concurrent.futures\n"
            "go, came = threading.Event(), threading.Event()\n"
            "def later():\n"
            "    go.wait()\n"
            "    try:\n"
            "        asyncio.run(runtime.call_tool('filesystem', 'read_file', {'path': '/late'}))\n"
            "    except Exception:\n"
            "        pass\n"
            "    came.set()\n"
            "threading.Thread(target=later, daemon=True).start()\n"
            "pool = concurrent.futures.ThreadPoolExecutor(1)\n"
            "pool.submit(lambda: None).result()\n")
        self.assertTrue(r.ok, r)
        r = self.a.exec(
            "go.set(); came.wait(10)\n"
            "pool.submit(asyncio.run, runtime.call_tool('filesystem', 'read_file', {'path': '/pool'})).result()\n"
            "await mcp_filesystem.read_file(path='/main')\n",
            servers=[FS])
        self.assertTrue(r.ok, r)
        execs = {c["p"]["arguments"]["path"]: c["exec"] for c in r.calls}
        self.assertEqual(execs, {"/late": 0, "/pool": 2, "/main": 2}, r.calls)

    def test_failed_call_raises_mcperror(self):
        r = self.a.exec(
            "try:\n"
            "    await runtime.call_tool('other', 'x', {})\n"
            "except runtime.MCPError as e:\n"
            "    print(type(e).__name__, isinstance(e, RuntimeError), e.code, e)\n"
            "try:\n"
            "    await runtime.call_tool('filesystem', 'x', [1])\n"
            "except runtime.MCPError as e:\n"
            "    print(e)\n"
            "try:\n"
            "    await runtime.call_tool('filesystem', 'x', {'s': {1, 2}})\n"
            "except TypeError as e:\n"
            "    print(e)\n",
            servers=[FS])
        self.assertEqual(r.stdout,
                         "PermissionDeniedError True permission_denied Server 'other' is not available; "
                         "allowed: ['filesystem']\n"
                         "Arguments must be an object (dict), not list\n"
                         "call_tool: parameters must be JSON serialisable: value of type set is not "
                         "JSON serialisable\n", r)

    def test_large_payloads_both_ways(self):
        big = "é" * (8 << 20)  # 16 MiB of UTF-8 each way

        class BigHost(FakeHost):
            def handle(self, m, p):
                if m == "call_tool":
                    return True, {"content": [{"type": "text", "text": big}], "echo": len(p["arguments"]["s"])}
                return FakeHost.handle(self, m, p)

        a = Agent(BigHost())
        try:
            r = a.exec("res = await mcp_filesystem.read_file(s='x' * (20 << 20))\n"
                       "print(len(res['content'][0]['text']), res['echo'])", servers=[FS], timeout=120)
            self.assertEqual(r.stdout, "%d %d\n" % (8 << 20, 20 << 20), r)
        finally:
            a.close()

    def test_unserved_method(self):
        host = FakeHost()
        host.handle = lambda m, p: (False, "sandboxd does not serve %s yet" % m)
        a = Agent(host)
        try:
            r = a.exec("print(await runtime.list_servers())")
            self.assertEqual(r.error, "MCPError: sandboxd does not serve list_servers yet")
        finally:
            a.close()

    def test_gather_is_concurrent(self):
        class SlowHost(FakeHost):
            def __init__(self):
                super().__init__()
                self.lock = threading.Lock()
                self.in_flight = 0
                self.max_in_flight = 0

            def on_call(self, agent, msg):
                with self.lock:
                    self.in_flight += 1
                    self.max_in_flight = max(self.max_in_flight, self.in_flight)

                def answer():
                    with self.lock:
                        self.in_flight -= 1
                    FakeHost.on_call(self, agent, msg)

                # Answer in reverse order of arrival to check the matching.
                threading.Timer(0.4 - 0.1 * int(msg["p"]["arguments"]["n"]), answer).start()

        host = SlowHost()
        a = Agent(host)
        try:
            r = a.exec(
                "import asyncio, json\n"
                "rs = await asyncio.gather(*(mcp_filesystem.read_file(n=i) for i in range(3)))\n"
                "print([json.loads(x['content'][0]['text'])['arguments']['n'] for x in rs])\n",
                servers=[FS])
            self.assertEqual(r.stdout, "[0, 1, 2]\n", r)
            # All three were in flight at once: the calls ran concurrently
            # (a timing bound would say the same, and fail on a busy host).
            self.assertEqual(host.max_in_flight, 3)
        finally:
            a.close()

    def test_calls_from_threads_and_sync_helpers_in_async_code(self):
        r = self.a.exec(
            "import threading\n"
            "out = []\n"
            "ts = [threading.Thread(target=lambda i=i: out.append(save_memory('k%d' % i, i))) for i in range(5)]\n"
            "[t.start() for t in ts]; [t.join() for t in ts]\n"
            "print(sorted(out))\n"
            "await asyncio.sleep(0) if 'asyncio' in globals() else None\n"
            "print(load_memory('k3'))\n")
        self.assertEqual(r.stdout, "[\"Memory 'k0' saved.\", \"Memory 'k1' saved.\", \"Memory 'k2' saved.\", "
                         "\"Memory 'k3' saved.\", \"Memory 'k4' saved.\"]\n3\n", r)


class DiscoveryTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.a = Agent()

    @classmethod
    def tearDownClass(cls):
        cls.a.close()

    def run_code(self, code):
        disc = [{"name": "filesystem", "description": "files"}, {"name": "GitHub-Server.v2", "description": "gh"},
                {"name": "idle", "description": "not loaded"}]
        r = self.a.exec(code, servers=[FS, GH], discovered=disc)
        self.assertTrue(r.ok, r)
        return r

    def test_sync_helpers(self):
        r = self.run_code(
            "print(runtime.list_servers_sync())\n"
            "print(runtime.discovered_servers())\n"
            "print(runtime.discovered_servers(detailed=True)[2])\n"
            "print([t['alias'] for t in runtime.list_tools_sync('filesystem')])\n"
            "print(runtime.list_tools_sync('github_server_v2')[0]['input_schema'])\n"
            "d = runtime.describe_server('filesystem'); print(d['cwd'], d['alias'], d['description'])\n"
            "d['tools'].clear(); print(len(runtime.describe_server('filesystem')['tools']))\n"
            "print(len(runtime.list_loaded_server_metadata()))\n"
            "print(runtime.query_tool_docs_sync('filesystem', 'READ_FILE'))\n"
            "print(runtime.query_tool_docs_sync('github_server_v2', 'Get-Issue', detail='full'))\n"
            "print(len(runtime.query_tool_docs_sync('filesystem')))\n")
        self.assertEqual(r.stdout.splitlines(), [
            "('filesystem', 'GitHub-Server.v2')",
            "('filesystem', 'GitHub-Server.v2', 'idle')",
            "{'name': 'idle', 'description': 'not loaded'}",
            "['read_file', 'write_file']",
            "{'type': 'object'}",
            "/srv/filesystem filesystem filesystem server",
            "2",
            "2",
            "[{'server': 'filesystem', 'serverAlias': 'filesystem', 'tool': 'read_file', 'toolAlias': 'read_file', "
            "'description': 'the read_file tool'}]",
            "[{'server': 'GitHub-Server.v2', 'serverAlias': 'github_server_v2', 'tool': 'Get-Issue', "
            "'toolAlias': 'get_issue', 'description': 'the Get-Issue tool', 'inputSchema': {'type': 'object'}}]",
            "2",
        ])

    def test_sync_helper_errors(self):
        r = self.run_code(
            "for f in (lambda: runtime.list_tools_sync(), lambda: runtime.describe_server('idle'),\n"
            "          lambda: runtime.query_tool_docs_sync('filesystem', 'nope'),\n"
            "          lambda: runtime.query_tool_docs_sync('filesystem', detail='all'),\n"
            "          lambda: runtime.query_tool_docs_sync('filesystem', 3)):\n"
            "    try:\n"
            "        f()\n"
            "    except Exception as e:\n"
            "        print(type(e).__name__, e)\n")
        self.assertEqual(r.stdout.splitlines(), [
            "MCPError list_tools_sync needs a server name; loaded: filesystem, GitHub-Server.v2",
            "MCPError Server 'idle' is not loaded in this call (loaded: filesystem, GitHub-Server.v2). "
            "List it in run_python's servers=[...] to use it.",
            "MCPError Tool 'nope' not found on server 'filesystem' (tools: read_file, write_file)",
            "ValueError detail must be 'summary' or 'full', not 'all'",
            "MCPError 'tool' must be a string when provided, not int",
        ])

    def test_unloaded_server_says_why(self):
        # A name whose config entry discoveryd did not load: the sync
        # helpers say where and why, not to list it in servers=[...]; the
        # next exec's metadata replaces the list.
        code = ("for f in (lambda: runtime.describe_server('every'), lambda: runtime.list_tools_sync('every'),\n"
                "          lambda: runtime.query_tool_docs_sync('every')):\n"
                "    try:\n"
                "        f()\n"
                "    except Exception as e:\n"
                "        print(type(e).__name__, e)\n")
        r = self.a.exec(code, servers=[FS], unloaded=[
            {"name": "every", "source": "/p/.mcp.json", "reason": "undefined variable(s) TOKEN"}])
        self.assertTrue(r.ok, r)
        self.assertEqual(r.stdout.splitlines(), [
            "MCPError Server 'every' is not available: its config entry in /p/.mcp.json was not loaded: "
            "undefined variable(s) TOKEN"] * 3)
        r = self.a.exec(code, servers=[FS])
        self.assertTrue(r.ok, r)
        self.assertEqual(r.stdout.splitlines(), [
            "MCPError Server 'every' is not loaded in this call (loaded: filesystem). "
            "List it in run_python's servers=[...] to use it."] * 3)

    def test_async_helpers(self):
        r = self.run_code(
            "print(await runtime.list_servers())\n"
            "print(await runtime.list_tools('filesystem'))\n"
            "print(await runtime.query_tool_docs('filesystem', 'read_file', detail='full'))\n"
            "print(await runtime.query_tool_docs('filesystem'))\n"
            "r = await runtime.search_tool_docs('read', limit=50)\n"
            "print(r, type(r).__name__, isinstance(r, list), r.total, r.truncated)\n")
        self.assertEqual(r.stdout.splitlines(), [
            "('filesystem', 'GitHub-Server.v2')",
            "[{'name': 'echo', 'inputSchema': {'type': 'object'}}]",
            "{'server': 'filesystem', 'tool': 'read_file', 'detail': 'full'}",
            "[{'server': 'filesystem', 'tool': 'echo', 'detail': 'summary'}]",
            "[{'query': 'read', 'limit': 20, 'match': 'name: read'}] ToolDocs True 1 False",
        ])
        self.assertEqual([(c["m"], c["p"]) for c in r.calls], [
            ("list_servers", {}),
            ("list_tools", {"server": "filesystem"}),
            ("query_tool_docs", {"server": "filesystem", "detail": "full", "tool": "read_file"}),
            ("query_tool_docs", {"server": "filesystem", "detail": "summary"}),
            ("search_tool_docs", {"query": "read", "limit": 20, "detail": "summary"}),
        ])

    def test_search_sync_and_async_agree(self):
        # Both ask sandboxd, whose search spans every configured server.
        r = self.run_code(
            "a = await runtime.search_tool_docs('read', limit=3, detail='full')\n"
            "s = runtime.search_tool_docs_sync('read', limit=3, detail='full')\n"
            "print(a == s, type(s).__name__, s.total, s.truncated, s.unindexed)\n"
            "for bad in (lambda: runtime.search_tool_docs_sync('x', limit='3'),\n"
            "            lambda: runtime.search_tool_docs_sync('x', detail='all')):\n"
            "    try:\n"
            "        bad()\n"
            "    except Exception as e:\n"
            "        print(type(e).__name__, e)\n")
        self.assertEqual(r.stdout.splitlines(), [
            "True ToolDocs 1 False ()",
            "TypeError limit must be an int, not str",
            "ValueError detail must be 'summary' or 'full', not 'all'",
        ])
        self.assertEqual([(c["m"], c["p"]) for c in r.calls], [
            ("search_tool_docs", {"query": "read", "limit": 3, "detail": "full"}),
            ("search_tool_docs", {"query": "read", "limit": 3, "detail": "full"}),
        ])

    def test_capability_summary(self):
        r = self.run_code("print(runtime.capability_summary())")
        for want in ("PYTHON SANDBOX MANUAL", "servers=[", "Servers loaded now: filesystem, GitHub-Server.v2",
                     "idle", "save_memory", "update_memory", "save_tool", "import user_tools",
                     "await mcp_<alias>", "MCPError", "Limits", "Persistent"):
            self.assertIn(want, r.stdout)
        self.assertLess(len(r.stdout), 3000)


GHOST_ERROR = {"code": "unavailable",
               "message": "unavailable: MCP server failed to start: fork/exec /nonexistent/mcp-ghost: no such file"}
GHOST = server("ghost", error=GHOST_ERROR)  # its tools could not be listed for the exec


class GhostHost(FakeHost):
    """sandboxd with a server that fails to start: every call to it fails
    as it did when sandboxd listed its tools for the exec."""

    def handle(self, m, p):
        if p.get("server") == "ghost":
            return False, (GHOST_ERROR["code"], GHOST_ERROR["message"])
        return super().handle(m, p)


class FailedServerTest(unittest.TestCase):
    """A server that failed to load: the sync helpers and the proxy say so,
    with the error the async helpers raise, and the other servers work."""

    @classmethod
    def setUpClass(cls):
        cls.a = Agent(GhostHost())

    @classmethod
    def tearDownClass(cls):
        cls.a.close()

    def test_sync_helpers_raise_what_the_async_ones_raise(self):
        r = self.a.exec(
            "async def outcome(f):\n"
            "    try:\n"
            "        res = f()\n"
            "        if hasattr(res, '__await__'):\n"
            "            res = await res\n"
            "        return 'returned %r' % (res,)\n"
            "    except Exception as e:\n"
            "        return '%s %s %s' % (type(e).__name__, e.code, e)\n"
            "for f in (lambda: runtime.query_tool_docs('ghost'),\n"
            "          lambda: runtime.query_tool_docs_sync('ghost'),\n"
            "          lambda: runtime.query_tool_docs_sync('ghost', 'x'),\n"
            "          lambda: runtime.list_tools('ghost'),\n"
            "          lambda: runtime.list_tools_sync('ghost'),\n"
            "          lambda: runtime.describe_server('ghost'),\n"
            "          lambda: mcp_ghost.list_tools()):\n"
            "    print(await outcome(f))\n"
            "print(repr(mcp_ghost))\n"
            "print(repr(mcp_filesystem), len(runtime.query_tool_docs_sync('filesystem')))\n"
            "print(runtime.list_servers_sync())\n"
            "print([m.get('error') for m in runtime.list_loaded_server_metadata()])\n",
            servers=[FS, GHOST])
        self.assertTrue(r.ok, r)
        err = "UnavailableError unavailable " + GHOST_ERROR["message"]
        self.assertEqual(r.stdout.splitlines(), [err] * 7 + [
            "<MCP server 'ghost': failed to load (UnavailableError: %s)>" % GHOST_ERROR["message"],
            "<MCP server 'filesystem': 2 tools> 2",
            "('filesystem', 'ghost')",
            "[None, %r]" % GHOST_ERROR,
        ])

    def test_its_module_says_why_it_has_no_tools(self):
        r = self.a.exec(
            "import mcp.servers.ghost as g\n"
            "for f in (lambda: g.read_file, lambda: exec('from mcp.servers.ghost import read_file')):\n"
            "    try:\n"
            "        f()\n"
            "    except Exception as e:\n"
            "        print(type(e).__name__, e.code, e)\n"
            "print(g.TOOLS, hasattr(g, '_private'), hasattr(g, '__wrapped__'))\n"
            "from mcp.servers.filesystem import read_file\n"
            "print(read_file.__name__)\n",
            servers=[FS, GHOST])
        self.assertTrue(r.ok, r)
        err = ("UnavailableError unavailable server 'ghost' failed to load, so mcp.servers.ghost has no tool "
               "'read_file': " + GHOST_ERROR["message"])
        self.assertEqual(r.stdout.splitlines(), [err, err, "[] False False", "read_file"])

    def test_capability_summary_says_which_failed(self):
        r = self.a.exec("print(runtime.capability_summary())", servers=[FS, GHOST])
        self.assertIn("Servers loaded now: filesystem, ghost (failed to load: %s)\n" % GHOST_ERROR["message"],
                      r.stdout, r)

    def test_an_unknown_code_is_an_mcperror_with_that_code(self):
        bad = server("ghost", error={"code": "teapot", "message": "short and stout"})
        r = self.a.exec(
            "try:\n"
            "    runtime.list_tools_sync('ghost')\n"
            "except runtime.MCPError as e:\n"
            "    print(type(e).__name__, e.code, e)\n",
            servers=[bad])
        self.assertEqual(r.stdout, "MCPError teapot short and stout\n", r)


class NullHost(FakeHost):
    """A host that answers discovery lists with null, as sandboxd once did."""

    def handle(self, m, p):
        if m in ("list_servers", "list_tools"):
            return True, None
        return super().handle(m, p)


class EmptyRepliesTest(unittest.TestCase):
    def test_null_lists_read_back_empty(self):
        a = Agent(NullHost())
        try:
            r = a.exec("print(repr(await runtime.list_servers()), repr(await runtime.list_tools('filesystem')))",
                       servers=[FS])
        finally:
            a.close()
        self.assertEqual(r.stdout, "() []\n", r)


if __name__ == "__main__":
    unittest.main()
