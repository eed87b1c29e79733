#!/usr/bin/env bash
# deploy/test-runtimes.sh: the container runtimes under test, as CI runs it.
#
#  - installs podman, runc, catatonit, docker.io and debootstrap when missing
#    (as root, with apt-get);
#  - starts dockerd if none answers, and stops it at the end;
#  - builds localhost/codeexec-sandbox:latest for docker and for podman, offline
#    (deploy/build-images.sh);
#  - runs the engine's tests against both engines
#    (CODEEXEC_TEST_RUNTIMES=podman,docker) and the whole end-to-end suite of
#    cmd/codeexec/e2e/... once per runtime (CODEEXEC_E2E_RUNTIME=docker, =podman).
#
# A few minutes on 2 cores. Nothing is left running.
set -euo pipefail
cd "$(dirname "$0")/.."
t0=$(date +%s)
log() { printf '[runtimes %3ds] %s\n' "$(( $(date +%s) - t0 ))" "$*"; }
. deploy/dockerd.sh

need=()
for pair in podman:podman runc:runc dockerd:docker.io debootstrap:debootstrap; do
  command -v "${pair%%:*}" >/dev/null || need+=("${pair#*:}")
done
[ -x /usr/libexec/podman/catatonit ] || need+=(catatonit)
if [ ${#need[@]} -gt 0 ]; then
  scripts/apt-install.sh "${need[@]}"
fi

work=$(mktemp -d)
cleanup() {
  local rc=$?
  set +e
  for rt in docker podman; do
    left=$($rt ps -aq --filter label=codeexec.owner 2>/dev/null)
    [ -n "$left" ] && { log "removing leftover $rt sandboxes"; $rt rm -f $left >/dev/null; }
  done
  dockerd_stop
  rm -rf "$work"
  log "done (exit $rc)"
}
trap cleanup EXIT

dockerd_start "$work/dockerd.log" || exit 1

log "building images"
bash deploy/build-images.sh docker
bash deploy/build-images.sh podman

log "engine tests against podman and docker"
CODEEXEC_TEST_RUNTIMES=podman,docker go test -count=1 -run 'TestContainer|TestDetectPodman|TestNewContainer' ./sandboxd/internal/engine/...
for rt in docker podman; do
  log "end-to-end suite with $rt"
  CODEEXEC_E2E_RUNTIME=$rt go test -count=1 ./cmd/codeexec/e2e/...
done
log "PASS"
