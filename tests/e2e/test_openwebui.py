"""End-to-end: NEO NL Agent behind a real Open WebUI 0.12.4 (opt-in: `NEO_E2E_OPENWEBUI=1`).

What runs: the service (offline/extractive mode, bundled document server, API_KEYS=e2e-key) and Open WebUI, each
as its own process on a free loopback port. Open WebUI is installed with pip into its own virtualenv
(`.venv-openwebui`, override with NEO_OPENWEBUI_VENV), once; a marker file makes later runs reuse it.

The chat goes the way the 0.12.4 browser sends it (Chat.svelte `sendMessageSocket`): a socket.io connection is
opened first (its sid is the `session_id`), then `POST /api/chat/completions` without `chat_id` and with
`parent_id: null`, `id` (the assistant message), `message_ids`, `user_message` and `background_tasks`
(title, tags, follow-ups). Open WebUI then creates the chat itself, answers `{status, task_ids, chat_id}`,
streams the service's SSE to the browser as socket.io `events`, stores the message and runs the background
tasks. The test reads the socket.io events as the browser would, then the stored chat
(`GET /api/v1/chats/{id}`), the service's `/metrics` and its log, and what Open WebUI sent to the service
(a transparent recording relay sits between the two). See docs/OPENWEBUI_E2E.md.

Two tests pin service bugs this test found (event lines on Open WebUI's API passthrough; numbered sources that
shared a URL collapsing into one citation); both are fixed.

Run: NEO_E2E_OPENWEBUI=1 .venv/bin/python -m pytest tests/e2e -q -s
"""

from __future__ import annotations

import json
import os
import re
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from tests.fakes.servers import ServerThread

REPO = Path(__file__).resolve().parents[2]
OPENWEBUI_VERSION = "0.12.4"
QUESTION = "Wanneer vervalt de vergunning van kerncentrale Borssele?"
EXPECTED_DATE = "31 december 2033"
API_KEY = "e2e-key"
MODEL, LITE_MODEL = "neo-nl-agent", "neo-nl-agent-lite"
# The admin the stack signs up (the first user of a fresh Open WebUI); the browser step signs in with it.
ADMIN_NAME, ADMIN_EMAIL, ADMIN_PASSWORD = "E2E Admin", "e2e-admin@example.com", "e2e-Password-1"
# Open WebUI 0.12.4 runs these three background tasks for the first turn of a new chat (see background_tasks).
BACKGROUND_TASKS = {"title_generation": True, "tags_generation": True, "follow_up_generation": True}

pytestmark = pytest.mark.skipif(
    os.environ.get("NEO_E2E_OPENWEBUI") != "1",
    reason="opt-in: set NEO_E2E_OPENWEBUI=1 (installs open-webui==0.12.4 into its own venv, several GB)",
)

# socket.io client run with Open WebUI's own interpreter (python-socketio and aiohttp come with it): prints
# {"sid": ...} once connected, then appends every `events` message (what the browser receives) as a JSON line.
LISTENER = r"""
import asyncio, json, sys
import socketio

async def main(url, token, out_path):
    sio = socketio.AsyncClient(reconnection=False)
    out = open(out_path, "a", buffering=1, encoding="utf-8")

    @sio.on("events")
    async def on_events(data):
        out.write(json.dumps(data, ensure_ascii=False, default=str) + "\n")

    await sio.connect(url, socketio_path="/ws/socket.io", auth={"token": token},
                      transports=["websocket"], wait_timeout=30)
    await sio.emit("user-join", {"auth": {"token": token}})
    print(json.dumps({"sid": sio.get_sid()}), flush=True)
    await sio.wait()

asyncio.run(main(*sys.argv[1:4]))
"""


# ---------------------------------------------------------------------------------------------- processes
def _python311() -> str:
    for candidate in (
        os.environ.get("NEO_OPENWEBUI_PYTHON"),
        "/root/.pyenv/versions/3.11.7/bin/python3.11",
        shutil.which("python3.11"),
    ):
        if candidate and Path(candidate).exists():
            return candidate
    pytest.fail("open-webui needs Python 3.11: none found (set NEO_OPENWEBUI_PYTHON)")


def _run(cmd: list[str], timeout: float) -> None:
    print(f"[e2e] $ {' '.join(cmd)}", flush=True)
    result = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=timeout, text=True)
    if result.returncode != 0:
        pytest.fail(f"command failed ({result.returncode}): {' '.join(cmd)}\n{result.stdout[-4000:]}")


