// sdkv1client.mjs drives codeexec with the official TypeScript MCP SDK v1
// client (@modelcontextprotocol/sdk, installed with the reference
// servers), over stdio or streamable HTTP, for the end-to-end tests.
//
//   node sdkv1client.mjs '<spec JSON>'
//
// spec: {"command": "...", "args": [...], "env": {...}, "cwd": "...",   // stdio
//        "url": "http://127.0.0.1:PORT/mcp", "headers": {...},          // http
//        "calls": [{"name": "run_python", "arguments": {...}}, ...],
//        "reads": ["resource://...", ...], "listTools": true,
//        "elicit": ["accept", "decline", ...]}
//
// elicit, when present, declares the elicitation capability and answers
// the server's elicitation/create requests in turn with those actions
// (the last one repeats); each request's params are kept.
//
// It prints one JSON object: {"results": [CallToolResult, ...],
// "reads": [ReadResourceResult, ...], "tools": [Tool, ...],
// "elicitations": [params, ...]}; a failure is {"error": "..."} with exit
// code 1.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { ElicitRequestSchema } from "@modelcontextprotocol/sdk/types.js";

async function main() {
  const spec = JSON.parse(process.argv[2]);
  const transport = spec.url
    ? new StreamableHTTPClientTransport(new URL(spec.url), { requestInit: { headers: spec.headers ?? {} } })
    : new StdioClientTransport({ command: spec.command, args: spec.args ?? [], env: spec.env, cwd: spec.cwd, stderr: "inherit" });
  const capabilities = spec.elicit ? { elicitation: {} } : {};
  const client = new Client({ name: "codeexec-e2e-sdk-v1", version: "1" }, { capabilities });
  const elicitations = [];
  if (spec.elicit) {
    client.setRequestHandler(ElicitRequestSchema, async (req) => {
      const action = spec.elicit[Math.min(elicitations.length, spec.elicit.length - 1)];
      elicitations.push(req.params);
      return action === "accept" ? { action, content: {} } : { action };
    });
  }
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
  const out = { results, reads, tools, elicitations };
  await client.close();
  process.stdout.write(JSON.stringify(out) + "\n");
}

main().catch((err) => {
  process.stdout.write(JSON.stringify({ error: String(err && err.stack ? err.stack : err) }) + "\n");
  process.exit(1);
});
