#!/usr/bin/env python3
"""A minimal MCP server over stdio, hand-written JSON-RPC, for tests.

Tools: echo(text), fail(), sleep(seconds), crash(code), env(), add_tool(name).
`crash` writes to stderr and exits mid-call; `add_tool` registers a tool and
sends notifications/tools/list_changed. FAKESERVER_CACHE_SCOPE and
FAKESERVER_TTL_MS in its environment add cacheScope and ttlMs to its
tools/list answer. With --die-on-start the process
writes to stderr and exits before answering anything; with
--start-delay SECONDS it waits that long before reading its input, like a
server that is slow to start.
"""
import json
import os
import sys
import threading
import time

if "--die-on-start" in sys.argv:
    sys.stderr.write("fakeserver: cannot open database /nonexistent/db\n")
    sys.stderr.flush()
    sys.exit(2)

if "--start-delay" in sys.argv:
    time.sleep(float(sys.argv[sys.argv.index("--start-delay") + 1]))

lock = threading.Lock()
schema = {"type": "object", "properties": {}}
tools = [
    {"name": "echo", "description": "Echo the text back.", "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}},
    {"name": "fail", "description": "Always reports a tool error.", "inputSchema": schema},
    {"name": "sleep", "description": "Sleep for some seconds.", "inputSchema": {"type": "object", "properties": {"seconds": {"type": "number"}}}},
    {"name": "crash", "description": "Exit the process mid-call.", "inputSchema": {"type": "object", "properties": {"code": {"type": "integer"}}}},
    {"name": "env", "description": "Return the environment.", "inputSchema": schema},
    {"name": "add_tool", "description": "Register a new tool.", "inputSchema": {"type": "object", "properties": {"name": {"type": "string"}}}},
]


def send(msg):
    with lock:
        sys.stdout.write(json.dumps(msg) + "\n")
        sys.stdout.flush()


def text(t, is_error=False):
    r = {"content": [{"type": "text", "text": t}]}
    if is_error:
        r["isError"] = True
    return r


def call(name, args):
    if name == "echo":
        return text(str(args.get("text", "")))
    if name == "fail":
        return text("this tool always fails", True)
    if name == "sleep":
        time.sleep(float(args.get("seconds", 1)))
        return text("slept")
    if name == "crash":
        sys.stderr.write("fakeserver: crashing on purpose\n")
        sys.stderr.flush()
        os._exit(int(args.get("code", 3)))
    if name == "env":
        return {"content": [{"type": "text", "text": json.dumps(dict(os.environ))}], "structuredContent": dict(os.environ)}
    if name == "add_tool":
        tools.append({"name": args["name"], "description": "added at runtime", "inputSchema": schema})
        send({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"})
        return text("added")
    return None


def handle(msg):
    mid, method, params = msg.get("id"), msg.get("method"), msg.get("params") or {}
    if mid is None:
        return
    if method == "initialize":
        result = {"protocolVersion": params.get("protocolVersion", "2025-06-18"),
                  "capabilities": {"tools": {"listChanged": True}},
                  "serverInfo": {"name": "fakeserver", "version": "1"}}
    elif method == "ping":
        result = {}
    elif method == "tools/list":
        result = {"tools": list(tools)}
        # MCP 2026-07-28's cache hints, when the test asks for them.
        if os.environ.get("FAKESERVER_CACHE_SCOPE"):
            result["cacheScope"] = os.environ["FAKESERVER_CACHE_SCOPE"]
        if os.environ.get("FAKESERVER_TTL_MS"):
            result["ttlMs"] = int(os.environ["FAKESERVER_TTL_MS"])
    elif method == "tools/call":
        result = call(params.get("name"), params.get("arguments") or {})
        if result is None:
            send({"jsonrpc": "2.0", "id": mid, "error": {"code": -32602, "message": "Unknown tool: %s" % params.get("name")}})
            return
    else:
        send({"jsonrpc": "2.0", "id": mid, "error": {"code": -32601, "message": "Method not found: %s" % method}})
        return
    send({"jsonrpc": "2.0", "id": mid, "result": result})


for line in sys.stdin:
    line = line.strip()
    if not line:
        continue
    msg = json.loads(line)
    if isinstance(msg, dict) and msg.get("method") == "tools/call":
        threading.Thread(target=handle, args=(msg,), daemon=True).start()
    else:
        handle(msg)