def ensure_openwebui(venv: Path) -> dict[str, Any]:
    """Install open-webui==0.12.4 into `venv` unless its marker says it is there; returns install facts."""
    marker = venv / f".installed-open-webui-{OPENWEBUI_VERSION}"
    if marker.exists() and (venv / "bin" / "open-webui").exists():
        info = json.loads(marker.read_text() or "{}")
        return {**info, "reused": True}
    python = venv / "bin" / "python"
    started = time.monotonic()
    if not python.exists():
        _run([_python311(), "-m", "venv", str(venv)], timeout=600)
    _run([str(python), "-m", "pip", "install", "-q", "--upgrade", "pip"], timeout=900)
    # The wheel is ~100 MB and its dependencies several GB (torch among them): minutes, not seconds.
    _run([str(python), "-m", "pip", "install", "-q", f"open-webui=={OPENWEBUI_VERSION}"], timeout=3600)
    info = {
        "version": OPENWEBUI_VERSION,
        "install_seconds": round(time.monotonic() - started, 1),
        "installed_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "python": subprocess.run([str(python), "--version"], capture_output=True, text=True).stdout.strip(),
    }
    marker.write_text(json.dumps(info))
    return {**info, "reused": False}


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class Proc:
    """A child process in its own session (so it and its children stop together), output to a log file."""

    def __init__(self, name: str, args: list[str], env: dict[str, str], cwd: Path, log_path: Path) -> None:
        self.name, self.log_path = name, log_path
        self._log = open(log_path, "wb")
        self.popen = subprocess.Popen(
            args, env=env, cwd=cwd, stdout=self._log, stderr=subprocess.STDOUT, start_new_session=True
        )

    def alive(self) -> bool:
        return self.popen.poll() is None

    def stop(self) -> None:
        if self.popen.poll() is None:
            for sig, wait in ((signal.SIGTERM, 20), (signal.SIGKILL, 10)):
                try:
                    os.killpg(self.popen.pid, sig)
                except ProcessLookupError:
                    break
                try:
                    self.popen.wait(wait)
                    break
                except subprocess.TimeoutExpired:
                    continue
        self._log.close()

    def text(self) -> str:
        return self.log_path.read_text(encoding="utf-8", errors="replace") if self.log_path.exists() else ""

    def tail(self, lines: int = 60) -> str:
        return "\n".join(self.text().splitlines()[-lines:])


def wait_http(url: str, proc: Proc, timeout: float) -> float:
    started = time.monotonic()
    while time.monotonic() - started < timeout:
        if not proc.alive():
            pytest.fail(f"{proc.name} exited ({proc.popen.returncode}) before {url} answered:\n{proc.tail()}")
        try:
            if httpx.get(url, timeout=5).status_code == 200:
                return round(time.monotonic() - started, 1)
        except httpx.HTTPError:
            pass
        time.sleep(1)
    pytest.fail(f"{url} did not answer within {timeout:.0f}s:\n{proc.tail()}")


class RecordingProxy:
    """Transparent HTTP relay between Open WebUI and the service that keeps what crossed it: the
    X-OpenWebUI-* headers, the request body and the response (streams are relayed as they come)."""

    def __init__(self, upstream: str) -> None:
        self.upstream = upstream
        self.records: list[dict[str, Any]] = []
        self.app = Starlette(routes=[Route("/{path:path}", self.relay, methods=["GET", "POST"])])

    async def relay(self, request: Request) -> Response:
        body = await request.body()
        try:
            payload = json.loads(body) if body else None
        except ValueError:
            payload = None
        record: dict[str, Any] = {
            "method": request.method,
            "path": request.url.path,
            "headers": {k.lower(): v for k, v in request.headers.items() if k.lower().startswith("x-openwebui-")},
            "body": payload,
            "status": None,
            "response": None,
        }
        self.records.append(record)
        headers = {
            k: v for k, v in request.headers.items() if k.lower() not in ("host", "content-length", "accept-encoding")
        }
        client = httpx.AsyncClient(base_url=self.upstream, timeout=None)
        upstream = await client.send(
            client.build_request(
                request.method, request.url.path, params=request.query_params, headers=headers, content=body
            ),
            stream=True,
        )
        record["status"] = upstream.status_code
        media_type = upstream.headers.get("content-type", "application/json")
        if "text/event-stream" not in media_type:
            data = await upstream.aread()
            await upstream.aclose()
            await client.aclose()
            record["response"] = data.decode("utf-8", "replace")
            return Response(data, status_code=upstream.status_code, media_type=media_type)

        async def stream():
            seen: list[bytes] = []
            try:
                async for chunk in upstream.aiter_bytes():
                    seen.append(chunk)
                    yield chunk
            finally:
                record["response"] = b"".join(seen).decode("utf-8", "replace")
                await upstream.aclose()
                await client.aclose()

        return StreamingResponse(stream(), status_code=upstream.status_code, media_type=media_type)

    def chat_requests(self, start: int = 0) -> list[dict[str, Any]]:
        return [r for r in self.records[start:] if r["path"] == "/v1/chat/completions" and r["method"] == "POST"]


def last_user_text(body: dict[str, Any] | None) -> str:
    for message in reversed((body or {}).get("messages") or []):
        if message.get("role") == "user":
            content = message.get("content")
            if isinstance(content, list):
                return "\n".join(p.get("text") or "" for p in content if isinstance(p, dict))
            return content or ""
    return ""


