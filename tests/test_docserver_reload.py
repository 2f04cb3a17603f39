"""Where the persisted index lives, and a running document server picking up documents ingested
into its index file while it runs (docserver/store.py, docserver/live.py).

The server tests run the real app on a loopback port (uvicorn in a thread, or the embedded server)
and talk to it with the official MCP client; the ingest runs as the CLI in another process, or as
the real ``ingest`` function.  Nothing is mocked.
"""

import asyncio
import logging
import os
import shutil
import sqlite3
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

import textkit
from docserver.__main__ import parse_args, parse_ingest_args
from docserver.corpus import BUNDLED_CORPUS, load_corpus
from docserver.embedded import serve_in_background
from docserver.ingest import ingest
from docserver.live import LiveIndex
from docserver.server import create_app
from docserver.store import DocumentStore, default_index_path, index_version, load_snapshot, resolve_index_path
from docserver.tools import UNREADABLE
from tests.fakes.servers import ServerThread
from tests.test_docserver import call, connect, split_result, write_corpus

ROOT = Path(__file__).resolve().parents[1]
TERM = "xyzzyquux"  # in no document of the test corpus, nor a compound of its words
NOTE = f"""\
---
doc_id: quokka-notitie
title: Inspectienotitie Quokka
---

# Inspectienotitie Quokka

## Bevindingen

Tijdens de inspectie is de {TERM}-procedure van de kerncentrale gecontroleerd.
"""


@pytest.fixture
def corpus_dir(tmp_path: Path) -> Path:  # tests/conftest.py points DOCSERVER_INDEX away from the checkout's index
    return write_corpus(tmp_path / "corpus")


@pytest.fixture
def note(tmp_path: Path) -> Path:
    path = tmp_path / "notes" / "quokka.md"
    path.parent.mkdir()
    path.write_text(NOTE, encoding="utf-8")
    return path


# --- where the index lives ----------------------------------------------------------------------


