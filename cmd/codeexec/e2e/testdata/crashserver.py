#!/usr/bin/env python3
"""A tiny MCP server over stdio (hand-written JSON-RPC) that crashes on demand.

Tools: echo(text) answers with the text and this process's pid; crash()
writes a line to stderr and exits with status 3 in the middle of the call,
without answering. With --die-on-start it writes a line to stderr and exits
with status 2 before answering anything; with --no-tools it lists no tools. The end-to-end tests use it to
check that a crash gives the sandbox a precise MCPError, that the next call
starts it again, and that a failed start is reported with its stderr.
"""
import json
import os
import sys
import threading

if "--die-on-start" in sys.argv:
    sys.stderr.write("crashserver: cannot open /nonexistent/state.db\n")
    sys.stderr.flush()
    sys.exit(2)

lock = threading.Lock()
tools = [
    {"name": "echo", "description": "Echo the text back with the server's pid.",
     "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}},
    {"name": "crash", "description": "Exit the server process in the middle of the call.",
     "inputSchema": {"type": "object", "properties": {}}},
]


def send(msg):
    with lock:
        sys.stdout.write(json.dumps(msg) + "\n")
        sys.stdout.flush()


def handle(msg):
    mid, method, params = msg.get("id"), msg.get("method"), msg.get("params") or {}
    if mid is None:
        return  # a notification
    if method == "initialize":
        result = {"protocolVersion": params.get("protocolVersion", "2025-06-18"),
                  "capabilities": {"tools": {}},
                  "serverInfo": {"name": "crashserver", "version": "1"}}
    elif method == "ping":
        result = {}
    elif method == "tools/list":
        result = {"tools": [] if "--no-tools" in sys.argv else tools}
    elif method == "tools/call":
        name, args = params.get("name"), params.get("arguments") or {}
        if name == "echo":
            result = {"content": [{"type": "text", "text": "%s (pid %d)" % (args.get("text", ""), os.getpid())}]}
        elif name == "crash":
            sys.stderr.write("crashserver: crashing on purpose\n")
            sys.stderr.flush()
            os._exit(3)
        else:
            send({"jsonrpc": "2.0", "id": mid, "error": {"code": -32602, "message": "Unknown tool: %s" % name}})
            return
    else:
        send({"jsonrpc": "2.0", "id": mid, "error": {"code": -32601, "message": "Method not found: %s" % method}})
        return
    send({"jsonrpc": "2.0", "id": mid, "result": result})


for line in sys.stdin:
    line = line.strip()
    if line:
        handle(json.loads(line))