# ---------------------------------------------------------------------------------------------- the stack
@dataclass
class Stack:
    service_url: str
    webui_url: str
    token: str
    user_id: str
    tmp: Path
    service: Proc
    webui: Proc
    webui_python: Path
    proxy: RecordingProxy
    report: dict[str, Any] = field(default_factory=dict)

    def client(self, timeout: float = 60) -> httpx.Client:
        return httpx.Client(base_url=self.webui_url, headers={"Authorization": f"Bearer {self.token}"}, timeout=timeout)

    def metrics(self) -> dict[str, float]:
        """Service counters: requests by kind (`chat`, `task`) and outcome, plus in-flight requests."""
        # /metrics takes the API key when API_KEYS is set (unless METRICS_PUBLIC=true)
        response = httpx.get(self.service_url + "/metrics", headers={"Authorization": f"Bearer {API_KEY}"}, timeout=10)
        assert response.status_code == 200, f"/metrics: {response.status_code} {response.text[:200]}"
        text = response.text
        counts: dict[str, float] = {}
        for kind, outcome, value in re.findall(
            r'^neo_requests_total\{kind="(\w+)",outcome="(\w+)"\} ([0-9.e+]+)$', text, re.M
        ):
            counts[f"{kind}/{outcome}"] = float(value)
        in_flight = re.search(r"^neo_requests_in_flight ([0-9.e+]+)$", text, re.M)
        counts["in_flight"] = float(in_flight.group(1)) if in_flight else 0.0
        return counts

    def pipeline_runs(self) -> int:
        """Completed pipeline runs, from the service log (graph/runner.py logs "pipeline finished" once a run)."""
        return self.service.text().count("pipeline finished")

    def set_task_model_external(self, model_id: str) -> dict[str, Any]:
        with self.client() as client:
            config = client.get("/api/v1/tasks/config").json()
            config["TASK_MODEL_EXTERNAL"] = model_id
            response = client.post("/api/v1/tasks/config/update", json=config)
            assert response.status_code == 200, response.text
            return response.json()


def _child_env(drop_prefixes: tuple[str, ...] = ()) -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith(drop_prefixes)}


@contextmanager
def start_stack(request: pytest.FixtureRequest, openwebui_events: str = "auto") -> Iterator[Stack]:
    """The service, the recording relay and Open WebUI with a signed-up admin; stopped (and the temp dir removed
    unless a test of the module failed or NEO_E2E_KEEP=1) on exit. The `stack` fixture of each e2e module.
    `openwebui_events`: the service's OPENWEBUI_EVENTS ("off": Open WebUI builds its sources from the answer's
    `url_citation` annotations instead of the service's own `source` events)."""
    venv = Path(os.environ.get("NEO_OPENWEBUI_VENV") or REPO / ".venv-openwebui")
    install = ensure_openwebui(venv)
    print(f"\n[e2e] open-webui {OPENWEBUI_VERSION} in {venv}: {install}", flush=True)
    tmp = Path(tempfile.mkdtemp(prefix="neo-e2e-openwebui-"))
    failed_before = request.session.testsfailed
    service_port, webui_port = free_port(), free_port()

    # The service: offline (no LLM), bundled document server, one API key. cwd=tmp so that a developer's
    # .env in the repo is not read; the settings that matter here are set explicitly.
    service_env = {
        **_child_env(),
        "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
        "HOST": "127.0.0.1",
        "PORT": str(service_port),
        "API_KEYS": API_KEY,
        "LLM_BASE_URL": "",
        "MCP_SERVER_URL": "",
        "MODEL_ID": MODEL,
        "LITE_MODEL_ID": LITE_MODEL,
        "THINK_MODE": "tags",
        "OPENWEBUI_EVENTS": openwebui_events,
        # Every chat turn must run the pipeline (no replay from the answer cache), so that "pipeline runs"
        # counts are exact.
        "RESPONSE_CACHE": "false",
        "REDIS_URL": "",
        "RATE_LIMIT": "",
        "LOG_LEVEL": "INFO",
        "LOG_JSON": "false",
    }
    # Open WebUI talks to the service through a transparent recording relay (in this process), so the test can
    # see what Open WebUI sent (headers, model, task prompts) and what the service answered.
    proxy = RecordingProxy(f"http://127.0.0.1:{service_port}")
    proxy_server = ServerThread(proxy.app).start()

    webui_env = {
        **_child_env(("OPENAI_", "OLLAMA_", "REDIS_", "DATABASE_", "VIRTUAL_ENV", "PYTHONPATH", "TASK_MODEL")),
        "DATA_DIR": str(tmp / "openwebui-data"),
        "WEBUI_SECRET_KEY": "neo-e2e-secret",
        "OFFLINE_MODE": "true",
        "HF_HUB_OFFLINE": "1",
        "ENABLE_OLLAMA_API": "false",
        "OPENAI_API_BASE_URLS": f"{proxy_server.base_url}/v1",
        "OPENAI_API_KEYS": API_KEY,
        "RAG_EMBEDDING_ENGINE": "openai",
        "ENABLE_VERSION_UPDATE_CHECK": "false",
        # X-OpenWebUI-User-* (and X-OpenWebUI-Chat-Id) headers: the service then emits status/source events.
        "ENABLE_FORWARD_USER_INFO_HEADERS": "true",
        # 0.12.4 reads it as the default of the `task.model.external` config ("Task Model (External)").
        "TASK_MODEL_EXTERNAL": LITE_MODEL,
    }
    (tmp / "openwebui-data").mkdir()
    service: Proc | None = None
    webui: Proc | None = None
    stack: Stack | None = None
    try:
        service = Proc("service", [sys.executable, "-m", "app", "serve"], service_env, tmp, tmp / "service.log")
        service_seconds = wait_http(f"http://127.0.0.1:{service_port}/health", service, 120)
        webui = Proc(
            "open-webui",
            [str(venv / "bin" / "open-webui"), "serve", "--host", "127.0.0.1", "--port", str(webui_port)],
            webui_env,
            tmp,
            tmp / "openwebui.log",
        )
        webui_seconds = wait_http(f"http://127.0.0.1:{webui_port}/health", webui, 300)
        print(f"[e2e] service up in {service_seconds}s, Open WebUI up in {webui_seconds}s; logs in {tmp}", flush=True)

        signup = httpx.post(
            f"http://127.0.0.1:{webui_port}/api/v1/auths/signup",
            json={"name": ADMIN_NAME, "email": ADMIN_EMAIL, "password": ADMIN_PASSWORD},
            timeout=60,
        )
        assert signup.status_code == 200, signup.text
        account = signup.json()
        assert account["role"] == "admin", account
        stack = Stack(
            service_url=f"http://127.0.0.1:{service_port}",
            webui_url=f"http://127.0.0.1:{webui_port}",
            token=account["token"],
            user_id=account["id"],
            tmp=tmp,
            service=service,
            webui=webui,
            webui_python=venv / "bin" / "python",
            proxy=proxy,
        )
        version = httpx.get(stack.webui_url + "/api/version", timeout=10).json().get("version")
        with stack.client() as client:
            task_config = client.get("/api/v1/tasks/config").json()
        stack.report.update(
            date=datetime.now(UTC).isoformat(timespec="seconds"),
            open_webui_version=version,
            install=install,
            startup_seconds={"service": service_seconds, "open_webui": webui_seconds},
            task_model_external_from_env=task_config.get("TASK_MODEL_EXTERNAL"),
        )
        yield stack
    finally:
        failed = request.session.testsfailed > failed_before
        if stack is not None:
            report_path = Path(os.environ.get("NEO_E2E_REPORT") or tmp / "report.json")
            report_path.write_text(json.dumps(stack.report, ensure_ascii=False, indent=2), encoding="utf-8")
            print(f"\n[e2e] report: {report_path}", flush=True)
        for proc in (webui, service):
            if proc is not None:
                proc.stop()
        proxy_server.stop()
        if failed or stack is None:
            for proc in (service, webui):
                if proc is not None:
                    print(f"\n[e2e] ---- {proc.name} log (tail, {proc.log_path}) ----\n{proc.tail(80)}", flush=True)
            print(f"[e2e] kept {tmp} for inspection", flush=True)
        elif not os.environ.get("NEO_E2E_KEEP"):
            shutil.rmtree(tmp, ignore_errors=True)


