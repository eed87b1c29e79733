#!/usr/bin/env bash
# Builds the images deploy/ needs from local material only (no registry):
#
#   localhost/codeexec-base:latest     a minimal Debian root file system with python3
#                            and bubblewrap (sandboxd's bwrap runtime in a
#                            Kubernetes pod), made with debootstrap and imported;
#   localhost/codeexec-sandbox:latest  what each sandbox runs: the default
#                            environment's tree (codeexec env build: Debian
#                            trixie, Python 3.13, the data stack), imported
#                            as it is, so containers run what bwrap runs;
#   localhost/codeexec:latest          the services (Dockerfile.services): the codeexec
#                            binary built here with CGO_ENABLED=0, and the
#                            docker CLI for sandboxd's sibling containers;
#   localhost/codeexec-postgres:latest with --with-postgres only: Debian's
#                            PostgreSQL 15 (Dockerfile.postgres), for the
#                            PostgreSQL variant and the Kubernetes example.
#                            Its build runs apt-get against the Debian mirror.
#
# Usage: deploy/build-images.sh [docker|podman] [--with-postgres]   (default: docker)
# Env:   CODEEXEC_ROOTFS_CACHE  where the debootstrap tarball is kept
#                               (default /var/cache/codeexec/rootfs-2.tar)
#        DEBIAN_SUITE, DEBIAN_MIRROR  default: this host's (or bookworm and
#                               the mirror apt uses)
# Needs root (debootstrap), debootstrap and go. With a registry reachable
# the Dockerfiles build the normal way from any python3 base image too.
set -euo pipefail
engine=${1:-docker}
case "$engine" in docker|podman) ;; *) echo "usage: $0 [docker|podman] [--with-postgres]" >&2; exit 2 ;; esac
with_postgres=false
[ "${2:-}" = --with-postgres ] && with_postgres=true
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
# The base's contents have a version: a new one gets a new cache file and
# replaces an older base image (2: bubblewrap added).
base_version=2
cache=${CODEEXEC_ROOTFS_CACHE:-/var/cache/codeexec/rootfs-$base_version.tar}

command -v "$engine" >/dev/null || { echo "$engine is not installed: apt-get install ${engine/docker/docker.io}" >&2; exit 1; }
command -v go >/dev/null || { echo "go is not installed (needed to build the codeexec binary)" >&2; exit 1; }

# The mirror apt already uses: it is reachable wherever apt-get works.
mirror() {
  local m
  m=$(grep -hsE '^(URIs:|deb )' /etc/apt/sources.list /etc/apt/sources.list.d/* 2>/dev/null \
      | grep -v security | sed -E 's/^URIs: *//; s/^deb (\[[^]]*\] )?//' | awk '{print $1}' | head -n1)
  echo "${m:-http://deb.debian.org/debian}"
}
suite=${DEBIAN_SUITE:-$(. /etc/os-release 2>/dev/null; echo "${VERSION_CODENAME:-bookworm}")}
[ "$suite" = "" ] && suite=bookworm

have=$("$engine" image inspect --format '{{index .Config.Labels "codeexec.base"}}' localhost/codeexec-base:latest 2>/dev/null || true)
if [ "$have" != "$base_version" ]; then
  if [ ! -s "$cache" ]; then
    command -v debootstrap >/dev/null || { echo "debootstrap is not installed: apt-get install debootstrap" >&2; exit 1; }
    [ "$(id -u)" = 0 ] || { echo "debootstrap needs root" >&2; exit 1; }
    tmp=$(mktemp -d)
    trap 'rm -rf "$tmp"' EXIT
    echo "debootstrap $suite from $(mirror) (a minute or two) ..." >&2
    debootstrap --variant=minbase --include=python3,bubblewrap "$suite" "$tmp/rootfs" "$(mirror)" >"$tmp/debootstrap.log" 2>&1 \
      || { tail -20 "$tmp/debootstrap.log" >&2; exit 1; }
    mkdir -p "$(dirname "$cache")"
    tar -C "$tmp/rootfs" -cf "$cache.part" . && mv "$cache.part" "$cache"
    rm -rf "$tmp"; trap - EXIT
  fi
  "$engine" import --change "LABEL codeexec.base=$base_version" "$cache" localhost/codeexec-base:latest >/dev/null
  echo "imported localhost/codeexec-base:latest" >&2
