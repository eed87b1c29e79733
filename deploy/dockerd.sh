# deploy/dockerd.sh: sourced by the scripts that need a Docker engine
# (deploy/e2e.sh, deploy/test-runtimes.sh); they define log() first.
#
# dockerd_start LOGFILE starts dockerd when none answers, waits up to 30 s
# for it, and fails with the end of its log when it does not come up.
# dockerd_stop stops the dockerd that dockerd_start started, and no other.
dockerd_pid=""

dockerd_start() {
  docker info >/dev/null 2>&1 && return 0
  log "starting dockerd"
  dockerd >"$1" 2>&1 &
  dockerd_pid=$!
  for _ in $(seq 60); do
    docker info >/dev/null 2>&1 && return 0
    sleep 0.5
  done
  tail -20 "$1" >&2
  return 1
}

dockerd_stop() {
  [ -n "$dockerd_pid" ] || return 0
  log "stopping the dockerd this script started"
  kill "$dockerd_pid" 2>/dev/null
  wait "$dockerd_pid" 2>/dev/null
  dockerd_pid=""
}