@pytest.fixture(scope="module")
def stack(request: pytest.FixtureRequest) -> Iterator[Stack]:
    with start_stack(request) as running:
        yield running


# ---------------------------------------------------------------------------------------------- a web-UI turn
class Listener:
    """The browser's socket.io connection (run with Open WebUI's interpreter)."""

    def __init__(self, stack: Stack, label: str) -> None:
        script = stack.tmp / "listener.py"
        script.write_text(LISTENER, encoding="utf-8")
        self.events_path = stack.tmp / f"events-{label}.jsonl"
        self.popen = subprocess.Popen(
            [str(stack.webui_python), str(script), stack.webui_url, stack.token, str(self.events_path)],
            stdout=subprocess.PIPE,
            stderr=open(stack.tmp / f"listener-{label}.log", "wb"),
            start_new_session=True,
        )
        ready, _, _ = select.select([self.popen.stdout], [], [], 60)
        line = self.popen.stdout.readline() if ready else b""
        if not line:
            self.stop()
            pytest.fail(f"socket.io listener did not connect: {(stack.tmp / f'listener-{label}.log').read_text()}")
        self.sid = json.loads(line)["sid"]

    def events(self, chat_id: str) -> list[dict[str, Any]]:
        """The `data` of every socket.io `events` message for this chat, in arrival order."""
        if not self.events_path.exists():
            return []
        out = []
        for line in self.events_path.read_text(encoding="utf-8").splitlines():
            try:
                message = json.loads(line)
            except json.JSONDecodeError:  # a line being written
                continue
            if message.get("chat_id") == chat_id and isinstance(message.get("data"), dict):
                out.append(message["data"])
        return out

    def stop(self) -> None:
        if self.popen.poll() is None:
            os.killpg(self.popen.pid, signal.SIGTERM)
            try:
                self.popen.wait(10)
            except subprocess.TimeoutExpired:
                os.killpg(self.popen.pid, signal.SIGKILL)
                self.popen.wait(10)


@dataclass
class ChatRun:
    label: str
    response: dict[str, Any]
    chat_id: str
    assistant_id: str
    events: list[dict[str, Any]]
    chat: dict[str, Any]
    message: dict[str, Any]
    tags: list[str]
    metrics_delta: dict[str, float]
    pipeline_runs: int
    seconds: float
    requests: list[dict[str, Any]]  # chat-completion requests Open WebUI sent to the service during the turn
    title_exchange: dict[str, Any] | None = None


