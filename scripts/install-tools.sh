#!/usr/bin/env bash
# Installs everything the build, the code generators and the tests need on a
# fresh Debian/Ubuntu machine. Safe to run again: each step is skipped when
# its tool is already present at the pinned version.
#
#   bash scripts/install-tools.sh                  # everything
#   bash scripts/install-tools.sh golangci-lint    # only the linter
#   CODEEXEC_SKIP_GOLANGCI_LINT=1 bash scripts/install-tools.sh
#                                                  # everything but the linter
#                                                  # (scripts/test.sh builds it
#                                                  # in the background)
set -euo pipefail
cd "$(dirname "$0")/.."

BUF_VERSION=v1.75.0
GOLANGCI_LINT_VERSION=v2.15.0
GOBIN="$(go env GOPATH)/bin"
export PATH="$GOBIN:$PATH"

# golangci-lint is pinned here, as buf is, rather than in go.mod: its
# module graph is larger still. Building it takes minutes on a small
# machine, so it is skipped when the pinned version is there.
install_golangci_lint() {
  if ! "$GOBIN/golangci-lint" version 2>/dev/null | grep -q "has version ${GOLANGCI_LINT_VERSION#v} "; then
    echo "installing golangci-lint ${GOLANGCI_LINT_VERSION}" >&2
    go install "github.com/golangci/golangci-lint/v2/cmd/golangci-lint@${GOLANGCI_LINT_VERSION}"
  fi
}
if [ "${1:-}" = golangci-lint ]; then
  install_golangci_lint
  exit 0
fi

need_apt=()
command -v bwrap >/dev/null 2>&1 || need_apt+=(bubblewrap)
[ -x /usr/bin/python3 ] || need_apt+=(python3)
command -v setpriv >/dev/null 2>&1 || need_apt+=(util-linux)
command -v npm >/dev/null 2>&1 || need_apt+=(nodejs npm)
# The memoryd tests start PostgreSQL servers of their own (services/pgtest).
compgen -G '/usr/lib/postgresql/*/bin/initdb' >/dev/null || need_apt+=(postgresql)
# A sandbox on the host's /usr imports Debian's numpy and matplotlib
# (TestHostUsrDebianPackages); environments are built with debootstrap.
/usr/bin/python3 -c 'import numpy, matplotlib' 2>/dev/null || need_apt+=(python3-numpy python3-matplotlib)
command -v debootstrap >/dev/null 2>&1 || need_apt+=(debootstrap)
# The cgroup v2 tests boot a QEMU machine (services/vmtest); its kernel is
# fetched below.
command -v qemu-system-x86_64 >/dev/null 2>&1 || need_apt+=(qemu-system-x86)
# deploy/kubernetes is rendered by kubectl kustomize (go test ./deploy/kubernetes).
command -v kubectl >/dev/null 2>&1 || need_apt+=(kubectl)
if [ ${#need_apt[@]} -gt 0 ]; then
  scripts/apt-install.sh "${need_apt[@]}"
fi

# buf is pinned here rather than in go.mod: its module graph is large and
# would otherwise leak into ours. The protoc plugins are pinned in go.mod.
if ! "$GOBIN/buf" --version 2>/dev/null | grep -qx "${BUF_VERSION#v}"; then
  echo "installing buf ${BUF_VERSION}" >&2
  go install "github.com/bufbuild/buf/cmd/buf@${BUF_VERSION}"
fi
go install google.golang.org/protobuf/cmd/protoc-gen-go google.golang.org/grpc/cmd/protoc-gen-go-grpc
if [ -z "${CODEEXEC_SKIP_GOLANGCI_LINT:-}" ]; then
  install_golangci_lint
fi

bash scripts/vm-kernel.sh

# Tool search's model (docs/SEARCH.md): a 50 MB download the first time,
# nothing after. Search works without it; its tests that rank by meaning
# need it.
if [ -z "${CODEEXEC_SKIP_SEARCH_MODEL:-}" ]; then
  bash scripts/search-model.sh
fi