def test_default_index_is_in_the_checkout_data_folder(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    checkout = tmp_path / "checkout"
    (checkout / "docserver").mkdir(parents=True)
    (checkout / "pyproject.toml").write_text("[project]\nname = 'neo-nl-agent'\n", encoding="utf-8")
    assert default_index_path(checkout / "docserver") == checkout / "data" / "docserver.sqlite3"
    assert default_index_path() == ROOT / "data" / "docserver.sqlite3"  # the package under test is a checkout

    installed = tmp_path / "venv" / "lib" / "python3.11" / "site-packages" / "docserver"
    installed.mkdir(parents=True)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    assert default_index_path(installed) == tmp_path / "cache" / "neo-nl" / "docserver.sqlite3"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert default_index_path(installed) == tmp_path / "home" / ".cache" / "neo-nl" / "docserver.sqlite3"


def test_env_var_and_index_option_win(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("DOCSERVER_INDEX")
    assert resolve_index_path() == default_index_path()
    assert parse_args([]).index == str(default_index_path())
    monkeypatch.setenv("DOCSERVER_INDEX", str(tmp_path / "env.sqlite3"))
    assert resolve_index_path() == tmp_path / "env.sqlite3"
    assert parse_ingest_args(["x.md", "--collection", "c"]).index == str(tmp_path / "env.sqlite3")
    assert resolve_index_path(tmp_path / "option.sqlite3") == tmp_path / "option.sqlite3"
    assert parse_args(["--index", str(tmp_path / "option.sqlite3")]).index == str(tmp_path / "option.sqlite3")
    monkeypatch.setenv("DOCSERVER_INDEX", "")  # empty: not set
    assert resolve_index_path() == default_index_path()


def test_installed_package_uses_the_user_cache(tmp_path: Path) -> None:
    """The package copied outside a checkout (as ``pip install .`` puts it in site-packages) and imported
    from there: no pyproject.toml beside it, so the per-user cache."""
    site = tmp_path / "site-packages"
    shutil.copytree(ROOT / "docserver", site / "docserver", ignore=shutil.ignore_patterns("__pycache__", "corpus"))
    env = {k: v for k, v in os.environ.items() if k != "DOCSERVER_INDEX"}
    env.update(PYTHONPATH=f"{site}{os.pathsep}{ROOT}", XDG_CACHE_HOME=str(tmp_path / "cache"))
    script = "import docserver.store as s; print(s.__file__); print(s.resolve_index_path())"
    result = subprocess.run(
        [sys.executable, "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60, check=False
    )
    assert result.returncode == 0, result.stderr
    module, index = result.stdout.splitlines()
    assert Path(module).is_relative_to(site)
    assert Path(index) == tmp_path / "cache" / "neo-nl" / "docserver.sqlite3"


# --- the version of an index file ---------------------------------------------------------------


def test_every_save_bumps_the_generation(tmp_path: Path, note: Path) -> None:
    path = tmp_path / "index.sqlite3"
    assert index_version(path) is None and load_snapshot(path) == (None, [])
    ingest([note], "notes", index_path=path)
    first = index_version(path)
    assert first is not None and first.generation == 1
    version, documents = load_snapshot(path)
    assert version == first and [d.doc_id for d in documents] == ["quokka-notitie"]
    assert index_version(path) == first  # reading changes nothing
    ingest([note], "notes", index_path=path)  # the same document again: same size, maybe the same mtime
    second = index_version(path)
    assert second is not None and second.generation == 2 and second != first


def test_index_files_from_before_the_generation_counter(tmp_path: Path, note: Path) -> None:
    """A file written by the code before the ``meta`` table: read as generation 0; the first save adds
    the table; a writer that does not know it (an older checkout) still shows as a new version."""
    path = tmp_path / "old.sqlite3"
    ingest([note], "notes", index_path=path)
    with sqlite3.connect(path) as db:
        db.execute("DROP TABLE meta")
    db.close()
    version, documents = load_snapshot(path)
    assert version is not None and version.generation == 0 and len(documents) == 1
    with DocumentStore(path) as store:
        assert store.generation() == 0
        store.save([])
        assert store.generation() == 1
    os.utime(path, ns=(0, 0))  # so the write below cannot fall in the same clock tick as the save
    before = index_version(path)
    with sqlite3.connect(path) as db:  # as an older writer does: no generation bump
        db.execute("DELETE FROM chunks")
        db.execute("DELETE FROM documents")
    db.close()
    after = index_version(path)
    assert after is not None and before is not None and after.generation == before.generation
    assert after != before, "the file's mtime or size tells"


# --- the stems a rebuild thread computes ----------------------------------------------------------


def test_stems_are_the_same_from_any_thread() -> None:
    """A rebuild thread and the event loop stem at the same time: each thread has its own stemmers."""
    from concurrent.futures import ThreadPoolExecutor

    tokens = sorted({t for d in load_corpus(BUNDLED_CORPUS) for c in d.chunks
                     for t in textkit.tokenize(f"{c.title} {c.text}")})
    assert len(tokens) > 1000
    uncached = textkit.stems.__wrapped__  # past the shared cache, into the stemmers
    expected = [uncached(t) for t in tokens]
    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(lambda _: [uncached(t) for t in tokens], range(4)))
    assert all(result == expected for result in results)


# --- a running server picks up what is ingested ---------------------------------------------------


async def eventually(probe: Callable[[], Awaitable[bool]], timeout: float = 10.0) -> float:
    """Seconds until ``probe()`` is true, polling every 0.1 s; fails after ``timeout``."""
    started = time.monotonic()
    while not await probe():
        assert time.monotonic() - started < timeout, f"not within {timeout} s"
        await asyncio.sleep(0.1)
    return time.monotonic() - started


def found(result: dict[str, Any]) -> bool:
    return not result["isError"] and any(s["fileId"] == "quokka-notitie" for s in split_result(result)[1])


def run_ingest_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "docserver", "ingest", *args, "--quiet"],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.mark.asyncio
async def test_running_server_finds_a_document_ingested_by_another_process(
    corpus_dir: Path, note: Path, tmp_path: Path
) -> None:
    index_file = tmp_path / "index" / "docserver.sqlite3"
    search = {"query": f"{TERM} procedure", "collection": "anvs"}
    with ServerThread(create_app(corpus_dir, index_path=index_file)) as server:
        url = server.base_url + "/mcp"
        async with connect(url) as client:
            before = await call(client, "search_collection", search)
            assert split_result(before) == ([], [])
            health = httpx.get(server.base_url + "/health", timeout=10).json()

            ingested = run_ingest_cli(str(note), "--collection", "anvs", "--index", str(index_file))
            assert ingested.returncode == 0, ingested.stderr

            async def searched() -> bool:
                return found(await call(client, "search_collection", search))

            await eventually(searched)
            texts, sources = split_result(await call(client, "search_collection", search))
            assert TERM in texts[0] and sources[0]["metadata"]["collection"] == "anvs"
            listing = await call(client, "list_documents", {"query": "Inspectienotitie Quokka"})
            assert "Doc ID: quokka-notitie" in listing["content"][0]["text"]
            read = await call(client, "read_document", {"doc_id": "quokka-notitie", "collection": "anvs"})
            assert TERM in read["content"][0]["text"]
        after = httpx.get(server.base_url + "/health", timeout=10).json()
    assert after["documents"] == health["documents"] + 1 and after["chunks"] == health["chunks"] + 1


@pytest.mark.asyncio
async def test_embedded_server_picks_up_a_new_collection_and_survives_a_broken_file(
    corpus_dir: Path, note: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The index file does not exist when the server starts; the ingest (the real function) creates it
    with a collection the server has never seen.  A file that later turns unreadable is logged, the calls answer a
    clear error (a library searched on disk has nothing else to answer from) and the server keeps running: a file
    written anew is served again."""
    index_file = tmp_path / "later" / "docserver.sqlite3"
    search = {"query": TERM, "collection": "inspecties"}
    caplog.set_level(logging.INFO, logger="docserver")
    server = await serve_in_background(corpus_dir=corpus_dir, index_path=index_file)
    try:
        async with connect(server.url, server.token) as client:
            unknown = await call(client, "search_collection", search)
            assert unknown["isError"] and "Unknown collection 'inspecties'" in unknown["content"][0]["text"]
            ingest([note], "inspecties", index_path=index_file)

            async def searched() -> bool:
                return found(await call(client, "search_collection", search))

            await eventually(searched)

            async def reloaded() -> bool:  # searched on disk, the new document is found before the reload
                await call(client, "list_documents", {"query": "*"})
                return any("reloaded" in r.getMessage() for r in caplog.records)

            await eventually(reloaded)

            index_file.write_bytes(b"this is not a SQLite database" * 100)

            async def warned() -> bool:
                await call(client, "list_documents", {"query": "*"})
                return any("cannot be read" in r.getMessage() for r in caplog.records)

            await eventually(warned)
            broken = await call(client, "search_collection", search)  # pages read before may still answer
            assert found(broken) if not broken["isError"] else broken["content"][0]["text"] == UNREADABLE
            async with httpx.AsyncClient() as http:  # the server runs on this event loop
                health = await http.get(server.base_url + "/health", timeout=10)
            assert health.status_code in (200, 503), health.text

            for path in index_file.parent.glob(index_file.name + "*"):  # the file with its write-ahead log
                path.unlink()
            ingest([note], "inspecties", index_path=index_file)
            await eventually(searched)
    finally:
        await server.stop()


@pytest.mark.asyncio
async def test_live_index_checks_at_most_once_per_interval(corpus_dir: Path, note: Path, tmp_path: Path) -> None:
    index_file = tmp_path / "index.sqlite3"
    slow = LiveIndex.load(corpus_dir, index_path=index_file, check_interval_s=3600)
    eager = LiveIndex.load(corpus_dir, index_path=index_file, check_interval_s=0)
    start_slow, start_eager = slow.index, eager.index
    assert await eager.current() is start_eager  # nothing changed: no rebuild
    ingest([note], "notes", index_path=index_file)
    assert await slow.current() is start_slow  # not looked at yet
    results = await asyncio.gather(*(eager.current() for _ in range(5)))  # one rebuild, shared
    assert len({id(r) for r in results}) == 1 and results[0] is not start_eager
    assert [d.doc_id for d in results[0].listing("notes", 10)] == ["quokka-notitie"]
    assert await eager.current() is results[0]
    static = LiveIndex(start_eager)  # an index built elsewhere is served as it is
    assert static.path is None and await static.current() is start_eager


@pytest.mark.asyncio
async def test_a_long_reload_does_not_stall_the_calls_that_meet_it(
    corpus_dir: Path, note: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A reload that takes long (a 200-page PDF is seconds of indexing) is waited for at most RELOAD_WAIT_S: the
    calls meanwhile answer from the documents served until then, the ones after it from the new ones."""
    import threading

    index_file = tmp_path / "index.sqlite3"
    served = LiveIndex.load(corpus_dir, index_path=index_file, check_interval_s=0, reload_wait_s=0.05)
    before = served.index
    ingest([note], "notes", index_path=index_file)
    release = threading.Event()
    engine = type(before)  # the index on disk (sqlite/search.py), or in memory
    load = engine.load

    def held_load(*args: Any, **kwargs: Any) -> Any:
        release.wait(30)  # the reload is "long" until the test lets it finish
        return load(*args, **kwargs)

    monkeypatch.setattr(engine, "load", held_load)
    assert await served.current() is before  # the reload is under way: the previous documents answer
    assert await served.current() is before
    release.set()

    async def renewed() -> bool:
        return await served.current() is not before

    await eventually(renewed)
    assert [d.doc_id for d in (await served.current()).listing("notes", 10)] == ["quokka-notitie"]

