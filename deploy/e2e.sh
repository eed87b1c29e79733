#!/usr/bin/env bash
# deploy/e2e.sh: the compose stack's whole cycle, as CI runs it.
#
#  1. start a Docker daemon if none answers (and stop it at the end);
#  2. build the images offline (deploy/build-images.sh: debootstrap + import);
#  3. compose up with 1 sandboxd replica: throughput through the gateway;
#  4. scale to 3 replicas: throughput again, then sessions spread over the
#     replicas with a real MCP client, memory and saved tools shared, one
#     replica killed: its sessions say "session lost" and continue on a
#     healthy one; a fork bomb and a memory bomb in a sibling sandbox are
#     stopped with a clear error;
#  5. restart the killed replica (it removes its orphaned sandboxes),
#     recreate the whole stack (an upgrade): memory and saved tools remain;
#  6. compose down; nothing of ours is left running;
#  7. the PostgreSQL variant (docker-compose.postgres.yml): two memoryd
#     replicas on one database, update_memory from sandboxes and increments
#     through each replica on one counter (exact), one memoryd replica
#     killed, the database down for 8 s mid-call (the replicas pause their
#     sandboxes and resume them); then the stack is
#     recreated and the memory is still there; compose down.
#
# Run it as root on Debian/Ubuntu. Missing packages (docker.io,
# docker-compose, debootstrap) are installed with apt-get. A few minutes
# on 2 cores; the debootstrap root file system is cached in
# /var/cache/codeexec/rootfs-2.tar.
set -euo pipefail
cd "$(dirname "$0")/.."
t0=$(date +%s)
log() { printf '[e2e %3ds] %s\n' "$(( $(date +%s) - t0 ))" "$*"; }
. deploy/dockerd.sh

port=${CODEEXEC_HTTP_PORT:-18080}
export CODEEXEC_HTTP_PORT=$port
# The agent's files for this stack only, removed at the end (a killed
# replica cannot remove its own).
export CODEEXEC_AGENT_ROOT=/var/lib/codeexec-agent-e2e
project=codeexec-e2e
file=deploy/docker-compose.yml
pgproject=codeexec-e2e-pg

