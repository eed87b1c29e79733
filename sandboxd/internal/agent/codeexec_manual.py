"""The sandbox's manual, which runtime.capability_summary() fills in."""

MANUAL = """--- PYTHON SANDBOX MANUAL ---
Persistent Python session (like a Jupyter kernel): variables, imports and
functions survive between run_python calls. Top-level `await` works.

Servers loaded now: %(loaded)s
Configured servers: %(known)s
Servers must be listed in EVERY call: run_python(code, servers=["name", ...]).
Only listed servers get proxies; the set is rebuilt on each call.

Discover (sync helpers read this call's metadata, async ones ask the host):
  runtime.discovered_servers(detailed=True)    every configured server
  runtime.list_servers_sync()                  servers loaded for this call
  runtime.list_tools_sync("server")            name, alias, description, schema
  runtime.search_tool_docs_sync("words", limit=5, detail="summary"|"full")
      every configured server; a hit's loadWith is the servers=[...] to pass
  runtime.query_tool_docs_sync("server", tool=None, detail="full")
  runtime.describe_server("server")            includes the server's cwd

Call tools (async; a result is a CallToolResult dict):
  res = await mcp_<alias>.<tool_alias>(arg=value); res["content"][0]["text"]
  await runtime.call_tool("server", "tool", {"arg": value})
  A failed call (isError too) raises runtime.ToolError (.server .tool
  .message .structured_content); raise_on_error=False returns the dict.
  Arguments are checked against the tool's schema first.
  asyncio.gather(...) runs calls concurrently. Failures raise runtime.MCPError
  subclasses by kind (e.code): NotFoundError, UnavailableError, ...
  from mcp.servers.<alias> import *   one async function per tool.

Long runs: a call still running at the yield time returns "running";
code="" waits for it, cancel=True stops it.
  runtime.progress(done, total=None, message="")   tell the client

Sessions: variables, imports, functions, classes and /workspace files are
checkpointed after each call and come back after a timeout or crash.
  runtime.end_session()    end this session and delete its checkpoint

Memory (JSON values, kept across sessions):
  save_memory(key, value, *, metadata=None)  load_memory(key, *, default=None)
  update_memory(key, fn)  (atomic: retried on concurrent change)
  delete_memory(key)  list_memories()  memory_exists(key)  get_memory_info(key)

Saved tools (kept across sessions):
  save_tool(func)   then in any later session: func(...) or import user_tools
  It carries the imports, constants and helpers func uses.
  runtime.list_saved_tools()   runtime.delete_saved_tool(name)

Limits (defaults): no network (MCP servers reach out); read-only root;
512 MiB of memory, 128 processes, a 30 s timeout of at most 3600 s. A
result keeps the head and tail of 40,000 characters of output, the whole
in the file its marker names. /workspace (128 MiB) is checkpointed,
/tmp is not. The last expression is shown (a
trailing ; hides it); display(x) and figures come back as images,
/workspace/out files as resources; host mounts are under /mnt.
"""
