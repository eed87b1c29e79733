#!/usr/bin/env bash
# Runs every Go fuzz target of the module for a bounded time each
# (FUZZTIME, default 4s), FUZZJOBS of them at a time (default: one a CPU;
# each target fuzzes with one worker). Inputs that fail are written by
# `go test` to the package's testdata/fuzz/<Target>/ and fail this script;
# commit them with the fix, so that they run as regression tests in every
# plain `go test` from then on.
#
#   bash scripts/fuzz.sh                   # every target, 4s each
#   FUZZTIME=1m bash scripts/fuzz.sh FuzzJWT   # one target, longer
#   bash scripts/fuzz.sh --save-corpus     # also copy the inputs the fuzzer
#                                          # found interesting into testdata/fuzz
set -euo pipefail
cd "$(dirname "$0")/.."
export fuzztime=${FUZZTIME:-4s}
jobs=${FUZZJOBS:-$(nproc)}
case "$jobs" in
  '' | *[!0-9]* | 0) echo "FUZZJOBS=$jobs: want a whole number of targets to run at a time, 1 or more" >&2; exit 2 ;;
esac
export save=0
only=()
for a in "$@"; do
  case "$a" in
    --save-corpus) save=1 ;;
    *) only+=("$a") ;;
  esac
done
cache=$(go env GOCACHE)/fuzz
export cache

# fuzz_target FILE TARGET fuzzes one target and prints what it did as one
# block, once it is done, so that targets running side by side do not mix
# their lines.
fuzz_target() {
  local dir target=$2 pkg out
  dir=$(dirname "$1")
  if ! pkg=$(go list "./$dir" 2>&1); then
    printf '==> ./%s %s: go list failed\n%s\n' "$dir" "$target" "$pkg"
    return 1
  fi
  # -parallel 1: on a small machine the coordinator otherwise starves its
  # workers while it gathers baseline coverage.
  if ! out=$(go test -run '^$' -fuzz "^${target}\$" -fuzztime "$fuzztime" -parallel 1 "./$dir" 2>&1); then
    # A loaded machine can miss the coordinator's deadline while the
    # baseline is gathered, which go test reports as a bare "context
    # deadline exceeded" without an input: that is not a finding, so the
    # target runs once more. A real finding names its failing input.
    if grep -q "Failing input written" <<<"$out" || ! grep -q "context deadline exceeded" <<<"$out"; then
      printf '==> %s %s (%s): FAILED\n%s\n' "$pkg" "$target" "$fuzztime" "$(tail -n 30 <<<"$out")"
      return 1
    fi
    if ! out=$(go test -run '^$' -fuzz "^${target}\$" -fuzztime "$fuzztime" -parallel 1 "./$dir" 2>&1); then
      printf '==> %s %s (%s), run again after a missed deadline: FAILED\n%s\n' "$pkg" "$target" "$fuzztime" "$(tail -n 30 <<<"$out")"
      return 1
    fi
  fi
  printf '==> %s %s (%s)\n%s\n' "$pkg" "$target" "$fuzztime" "$(tail -n 2 <<<"$out")"
  if [ "$save" = 1 ] && [ -d "$cache/$pkg/$target" ]; then
    mkdir -p "$dir/testdata/fuzz/$target"
    # Keep the corpus small: the 40 shortest inputs cover the cases found.
    ls -S -r "$cache/$pkg/$target" | head -n 40 | while read -r f; do cp "$cache/$pkg/$target/$f" "$dir/testdata/fuzz/$target/"; done
  fi
}
export -f fuzz_target

# git grep exits 1 when nothing matches, which the checks below report.
all=$(git grep -o -e '^func Fuzz[A-Za-z0-9_]*' -- '*_test.go') || [ $? -eq 1 ] || { echo "fuzz: git grep failed" >&2; exit 1; }
all=$(sed 's/:func / /' <<<"$all")
for name in "${only[@]}"; do
  grep -q " $name\$" <<<"$all" || { echo "fuzz: no fuzz target is named $name" >&2; exit 1; }
done
targets=$(while read -r file target; do
  [ ${#only[@]} -eq 0 ] || printf '%s\n' "${only[@]}" | grep -qx "$target" || continue
  printf '%s %s\n' "$file" "$target"
done <<<"$all")
if [ -z "$targets" ]; then
  echo "fuzz: no fuzz targets in this module" >&2
  exit 1
fi
n=$(wc -l <<<"$targets")
# xargs runs every target even when one fails, and exits non-zero if any did.
if ! xargs -P "$jobs" -L 1 bash -c 'fuzz_target "$1" "$2"' fuzz <<<"$targets"; then
  echo "fuzz: a target failed (above)" >&2
  exit 1
fi
echo "fuzz: $n targets, $fuzztime each, $jobs at a time: no failures"
