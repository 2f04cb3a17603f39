"""Shared fixtures: the reference document server, the fake upstream LLM and service instances, all on
real loopback HTTP."""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest

from app.main import create_app
from app.settings import Settings
from docserver.server import create_app as create_docserver
from tests.fakes.fake_llm import FakeLLM
from tests.fakes.servers import ServerThread

SHARED = Path(os.environ.get("NEO_SHARED_DIR", Path(__file__).resolve().parents[2] / "shared"))

# A developer's persisted document index (python -m docserver ingest) must not leak into the tests.
os.environ["DOCSERVER_INDEX"] = str(Path(tempfile.mkdtemp(prefix="neo-nl-test-")) / "index.sqlite3")
# nor a token the standalone server would demand (`create_docserver()` reads it): tests that want one pass it
os.environ.pop("DOCSERVER_TOKEN", None)
QUESTION = "Wanneer vervalt de vergunning van kerncentrale Borssele?"
# the heuristics are not sure and hold a signal of a type other than the catch-all: a model classifies it
TORN = "Kernmateriaal tegen diefstal beschermen: wat geldt er allemaal"


@pytest.fixture(scope="session")
def docserver() -> Iterator[ServerThread]:
    with ServerThread(create_docserver()) as server:
        yield server


@pytest.fixture(scope="session")
def docserver_url(docserver: ServerThread) -> str:
    return docserver.base_url + "/mcp"


@pytest.fixture
def fake_llm() -> Iterator[FakeLLM]:
    with FakeLLM() as fake:
        yield fake


ServiceFactory = Callable[..., str]


@pytest.fixture
def service(docserver_url: str) -> Iterator[ServiceFactory]:
    """Start the service with settings overrides; returns its base URL (`.../v1` is added by callers)."""
    started: list[ServerThread] = []

    def start(**overrides: object) -> str:
        values: dict[str, object] = {
            "mcp_server_url": docserver_url, "llm_base_url": "", "sse_ping_s": 1.0, "response_cache": False,
            # the session's document server is shared: a test that uploads brings a library of its own
            "uploads": "off",
        }
        values.update(overrides)
        settings = Settings(_env_file=None, **values)
        server = ServerThread(create_app(settings)).start()
        started.append(server)
        return server.base_url

    yield start
    for server in started:
        server.stop()


@pytest.fixture
def offline(service: ServiceFactory) -> str:
    """The service in offline mode (no LLM_BASE_URL)."""
    return service()


@pytest.fixture
def llm_service(service: ServiceFactory, fake_llm: FakeLLM) -> Callable[..., str]:
    """Start the service in LLM mode against the fake upstream ("big" answers, "small" is the fast model)."""
    def start(**overrides: object) -> str:
        return service(llm_base_url=fake_llm.base_url, llm_model="big", llm_fast_model="small",
                       llm_timeout_s=overrides.pop("llm_timeout_s", 5.0), **overrides)
    return start


def sse_events(response: httpx.Response) -> list[str]:
    """The `data:` payloads of a raw SSE response, in order (comments skipped)."""
    return [line[len("data: "):] for line in response.text.split("\n") if line.startswith("data: ")]


def chunks(payloads: list[str]) -> list[dict]:
    return [json.loads(p) for p in payloads if p != "[DONE]"]


def content_of(chunk_list: list[dict]) -> str:
    return "".join((c["choices"][0]["delta"].get("content") or "") for c in chunk_list if c.get("choices"))
