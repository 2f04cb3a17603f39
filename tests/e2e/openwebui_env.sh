#!/usr/bin/env bash
# Start the same stack as tests/e2e/test_openwebui.py by hand, to look at it in a browser:
# the service (offline, API_KEYS=e2e-key) on $NEO_PORT and Open WebUI 0.12.4 on $OWUI_PORT with a fresh data dir.
# Needs the venv the test installs (run the test once, or: python3.11 -m venv .venv-openwebui &&
# .venv-openwebui/bin/pip install open-webui==0.12.4). Ctrl-C stops both.
#
#   bash tests/e2e/openwebui_env.sh            # then open http://127.0.0.1:8080 and sign up (first user = admin)
set -euo pipefail
REPO="$(cd "$(dirname "$0")/../.." && pwd)"
VENV="${NEO_OPENWEBUI_VENV:-$REPO/.venv-openwebui}"
NEO_PORT="${NEO_PORT:-8000}"
OWUI_PORT="${OWUI_PORT:-8080}"
DATA="$(mktemp -d -t neo-openwebui-XXXXXX)"
[ -x "$VENV/bin/open-webui" ] || { echo "no $VENV/bin/open-webui (run the e2e test once to install it)"; exit 1; }

cleanup() { trap - EXIT INT TERM; kill "$NEO_PID" "$OWUI_PID" 2>/dev/null || true; wait 2>/dev/null || true; echo "data and logs: $DATA"; }
trap cleanup EXIT INT TERM

(cd "$DATA" && PYTHONPATH="$REPO" HOST=127.0.0.1 PORT="$NEO_PORT" API_KEYS=e2e-key LLM_BASE_URL= MCP_SERVER_URL= \
  exec "$REPO/.venv/bin/python" -m app serve >"$DATA/service.log" 2>&1) &
NEO_PID=$!

(cd "$DATA" && exec env -u PYTHONPATH -u VIRTUAL_ENV DATA_DIR="$DATA/openwebui-data" WEBUI_SECRET_KEY=neo-e2e-secret \
  OFFLINE_MODE=true HF_HUB_OFFLINE=1 ENABLE_OLLAMA_API=false OPENAI_API_BASE_URLS="http://127.0.0.1:$NEO_PORT/v1" \
  OPENAI_API_KEYS=e2e-key RAG_EMBEDDING_ENGINE=openai ENABLE_VERSION_UPDATE_CHECK=false \
  ENABLE_FORWARD_USER_INFO_HEADERS=true TASK_MODEL_EXTERNAL=neo-nl-agent-lite \
  "$VENV/bin/open-webui" serve --host 127.0.0.1 --port "$OWUI_PORT" >"$DATA/openwebui.log" 2>&1) &
OWUI_PID=$!

echo "service: http://127.0.0.1:$NEO_PORT/v1 (log $DATA/service.log)"
echo "Open WebUI: http://127.0.0.1:$OWUI_PORT (log $DATA/openwebui.log; first start takes 20-90 s)"
wait
