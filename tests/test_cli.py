"""The command line: `python -m app graph` and `python -m app ask`."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

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


def test_ask_runs_the_service_in_process() -> None:
    result = run("ask", "--local", "Wat is INSAG-4?", PORT="9")
    assert result.returncode == 0, result.stderr
    assert "INSAG-4" in result.stdout and "[1]" in result.stdout
