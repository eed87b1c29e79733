#!/usr/bin/env bash
# scripts/test-environments.sh: environments (codeexec env) under test, as
# CI runs them.
#
#   scripts/test-environments.sh build   builds what the tests need, only:
#       the default environment and "data2" (the default's packages and
#       python3-toolz), from Debian trixie, the .debs and the debootstrapped
#       base cached in /var/cache/codeexec (a new machine has neither: about
#       5 minutes then, under a minute after). CI runs this in the
#       background early, beside steps that do not use it.
#   scripts/test-environments.sh         builds them when missing, then runs:
#     - the agent's Python tests under the environment's Python 3.13;
#     - the bwrap engine's tests (isolation, seccomp, limits, channel,
#       both start paths) in the default environment;
#     - the end-to-end tests of the sandbox in the default environment, with
#       the fork server and with bwrap alone, and the session pinned to
#       data2. deploy/test-runtimes.sh runs the same under podman and docker.
#
# Needs root (debootstrap, cgroups). CODEEXEC_ENV_DIR moves the store.
set -euo pipefail
cd "$(dirname "$0")/.."
t0=$(date +%s)
log() { printf '[environments %3ds] %s\n' "$(( $(date +%s) - t0 ))" "$*"; }

command -v debootstrap >/dev/null || scripts/apt-install.sh debootstrap
env_dir=${CODEEXEC_ENV_DIR:-/var/lib/codeexec/environments}
export CODEEXEC_ENV_DIR=$env_dir
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
go build -o "$work/codeexec" ./cmd/codeexec

# built NAME: whether NAME is built (its manifest is there).
built() { [ -s "$env_dir/names/$1/manifest.json" ]; }
if ! built default; then
  log "building the default environment"
  "$work/codeexec" env build default
fi
if ! built data2; then
  log "building data2: the default's packages and python3-toolz"
  "$work/codeexec" env build --apt python3-toolz data2
fi
"$work/codeexec" env list
[ "${1:-}" = build ] && exit 0

root=$env_dir/names/default/root
log "the agent's Python tests under the environment's Python ($(bwrap --ro-bind "$root" / --unshare-all --die-with-parent python3 -V))"
bwrap --ro-bind "$root" / --ro-bind "$PWD" /workspace --tmpfs /tmp --proc /proc --dev /dev \
  --unshare-all --die-with-parent --chdir /workspace --setenv CODEEXEC_AGENT_TESTS_SANDBOXED 1 \
  python3 -m unittest discover -s sandboxd/internal/agent/tests 2>&1 | tail -n 4

log "the bwrap engine's tests in the default environment"
CODEEXEC_TEST_ENV_ROOT=$root go test -count=1 ./sandboxd/internal/engine/bwrap/ ./sandboxd/internal/engine/forkserver/

# The end-to-end tests of the sandbox itself: sessions, isolation and
# secrets, the fork and memory bombs, the caps, output, timeouts, deaths
# and restores, and the environments' own.
sandbox_tests='TestE2E(Environment.*|StatePersistsAcrossCalls|TopLevelAwait|ExceptionIsAnError|BlankLinesAreKept|HugeOutputIsCutWithAMarker'
sandbox_tests+='|TimeoutKillsAndRestoresTheCheckpoint|ClientIsolationAndSecrets|ChildProcessOutputAndChannelSafety|ForkBombIsContained'
sandbox_tests+='|MemoryBombIsContained|FileSizeAndOpenFilesCaps|LargeCodeAndOutputPassIntact|NoSandboxProcessOutlivesTheServer'
sandbox_tests+='|EventLoopPersists|BackgroundOutputNeverLeaksIntoTheNextCall|StateSurvivesEveryDeath|CancelledCallIsRestoredNotReset)'
for fork in true false; do
  log "end-to-end tests of the sandbox in the default environment (fork server: $fork)"
  CODEEXEC_FORK_SERVER=$fork CODEEXEC_E2E_ENV=default CODEEXEC_E2E_ENV2=data2 CODEEXEC_E2E_ENV2_MODULE=toolz \
    go test -count=1 -run "^${sandbox_tests}\$" ./cmd/codeexec/e2e/...
done
log "PASS"
