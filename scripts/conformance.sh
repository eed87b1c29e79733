#!/usr/bin/env bash
# Runs the official MCP conformance suite (@modelcontextprotocol/conformance,
# on the Node 22 that tools/conformance pins) against `codeexec serve --http`.
# Scenarios that do not apply are listed, with reasons, in
# tools/conformance/expected-failures.yml and docs/CONFORMANCE.md; any other
# failure, or a listed scenario that starts passing, fails the script.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
tools="$root/tools/conformance"
if [ ! -x "$tools/node_modules/node/bin/node" ] || [ ! -f "$tools/node_modules/@modelcontextprotocol/conformance/dist/index.js" ]; then
	(cd "$tools" && npm ci --no-audit --no-fund)
fi
node22="$tools/node_modules/node/bin/node"
suite="$tools/node_modules/@modelcontextprotocol/conformance/dist/index.js"

work=$(mktemp -d)
pid=""
cleanup() {
	if [ -n "$pid" ]; then
		kill -TERM "$pid" 2>/dev/null || true
		wait "$pid" 2>/dev/null || true
	fi
	rm -rf "$work"
}
trap cleanup EXIT

(cd "$root" && go build -o "$work/codeexec" ./cmd/codeexec)

# A free loopback port, and a home of its own so that no user config or
# state is read.
port=$("$node22" -e 'const s=require("net").createServer().listen(0,"127.0.0.1",()=>{console.log(s.address().port);s.close()})')
mkdir -p "$work/home"
HOME="$work/home" MCP_BRIDGE_STATE_DIR="$work/home/MCPs" CODEEXEC_POOL_SIZE=1 \
	"$work/codeexec" serve --http "127.0.0.1:$port" >"$work/server.log" 2>&1 &
pid=$!
for _ in $(seq 1 300); do
	if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
		break
	fi
	if ! kill -0 "$pid" 2>/dev/null; then
		echo "codeexec serve exited before listening:" >&2
		cat "$work/server.log" >&2
		exit 1
	fi
	sleep 0.1
done

echo "MCP conformance suite $("$node22" "$suite" --version) on node $("$node22" --version) against codeexec serve --http 127.0.0.1:$port"
rc=0
"$node22" "$suite" server --url "http://127.0.0.1:$port/mcp" \
	--expected-failures "$tools/expected-failures.yml" -o "$work/results" || rc=$?
# One closing line by scenario: those not applying count as skipped.
"$node22" -e '
const fs = require("fs"), path = require("path");
const [dir, baseline] = process.argv.slice(1);
const expected = new Set(fs.readFileSync(baseline, "utf8").split("\n")
  .map(l => l.match(/^\s*-\s*(\S+)/)).filter(Boolean).map(m => m[1]));
let passed = 0, failed = 0, skipped = 0;
for (const d of fs.readdirSync(dir)) {
  const name = d.replace(/^server-/, "").replace(/-\d{4}-\d{2}-\d{2}T[\d-]+Z$/, "");
  const checks = JSON.parse(fs.readFileSync(path.join(dir, d, "checks.json"), "utf8"));
  const bad = checks.some(c => c.status === "FAILURE" || c.status === "WARNING");
  if (!bad) passed++; else if (expected.has(name)) skipped++; else failed++;
}
console.log(`conformance: ${passed} passed, ${failed} failed, ${skipped} skipped`);
' "$work/results" "$tools/expected-failures.yml" || true
if [ "$rc" -ne 0 ]; then
	echo "conformance failed; codeexec's log:" >&2
	tail -n 100 "$work/server.log" >&2
fi
exit "$rc"
