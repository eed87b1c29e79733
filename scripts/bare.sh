#!/usr/bin/env bash
# Runs a command as on a machine without bubblewrap, PostgreSQL, a
# container engine, Node.js or the npm packages: in a mount namespace of
# its own where each of them is hidden (an empty file or directory mounted
# over it). The fast tier must pass so:
#
#   bash scripts/bare.sh go test -short ./...
#
# Needs root (unshare -m); the machine itself is not changed.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "$(id -u)" -ne 0 ]; then
  echo "scripts/bare.sh needs root for its mount namespace (unshare -m)" >&2
  exit 1
fi
if [ -z "${CODEEXEC_BARE_INSIDE:-}" ]; then
  export CODEEXEC_BARE_INSIDE=1
  exec unshare -m --propagation private bash "$0" "$@"
fi
empty_file=$(mktemp)
empty_dir=$(mktemp -d)
hidden=()
for name in bwrap node npm npx initdb postgres pg_ctl docker dockerd podman runc; do
  while read -r p; do
    p=$(readlink -f "$p")
    [ -e "$p" ] || continue
    case " ${hidden[*]} " in *" $p "*) continue ;; esac
    mount --bind "$empty_file" "$p" && hidden+=("$p")
  done < <(type -ap "$name" 2>/dev/null; [ "$name" = bwrap ] && echo /usr/bin/bwrap)
done
for d in /usr/lib/postgresql node_modules; do
  [ -d "$d" ] && mount --bind "$empty_dir" "$d" && hidden+=("$d")
done
echo "bare.sh: hidden ${hidden[*]}" >&2
exec "$@"
