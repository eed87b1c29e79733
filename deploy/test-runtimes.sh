#!/usr/bin/env bash
# deploy/test-runtimes.sh: the container runtimes under test, as CI runs it.
#
#  - installs podman, runc, catatonit, docker.io and debootstrap when missing
#    (as root, with apt-get);
#  - starts dockerd if none answers, and stops it at the end;
#  - builds localhost/codeexec-sandbox:latest for docker and for podman, offline,
#    from the default environment's tree (deploy/build-images.sh);
#  - runs the engine's tests against both engines
#    (CODEEXEC_TEST_RUNTIMES=podman,docker) and, under docker (or each of
#    CODEEXEC_E2E_RUNTIMES="docker podman"), the end-to-end tests of
#    cmd/codeexec/e2e/... whose outcome the runtime can change (below).
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
# The end-to-end tests that no sandbox runtime can change the outcome of
# run under bwrap only, in the Go tests of scripts/test.sh: they test the
# MCP and HTTP protocols, the clients' configs, the upstream servers, auth,
# metrics, the gateway's routing and quotas, the memory store and its
# commands, and processes sharing a state dir. Every other test (the
# sandbox's isolation and limits, its output, sessions and their restores,
# shutdown, calls from the sandbox) runs under each runtime, and so does
# any new test until it is listed here. Under a container runtime the whole
# suite costs three times what it costs under bwrap, almost all of it CPU.
runtime_independent=(
  'TestE2EDropIn.*' 'TestE2E(DiscoverySearchContract|DiscoveryTokens|ClientConfigLayouts|TenantScopedUpstream)'
  'TestE2E(ServerInBackoffFailsAtOnce|ServersOfACallAreListedTogether|SlowServerGivesUpWithinTheCallsTimeout|ServerLoadingCountsInTheCallsTimeout|RestoreCallsEndByTheCallsTimeout|QueuedCallsRestoreGetsItsOwnTime)'
  'TestE2EHTTP.*' 'TestE2ESDKv2.*' 'TestE2EAuth.*' 'TestE2EMetrics.*'
  'TestE2E(BatchIsRefusedSayingSo|ListWithForeignCursorSaysWhatToSend|StdioCancelledCallIsNotAnswered|Surface|ToonOutput|UnknownOutputModeWarns|CodeOverTheLimitIsRefusedWithTheLimit)'
  'TestE2E(StrayArguments|HelpIsNoError|StateDirIsResolvedOnce|PathSettingsExpandHome|BenchPrintsEveryRow)'
  'TestE2E(QuotaHitThenRecovers|GatewayOverReplicas|HandlesAreBoundToTheirTenant|SessionThroughTwoProcesses)'
  'TestE2EBackup.*' 'TestE2ECopy.*' 'TestE2EImportUpstream.*' 'TestE2EMemory(dBackupAndSharing|SurvivesARestart|RejectsBadInput)'
  'TestE2E(TwoMemorydOnOneDatabase|MoveToPostgres)'
  'TestE2E(ServeProcessesShareOneStateDir|OwnerKilledWhileOthersWrite|AnotherVersionHoldsTheStateDir|CtrlZOnOneClientLeavesTheOthersServed|SplitServicesMutualTLS)'
  'TestE2E(FirstSearchFigures|SearchFromTheCatalogue|Discovery|ConcurrentUpdateMemoryLosesNothing|SessionQuotaCountsModernSessions|EvictionTakesFromTheTenantOverItsShare)'
  'TestE2E(LongRunSurface|LongRunThroughTwoProcesses|LongRunModernStdio|LongRunOverHTTP|ServerLoadingEndsByTheYield|ProgressArrivesBeforeResult|TasksExtension.*)'
  'TestE2EApprove.*' 'TestE2EPassthrough.*' 'TestE2EMaxToolCalls'
  'TestE2E(TenantMaxTimeoutBoundsItsCalls|TruthRunPythonArguments|TruthCLI|TruthNoticesOncePerCause|TruthUnloadedServersSayHowToLoad|StdioExitAfterACallWarnsOfNothing)'
)
skip="^($(IFS='|'; echo "${runtime_independent[*]}"))\$"
all=$(go test -list '.*' ./cmd/codeexec/e2e/... | grep '^TestE2E')
# The image is the default environment's tree (build-images.sh), so the
# environments' own tests run too; the session moved to data2 runs when
# scripts/test-environments.sh has built data2 (its image is imported).
env_dir=${CODEEXEC_ENV_DIR:-/var/lib/codeexec/environments}
env2=()
[ -s "$env_dir/names/data2/manifest.json" ] && env2=(CODEEXEC_E2E_ENV2=data2 CODEEXEC_E2E_ENV2_MODULE=toolz)
# The end-to-end pass runs under docker only unless CODEEXEC_E2E_RUNTIMES
# says otherwise ("docker podman" for both): what differs between the two
# is the CLI's flags and its cgroups, which the engine tests above check
# under both, against a real container each.
for rt in ${CODEEXEC_E2E_RUNTIMES:-docker}; do
  log "end-to-end tests of the sandbox with $rt, in the default environment ($(grep -cvE "$skip" <<<"$all") of $(wc -l <<<"$all"))"
  env CODEEXEC_E2E_RUNTIME=$rt CODEEXEC_E2E_ENV=default "${env2[@]}" go test -count=1 -skip "$skip" ./cmd/codeexec/e2e/...
done
log "PASS"
