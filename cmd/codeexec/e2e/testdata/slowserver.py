#!/usr/bin/env python3
"""A tiny MCP server over stdio (hand-written JSON-RPC) that is slow on cue.

It has one tool, ping_<name>, which answers "pong from <name>". It appends
what it does ("started", "initialize", "answered initialize", "listed") to
DIR/<name>.log, so that a test can tell what it had done when a call
returned. Options:

  --name NAME     its name (default "slow")
  --dir DIR       where its log and cue files are
  --hold          answers initialize only once DIR/release exists
  --hold-list     answers tools/list only once DIR/release exists
  --peers A,B,C   answers initialize only once every peer has received its
                  own initialize (DIR/<peer>.init exists): servers started
                  one after another never get there
  --exit          writes a line to stderr and exits with status 2 at once
"""
import json
import os
import sys
import time

args = sys.argv[1:]


def opt(name, default=""):
    return args[args.index(name) + 1] if name in args else default


name, cue = opt("--name", "slow"), opt("--dir", ".")


def log(event):
    with open(os.path.join(cue, name + ".log"), "a") as f:
        f.write(event + "\n")


def wait_for(paths):
    while not all(os.path.exists(p) for p in paths):
        time.sleep(0.02)


log("started")
if "--exit" in args:
    sys.stderr.write("%s: cannot open /nonexistent/config\n" % name)
    sys.stderr.flush()
    sys.exit(2)


def send(msg):
    sys.stdout.write(json.dumps(msg) + "\n")
    sys.stdout.flush()


for line in sys.stdin:
    msg = json.loads(line)
    mid, method = msg.get("id"), msg.get("method")
    if mid is None:
        continue
    if method == "initialize":
        log("initialize")
        open(os.path.join(cue, name + ".init"), "w").close()
        if "--hold" in args:
            wait_for([os.path.join(cue, "release")])
        if "--peers" in args:
            wait_for([os.path.join(cue, p + ".init") for p in opt("--peers").split(",")])
        send({"jsonrpc": "2.0", "id": mid, "result": {
            "protocolVersion": msg["params"]["protocolVersion"], "capabilities": {"tools": {}},
            "serverInfo": {"name": name, "version": "1"}}})
        log("answered initialize")
    elif method == "tools/list":
        log("list")
        if "--hold-list" in args:
            wait_for([os.path.join(cue, "release")])
        send({"jsonrpc": "2.0", "id": mid, "result": {"tools": [{
            "name": "ping_" + name, "description": "Answer pong.", "inputSchema": {"type": "object", "properties": {}}}]}})
        log("listed")
    elif method == "tools/call":
        send({"jsonrpc": "2.0", "id": mid, "result": {"content": [{"type": "text", "text": "pong from " + name}]}})
    else:
        send({"jsonrpc": "2.0", "id": mid, "error": {"code": -32601, "message": "Method not found: " + method}})
