"""The command line: `python -m app serve`, `python -m app graph` and `python -m app ask`."""

from __future__ import annotations

import argparse
import http.client
import os
import subprocess
import sys
from pathlib import Path

from app.__main__ import server_options
from app.server import ConnectionGuard
from app.settings import Settings
from bench.harness import Proc, free_port

ROOT = Path(__file__).resolve().parents[1]


def run(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "app", *args], cwd=ROOT, capture_output=True, text=True, timeout=120,
                          env={**os.environ, "LLM_BASE_URL": "", "MCP_SERVER_URL": "", **env})


def test_graph_prints_mermaid() -> None:
    result = run("graph")
    assert result.returncode == 0
    assert result.stdout.lstrip().startswith("---") and "graph TD;" in result.stdout
    for node in ("route", "plan", "research", "judge", "synthesize"):
        assert f"{node}(" in result.stdout


def test_ask_streams_think_answer_and_sources(service) -> None:
    base = service()
    result = run("ask", "--url", base + "/v1", "Wanneer vervalt de vergunning van kerncentrale Borssele?")
    assert result.returncode == 0, result.stderr
    think, answer = result.stdout.split("\n\n", 1)
    assert "Vraagtype" in think and "<think>" not in result.stdout
    assert "31 december 2033" in answer and "**Bronnen**" in answer


def test_ask_without_a_service_says_so_and_how_to_start_one() -> None:
    """Nothing listens at the URL and no --local: a message naming the URL and the two ways on, exit 2, no
    traceback, and no service started behind the user's back."""
    url = f"http://127.0.0.1:{free_port()}/v1"
    result = run("ask", "--url", url, "Wat is INSAG-4?")
    assert result.returncode == 2, (result.stdout, result.stderr)
    assert f"no service answers at {url}" in result.stderr
    assert "make run" in result.stderr and "--local" in result.stderr
    assert "Traceback" not in result.stderr and result.stdout == ""


def test_ask_runs_the_service_in_process() -> None:
    result = run("ask", "--local", "Wat is INSAG-4?", PORT="9")
    assert result.returncode == 0, result.stderr
    assert "INSAG-4" in result.stdout and "[1]" in result.stdout


def test_serve_options_flags_over_settings() -> None:
    settings = Settings(_env_file=None, host="0.0.0.0", port=8000, workers=2, log_level="WARNING",
                        http_idle_timeout_s=75.0, request_header_timeout_s=30.0, max_connections=1000)
    assert server_options(settings, argparse.Namespace(host=None, port=None, workers=None)) == {
        "host": "0.0.0.0", "port": 8000, "log_level": "warning", "workers": 2, "timeout_keep_alive": 75.0,
        "http": ConnectionGuard(30.0, 1000), "factory": True,
    }
    flags = server_options(settings, argparse.Namespace(host="127.0.0.1", port=9001, workers=3))
    assert (flags["host"], flags["port"], flags["workers"]) == ("127.0.0.1", 9001, 3)
    # the client must be the side that closes an idle connection: aiohttp (Open WebUI) keeps them 15 s. The
    # field's default, not Settings(): an HTTP_IDLE_TIMEOUT_S in the developer's environment must not decide it
    assert Settings.model_fields["http_idle_timeout_s"].default > 15


def test_serve_closes_idle_connections_after_the_configured_time(tmp_path: Path) -> None:
    """HTTP_IDLE_TIMEOUT_S reaches uvicorn: an idle keep-alive connection is closed after it (uvicorn's own
    default would keep it 5 s), and one in use is not."""
    port = free_port()
    env = {**os.environ, "LLM_BASE_URL": "", "MCP_SERVER_URL": "", "HTTP_IDLE_TIMEOUT_S": "1"}
    proc = Proc("serve", [sys.executable, "-m", "app", "serve", "--port", str(port)], env, ROOT, tmp_path)
    try:
        proc.wait_http(f"http://127.0.0.1:{port}/health")
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        try:
            for _ in range(2):  # the second request reuses the connection at once: still open
                connection.request("GET", "/health")
                response = connection.getresponse()
                assert response.status == 200 and response.read()
            connection.sock.settimeout(4)  # below uvicorn's default of 5 s: a timeout means the setting did not apply
            assert connection.sock.recv(1) == b""  # the server closed the idle connection
        finally:
            connection.close()
    finally:
        proc.stop()