need=()
command -v dockerd >/dev/null || need+=(docker.io)
command -v docker-compose >/dev/null || docker compose version >/dev/null 2>&1 || need+=(docker-compose)
command -v debootstrap >/dev/null || need+=(debootstrap)
if [ ${#need[@]} -gt 0 ]; then
  scripts/apt-install.sh "${need[@]}"
fi
if docker compose version >/dev/null 2>&1; then compose=(docker compose); else compose=(docker-compose); fi
pgcompose=("${compose[@]}" -f "$file" -f deploy/docker-compose.postgres.yml -p "$pgproject")
compose+=(-f "$file" -p "$project")

work=$(mktemp -d)
# The PostgreSQL variant's password, in a file as a deployment keeps it.
export CODEEXEC_PG_PASSWORD_FILE=$work/pg-password
(umask 077; head -c 18 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$CODEEXEC_PG_PASSWORD_FILE")
cleanup() {
  local rc=$?
  set +e
  if [ "$rc" -ne 0 ]; then
    # What the services said: a failure in CI is read from this log only.
    log "the services' last log lines"
    "${compose[@]}" logs --no-color --tail 80 >&2 2>/dev/null
    "${pgcompose[@]}" logs --no-color --tail 80 >&2 2>/dev/null
  fi
  log "cleaning up"
  "${compose[@]}" down -v --remove-orphans >/dev/null 2>&1
  "${pgcompose[@]}" down -v --remove-orphans >/dev/null 2>&1
  left=$(docker ps -aq --filter label=codeexec.owner 2>/dev/null)
  if [ -n "$left" ]; then
    log "removing $(echo "$left" | wc -l) leftover sandbox containers"
    docker rm -f $left >/dev/null
  fi
  dockerd_stop
  rm -rf "$work" "$CODEEXEC_AGENT_ROOT"
  log "done (exit $rc)"
}
trap cleanup EXIT

# 1. An engine.
dockerd_start "$work/dockerd.log" || exit 1

# 2. Images, and the host-side tools.
log "building images"
bash deploy/build-images.sh docker --with-postgres
go build -o "$work/codeexec" ./cmd/codeexec
go build -o "$work/driver" ./deploy/e2e
mkdir -p "$CODEEXEC_AGENT_ROOT"
driver() { "$work/driver" -gateway "http://127.0.0.1:$port/mcp" -project "$project" "$@"; }

wait_healthy() { # replicas
  for _ in $(seq 120); do
    healthy=$(docker ps --filter "label=com.docker.compose.project=$project" --filter label=com.docker.compose.service=sandboxd \
      --filter health=healthy -q | wc -l)
    if [ "$healthy" -ge "$1" ] && "$work/codeexec" health "http://127.0.0.1:$port/healthz" >/dev/null 2>&1; then
      sleep 6 # the gateway re-resolves the replicas every 5s
      return 0
    fi
    sleep 0.5
  done
  "${compose[@]}" ps >&2; "${compose[@]}" logs --tail 30 >&2
  return 1
}

# 3. One replica.
log "compose up, 1 sandboxd replica"
"${compose[@]}" up -d --scale sandboxd=1 >/dev/null 2>&1 || "${compose[@]}" up -d --scale sandboxd=1
wait_healthy 1
driver -mode throughput -label 1 -duration "${CODEEXEC_E2E_DURATION:-10s}"

# 4. Three replicas.
log "scale to 3 sandboxd replicas"
"${compose[@]}" up -d --scale sandboxd=3 >/dev/null 2>&1
wait_healthy 3
driver -mode throughput -label 3 -duration "${CODEEXEC_E2E_DURATION:-10s}"
driver -mode replicas
driver -mode limits

# 5. The killed replica comes back and removes the sandboxes it left.
log "restarting the killed replica"
"${compose[@]}" up -d --scale sandboxd=3 >/dev/null 2>&1
wait_healthy 3
exited=$(docker ps -aq --filter label=codeexec.owner --filter status=exited | wc -l)
if [ "$exited" -ne 0 ]; then
  docker ps -a --filter label=codeexec.owner >&2
  echo "e2e: FAIL: $exited exited sandbox containers were not reaped by the restarted replica" >&2
  exit 1
fi
log "no orphaned sandbox containers"
log "recreating the whole stack (an upgrade)"
"${compose[@]}" up -d --force-recreate --scale sandboxd=3 >/dev/null 2>&1
wait_healthy 3
driver -mode recall

# 6. Down.
log "compose down"
"${compose[@]}" down -v --remove-orphans >/dev/null 2>&1
if [ -n "$(docker ps -aq --filter label=codeexec.owner)" ] || [ -n "$(docker ps -aq --filter "label=com.docker.compose.project=$project")" ]; then
  docker ps -a >&2
  echo "e2e: FAIL: containers are left after compose down" >&2
  exit 1
fi

# 7. The PostgreSQL variant.
log "PostgreSQL variant: compose up, 2 memoryd replicas, 2 sandboxd replicas"
"${pgcompose[@]}" up -d --scale sandboxd=2 --scale memoryd=2 >/dev/null 2>&1 || "${pgcompose[@]}" up -d --scale sandboxd=2 --scale memoryd=2
project=$pgproject wait_healthy 2
"$work/driver" -gateway "http://127.0.0.1:$port/mcp" -project "$pgproject" -mode store
log "recreating the PostgreSQL variant (an upgrade)"
"${pgcompose[@]}" up -d --force-recreate --scale sandboxd=2 --scale memoryd=2 >/dev/null 2>&1
project=$pgproject wait_healthy 2
"$work/driver" -gateway "http://127.0.0.1:$port/mcp" -project "$pgproject" -mode recall
log "compose down (PostgreSQL variant)"
"${pgcompose[@]}" down -v --remove-orphans >/dev/null 2>&1
if [ -n "$(docker ps -aq --filter "label=com.docker.compose.project=$pgproject")" ]; then
  docker ps -a >&2
  echo "e2e: FAIL: containers are left after compose down (PostgreSQL variant)" >&2
  exit 1
fi
log "e2e: PASS"
