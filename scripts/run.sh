#!/usr/bin/env bash
# Builds codeexec and serves MCP on stdio (or over HTTP with --http ADDR).
# On Debian/Ubuntu it installs bubblewrap first when it is missing and this
# runs as root; otherwise it says exactly what to install. Everything it
# prints goes to stderr: stdout belongs to the MCP protocol.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v bwrap >/dev/null 2>&1 && [ ! -x /usr/bin/bwrap ]; then
  if [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "codeexec: installing bubblewrap (the sandbox runtime)" >&2
    bash scripts/apt-install.sh bubblewrap >&2
  else
    echo "codeexec needs bubblewrap (bwrap) for its sandboxes. Install it with:" >&2
    echo "  sudo apt-get install bubblewrap      # Debian/Ubuntu" >&2
    echo "  sudo dnf install bubblewrap          # Fedora/RHEL" >&2
    exit 1
  fi
fi

# Tool search's model: made in the background the first time (a few
# minutes), so that this start is not held up; codeexec ranks by words
# only until a later start finds it.
model="${CODEEXEC_SEARCH_MODEL:-${XDG_DATA_HOME:-$HOME/.local/share}/codeexec/minilm-l6-static-v1.bin}"
if [ "$model" != off ] && [ ! -f "$model" ]; then
  mkdir -p "$(dirname "$model")"
  echo "codeexec: making the search model in the background (log: $model.log); search ranks by words only until the next start" >&2
  nohup bash scripts/search-model.sh "$model" >"$model.log" 2>&1 </dev/null &
fi

mkdir -p bin
go build -o bin/codeexec ./cmd/codeexec >&2
exec bin/codeexec serve "$@"
