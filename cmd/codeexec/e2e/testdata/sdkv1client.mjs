// sdkv1client.mjs drives codeexec with the official TypeScript MCP SDK v1
// client (@modelcontextprotocol/sdk, installed with the reference
// servers), over stdio, for the end-to-end tests.
//
//   node sdkv1client.mjs '<spec JSON>'
//
// spec: {"command": "...", "args": [...], "env": {...}, "cwd": "...",
//        "calls": [{"name": "run_python", "arguments": {...}}, ...],
//        "reads": ["resource://...", ...], "listTools": true}
//
// It prints one JSON object: {"results":
// [CallToolResult, ...], "reads": [ReadResourceResult, ...], "tools":
// [Tool, ...]}; a failure is {"error": "..."} with exit code 1.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";

async function main() {
  const spec = JSON.parse(process.argv[2]);
  const transport = new StdioClientTransport({ command: spec.command, args: spec.args ?? [], env: spec.env, cwd: spec.cwd, stderr: "inherit" });
  const client = new Client({ name: "codeexec-e2e-sdk-v1", version: "1" });
  await client.connect(transport);
  const results = [];
  for (const call of spec.calls ?? []) {
    results.push(await client.callTool({ name: call.name, arguments: call.arguments ?? {} }, undefined, { timeout: 180000 }));
  }
  const reads = [];
  for (const uri of spec.reads ?? []) {
    reads.push(await client.readResource({ uri }));
  }
  const tools = spec.listTools ? (await client.listTools()).tools : [];
  const out = { results, reads, tools };
  await client.close();
  process.stdout.write(JSON.stringify(out) + "\n");
}

main().catch((err) => {
  process.stdout.write(JSON.stringify({ error: String(err && err.stack ? err.stack : err) }) + "\n");
  process.exit(1);
});
