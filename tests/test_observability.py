"""Request ids, Prometheus metrics, logs that never contain API keys, and the embedded document server's log
lines told apart from the service's."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

import httpx
import pytest

from docserver.embedded import LOGGER, serve_in_background
from tests.conftest import QUESTION


def test_request_id_is_echoed_or_created(service) -> None:
    base = service()
    given = httpx.get(base + "/health", headers={"X-Request-Id": "abc-123"})
    assert given.headers["x-request-id"] == "abc-123"
    made = httpx.get(base + "/health", headers={"X-Request-Id": "bad id with spaces"})
    assert made.headers["x-request-id"] != "bad id with spaces" and len(made.headers["x-request-id"]) == 32


def test_metrics_count_requests_and_loop_lag(service) -> None:
    base = service()
    for stream in (True, False):
        httpx.post(base + "/v1/chat/completions", timeout=30,
                   json={"model": "neo-nl-agent", "stream": stream, "messages": [{"role": "user", "content": QUESTION}]})
    text = httpx.get(base + "/metrics").text
    assert 'neo_requests_total{kind="chat",outcome="ok"} 2.0' in text
    assert "neo_request_seconds_bucket" in text and "neo_first_answer_token_seconds_count 1.0" in text
    assert "neo_event_loop_lag_seconds" in text and "neo_upstream_calls_total 0.0" in text


def test_api_keys_never_reach_the_logs(service, capfd) -> None:
    base = service(api_keys=["s3cret-key-value"], log_level="DEBUG", log_json=True)
    httpx.post(base + "/v1/chat/completions", timeout=30, headers={"Authorization": "Bearer s3cret-key-value"},
               json={"model": "neo-nl-agent", "messages": [{"role": "user", "content": QUESTION}]})
    httpx.get(base + "/v1/models", headers={"Authorization": "Bearer wrong-key-value"})
    out, err = capfd.readouterr()
    assert "s3cret-key-value" not in out + err and "wrong-key-value" not in out + err


def test_json_logs_carry_request_id_and_node_timings(service, capfd) -> None:
    import json as _json

    base = service(log_json=True)
    httpx.post(base + "/v1/chat/completions", timeout=30, headers={"X-Request-Id": "rid-42"},
               json={"model": "neo-nl-agent", "messages": [{"role": "user", "content": QUESTION}]})
    _, err = capfd.readouterr()
    records = [_json.loads(line) for line in err.splitlines() if line.startswith("{")]
    finished = [r for r in records if r.get("message") == "pipeline finished"]
    assert finished and finished[-1]["request_id"] == "rid-42"
    assert {"route", "plan", "research", "summarize", "synthesize"} <= set(finished[-1]["node_seconds"])


def test_startup_freezes_long_lived_objects_and_relaxes_the_collector(service) -> None:
    """The service runs in this process: after its startup the collector skips what startup created and
    collects young objects less often (full collections over everything were the sweep's largest stalls)."""
    import gc

    from app.main import GC_YOUNG_THRESHOLD

    gc.unfreeze()
    gc.set_threshold(700, 10, 10)
    base = service()
    assert httpx.get(base + "/health", timeout=10).status_code == 200
    assert gc.get_freeze_count() > 1000 and gc.get_threshold()[0] == GC_YOUNG_THRESHOLD


class _Lines(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


async def test_the_embedded_document_server_logs_as_itself(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`uvicorn.run` gives uvicorn's loggers a handler of their own (`INFO:     ...`), which the service's own server
    writes to: the embedded server's lines go to `docserver.embedded` in the service's format instead (its
    requests at DEBUG), and the service's uvicorn lines, access log included, stay where they were."""
    uvicorn_handler = _Lines()  # what uvicorn.run's logging config does, on this process's loggers
    for name in ("uvicorn", "uvicorn.access"):
        monkeypatch.setattr(logging.getLogger(name), "handlers", [uvicorn_handler])
        monkeypatch.setattr(logging.getLogger(name), "propagate", False)
    for name in ("uvicorn", "uvicorn.error", "uvicorn.access"):  # a service run earlier may have left WARNING
        caplog.set_level(logging.INFO, logger=name)
    caplog.set_level(logging.INFO)
    caplog.set_level(logging.DEBUG, logger=LOGGER)
    server = await serve_in_background(index_path=tmp_path / "none.sqlite3")
    try:
        async with httpx.AsyncClient() as client:  # a request it answers, then one it refuses (a warning)
            assert (await client.get(server.base_url + "/health")).status_code == 200
        reader, writer = await asyncio.open_connection(server.host, server.port)
        writer.write(b"NOT HTTP AT ALL\r\n\r\n")
        await writer.drain()
        await asyncio.wait_for(reader.read(), 10)
        writer.close()
        logging.getLogger("uvicorn.error").info("the service's own line")
    finally:
        await server.stop()

    own = {(r.levelname, r.getMessage()) for r in caplog.records if r.name == LOGGER}
    assert any(level == "INFO" and "documents" in m and "chunks in collections" in m for level, m in own)  # index
    assert {("INFO", "Application startup complete."), ("INFO", "Application shutdown complete.")} <= own
    assert any(level == "WARNING" and "Invalid HTTP request" in m for level, m in own)  # from the connection
    assert [level for level, m in own if "GET /health" in m] == ["DEBUG"]  # its requests, at DEBUG only
    assert uvicorn_handler.lines == ["the service's own line"]
    assert logging.getLogger("uvicorn.access").handlers == [uvicorn_handler]  # the service's access log stays