def browser_body(model_item: dict[str, Any], session_id: str, user_id: str) -> tuple[dict[str, Any], str]:
    """The body Chat.svelte (0.12.4) sends for the first message of a new chat; returns it and the assistant id."""
    user_message_id, assistant_id = str(uuid.uuid4()), str(uuid.uuid4())
    user_message = {
        "id": user_message_id,
        "parentId": None,
        "childrenIds": [],
        "role": "user",
        "user": {"id": user_id, "name": "E2E Admin"},
        "user_id": user_id,
        "content": QUESTION,
        "timestamp": int(time.time()),
        "models": [MODEL],
    }
    body = {
        "stream": True,
        "model": MODEL,
        # No `messages`: for a saved chat the browser sends only a system prompt (none here); the backend
        # loads the conversation from the database.
        "params": {"model_controls": {}},
        "tool_ids": [],
        "tool_servers": [],
        "features": {"voice": False, "image_generation": False, "code_interpreter": False, "web_search": False},
        "variables": {},
        "chat_variables": {},
        "model_item": model_item,
        "session_id": session_id,
        # no chat_id: a new chat; with parent_id null the backend creates it (and starts title generation)
        "id": assistant_id,
        "message_ids": [{"model_id": MODEL, "message_id": assistant_id, "modelIdx": 0}],
        "parent_id": None,
        "user_message": user_message,
        "background_tasks": dict(BACKGROUND_TASKS),
    }
    return body, assistant_id


def _delta(after: dict[str, float], before: dict[str, float]) -> dict[str, float]:
    keys = set(after) | set(before)
    return {k: after.get(k, 0.0) - before.get(k, 0.0) for k in sorted(keys) if k != "in_flight"}


def run_webui_chat(stack: Stack, label: str) -> ChatRun:
    listener = Listener(stack, label)
    try:
        with stack.client(timeout=120) as client:
            models = client.get("/api/models").json()["data"]
            model_item = next(m for m in models if m["id"] == MODEL)
            metrics_before, runs_before = stack.metrics(), stack.pipeline_runs()
            records_before = len(stack.proxy.records)
            body, assistant_id = browser_body(model_item, listener.sid, stack.user_id)
            started = time.monotonic()
            response = client.post("/api/chat/completions", json=body)
            assert response.status_code == 200, f"POST /api/chat/completions: {response.status_code} {response.text}"
            accepted = response.json()
            chat_id = accepted.get("chat_id")
            assert chat_id, f"no chat_id in {accepted}"

            # Consume the live stream (socket.io) until the turn is over: the final chat:completion with
            # done=true, then chat:active=false (sent after the background tasks of the turn ran).
            deadline = time.monotonic() + 300
            while True:
                events = listener.events(chat_id)
                done_at = next(
                    (
                        i
                        for i, e in enumerate(events)
                        if e.get("type") == "chat:completion" and (e.get("data") or {}).get("done") is True
                    ),
                    None,
                )
                if done_at is not None and any(
                    e.get("type") == "chat:active" and (e.get("data") or {}).get("active") is False
                    for e in events[done_at:]
                ):
                    break
                for proc in (stack.service, stack.webui):
                    assert proc.alive(), f"{proc.name} died during the chat:\n{proc.tail()}"
                assert time.monotonic() < deadline, f"turn not finished after 300s; events so far: {events[-5:]}"
                time.sleep(0.3)
            seconds = round(time.monotonic() - started, 2)

            # The title task starts concurrently when the chat is created; wait until it is stored, and until
            # the service has no request in flight.
            deadline = time.monotonic() + 120
            while True:
                chat = client.get(f"/api/v1/chats/{chat_id}").json()
                message = chat["chat"]["history"]["messages"].get(assistant_id, {})
                if (
                    chat.get("title") not in (None, "", "New Chat")
                    and message.get("done")
                    and stack.metrics()["in_flight"] == 0
                ):
                    break
                assert time.monotonic() < deadline, f"chat not settled after 120s: title={chat.get('title')!r}"
                time.sleep(0.5)
            time.sleep(1.0)  # let stragglers land before the final reads
            chat = client.get(f"/api/v1/chats/{chat_id}").json()
            message = chat["chat"]["history"]["messages"][assistant_id]
            tags = [t.get("name") for t in client.get(f"/api/v1/chats/{chat_id}/tags").json()]
            return ChatRun(
                label=label,
                response=accepted,
                chat_id=chat_id,
                assistant_id=assistant_id,
                events=listener.events(chat_id),
                chat=chat,
                message=message,
                tags=tags,
                metrics_delta=_delta(stack.metrics(), metrics_before),
                pipeline_runs=stack.pipeline_runs() - runs_before,
                seconds=seconds,
                requests=stack.proxy.chat_requests(records_before),
            )
    finally:
        listener.stop()


# ---------------------------------------------------------------------------------------------- checks
class Checks:
    """Named checks: all are evaluated and reported (pass/fail each) before the test asserts."""

    def __init__(self) -> None:
        self.results: dict[str, dict[str, Any]] = {}

    def check(self, name: str, ok: bool, detail: Any = None) -> None:
        self.results[name] = {"ok": bool(ok), "detail": detail}

    def assert_all(self) -> None:
        failed = {k: v for k, v in self.results.items() if not v["ok"]}
        for name, result in self.results.items():
            print(f"[e2e]   {'PASS' if result['ok'] else 'FAIL'} {name}: {str(result['detail'])[:300]}", flush=True)
        assert not failed, "failed checks:\n" + json.dumps(failed, ensure_ascii=False, indent=2)[:6000]


def _reasoning_text(output: list[dict[str, Any]]) -> str:
    return "".join(
        part.get("text") or ""
        for item in output
        if item.get("type") == "reasoning"
        for part in item.get("content") or []
    )


