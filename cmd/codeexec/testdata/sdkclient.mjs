// sdkclient.mjs drives codeexec with the official TypeScript MCP SDK v2
// client (@modelcontextprotocol/client), for the end-to-end tests.
//
//   node sdkclient.mjs '<spec JSON>'
//
// spec: {
//   "transport": "stdio" | "http",
//   "command": "...", "args": [...], "env": {...},   // stdio
//   "url": "http://127.0.0.1:PORT/mcp",               // http
//   "negotiation": "auto" | "legacy" | {"pin": "2026-07-28"},
//   "calls": [{"name": "run_python", "arguments": {...}}, ...]
// }
//
// It connects, makes the calls in order and prints one JSON object:
// {"protocolVersion": "...", "results": [CallToolResult, ...]}. Any
// failure is printed as {"error": "..."} with exit code 1.
import { Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";
import { StdioClientTransport } from "@modelcontextprotocol/client/stdio";

async function main() {
  const spec = JSON.parse(process.argv[2]);
  let transport;
  if (spec.transport === "http") {
    transport = new StreamableHTTPClientTransport(new URL(spec.url));
  } else {
    transport = new StdioClientTransport({ command: spec.command, args: spec.args ?? [], env: spec.env, stderr: "inherit" });
  }
  const mode = spec.negotiation ?? "legacy";
  const client = new Client({ name: "codeexec-e2e-sdk-v2", version: "1" }, { versionNegotiation: { mode } });
  await client.connect(transport);
  const results = [];
  for (const call of spec.calls ?? []) {
    results.push(await client.callTool({ name: call.name, arguments: call.arguments }));
  }
  const out = { protocolVersion: client.getNegotiatedProtocolVersion(), results };
  await client.close();
  process.stdout.write(JSON.stringify(out) + "\n");
}

main().catch((err) => {
  process.stdout.write(JSON.stringify({ error: String(err && err.stack ? err.stack : err) }) + "\n");
  process.exit(1);
});
