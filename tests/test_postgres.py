"""The library in PostgreSQL (docserver/postgres/, ``DOCSERVER_DATABASE_URL``): ranked as the index in memory ranks
it, written by the CLI, and shared by two document servers on one database.

A real PostgreSQL 16 with pgvector, started by the tests (the ``pgserver`` package, tests/conftest.py), the real
app on loopback ports and the official MCP client; the CLI in another process.  Nothing is mocked.
"""

import asyncio
import json
import os
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import pytest

from docserver import postings
from docserver.corpus import BUNDLED_CORPUS, load_collections, load_corpus
from docserver.index import Index
from docserver.ingest import ingest_files
from docserver.location import database_url, shown
from docserver.postgres.search import PostgresIndex, open_library
from docserver.postgres.store import PostgresStore
from docserver.server import create_app
from tests.fakes.servers import ServerThread
from tests.test_docserver import call, connect, split_result
from tests.test_docserver_reload import NOTE, TERM  # a note holding a word no other document holds

ROOT = Path(__file__).resolve().parents[1]
# (query, collection): Dutch and English, compounds whole and in parts, a word known only inside compounds, named
# articles, stop words alone, words no document holds
QUERIES = [
    ("Wat zijn de eisen voor veiligheidscultuur?", "anvs"),
    ("Hoe verloopt de vergunningverlening voor een kerninstallatie?", "anvs"),
    ("stralingsbescherming dosislimieten werknemers", "wetten_overheid"),
    ("artikel 15a Kernenergiewet vergunning", "wetten_overheid"),
    ("Artikel 3 van het Besluit kerninstallaties", "wetten_overheid"),
    ("defence in depth levels of protection", "iaea"),
    ("leadership and management for safety", "iaea"),
    ("limiet", "iaea"),
    ("physical protection of nuclear material in transport", "security"),
    ("beveiliging van nucleair materiaal", "security"),
    ("de het een van", "anvs"),
    ("quokka xyzzy", "iaea"),
    ("emergency preparedness and response", "iaea"),
    ("radioactief afval COVRA opslag", "anvs"),
]


def ranking(hits: list) -> list[tuple]:
    return [(h.document.doc_id, h.chunk.chunk_index, round(h.score, 6), h.relevance, h.matched_terms)
            for h in hits]


@pytest.fixture(scope="module")
def bundled() -> tuple[list, list]:
    return load_corpus(BUNDLED_CORPUS), load_collections(BUNDLED_CORPUS)


def test_ranks_every_query_as_the_index_in_memory(postgres_url: str, bundled: tuple[list, list]) -> None:
    """Over the bundled corpus (fewer postings per stem than ``postings.CHAMPIONS``: nothing is pruned) every hit,
    its order, raw score, relevance and matched terms are the index's, also within one document."""
    documents, collections = bundled
    library, memory = open_library(postgres_url), Index(documents, collections)
    assert library.collections == memory.collections and library.chunk_count == memory.chunk_count
    for query, collection in QUERIES:
        assert ranking(library.search(query, collection)) == ranking(memory.search(query, collection)), query
        assert ranking(library.search(query, collection, limit=None)) == ranking(
            memory.search(query, collection, limit=None)), query
    doc_id = memory.documents("iaea")[0].doc_id
    assert ranking(library.search("safety requirements", "iaea", limit=3, doc_id=doc_id)) == ranking(
        memory.search("safety requirements", "iaea", limit=3, doc_id=doc_id))
    assert [d.doc_id for d in library.match_titles("veiligheidscultuur leiderschap", "anvs")] == [
        d.doc_id for d in memory.match_titles("veiligheidscultuur leiderschap", "anvs")]
    for collection in collections:
        assert library.outline(collection.name, 12) == memory.outline(collection.name, 12)
        assert [d.doc_id for d in library.listing(collection.name, 5)] == [
            d.doc_id for d in memory.listing(collection.name, 5)]
        first = memory.documents(collection.name)[0]
        assert library.document(collection.name, first.doc_id) == first
    with pytest.raises(KeyError):
        library.search("x", "nowhere")


