// collect.mjs records the tools/list answer of published MCP servers.
//
// Usage: node collect.mjs <install-root> <out-dir> [server-name...]
//
// servers.json names each server's npm package, pinned version, binary,
// arguments and the placeholder environment it needs to start. Every
// package must be installed under <install-root>/<dir>/node_modules, where
// <dir> is the package spec with "/" and "@" turned into "_" (see
// install.sh). The credentials are placeholders: tools/list needs none of
// them, and no tool is ever called.
import { spawn } from "node:child_process";
import { readFileSync, writeFileSync, mkdirSync } from "node:fs";
import { join } from "node:path";

const [root, outDir, ...only] = process.argv.slice(2);
const servers = JSON.parse(readFileSync(new URL("./servers.json", import.meta.url)));
mkdirSync(outDir, { recursive: true });

function dirFor(spec) {
  return spec.replaceAll("/", "_").replaceAll("@", "_");
}

function listTools(s) {
  return new Promise((resolve, reject) => {
    const spec = `${s.package}@${s.version}`;
    const bin = join(root, dirFor(spec), "node_modules", ".bin", s.bin);
    const child = spawn(bin, s.args ?? [], {
      env: { ...process.env, ...(s.env ?? {}) },
      stdio: ["pipe", "pipe", "pipe"],
    });
    let buf = "";
    let stderr = "";
    const tools = [];
    const timer = setTimeout(() => {
      child.kill("SIGKILL");
      reject(new Error(`timeout; stderr: ${stderr.slice(-500)}`));
    }, 60000);
    const send = (m) => child.stdin.write(JSON.stringify(m) + "\n");
    child.stderr.on("data", (d) => (stderr += d));
    child.on("exit", (code) => {
      clearTimeout(timer);
      reject(new Error(`exited ${code}; stderr: ${stderr.slice(-800)}`));
    });
    child.stdout.on("data", (d) => {
      buf += d;
      let i;
      while ((i = buf.indexOf("\n")) >= 0) {
        const line = buf.slice(0, i).trim();
        buf = buf.slice(i + 1);
        if (!line.startsWith("{")) continue;
        let m;
        try {
          m = JSON.parse(line);
        } catch {
          continue;
        }
        if (m.id === 1) {
          send({ jsonrpc: "2.0", method: "notifications/initialized" });
          send({ jsonrpc: "2.0", id: 2, method: "tools/list", params: {} });
        } else if (typeof m.id === "number" && m.id >= 2) {
          if (m.error) {
            clearTimeout(timer);
            child.kill("SIGKILL");
            reject(new Error(JSON.stringify(m.error)));
            return;
          }
          tools.push(...m.result.tools);
          if (m.result.nextCursor) {
            send({ jsonrpc: "2.0", id: m.id + 1, method: "tools/list", params: { cursor: m.result.nextCursor } });
          } else {
            clearTimeout(timer);
            child.removeAllListeners("exit");
            child.kill("SIGKILL");
            resolve({ tools, serverInfo: s.serverInfo });
          }
        }
      }
    });
    send({
      jsonrpc: "2.0",
      id: 1,
      method: "initialize",
      params: {
        protocolVersion: "2025-06-18",
        capabilities: {},
        clientInfo: { name: "codeexec-testdata-collector", version: "0" },
      },
    });
  });
}

for (const s of servers) {
  if (only.length && !only.includes(s.name)) continue;
  try {
    const { tools } = await listTools(s);
    const out = {
      server: s.name,
      source: { registry: "npm", package: s.package, version: s.version, repository: s.repository },
      collected: "tools/list over stdio by testdata/search/collect/collect.mjs",
      tools: tools.map((t) => ({ name: t.name, description: t.description ?? "", inputSchema: t.inputSchema ?? {} })),
    };
    writeFileSync(join(outDir, `${s.name}.json`), JSON.stringify(out, null, 1) + "\n");
    console.log(`${s.name}: ${tools.length} tools`);
  } catch (e) {
    console.log(`${s.name}: FAILED ${e.message.slice(0, 600)}`);
  }
}
