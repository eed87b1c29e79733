#!/usr/bin/env bash
# Regenerates discoveryd/internal/search/internal/wordvec/vectors.bin: word
# vectors trained by tools/vecgen on software documentation that ships in
# Debian bookworm (package descriptions, reference manuals, API
# documentation; the list and licences are in vecgen's corpus.go and
# VECTORS-NOTICE). Building or
# testing codeexec needs none of it: the generated file is committed. Needs
# root to install the packages; takes about 20 minutes on one core. The
# output is the same, byte for byte, for the same package versions.
# See docs/SEARCH.md.
set -euo pipefail
cd "$(dirname "$0")/.."

PACKAGES=(python3.11-doc postgresql-doc-15 nodejs-doc docker-doc gh python3-botocore
  golang-github-google-go-github-dev golang-github-xanzy-go-gitlab-dev
  golang-github-digitalocean-godo-dev golang-github-slack-go-slack-dev golang-google-api-dev)

if [ "$(id -u)" -ne 0 ]; then
  echo "vectors.sh installs Debian packages: run it as root" >&2
  exit 1
fi
# The long package descriptions are in the Translation-en indexes, which
# apt leaves out unless asked for.
apt-get update -qq -o Acquire::Languages=en
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${PACKAGES[@]}" >/dev/null
dpkg-query -W "${PACKAGES[@]}" >&2

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
index=$(ls /var/lib/apt/lists/*_debian_dists_bookworm_main_i18n_Translation-en*)
/usr/lib/apt/apt-helper cat-file "$index" >"$tmp/Translation-en"
sha256sum "$tmp/Translation-en" >&2

go run ./tools/vecgen \
  -translations "$tmp/Translation-en" \
  -out discoveryd/internal/search/internal/wordvec/vectors.bin "$@"