def _message_text(output: list[dict[str, Any]]) -> str:
    return "\n".join(
        "".join(part.get("text") or "" for part in item.get("content") or [])
        for item in output
        if item.get("type") == "message"
    )


def excerpt(run: ChatRun) -> dict[str, Any]:
    """The stored assistant message, shortened for the report."""
    message = run.message

    def short(text: str, n: int = 300) -> str:
        return text if len(text) <= n else text[:n] + f"… (+{len(text) - n} chars)"

    return {
        "chat_title": run.chat.get("title"),
        "tags": run.tags,
        "message": {
            "model": message.get("model"),
            "done": message.get("done"),
            "content": short(message.get("content") or "", 600),
            "output": [
                {
                    "type": item.get("type"),
                    "status": item.get("status"),
                    **(
                        {"start_tag": item.get("start_tag"), "end_tag": item.get("end_tag")}
                        if item.get("type") == "reasoning"
                        else {}
                    ),
                    "text": short("".join(p.get("text") or "" for p in item.get("content") or []), 700),
                }
                for item in message.get("output") or []
            ],
            "statusHistory": message.get("statusHistory"),
            "sources": [
                {
                    "source": s.get("source"),
                    "document": [short(d, 160) for d in s.get("document") or []],
                    "metadata": s.get("metadata"),
                }
                for s in (message.get("sources") or [])[:2]
            ]
            + ([f"... {len(message['sources']) - 2} more"] if len(message.get("sources") or []) > 2 else []),
            "followUps": message.get("followUps"),
        },
    }


def check_webui_chat(run: ChatRun, task_model: str) -> Checks:
    c = Checks()
    message, events = run.message, run.events
    output = message.get("output") or []
    content = message.get("content") or ""
    event_types = [e.get("type") for e in events]

    c.check(
        "accepted as a background task",
        run.response.get("status") is True and bool(run.response.get("task_ids")),
        run.response,
    )
    c.check("no error stored on the message", "error" not in message, message.get("error"))

    # Live stream as the browser sees it
    live_status = [e["data"] for e in events if e.get("type") == "status"]
    c.check(
        "live: status events",
        sum(1 for s in live_status if s.get("description")) >= 3,
        [s.get("description") for s in live_status],
    )
    live_sources = [e["data"] for e in events if e.get("type") == "source"]
    c.check("live: source events", len(live_sources) >= 1, len(live_sources))
    c.check(
        "live: answer completed (chat:completion done)",
        any(e.get("type") == "chat:completion" and (e.get("data") or {}).get("done") is True for e in events),
        event_types[-8:],
    )
    c.check(
        "live: chat:title event",
        "chat:title" in event_types,
        [e.get("data") for e in events if e.get("type") == "chat:title"],
    )

    # Reasoning: a reasoning output item with the think lines, not in the visible content
    reasoning_items = [item for item in output if item.get("type") == "reasoning"]
    reasoning = _reasoning_text(output)
    think_lines = [line.strip() for line in reasoning.splitlines() if line.strip()]
    c.check(
        "reasoning item stored",
        len(reasoning_items) == 1 and reasoning_items[0].get("start_tag") == "<think>",
        [(i.get("type"), i.get("start_tag"), i.get("status")) for i in output],
    )
    c.check(
        "reasoning has the think lines",
        len(think_lines) >= 3 and any("passages" in x for x in think_lines),
        think_lines,
    )
    history = message.get("statusHistory") or []
    status_lines = [s.get("description") for s in history if s.get("description")]
    # the service closes Open WebUI's list with what the answer rests on ("Klaar: antwoord met 3 geciteerde
    # bron(nen)"), not a repeat of the last progress line
    c.check(
        "statusHistory stored (= think lines, then the closing 'Klaar: …' line as done)",
        bool(status_lines)
        and status_lines[:-1] == think_lines
        and status_lines[-1].startswith("Klaar: ")
        and status_lines[-1] not in think_lines
        and history[-1].get("done") is True,
        {"statusHistory": status_lines[:4], "last": status_lines[-1:], "count": len(status_lines)},
    )
    content_lines = {line.strip() for line in content.splitlines()}
    c.check(
        "think lines not in visible content",
        "<think>" not in content and "</think>" not in content and not (set(think_lines) & content_lines),
        sorted(set(think_lines) & content_lines),
    )
    c.check(
        "content = message output text",
        content.strip() == _message_text(output).strip(),
        {"content_chars": len(content), "output_text_chars": len(_message_text(output))},
    )

    # The answer: date, [n] citations, Markdown sources list
    body, _, sources_list = content.partition("**Bronnen**")
    cited = sorted({int(n) for n in re.findall(r"\[(\d+)\]", body)})
    listed = [int(n) for n in re.findall(r"^(\d+)\. ", sources_list, re.M)]
    # "1. Title, Section (ANVS, 2016) — url": the line after its number (a title may hold " (" itself)
    lines = re.findall(r"^\d+\. (.+)$", sources_list, re.M)
    c.check(f'answer contains "{EXPECTED_DATE}"', EXPECTED_DATE in body, body[:300])
    c.check("answer has [n] citations", bool(cited), cited)
    c.check("Markdown **Bronnen** list", bool(listed) and listed == list(range(1, len(listed) + 1)), listed)

    # Sources stored from the service's source events (citation chips)
    stored = message.get("sources") or []
    # the n-th stored source is the list's n-th line (named by its title; Open WebUI numbers the panel)
    names = [(source.get("source") or {}).get("name") or "" for source in stored]
    numbers = [n for n, name in enumerate(names, 1) if name and n <= len(lines) and lines[n - 1].startswith(name)]
    c.check(
        "sources stored",
        len(stored) >= 1 and all(s.get("document") and s.get("metadata") for s in stored),
        [(s.get("source") or {}).get("name") for s in stored],
    )
    c.check(
        "stored sources match the [n] numbering",
        numbers == listed and all(n <= len(stored) for n in cited),
        {"stored": numbers, "listed": listed, "cited": cited},
    )

    # Background tasks answered by the task path
    title = run.chat.get("title")
    c.check("title from the task path", title not in (None, "", "New Chat", QUESTION), title)
    c.check("follow-ups stored", bool(message.get("followUps")), message.get("followUps"))
    c.check("tags stored", bool(run.tags), run.tags)

    # The service's view: one pipeline run (the answer); the three background requests were tasks
    delta = run.metrics_delta
    c.check("service: 1 chat request", delta.get("chat/ok") == 1, delta)
    c.check("service: 3 task requests (title, tags, follow-ups)", delta.get("task/ok") == 3, delta)
    c.check("service: no failed requests", all(v == 0 for k, v in delta.items() if not k.endswith("/ok")), delta)
    c.check("service: pipeline ran once", run.pipeline_runs == 1, run.pipeline_runs)

    # What Open WebUI actually sent (recording relay): one streamed answer request for the web-UI chat, and
    # the task prompts, non-streamed, to the task model; the title reply is the JSON Open WebUI parsed.
    answers = [r for r in run.requests if (r["body"] or {}).get("stream") is True]
    tasks = [r for r in run.requests if last_user_text(r["body"]).lstrip().startswith("### Task:")]
    c.check(
        "request: one streamed answer request with X-OpenWebUI-Chat-Id",
        len(answers) == 1
        and answers[0]["body"].get("model") == MODEL
        and answers[0]["headers"].get("x-openwebui-chat-id") == run.chat_id,
        [{"model": (r["body"] or {}).get("model"), "headers": sorted(r["headers"])} for r in answers],
    )
    c.check(
        f"request: 3 `### Task:` prompts to {task_model}, not streamed",
        len(tasks) == 3 and all(r["body"].get("model") == task_model and not r["body"].get("stream") for r in tasks),
        [(r["body"].get("model"), r["body"].get("stream"), last_user_text(r["body"])[:60]) for r in tasks],
    )
    title_requests = [r for r in tasks if "title" in (last_user_text(r["body"]).split("\n", 2) + ["", ""])[1].lower()]
    title_reply = None
    if len(title_requests) == 1:
        try:
            title_reply = json.loads(title_requests[0]["response"])["choices"][0]["message"]["content"]
        except (TypeError, ValueError, KeyError, IndexError):
            title_reply = title_requests[0]["response"]
    c.check(
        "title request answered with the title JSON (no think block)",
        isinstance(title_reply, str)
        and "<think>" not in title_reply
        and json.loads(title_reply[title_reply.find("{") : title_reply.rfind("}") + 1] or "{}").get("title") == title,
        title_reply,
    )
    run.title_exchange = (
        {
            "request": {
                "model": title_requests[0]["body"].get("model"),
                "stream": title_requests[0]["body"].get("stream"),
                "headers": title_requests[0]["headers"],
                "prompt_start": last_user_text(title_requests[0]["body"])[:120],
            },
            "response_content": title_reply,
        }
        if title_requests
        else None
    )
    return c


