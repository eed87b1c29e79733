#!/usr/bin/env bash
# install.sh installs, outside the repository, every package named in
# servers.json at its pinned version, one folder per package, so that
# collect.mjs can start each server and record its tools/list answer.
#
# Usage: bash install.sh /tmp/mcpcollect/inst
# Then:  node collect.mjs /tmp/mcpcollect/inst ../servers
#
# Install scripts are skipped: they only download browsers or build native
# credential stores, and listing tools needs neither. @azure-devops/mcp
# loads keytar at start-up, so its native binding is replaced by a stub that
# stores nothing; google-calendar-mcp needs an OAuth client file to exist,
# so a placeholder one is written. Desktop Commander keeps its settings under
# $HOME, so it gets a throwaway home whose settings turn its telemetry off.
set -euo pipefail
root=${1:?usage: install.sh <install-root>}
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$root"
node -e 'for (const s of require(process.argv[1])) console.log(`${s.package}@${s.version}`)' "$here/servers.json" |
while read -r spec; do
  dir="$root/$(echo "$spec" | tr '/@' '__')"
  [ -d "$dir/node_modules" ] && continue
  mkdir -p "$dir"
  (cd "$dir" && npm init -y >/dev/null &&
    PUPPETEER_SKIP_DOWNLOAD=1 PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 \
    npm install --no-audit --no-fund --ignore-scripts "$spec" >install.log 2>&1) ||
    echo "install failed: $spec (see $dir/install.log)" >&2
done
keytar="$root/_azure-devops_mcp_2.10.0/node_modules/keytar/lib/keytar.js"
if [ -f "$keytar" ]; then
  sed -i '1s#.*#var keytar = {getPassword: async()=>null, setPassword: async()=>{}, deletePassword: async()=>false, findPassword: async()=>null, findCredentials: async()=>[]}#' "$keytar"
fi
mkdir -p /tmp/mcpcollect/fake
echo '{"installed":{"client_id":"placeholder.apps.googleusercontent.com","client_secret":"placeholder","redirect_uris":["http://localhost"]}}' \
  >/tmp/mcpcollect/fake/gcp-oauth.keys.json
mkdir -p /tmp/mcpcollect/fake/home/.claude-server-commander
echo '{"telemetryEnabled": false}' >/tmp/mcpcollect/fake/home/.claude-server-commander/config.json
