"""Interoperability with a document server built on the mcp 1.x SDK (the production genai-utils era).

The reference server runs unchanged under mcp 1.x (FastMCP); this test installs mcp<2 into a separate,
cached virtualenv (`.venv-mcp1`), starts `python -m docserver` there, and talks to it with this process's
2.x client. Skipped when that environment cannot be created (no package registry).
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from graph.clients.mcp_client import DocumentClient

ROOT = Path(__file__).resolve().parents[1]
VENV = Path(os.environ.get("NEO_MCP1_VENV", ROOT / ".venv-mcp1"))


def _python() -> Path:
    return VENV / "bin" / "python"


# what `python -m docserver` imports beyond the standard library (the docserver's own dependencies, mcp 1.x)
PACKAGES = ("mcp>=1.20,<2", "uvicorn", "snowballstemmer", "numpy", "httpx", "cachetools")


def _ensure_venv() -> bool:
    marker = VENV / ".ready"
    if marker.exists() and marker.read_text() == " ".join(PACKAGES):
        return True
    try:
        subprocess.run([sys.executable, "-m", "venv", str(VENV)], check=True, capture_output=True, timeout=120)
        subprocess.run([str(_python()), "-m", "pip", "install", "-q", *PACKAGES], check=True, capture_output=True,
                       timeout=600)
    except (subprocess.SubprocessError, OSError):
        return False
    marker.write_text(" ".join(PACKAGES))
    return True


@pytest.fixture(scope="module")
def mcp1_server():
    if not _ensure_venv():
        pytest.skip("could not create a virtualenv with mcp<2")
    version = subprocess.run([str(_python()), "-c", "import importlib.metadata as m; print(m.version('mcp'))"],
                             capture_output=True, text=True, check=True).stdout.strip()
    assert version.startswith("1.")
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    process = subprocess.Popen(
        [str(_python()), "-m", "docserver", "--port", str(port), "--log-level", "warning"],
        cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"http://127.0.0.1:{port}/health", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.2)
        else:
            pytest.fail("mcp 1.x document server did not start")
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        process.terminate()
        process.wait(timeout=10)


@pytest.mark.asyncio
@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_client_works_against_an_mcp1_server(mcp1_server: str, mode: str) -> None:
    client = DocumentClient(mcp1_server, timeout_s=10, display_names={"iaea": "IAEA"}, mode=mode)
    try:
        evidence = await client.search("iaea", "GSR Part 2 veiligheidscultuur")
        assert evidence and evidence[0].id.startswith("iaea/iaea-gsr-part-2#") and evidence[0].summary
        assert client.has_read_document
        docs = await client.list_documents("GSR")
        assert any(d.doc_id == "iaea-gsr-part-2" for d in docs)
    finally:
        await client.aclose()