def _record(stack: Stack, run: ChatRun, checks: Checks, **extra: Any) -> None:
    stack.report[run.label] = {
        "chat_id": run.chat_id,
        "seconds_to_answer": run.seconds,
        "service_requests": run.metrics_delta,
        "pipeline_runs": run.pipeline_runs,
        "title_exchange": run.title_exchange,
        **extra,
        "checks": {k: ("pass" if v["ok"] else "FAIL") for k, v in checks.results.items()},
        "stored": excerpt(run),
    }


# ---------------------------------------------------------------------------------------------- fixtures
@pytest.fixture(scope="module")
def external_task_chat(stack: Stack) -> ChatRun:
    """Task Model (External) = neo-nl-agent-lite (from TASK_MODEL_EXTERNAL)."""
    config = stack.set_task_model_external(LITE_MODEL)
    assert config["TASK_MODEL_EXTERNAL"] == LITE_MODEL
    return run_webui_chat(stack, "webui_chat_task_model_lite")


@pytest.fixture(scope="module")
def default_task_chat(stack: Stack) -> ChatRun:
    """No task model: Open WebUI sends the task prompts to neo-nl-agent itself (template heuristic)."""
    config = stack.set_task_model_external("")
    assert config["TASK_MODEL_EXTERNAL"] == ""
    return run_webui_chat(stack, "webui_chat_no_task_model")


@dataclass
class Passthrough:
    payloads: list[dict[str, Any]]
    content: str
    metrics_delta: dict[str, float]
    requests: list[dict[str, Any]]


