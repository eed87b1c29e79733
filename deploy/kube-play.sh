#!/usr/bin/env bash
# deploy/kube-play.sh: the Kubernetes manifests, rendered and run for real
# on this one machine, as CI runs it.
#
#  1. kubectl kustomize deploy/kubernetes renders (the manifests' own checks
#     are go test ./deploy/kubernetes);
#  2. the images are built for podman (deploy/build-images.sh podman
#     --with-postgres);
#  3. deploy/kubeplay turns the rendered Deployments and the StatefulSet
#     into one podman pod per replica on a network of their own, each
#     Service name resolving to its pods' addresses (podman has no Services
#     and no cluster DNS), and `podman kube play` starts them with the
#     manifests' security contexts: sandboxd's pods run bwrap sandboxes;
#  4. an MCP client with a bearer token completes run_python, a memory save
#     read back through the other gateway replica, and a proxied tool call,
#     through each of the two gateway replicas (deploy/e2e -mode kube);
#  5. everything is removed.
#
# What podman does not do (NetworkPolicies, the HPA, PDBs, Services as
# such, hostUsers) is listed in docs/KUBERNETES.md. Needs root, podman,
# runc and kubectl (installed when missing). A few minutes on 2 cores.
set -euo pipefail
cd "$(dirname "$0")/.."
t0=$(date +%s)
log() { printf '[kube %3ds] %s\n' "$(( $(date +%s) - t0 ))" "$*"; }

need=()
for pair in podman:podman runc:runc debootstrap:debootstrap; do
  command -v "${pair%%:*}" >/dev/null || need+=("${pair#*:}")
done
command -v kubectl >/dev/null || need+=(kubectl)
if [ ${#need[@]} -gt 0 ]; then
  scripts/apt-install.sh "${need[@]}"
fi

work=$(mktemp -d)
net=codeexec-kube-play
subnet=10.89.77
# This host's limits are below podman's default ulimits, and crun refuses
# its cgroup v1 controllers: a containers.conf for these pods only.
cat >"$work/containers.conf" <<CONF
[containers]
default_ulimits = ["nofile=4096:4096", "nproc=4096:4096"]
[engine]
runtime = "runc"
cgroup_manager = "cgroupfs"
CONF
export CONTAINERS_CONF=$work/containers.conf
# hostUsers: false (a user namespace per pod, as sandboxd's pods ask) is
# podman's --userns=auto, which takes its ranges from user "containers".
for f in /etc/subuid /etc/subgid; do
  grep -q '^containers:' "$f" 2>/dev/null || echo "containers:2147483647:2147483648" >>"$f"
done
cleanup() {
  local rc=$?
  set +e
  if [ -n "${CODEEXEC_KUBE_KEEP:-}" ]; then
    log "CODEEXEC_KUBE_KEEP is set: leaving the pods running; files in $work"
    return
  fi
  log "cleaning up"
  if [ -s "$work/play.yaml" ]; then
    [ $rc -ne 0 ] && for p in $(podman pod ps -q --filter "network=$net"); do podman pod logs --tail 20 "$p" >&2; done
    podman kube down "$work/play.yaml" >/dev/null 2>&1
  fi
  # A pod that failed to start half-way is not always known to kube down.
  [ -s "$work/pods" ] && while read -r pod _; do podman pod rm -f -t 0 "$pod-pod-0" >/dev/null 2>&1; done <"$work/pods"
  true
  podman network rm -f "$net" >/dev/null 2>&1
  rm -rf "$work"
  log "done (exit $rc)"
}
trap cleanup EXIT

log "rendering deploy/kubernetes"
kubectl kustomize deploy/kubernetes >"$work/rendered.yaml"

log "building images for podman"
bash deploy/build-images.sh podman --with-postgres
go build -o "$work/codeexec" ./cmd/codeexec
go build -o "$work/kubeplay" ./deploy/kubeplay
go build -o "$work/driver" ./deploy/e2e

token="cx_kube_play_$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')"
hash=$(printf '%s\n' "$token" | "$work/codeexec" token hash)
"$work/kubeplay" -subnet "$subnet" -network "$net" -ips "$work/ips" -pods "$work/pods" -podman-run "$work/run.sh" -tokens "$hash default" \
  -mcp-server discoveryd/internal/upstream/testdata/fakeserver.py <"$work/rendered.yaml" >"$work/play.yaml"

podman network rm -f "$net" >/dev/null 2>&1 || true
podman network create --subnet "$subnet.0/24" "$net" >/dev/null
ipargs=()
while read -r ip; do ipargs+=(--ip "$ip"); done <"$work/ips"
log "podman kube play: $(wc -l <"$work/ips") pods; podman run: $(grep -c "pod create" "$work/run.sh") (procMount: Unmasked)"
# From an empty directory: podman builds an image from a directory named
# like it when there is one (the codeexec binary in $work is not).
mkdir "$work/empty"
(cd "$work/empty" && podman kube play --replace --build=false --network "$net" "${ipargs[@]}" "$work/play.yaml") >"$work/play.log" 2>&1 \
  && bash "$work/run.sh" >>"$work/play.log" 2>&1 \
  || {
    cat "$work/play.log" >&2
    for c in $(podman ps -aq --filter status=created --filter status=exited); do
      podman inspect --format '{{.Name}}: {{.State.Error}}' "$c" >&2; podman logs --tail 5 "$c" >&2
    done
    exit 1
  }

# Wait for every service's own health check, as the probes run it.
health() { # name port
  while read -r pod ip; do
    case "$pod" in "$1"-*) ;; *) continue ;; esac
    for _ in $(seq 120); do
      "$work/codeexec" health "$ip:$2" >/dev/null 2>&1 && continue 2
      sleep 0.5
    done
    echo "kube: $pod ($ip:$2) is not healthy" >&2; return 1
  done <"$work/pods"
}
health memoryd 9004
health discoveryd 9003
health sandboxd 9002
gateways=()
while read -r pod ip; do
  case "$pod" in gateway-*) ;; *) continue ;; esac
  for _ in $(seq 120); do
    "$work/codeexec" health "http://$ip:8080/healthz" >/dev/null 2>&1 && break
    sleep 0.5
  done
  gateways+=("http://$ip:8080/mcp")
done <"$work/pods"
log "all pods healthy; gateways: ${gateways[*]}"
sleep 6 # the gateways re-resolve the sandboxd replicas every 5 s
"$work/driver" -mode kube -token "$token" -gateway "$(IFS=,; echo "${gateways[*]}")"
log "kube: PASS"