fi

# podman's own defaults fail on a host with the cgroup v1 controllers
# mounted (crun refuses them); the sandboxes get the same fix at run time.
podman_opts=()
if [ "$engine" = podman ] && [ "$(stat -fc %T /sys/fs/cgroup 2>/dev/null)" != cgroup2fs ]; then
  podman_opts=(--runtime runc --cgroup-manager cgroupfs)
fi

ctx=$(mktemp -d)
trap 'rm -rf "$ctx"' EXIT
(cd "$root" && CGO_ENABLED=0 go build -trimpath -o "$ctx/codeexec" ./cmd/codeexec)
# The docker CLI for sandboxd inside the services image (it only needs libc,
# which the base has). Prefer Debian's, which matches the Debian daemon.
cli=$(command -v /usr/bin/docker || command -v docker || true)
[ -n "$cli" ] || { echo "the docker CLI is needed for the services image: apt-get install docker.io" >&2; exit 1; }
cp "$cli" "$ctx/docker"
cp "$here/Dockerfile.services" "$here/Dockerfile.postgres" "$here/postgres-entrypoint.sh" "$ctx/"

build() { # tag dockerfile
  local cmd
  case "$engine" in
    # The legacy docker builder needs no buildx plugin and no registry.
    docker) cmd=(env DOCKER_BUILDKIT=0 docker build) ;;
    # crun refuses cgroup v1 hybrid hosts; runc with cgroupfs works on both.
    podman) cmd=(podman "${podman_opts[@]}" build) ;;
  esac
  if ! "${cmd[@]}" -q -t "$1" -f "$ctx/$2" "$ctx" >"$ctx/build.log" 2>&1; then
    cat "$ctx/build.log" >&2; exit 1
  fi
  echo "built $1" >&2
}
# The sandbox image is the default environment, built first if need be
# (a few minutes the first time; scripts/test-environments.sh builds it
# beside other work in CI).
env_dir=(--env-dir "${CODEEXEC_ENV_DIR:-/var/lib/codeexec/environments}")
if ! "$ctx/codeexec" env list "${env_dir[@]}" 2>/dev/null | grep -q '^default '; then
  echo "building the default environment (codeexec env build)" >&2
  "$ctx/codeexec" env build "${env_dir[@]}" >/dev/null
fi
"$ctx/codeexec" env image "${env_dir[@]}" default "$engine" localhost/codeexec-sandbox:latest
build localhost/codeexec:latest Dockerfile.services
# The PostgreSQL image's apt-get takes a minute or more: the first engine
# to build it saves it beside the root file system's tarball, keyed by
# what it is made of, and the other engine loads that file instead.
if $with_postgres; then
  pg_key=$(cat "$here/Dockerfile.postgres" "$here/postgres-entrypoint.sh" | sha256sum | cut -c1-16)
  pg_cache=$(dirname "$cache")/postgres-$base_version-$suite-$pg_key.tar
  if ! "$engine" image inspect localhost/codeexec-postgres:latest >/dev/null 2>&1 && [ -s "$pg_cache" ] \
     && "$engine" load -q -i "$pg_cache" >"$ctx/load.log" 2>&1; then
    echo "loaded localhost/codeexec-postgres:latest from $pg_cache" >&2
  else
    build localhost/codeexec-postgres:latest Dockerfile.postgres
    if [ ! -s "$pg_cache" ]; then
      mkdir -p "$(dirname "$pg_cache")"
      "$engine" save -o "$pg_cache.part" localhost/codeexec-postgres:latest && mv "$pg_cache.part" "$pg_cache"
    fi
  fi
fi
