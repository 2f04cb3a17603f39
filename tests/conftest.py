"""Shared fixtures: the reference document server, the fake upstream LLM and service instances, all on
real loopback HTTP."""

from __future__ import annotations

import atexit
import json
import os
import shutil
import tempfile
import uuid
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

import httpx
import pytest

from app.main import create_app
from app.settings import Settings
from docserver.server import create_app as create_docserver
from tests.fakes.fake_llm import FakeLLM
from tests.fakes.servers import ServerThread

if TYPE_CHECKING:
    from pgserver import PostgresServer

SHARED = Path(os.environ.get("NEO_SHARED_DIR", Path(__file__).resolve().parents[2] / "shared"))

# A developer's persisted document index (python -m docserver ingest) must not leak into the tests.
os.environ["DOCSERVER_INDEX"] = str(Path(tempfile.mkdtemp(prefix="neo-nl-test-")) / "index.sqlite3")
# nor a token the standalone server would demand (`create_docserver()` reads it): tests that want one pass it
os.environ.pop("DOCSERVER_TOKEN", None)
# nor a developer's PostgreSQL library (it wins over DOCSERVER_INDEX): tests that want one use `postgres_url`
os.environ.pop("DOCSERVER_DATABASE_URL", None)
QUESTION = "Wanneer vervalt de vergunning van kerncentrale Borssele?"
# the heuristics are not sure and hold a signal of a type other than the catch-all: a model classifies it
TORN = "Kernmateriaal tegen diefstal beschermen: wat geldt er allemaal"


@pytest.fixture(autouse=True)
def _own_index(monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory) -> None:
    """Each test's default index file its own: the session's document server searches its file on disk, so a test
    that ingests into the default file, or serves another corpus from it, must not change what that server finds."""
    monkeypatch.setenv("DOCSERVER_INDEX", str(tmp_path_factory.mktemp("index") / "index.sqlite3"))


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


# the longest unix socket path (sun_path is 108 bytes on Linux, 104 on macOS) minus the socket's own name
SOCKET_DIR_MAX = 100 - len("/.s.PGSQL.5432")


@pytest.fixture(scope="session")
def postgres_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PostgresServer]:
    """A real PostgreSQL 16 with pgvector for the session (the `pgserver` wheel: no system install), reached
    through a unix socket in its data directory; `vector` is created in its `postgres` database."""
    try:
        with warnings.catch_warnings():  # platformdirs warns when XDG_RUNTIME_DIR is not set
            warnings.simplefilter("ignore")
            import pgserver
        import psycopg
    except ImportError as error:
        pytest.skip(f"pgserver not installed: {error} (pip install -e '.[test]')")
    data = tmp_path_factory.mktemp("pg")
    own = len(str(data)) > SOCKET_DIR_MAX  # a long --basetemp: a short directory of our own instead
    if own:
        data = Path(tempfile.mkdtemp(prefix="pg"))
    server = pgserver.get_server(data, cleanup_mode="stop")
    try:
        with psycopg.connect(server.get_uri(), autocommit=True) as connection:
            connection.execute("CREATE EXTENSION IF NOT EXISTS vector")
        yield server
    finally:
        server.cleanup()
        # its exit hook would run again, and log into a stream pytest has closed by then
        atexit.unregister(server._cleanup)
        if own:
            shutil.rmtree(data, ignore_errors=True)


def _database_url(server_url: str, name: str) -> str:
    """`server_url` (postgresql://user:@/db?host=/socket/dir) naming database `name` instead."""
    return urlsplit(server_url)._replace(path="/" + name).geturl()


PostgresUrlFactory = Callable[[], str]


@pytest.fixture
def postgres_url_factory(postgres_server: PostgresServer) -> Iterator[PostgresUrlFactory]:
    """Create a fresh, empty database (with `vector`) per call; returns its postgresql:// URL. All are dropped
    after the test, connections still open to them included."""
    import psycopg

    server_url = postgres_server.get_uri()
    created: list[str] = []

    def create() -> str:
        name = "t_" + uuid.uuid4().hex[:12]
        with psycopg.connect(server_url, autocommit=True) as connection:
            connection.execute(f'CREATE DATABASE "{name}"')
        created.append(name)
        url = _database_url(server_url, name)
        with psycopg.connect(url, autocommit=True) as connection:
            connection.execute("CREATE EXTENSION IF NOT EXISTS vector")
        return url

    yield create
    with psycopg.connect(server_url, autocommit=True) as connection:
        for name in created:
            connection.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture
def postgres_url(postgres_url_factory: PostgresUrlFactory) -> str:
    """A fresh, empty database of the session's PostgreSQL for this test, with `vector`: its postgresql:// URL
    (postgresql://postgres:@/t_<12 hex>?host=<socket dir>). Two document servers on one library share it."""
    return postgres_url_factory()


def sse_events(response: httpx.Response) -> list[str]:
    """The `data:` payloads of a raw SSE response, in order (comments skipped)."""
    return [line[len("data: "):] for line in response.text.split("\n") if line.startswith("data: ")]


def chunks(payloads: list[str]) -> list[dict]:
    return [json.loads(p) for p in payloads if p != "[DONE]"]


def content_of(chunk_list: list[dict]) -> str:
    return "".join((c["choices"][0]["delta"].get("content") or "") for c in chunk_list if c.get("choices"))
