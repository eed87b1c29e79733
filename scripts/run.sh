#!/usr/bin/env bash
# Builds codeexec and serves MCP on stdio (or over HTTP with --http ADDR).
# On Debian/Ubuntu it installs bubblewrap first when it is missing and this
# runs as root, and builds the sandboxes' default environment on first
# use; otherwise it says exactly what to install or run. Everything it
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

# Tool search's model: installed in the background the first time (a
# download of some 50 MB), so that this start is not held up; codeexec
# ranks by words only until a later start finds it.
model="${CODEEXEC_SEARCH_MODEL:-${XDG_DATA_HOME:-$HOME/.local/share}/codeexec/search-model-v2}"
if [ "$model" != off ] && [ ! -f "$model/source" ]; then
  mkdir -p "$model"
  echo "codeexec: installing the search model in the background (log: $model.log); search ranks by words only until the next start" >&2
  nohup bash scripts/search-model.sh "$model" >"$model.log" 2>&1 </dev/null &
fi

mkdir -p bin
go build -o bin/codeexec ./cmd/codeexec >&2

# The sandboxes' Python: the default environment (Debian trixie, Python
# 3.13, numpy, pandas, scipy, matplotlib ...; docs/ENVIRONMENTS.md), built
# here on first use when this runs as root: a few minutes, once. Without
# it, sandboxes run the host's Python with what the host has installed.
env_dir=${CODEEXEC_ENV_DIR:-/var/lib/codeexec/environments}
if [ -z "${CODEEXEC_ENV:-}" ] && [ ! -s "$env_dir/names/default/manifest.json" ]; then
  if [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null 2>&1; then
    command -v debootstrap >/dev/null 2>&1 || bash scripts/apt-install.sh debootstrap >&2
    echo "codeexec: building the sandboxes' default environment (Python 3.13 and the data stack; a few minutes, once)" >&2
    bin/codeexec env build >&2 || echo "codeexec: the environment's build failed (above): sandboxes run on the host's Python until \`bin/codeexec env build\` succeeds" >&2
  else
    echo "codeexec: no environment is built, so sandboxes run the host's Python with the host's packages. For Python 3.13 with numpy, pandas, scipy and matplotlib, run once as root:" >&2
    echo "  sudo apt-get install debootstrap && sudo $PWD/bin/codeexec env build" >&2
  fi
fi
exec bin/codeexec serve "$@"
