#!/usr/bin/env bash
# Runs every Go fuzz target of the module for a bounded time each
# (FUZZTIME, default 4s), one after the other. Inputs that fail are
# written by `go test` to the package's testdata/fuzz/<Target>/ and fail
# this script; commit them with the fix, so that they run as regression
# tests in every plain `go test` from then on.
#
#   bash scripts/fuzz.sh                   # every target, 4s each
#   FUZZTIME=1m bash scripts/fuzz.sh FuzzJWT   # one target, longer
#   bash scripts/fuzz.sh --save-corpus     # also copy the inputs the fuzzer
#                                          # found interesting into testdata/fuzz
set -euo pipefail
cd "$(dirname "$0")/.."
fuzztime=${FUZZTIME:-4s}
save=0
only=()
for a in "$@"; do
  case "$a" in
    --save-corpus) save=1 ;;
    *) only+=("$a") ;;
  esac
done
cache=$(go env GOCACHE)/fuzz
n=0
while read -r file target; do
  [ ${#only[@]} -eq 0 ] || printf '%s\n' "${only[@]}" | grep -qx "$target" || continue
  dir=$(dirname "$file")
  pkg=$(go list "./$dir")
  printf '==> %s %s (%s)\n' "$pkg" "$target" "$fuzztime"
  # -parallel 1: on a small machine the coordinator otherwise starves its
  # workers while it gathers baseline coverage.
  if ! out=$(go test -run '^$' -fuzz "^${target}\$" -fuzztime "$fuzztime" -parallel 1 "./$dir" 2>&1); then
    # A loaded machine can miss the coordinator's deadline while the
    # baseline is gathered, which go test reports as a bare "context
    # deadline exceeded" without an input: that is not a finding, so the
    # target runs once more. A real finding names its failing input.
    if grep -q "Failing input written" <<<"$out" || ! grep -q "context deadline exceeded" <<<"$out"; then
      echo "$out" | tail -n 30; exit 1
    fi
    out=$(go test -run '^$' -fuzz "^${target}\$" -fuzztime "$fuzztime" -parallel 1 "./$dir" 2>&1) || { echo "$out" | tail -n 30; exit 1; }
  fi
  echo "$out" | tail -n 2
  if [ "$save" = 1 ] && [ -d "$cache/$pkg/$target" ]; then
    mkdir -p "$dir/testdata/fuzz/$target"
    # Keep the corpus small: the 40 shortest inputs cover the cases found.
    ls -S -r "$cache/$pkg/$target" | head -n 40 | while read -r f; do cp "$cache/$pkg/$target/$f" "$dir/testdata/fuzz/$target/"; done
  fi
  n=$((n + 1))
done < <(git ls-files '*_test.go' | xargs grep -H -o '^func Fuzz[A-Za-z0-9_]*' | sed 's/:func / /')
echo "fuzz: $n targets, $fuzztime each: no failures"