def test_champion_postings_bound_what_a_search_reads(postgres_url: str, bundled: tuple[list, list],
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """With only a few champion postings per stem a common-word query still finds its best passage (ranked among
    the candidates exactly), and a search reads no chunk that none of the champions names."""
    library = open_library(postgres_url)
    memory = Index(*bundled)
    query = "Hoe verloopt de vergunningverlening voor een kerninstallatie?"
    monkeypatch.setattr(postings, "CHAMPIONS", 3)
    pruned = library.search(query, "anvs", limit=3)
    full = memory.search(query, "anvs", limit=3)
    assert ranking(pruned)[0] == ranking(full)[0]
    monkeypatch.setattr(postings, "CANDIDATES", 2)
    assert len(library.search(query, "anvs", limit=None)) <= 2


@pytest.mark.parametrize(("limit", "scored"), [(1, 100), (10, 100), (20, 200), (30, 300), (100, 300), (None, 300)])
def test_how_many_candidates_a_search_scores(limit: int | None, scored: int) -> None:
    assert postings.candidates(limit) == scored


def test_the_bundled_corpus_is_kept_in_step(postgres_url: str, bundled: tuple[list, list], tmp_path: Path) -> None:
    """A start-up saves the corpus documents that changed and removes those gone; an ingested document of the
    same collection and doc_id is left as it is; an unchanged corpus writes nothing."""
    documents, collections = bundled
    described = [(c.name, c.display_name, c.focus) for c in collections]
    with PostgresStore(postgres_url) as store:
        assert store.sync_corpus(documents, described) is True
        generation = store.generation()
        assert store.sync_corpus(documents, described) is False and store.generation() == generation
        first, second, *rest = documents
        edited = replace(first, title=first.title + " (herzien)")
        assert store.sync_corpus([edited, *rest], described) is True
        library = PostgresIndex.load(postgres_url)
        assert library.document(first.collection, first.doc_id).title.endswith("(herzien)")
        assert library.document(second.collection, second.doc_id) is None
        assert library.chunk_count == sum(len(d.chunks) for d in [edited, *rest])
        mine = replace(rest[0], title="Eigen versie")
        store.save([(mine, None)])
        store.sync_corpus(documents, described)
        assert PostgresIndex.load(postgres_url).document(mine.collection, mine.doc_id).title == "Eigen versie"
        assert [d.doc_id for d in store.list_stored()] == [mine.doc_id]  # list shows what was ingested


def _cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """``python -m docserver ARGS`` in another process."""
    return subprocess.run([sys.executable, "-m", "docserver", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=120, check=False, env=env)


def test_cli_ingests_lists_and_removes_in_the_database(postgres_url: str, tmp_path: Path) -> None:
    note = tmp_path / "quokka.md"
    note.write_text(NOTE, encoding="utf-8")
    env = {**os.environ, "DOCSERVER_DATABASE_URL": postgres_url, "DOCSERVER_INDEX": str(tmp_path / "unused.db")}
    done = _cli("ingest", str(note), "--collection", "notes", env=env)
    assert done.returncode == 0, done.stderr
    assert "1 documents, 1 chunks -> collection 'notes'" in done.stdout
    listed = _cli("list", "--json", env=env)
    assert listed.returncode == 0, listed.stderr
    [entry] = json.loads(listed.stdout)
    assert entry["collection"] == "notes" and entry["doc_id"] == "quokka-notitie"
    assert not (tmp_path / "unused.db").exists()  # the database wins over DOCSERVER_INDEX
    again = _cli("ingest", str(note), "--collection", "notes", env=env)
    assert again.returncode == 0 and "(1 unchanged)" in again.stdout
    library = PostgresIndex.load(postgres_url)
    [hit] = library.search(TERM, "notes")
    assert hit.document.doc_id == "quokka-notitie" and library.file_id("notes", "quokka-notitie")
    unknown = _cli("remove", "nothing-here", "--database", postgres_url)
    assert unknown.returncode == 1 and "no document 'nothing-here'" in unknown.stderr
    removed = _cli("remove", "quokka-notitie", env=env)
    assert removed.returncode == 0 and "removed: quokka-notitie from collection 'notes'" in removed.stdout
    assert PostgresIndex.load(postgres_url).collection("notes") is None  # as in the SQLite file: nothing left in it


def test_a_url_that_names_no_postgresql_database_is_refused(tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DOCSERVER_DATABASE_URL", "mysql://user:secret@db/library")
    with pytest.raises(ValueError, match="postgresql://") as refused:
        database_url()
    assert "secret" not in str(refused.value)  # the password is never repeated
    done = _cli("list", "--database", "sqlite:///x.db")
    assert done.returncode == 1 and "postgresql://" in done.stderr
    assert shown("postgresql://neo:secret@db:5432/neo") == "postgresql://neo:***@db:5432/neo"


def test_serve_says_when_the_database_cannot_be_reached() -> None:
    done = _cli("--database", "postgresql://neo:secret@127.0.0.1:1/neo", "--port", "0")
    assert done.returncode == 1
    assert "cannot serve the library in postgresql://neo:***@127.0.0.1:1/neo" in done.stderr
    assert "secret" not in done.stderr and "Traceback" not in done.stderr


async def _search(url: str, query: str, collection: str) -> list[dict]:
    async with connect(f"{url}/mcp") as client:
        result = await call(client, "search_collection", {"query": query, "collection": collection})
        if result.get("isError"):
            return []
        return split_result(result)[1]


async def _collections(url: str) -> dict:
    async with connect(f"{url}/mcp") as client:
        result = await call(client, "list_collections", {})
        return {c["name"]: c for c in json.loads(result["content"][0]["text"])["collections"]}


async def _until(check, timeout_s: float = 5.0) -> float:
    """Seconds until ``check()`` holds (polled), or AssertionError after ``timeout_s``."""
    started = time.monotonic()
    while not await check():
        assert time.monotonic() - started < timeout_s, "not seen in time"
        await asyncio.sleep(0.05)
    return time.monotonic() - started


def test_two_servers_on_one_database_share_the_library(postgres_url: str, tmp_path: Path) -> None:
    """An ingest through one process is searchable on both servers within 2 s, as is its removal; the collection
    versions clients cache by agree across the servers."""
    note = tmp_path / "quokka.md"
    note.write_text(NOTE, encoding="utf-8")
    first = ServerThread(create_app(database_url=postgres_url)).start()
    second = ServerThread(create_app(database_url=postgres_url)).start()
    try:
        async def scenario() -> None:
            assert await _search(second.base_url, TERM, "notes") == []
            ingest_files([note], "notes", database_url=postgres_url)

            async def found() -> bool:
                seen = [[s["metadata"]["doc_id"] for s in await _search(server.base_url, TERM, "notes")]
                        for server in (first, second)]
                return seen == [["quokka-notitie"]] * 2

            assert await _until(found) < 2.0
            one, two = await _collections(first.base_url), await _collections(second.base_url)
            assert one["notes"]["version"] == two["notes"]["version"] and one["notes"]["documents"] == 1
            with PostgresStore(postgres_url) as store:
                store.remove(["quokka-notitie"], "notes")

            async def gone() -> bool:
                return [await _search(server.base_url, TERM, "notes") for server in (first, second)] == [[], []]

            assert await _until(gone) < 2.0

        asyncio.run(scenario())
    finally:
        first.stop()
        second.stop()


def test_ranking_does_not_depend_on_the_order_documents_came_in(postgres_url: str,
                                                                bundled: tuple[list, list]) -> None:
    """Saved one collection at a time (each save teaching the library new words that split compounds of the
    chunks saved before), the library ranks as the index in memory over all of it; removing a collection again
    splits the rest as the index without it does."""
    documents, collections = bundled
    with PostgresStore(postgres_url) as store:
        for collection in collections:
            store.save([(d, None) for d in documents if d.collection == collection.name])
        library = PostgresIndex.load(postgres_url)
        memory = Index(documents, collections)
        for query, collection in QUERIES:
            assert ranking(library.search(query, collection, limit=None)) == ranking(
                memory.search(query, collection, limit=None)), query
        store.remove([d.doc_id for d in documents if d.collection == "iaea"], "iaea")
    library = PostgresIndex.load(postgres_url)
    kept = [d for d in documents if d.collection != "iaea"]
    memory = Index(kept, [c for c in collections if c.name != "iaea"])
    for query, collection in QUERIES:
        if collection != "iaea":
            assert ranking(library.search(query, collection, limit=None)) == ranking(
                memory.search(query, collection, limit=None)), query


def test_the_service_writes_uploads_to_the_database(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                                   postgres_url: str) -> None:
    """With the library in PostgreSQL the service's uploads go there (the database wins over the file), and the key
    that signs source links is kept there: one for every replica (tests/test_library_api.py runs the Files API
    against both engines)."""
    from app.library import library_index, library_link_key
    from app.settings import Settings

    monkeypatch.setenv("DOCSERVER_INDEX", str(tmp_path / "index.sqlite3"))
    assert library_index(Settings(), embedded=True) == tmp_path / "index.sqlite3"
    monkeypatch.setenv("DOCSERVER_DATABASE_URL", postgres_url)
    assert library_index(Settings(), embedded=True) == postgres_url
    assert library_index(Settings(uploads="off"), embedded=True) is None
    key = library_link_key(Settings(link_secret=""), postgres_url)
    assert len(key) == 32 and library_link_key(Settings(link_secret=""), postgres_url) == key
    assert library_link_key(Settings(link_secret="s3cret"), postgres_url) == b"s3cret"


def test_copy_moves_a_library_from_the_file_into_the_database(postgres_url: str, tmp_path: Path) -> None:
    """`python -m docserver copy --to URL`: ingested and uploaded documents, the original bytes, a created collection
    with its metadata and the attachments arrive; an ingest of the same file afterwards finds it unchanged."""
    from docserver.library import Library, ingest_attached
    from docserver.postgres.library import PostgresLibrary

    index = tmp_path / "library" / "index.sqlite3"
    note = tmp_path / "quokka.md"
    note.write_text(NOTE, encoding="utf-8")
    assert _cli("ingest", str(note), "--collection", "notes", "--index", str(index), "--quiet").returncode == 0
    library = Library(index)
    library.create_collection("uploads", "Uploads", {"owner": "team"})
    content = b"Het wombatprotocol regelt de inspectie van de opslag.\n"
    written = library.incoming() / "upload-1"
    written.write_bytes(content)
    stored = library.add_file(written, "wombat.txt", "assistants")
    library.attach("uploads", stored.id)
    assert ingest_attached(index, "uploads", stored.id).status == "completed"

    done = _cli("copy", "--index", str(index), "--to", postgres_url)
    assert done.returncode == 0, done.stderr
    assert "copied 2 documents, 2 files, 1 created collections and 1 attachments" in done.stdout
    searched = PostgresIndex.load(postgres_url)
    assert [h.document.doc_id for h in searched.search(TERM, "notes")] == ["quokka-notitie"]
    assert [h.document.doc_id for h in searched.search("wombatprotocol", "uploads")] == ["wombat"]
    target = PostgresLibrary(postgres_url, cache=tmp_path / "cache")
    try:
        assert target.file_path(stored.id).read_bytes() == content
        assert target.file(stored.id).filename == "wombat.txt"
        [info] = [c for c in target.collections() if c.name == "uploads"]
        assert info.display_name == "Uploads" and info.metadata == {"owner": "team"} and info.documents == 1
        assert [a.status for a in target.attachments("uploads")] == ["completed"]
    finally:
        target.close()
    again = _cli("ingest", str(note), "--collection", "notes", "--database", postgres_url)
    assert again.returncode == 0 and "(1 unchanged)" in again.stdout
