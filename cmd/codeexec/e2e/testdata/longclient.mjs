// longclient.mjs runs long jobs through codeexec with the official
// TypeScript MCP SDK v2 client (@modelcontextprotocol/client), as a model
// would: each call under the SDK's default request timeout (60 s, as
// Claude Code's), and, while a result says "running", calls with code ""
// until the run ends. For the end-to-end tests of long runs.
//
//   node longclient.mjs '<spec JSON>'
//
// spec: {
//   "transport": "stdio" | "http",
//   "command": "...", "args": [...], "env": {...},   // stdio
//   "url": "http://127.0.0.1:PORT/mcp",               // http
//   "urls": ["...", "..."],                           // http: each call goes to the next, round robin
//   "negotiation": "auto" | "legacy" | {"pin": "2026-07-28"},
//   "timeoutMs": 60000,                                // each request's timeout
//   "jobs": [{"arguments": {...}, "progress": true}]  // run to the end, in order
// }
//
// Arguments "$session" are the handle of the latest result that carried
// one. It prints {"calls": [{"job", "ms" (since the start), "result",
// "progress": [{"ms", "progress", "total", "message"}]}]}: every call,
// with the progress notifications that arrived during it; a failure is
// {"error": "..."} with exit code 1.
import { Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";
import { StdioClientTransport } from "@modelcontextprotocol/client/stdio";

async function connect(spec, url) {
  let transport;
  if (spec.transport === "http") {
    transport = new StreamableHTTPClientTransport(new URL(url));
  } else {
    transport = new StdioClientTransport({ command: spec.command, args: spec.args ?? [], env: spec.env, stderr: "inherit" });
  }
  const client = new Client({ name: "codeexec-e2e-long", version: "1" }, { versionNegotiation: { mode: spec.negotiation ?? "legacy" } });
  await client.connect(transport);
  return client;
}

async function main() {
  const spec = JSON.parse(process.argv[2]);
  const urls = spec.urls ?? [spec.url];
  const clients = [];
  for (const url of urls) {
    clients.push(await connect(spec, url));
  }
  const start = Date.now();
  const calls = [];
  let session;
  let n = 0;
  const call = async (job, args, progress) => {
    const events = [];
    const opts = { timeout: spec.timeoutMs ?? 60000 };
    if (progress) {
      opts.onprogress = (p) => events.push({ ms: Date.now() - start, ...p });
    }
    const client = clients[n++ % clients.length];
    const resolved = Object.fromEntries(Object.entries(args).map(([k, v]) => [k, v === "$session" ? session : v]));
    const result = await client.callTool({ name: "run_python", arguments: resolved }, opts);
    session = result?.structuredContent?.session ?? session;
    calls.push({ job, ms: Date.now() - start, result, progress: events });
    return result;
  };
  for (const [i, job] of (spec.jobs ?? []).entries()) {
    let res = await call(i, job.arguments, job.progress);
    for (let k = 0; res?.structuredContent?.status === "running" && k < 100; k++) {
      const wait = { code: "" };
      if (session) {
        wait.session = session;
      }
      res = await call(i, wait, job.progress);
    }
  }
  for (const c of clients) {
    await c.close();
  }
  process.stdout.write(JSON.stringify({ calls }) + "\n");
}

main().catch((err) => {
  process.stdout.write(JSON.stringify({ error: String(err && err.stack ? err.stack : err) }) + "\n");
  process.exit(1);
});