@pytest.fixture(scope="module")
def api_passthrough(stack: Stack) -> Passthrough:
    """A plain API client of Open WebUI: POST /api/chat/completions with only model, messages and stream."""
    before, records_before = stack.metrics(), len(stack.proxy.records)
    payloads: list[dict[str, Any]] = []
    with stack.client(timeout=180) as client:
        body = {"model": MODEL, "stream": True, "messages": [{"role": "user", "content": QUESTION}]}
        with client.stream("POST", "/api/chat/completions", json=body) as response:
            assert response.status_code == 200, response.read()
            for line in response.iter_lines():
                if line.startswith("data:") and line[5:].strip() not in ("", "[DONE]"):
                    payloads.append(json.loads(line[5:]))
    content = "".join((p["choices"][0].get("delta") or {}).get("content") or "" for p in payloads if p.get("choices"))
    deadline = time.monotonic() + 30
    while stack.metrics()["in_flight"] and time.monotonic() < deadline:
        time.sleep(0.2)
    return Passthrough(payloads, content, _delta(stack.metrics(), before), stack.proxy.chat_requests(records_before))


# ---------------------------------------------------------------------------------------------- tests
def test_models_listed(stack: Stack) -> None:
    with stack.client() as client:
        models = {m["id"]: m for m in client.get("/api/models").json()["data"]}
    stack.report["models"] = {
        k: {"name": v.get("name"), "connection_type": v.get("connection_type")} for k, v in models.items()
    }
    assert MODEL in models, sorted(models)
    assert LITE_MODEL in models, sorted(models)
    assert models[MODEL]["name"] == "NEO NL Agent"
    assert "pipeline" not in models[MODEL]  # would make Open WebUI treat the service as a pipelines server
    assert models[MODEL].get("connection_type") == "external"  # so TASK_MODEL_EXTERNAL (not TASK_MODEL) applies
    assert stack.report["task_model_external_from_env"] == LITE_MODEL


def test_webui_chat_with_lite_task_model(stack: Stack, external_task_chat: ChatRun) -> None:
    """The recommended setup: Task Model (External) = neo-nl-agent-lite."""
    checks = check_webui_chat(external_task_chat, LITE_MODEL)
    _record(stack, external_task_chat, checks, task_model_external=LITE_MODEL)
    checks.assert_all()


def test_webui_chat_without_task_model(stack: Stack, default_task_chat: ChatRun) -> None:
    """Open WebUI's default: task prompts go to neo-nl-agent and are recognised by their `### Task:` template."""
    checks = check_webui_chat(default_task_chat, MODEL)
    _record(stack, default_task_chat, checks, task_model_external="")
    checks.assert_all()


def test_api_passthrough_stream(stack: Stack, api_passthrough: Passthrough) -> None:
    """Without chat fields Open WebUI passes the service's SSE through: think block, then the answer."""
    content = api_passthrough.content
    think, _, answer = content.partition("</think>")
    events = [p for p in api_passthrough.payloads if "event" in p]
    stack.report["api_passthrough"] = {
        "chunks": len(api_passthrough.payloads),
        "event_lines_passed_through": len(events),
        "service_requests": api_passthrough.metrics_delta,
        "openwebui_headers_sent": [sorted(r["headers"]) for r in api_passthrough.requests],
    }
    assert content.startswith("<think>\n"), content[:200]
    assert "</think>" in content
    assert EXPECTED_DATE in answer and "**Bronnen**" in answer, answer[:500]
    assert api_passthrough.metrics_delta.get("chat/ok") == 1, api_passthrough.metrics_delta


def test_api_passthrough_has_no_event_lines(api_passthrough: Passthrough) -> None:
    events = [p for p in api_passthrough.payloads if "event" in p]
    assert not events, f"{len(events)} `event` lines reached a plain API client, e.g. {events[:2]}"


def openwebui_source_ids(sources: list[dict[str, Any]]) -> list[str]:
    """What `[n]` resolves to in Open WebUI 0.12.4: a port of `getSourceIds` in
    src/lib/components/chat/Messages/ContentRenderer.svelte. Documents are de-duplicated by `metadata.source`
    (else `source.id`); `[n]` is the n-th distinct one (the sources panel groups them the same way)."""
    result: list[str] = []
    seen: set[str] = set()
    for source in sources:
        for index in range(len(source.get("document") or [])):
            metadata = (source.get("metadata") or [None] * (index + 1))[index] or {}
            key = metadata.get("source")
            if key is None:
                key = (source.get("source") or {}).get("id")
            key = "N/A" if key is None else key
            if key in seen:
                continue
            seen.add(key)
            if metadata.get("name"):
                result.append(metadata["name"])
            elif key.startswith(("http://", "https://")):
                result.append(key)
            else:
                result.append((source.get("source") or {}).get("name") or key)
    return result


def test_inline_citations_resolve_to_their_sources(stack: Stack, external_task_chat: ChatRun) -> None:
    stored = external_task_chat.message.get("sources") or []
    expected = [((s.get("metadata") or [{}])[0] or {}).get("name") for s in stored]
    resolved = openwebui_source_ids(stored)
    stack.report["inline_citation_resolution"] = {
        f"[{n}]": {"expected": want, "open_webui_shows": resolved[n - 1] if n <= len(resolved) else None}
        for n, want in enumerate(expected, 1)
    }
    stack.report["stored_sources_metadata_source"] = [
        ((s.get("metadata") or [{}])[0] or {}).get("source") for s in stored
    ]
    assert resolved == expected
