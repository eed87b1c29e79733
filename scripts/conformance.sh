#!/usr/bin/env bash
# Runs the official MCP conformance suite (@modelcontextprotocol/conformance,
# on the Node 22 that tools/conformance pins) against `codeexec serve --http`,
# twice against the same server: 0.1.16 (the session-based revisions, up to
# 2025-11-25) and 0.2.0-alpha.12 with --requirements 2026-07-28 (stateless
# MCP). What does not apply is listed, with reasons, in
# tools/conformance/expected-failures.yml, expected-failures-2026-07-28.yml
# and docs/CONFORMANCE.md; any other failure, or a listed one that starts
# passing, fails the script.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
tools="$root/tools/conformance"
node22="$tools/node_modules/node/bin/node"
suite="$tools/node_modules/@modelcontextprotocol/conformance/dist/index.js"
# The alpha is installed under an npm alias, beside 0.1.16.
next="$tools/node_modules/conformance-next/dist/index.js"
if [ ! -x "$node22" ] || [ ! -f "$suite" ] || [ ! -f "$next" ]; then
	(cd "$tools" && npm ci --no-audit --no-fund)
fi

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

# A home of its own, so that no user config or state is read. Port 0: the
# server binds a free port and names it in its "codeexec serving" line,
# written once it serves.
mkdir -p "$work/home"
HOME="$work/home" MCP_BRIDGE_STATE_DIR="$work/home/MCPs" CODEEXEC_POOL_SIZE=1 \
	"$work/codeexec" serve --http 127.0.0.1:0 >"$work/server.log" 2>&1 &
pid=$!
addr=""
for _ in $(seq 1 300); do
	addr=$(sed -nE 's/.*msg="codeexec serving" .*transport=http address=(127\.0\.0\.1:[0-9]+).*/\1/p' "$work/server.log" | head -n1)
	[ -n "$addr" ] && break
	if ! kill -0 "$pid" 2>/dev/null; then
		echo "codeexec serve exited before serving:" >&2
		cat "$work/server.log" >&2
		exit 1
	fi
	sleep 0.1
done
[ -n "$addr" ] || { echo "codeexec serve did not serve within 30s:" >&2; cat "$work/server.log" >&2; exit 1; }

url="http://$addr/mcp"
rc=0

echo "MCP conformance suite $("$node22" "$suite" --version) on node $("$node22" --version) against codeexec serve --http $addr"
"$node22" "$suite" server --url "$url" \
	--expected-failures "$tools/expected-failures.yml" -o "$work/results" || rc=1
"$node22" "$tools/verdict.mjs" "conformance $("$node22" "$suite" --version)" \
	"$work/results" "$tools/expected-failures.yml" || true

echo
echo "MCP conformance suite $("$node22" "$next" --version) --requirements 2026-07-28 against the same server"
"$node22" "$next" server --url "$url" --requirements 2026-07-28 \
	--expected-failures "$tools/expected-failures-2026-07-28.yml" -o "$work/results-2026-07-28" || rc=1
# The suite holds only the scenarios that 2026-07-28 scores to the list;
# verdict.mjs holds the ones it runs unscored (pending, extensions) too.
"$node22" "$tools/verdict.mjs" --gate "conformance $("$node22" "$next" --version) (2026-07-28)" \
	"$work/results-2026-07-28" "$tools/expected-failures-2026-07-28.yml" || rc=1

if [ "$rc" -ne 0 ]; then
	echo "conformance failed; codeexec's log:" >&2
	tail -n 100 "$work/server.log" >&2
fi
exit "$rc"
