// sdkclient.mjs drives codeexec with the official TypeScript MCP SDK v2
// client (@modelcontextprotocol/client), for the end-to-end tests.
//
//   node sdkclient.mjs '<spec JSON>'
//
// spec: {
//   "transport": "stdio" | "http",
//   "command": "...", "args": [...], "env": {...},   // stdio
//   "url": "http://127.0.0.1:PORT/mcp",               // http
//   "headers": {"Authorization": "Bearer ..."},        // http, optional
//   "negotiation": "auto" | "legacy" | {"pin": "2026-07-28"},
//   "calls": [{"name": "run_python", "arguments": {...}}, ...],
//   "reads": ["resource://...", ...],                   // optional
//   "elicit": ["accept", "decline", ...],               // optional
//   "readLinks": true                                   // optional
// }
//
// elicit, when present, declares the elicitation capability and answers
// the server's questions in turn with those actions (the last repeats):
// elicitation/create requests under the session-based revisions, the
// input requests of input_required results under 2026-07-28, which the
// SDK's driver fulfils and retries. Each question's params are kept.
//
// An argument whose value is "$session" is replaced by the session handle
// of the latest result that carried one (structuredContent.session), as a
// client of 2026-07-28 passes the handle back.
//
// With readLinks, the URI of every resource_link in the results is read
// too, after "reads".
//
// It connects, makes the calls in order, then reads the resources, and
// prints one JSON object: {"protocolVersion": "...", "results":
// [CallToolResult, ...], "elicitations": [params, ...], "reads": [{"uri", "result"} or {"uri", "error":
// {"code", "message", "data", "resourceNotFound"}}, ...]}: a read that
// fails is a result too; resourceNotFound says that the SDK raised its
// ResourceNotFoundError, which it does only when error.data.uri is there.
// Any other failure is printed as {"error": "..."} with exit code 1.
import { Client, ResourceNotFoundError, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";
import { StdioClientTransport } from "@modelcontextprotocol/client/stdio";

async function main() {
  const spec = JSON.parse(process.argv[2]);
  let transport;
  if (spec.transport === "http") {
    transport = new StreamableHTTPClientTransport(new URL(spec.url), { requestInit: { headers: spec.headers ?? {} } });
  } else {
    transport = new StdioClientTransport({ command: spec.command, args: spec.args ?? [], env: spec.env, stderr: "inherit" });
  }
  const mode = spec.negotiation ?? "legacy";
  const capabilities = spec.elicit ? { elicitation: { form: {} } } : {};
  const client = new Client({ name: "codeexec-e2e-sdk-v2", version: "1" }, { versionNegotiation: { mode }, capabilities });
  const elicitations = [];
  if (spec.elicit) {
    client.setRequestHandler("elicitation/create", async (request) => {
      const action = spec.elicit[Math.min(elicitations.length, spec.elicit.length - 1)];
      elicitations.push(request.params);
      return action === "accept" ? { action, content: {} } : { action };
    });
  }
  await client.connect(transport);
  const results = [];
  let session;
  for (const call of spec.calls ?? []) {
    const args = Object.fromEntries(Object.entries(call.arguments ?? {}).map(([k, v]) => [k, v === "$session" ? session : v]));
    const res = await client.callTool({ name: call.name, arguments: args });
    session = res?.structuredContent?.session ?? session;
    results.push(res);
  }
  const reads = [];
  const uris = [...(spec.reads ?? [])];
  if (spec.readLinks) {
    for (const res of results) {
      for (const c of res?.content ?? []) {
        if (c.type === "resource_link") uris.push(c.uri);
      }
    }
  }
  for (const uri of uris) {
    try {
      reads.push({ uri, result: await client.readResource({ uri }) });
    } catch (err) {
      reads.push({ uri, error: { code: err.code, message: err.message, data: err.data, resourceNotFound: err instanceof ResourceNotFoundError } });
    }
  }
  const out = { protocolVersion: client.getNegotiatedProtocolVersion(), results, reads, elicitations };
  await client.close();
  process.stdout.write(JSON.stringify(out) + "\n");
}

main().catch((err) => {
  process.stdout.write(JSON.stringify({ error: String(err && err.stack ? err.stack : err) }) + "\n");
  process.exit(1);
});
