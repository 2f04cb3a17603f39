"""The SQLite file searched on disk (docserver/sqlite/): the embedded default's search copy kept in the file, ranked
as the index in memory ranks it, kept up to date by every writer, whatever order documents came in, with the bundled
corpus in step; searches read the file while a long write is under way.

Real SQLite files in tmp_path, the real writers (``DocumentStore``, the library), the real corpus.  Nothing is mocked.
"""

import json
import os
import sqlite3
import subprocess
import sys
import threading
from contextlib import closing
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from docserver import schema
from docserver.corpus import BUNDLED_CORPUS, load_corpus
from docserver.index import Index
from docserver.live import LiveIndex
from docserver.sqlite.search import SqliteIndex, bring_up_to_date
from docserver.store import DocumentStore
from tests.test_postgres import QUERIES, ranking


def _copies(collection: str, count: int) -> list:
    """Bundled documents saved again into ``collection``: ingested documents beside the corpus."""
    corpus = load_corpus(BUNDLED_CORPUS)
    return [replace(d, collection=collection, chunks=tuple(replace(c, collection=collection) for c in d.chunks))
            for d in corpus[:count]]


def _same(memory: Index, disk: SqliteIndex, queries: list[tuple[str, str]]) -> None:
    for query, collection in queries:
        for limit in (1, 5, 10):
            assert ranking(disk.search(query, collection, limit=limit)) == ranking(
                memory.search(query, collection, limit=limit)), (query, collection, limit)
    assert [c.name for c in disk.collections] == [c.name for c in memory.collections]
    for c in memory.collections:
        assert disk.outline(c.name, 12) == memory.outline(c.name, 12)
        assert [d.doc_id for d in disk.listing(c.name, 50)] == [d.doc_id for d in memory.listing(c.name, 50)]
        assert disk.version(c.name) == memory.version(c.name)
        for words in ("veiligheidscultuur", "safety guide", "kernenergiewet besluit"):
            assert disk.match_titles(words, c.name) == [replace(d, chunks=()) for d in memory.match_titles(words,
                                                                                                           c.name)]
    assert (disk.chunk_count, disk.document_count) == (memory.chunk_count, memory.document_count)


def test_ranks_as_the_index_in_memory(tmp_path: Path) -> None:
    path = tmp_path / "library.sqlite3"
    with DocumentStore(path) as store:
        store.save([(d, None) for d in _copies("notes", 12)])
    memory, disk = Index.load(index_path=path), SqliteIndex.load(path)
    _same(memory, disk, [*QUERIES, *((q, "notes") for q, _ in QUERIES[:6])])
    first = memory.documents("notes")[0]
    assert disk.document("notes", first.doc_id) == first
    assert ranking(disk.search("veiligheid", "notes", doc_id=first.doc_id, limit=None)) == ranking(
        memory.search("veiligheid", "notes", doc_id=first.doc_id, limit=None))
    with pytest.raises(KeyError):
        disk.search("veiligheid", "no-such-collection")


def _words(path: Path) -> dict[str, object]:
    """The search copy as it ranks: every chunk's counts and length (not the impacts: an order of postings that
    depends on the average length when each was written), the statistics and the tokens."""
    with sqlite3.connect(path) as db:
        chunks = {(c, d, i): (length, {s: tf for s, (tf, _) in json.loads(terms).items()}) for c, d, i, length, terms
                  in db.execute("SELECT collection, doc_id, chunk_index, length, terms FROM word_chunks")}
        return {"chunks": chunks, "stems": set(db.execute("SELECT * FROM word_stems")),
                "stats": set(db.execute("SELECT * FROM word_stats")),
                "tokens": set(db.execute("SELECT * FROM word_tokens")),
                "postings": db.execute("SELECT count(*) FROM word_postings").fetchone()}


def test_the_order_documents_came_in_does_not_matter(tmp_path: Path) -> None:
    """Saved one collection at a time and one removed again, the copy holds what a build of the rest in one go
    holds: a chunk's compound splits follow the whole library's words (``words._resplit``)."""
    parts = {name: _copies(name, count) for name, count in (("a", 5), ("b", 9), ("c", 3))}
    one_by_one, at_once = tmp_path / "one.sqlite3", tmp_path / "once.sqlite3"
    with DocumentStore(one_by_one) as store:
        for documents in parts.values():
            store.save([(d, None) for d in documents])
        store.remove([d.doc_id for d in parts["b"]], "b")
    with DocumentStore(at_once) as store:
        store.save([(d, None) for d in parts["a"] + parts["c"]])
    assert _words(one_by_one) == _words(at_once)
    _same(Index.load(index_path=one_by_one), SqliteIndex.load(one_by_one), [(q, "a") for q, _ in QUERIES])


def test_a_file_from_before_the_copy_is_indexed_when_first_served(tmp_path: Path) -> None:
    path = tmp_path / "old.sqlite3"
    with DocumentStore(path) as store:
        store.save([(d, None) for d in _copies("notes", 6)])
    with sqlite3.connect(path) as db:  # as code from before the search copy left it
        for (name, kind) in db.execute("SELECT name, type FROM sqlite_master WHERE name LIKE 'word%' AND type IN "
                                       "('table', 'trigger')").fetchall():
            db.execute(f"DROP {kind.upper()} {name}")
    assert bring_up_to_date(path, load_corpus(BUNDLED_CORPUS)) > 6
    _same(Index.load(index_path=path), SqliteIndex.load(path), [(q, "notes") for q, _ in QUERIES])
    assert bring_up_to_date(path, load_corpus(BUNDLED_CORPUS)) == 0  # up to date: nothing written


def test_an_ingested_document_replaces_a_corpus_document_and_gives_it_back(tmp_path: Path) -> None:
    path = tmp_path / "library.sqlite3"
    corpus = load_corpus(BUNDLED_CORPUS)
    original = corpus[0]
    mine = replace(original, title="Mijn eigen versie", chunks=(replace(original.chunks[0], text="zwaluwstaart"),))
    SqliteIndex.load(path)
    with DocumentStore(path) as store:
        store.save([(mine, None)])
        disk = SqliteIndex.load(path)
        assert disk.document(original.collection, original.doc_id).title == "Mijn eigen versie"
        assert [h.document.doc_id for h in disk.search("zwaluwstaart", original.collection)] == [original.doc_id]
        store.remove([original.doc_id], original.collection)
    disk = SqliteIndex.load(path)  # a server brings the corpus back in step
    assert disk.document(original.collection, original.doc_id) == original
    assert disk.search("zwaluwstaart", original.collection) == []
    _same(Index.load(index_path=path), disk, QUERIES)


def test_searches_read_the_file_while_a_long_write_is_under_way(tmp_path: Path) -> None:
    """A write larger than the page cache (a folder of PDFs) does not lock the searches out: the file keeps a
    write-ahead log, and a search reads the last committed state until the write commits."""
    path = tmp_path / "library.sqlite3"
    with DocumentStore(path) as store:
        store.save([(d, None) for d in _copies("notes", 4)])
    disk = SqliteIndex.load(path)
    before = ranking(disk.search("veiligheidscultuur", "notes"))
    writer = schema.connect(path)
    writer.execute("PRAGMA cache_size = 1")  # spills to the file at once
    writer.execute("BEGIN IMMEDIATE")
    writer.executemany("INSERT INTO meta (key, value) VALUES (?, 1)", [(f"filler:{i}", ) for i in range(20000)])
    searched: list[list[tuple]] = []
    reader = threading.Thread(target=lambda: searched.append(ranking(disk.search("veiligheidscultuur", "notes"))))
    reader.start()
    reader.join(20)
    writer.rollback()
    writer.close()
    assert searched == [before]


def test_a_server_with_an_embedding_endpoint_or_an_unwritable_file_holds_the_index_in_memory(tmp_path: Path) -> None:
    path = tmp_path / "library.sqlite3"
    assert isinstance(LiveIndex.load(index_path=path).index, SqliteIndex)  # the default: on disk
    with sqlite3.connect(path) as db:
        db.execute("INSERT INTO word_pending VALUES ('notes', 'gone')")  # the copy is behind
    if os.geteuid() == 0:
        pytest.skip("root writes a read-only file")
    path.chmod(0o444)
    path.parent.chmod(0o555)
    try:
        assert isinstance(LiveIndex.load(index_path=path).index, Index)
    finally:
        path.parent.chmod(0o755)
        path.chmod(0o644)


def _random_vectors(path: Path, key: str, skip: int, seed: int = 1) -> None:
    """Every passage of the file (and the corpus) a random unit vector of space ``key`` but the last ``skip``."""
    from docserver.documents import chunk_text
    from docserver.vectors import _write, library_passages, passage_digest

    rng = np.random.default_rng(seed)
    vectors = {}
    for chunk in library_passages(path, BUNDLED_CORPUS):
        vector = rng.standard_normal(16).astype(np.float32)
        vectors[passage_digest(key, chunk_text(chunk))] = vector / np.linalg.norm(vector)
    with closing(schema.connect(path)) as db, db:
        _write(db, key, dict(list(vectors.items())[:len(vectors) - skip]))


def _hybrid(hits: list) -> list[tuple]:
    return [(*row, h.similarity, h.sentences) for row, h in zip(ranking(hits), hits, strict=True)]


def test_searches_by_meaning_as_the_index_in_memory(tmp_path: Path) -> None:
    """Words and meaning fused as the index in memory fuses them, within a document too; the passages without a
    vector wait for one (and are searched by their words), and a reload reads only the vectors new since."""
    path = tmp_path / "library.sqlite3"
    with DocumentStore(path) as store:
        store.save([(d, None) for d in _copies("notes", 10)])
    SqliteIndex.load(path)  # the corpus in the file, as a server's start puts it there
    _random_vectors(path, "space", skip=5)
    memory, disk = Index.load(index_path=path, vector_key="space"), SqliteIndex.load(path, vector_key="space")
    assert sorted(c.text for c in disk.waiting()) == sorted(c.text for c in memory.waiting()) and len(
        disk.waiting()) == 5
    rng = np.random.default_rng(7)
    first = memory.documents("notes")[0].doc_id
    for query, collection in [*QUERIES, *((q, "notes") for q, _ in QUERIES)]:
        vector = rng.standard_normal(16).astype(np.float32)
        vector /= np.linalg.norm(vector)
        for options in ({"limit": 5}, {"limit": 10}, {"limit": 10, "fusion": (1.0, 2.0)}):
            assert _hybrid(disk.search(query, collection, query_vector=vector, **options)) == _hybrid(
                memory.search(query, collection, query_vector=vector, **options)), (query, options)
        assert _hybrid(disk.search(query, "notes", query_vector=vector, doc_id=first, limit=None)) == _hybrid(
            memory.search(query, "notes", query_vector=vector, doc_id=first, limit=None))
    _random_vectors(path, "space", skip=0)
    again = SqliteIndex.load(path, previous=disk, vector_key="space")
    assert again.waiting() == [] and again._vectors.vector(next(iter(again._vectors.digests))) is not None
    assert not SqliteIndex.load(path).searches_by_meaning("notes")


def test_a_reload_reads_the_words_a_save_by_another_process_brought(tmp_path: Path) -> None:
    """The vocabulary a server holds (the compound splits of queries) is read again when a save changed the words,
    and only then."""
    path = tmp_path / "library.sqlite3"
    served = SqliteIndex.load(path)
    assert SqliteIndex.load(path, previous=served).vocabulary is served.vocabulary  # nothing changed
    note = replace(_copies("notes", 1)[0], doc_id="memo", title="Memo")
    note = replace(note, chunks=(replace(note.chunks[0], doc_id="memo", text="De zwaluwstaartprocedure geldt."),))
    with DocumentStore(path) as store:  # the CLI's ingest, in another process
        store.save([(note, None)])
    reloaded = SqliteIndex.load(path, previous=served)
    assert reloaded.vocabulary is not served.vocabulary
    assert [h.document.doc_id for h in reloaded.search("zwaluwstaart", "notes")] == ["memo"]  # a compound's part
    _same(Index.load(index_path=path), reloaded, [("zwaluwstaart procedure", "notes"), *QUERIES[:3]])


@pytest.mark.asyncio
async def test_a_running_server_searches_the_file_on_disk(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """The real server (the bundled corpus, the official MCP client): a note the CLI ingests in another process is
    found, with its collection's new version, as soon as the save commits (no reload needed); removed, it is gone; a
    file that turns unreadable gives a clear error and a 503 once the server reads it (what it cached may still
    answer), and a file written anew is served again."""
    import httpx

    from docserver.embedded import serve_in_background
    from docserver.tools import UNREADABLE
    from tests.test_docserver import call, connect
    from tests.test_docserver_reload import NOTE, TERM, eventually, found, run_ingest_cli
    from tests.test_library import listed_collections

    index_file = tmp_path / "library" / "docserver.sqlite3"
    note = tmp_path / "quokka.md"
    note.write_text(NOTE, encoding="utf-8")
    search = {"query": TERM, "collection": "anvs"}
    server = await serve_in_background(index_path=index_file)
    try:
        with closing(sqlite3.connect(index_file)) as db:  # the bundled corpus in the file: searched on disk
            assert db.execute("SELECT count(*) FROM word_documents WHERE corpus IS NOT NULL").fetchone()[0] > 40
        async with connect(server.url, server.token) as client:
            before = listed_collections(await call(client, "list_collections", {}))["anvs"]
            assert not found(await call(client, "search_collection", search))
            assert run_ingest_cli(str(note), "--collection", "anvs", "--index", str(index_file)).returncode == 0
            hit = await call(client, "search_collection", search)  # at once: the search reads the file
            assert found(hit)
            payload = json.loads(hit["content"][-1]["resource"]["text"])
            after = listed_collections(await call(client, "list_collections", {}))["anvs"]
            assert payload["collection_version"] == after["version"] != before["version"]
            assert after["documents"] == before["documents"] + 1
            removed = subprocess.run([sys.executable, "-m", "docserver", "remove", "quokka-notitie", "--index",
                                      str(index_file)], capture_output=True, text=True, timeout=120)
            assert removed.returncode == 0, removed.stderr
            assert not found(await call(client, "search_collection", search))

            index_file.write_bytes(b"this is not a SQLite database" * 100)
            broken = await call(client, "search_collection", search)  # pages read before may still answer
            assert not found(broken) and (not broken["isError"] or broken["content"][0]["text"] == UNREADABLE)
            async with httpx.AsyncClient() as http:
                assert (await http.get(server.base_url + "/health", timeout=10)).status_code in (200, 503)
            for path in index_file.parent.glob("docserver.sqlite3*"):  # the file with its write-ahead log
                path.unlink()
            assert run_ingest_cli(str(note), "--collection", "anvs", "--index", str(index_file)).returncode == 0

            async def served_again() -> bool:
                return found(await call(client, "search_collection", search))

            await eventually(served_again)
    finally:
        await server.stop()


def test_a_query_of_thousands_of_words_is_searched(tmp_path: Path) -> None:
    """A query of more distinct words than SQLite takes parameters or compound terms in one statement (hostile input:
    the tool takes any string) is searched by its first ``MOST_STEMS`` stems."""
    from docserver.sqlite.search import MOST_STEMS
    from textkit import tokenize

    disk = SqliteIndex.load(tmp_path / "library.sqlite3")
    known = list(dict.fromkeys(t for d in load_corpus(BUNDLED_CORPUS) for c in d.chunks for t in tokenize(c.text)))
    assert len(known) > 2 * MOST_STEMS
    hits = disk.search(" ".join(known * 3), "anvs")
    assert len(hits) == 10 and hits[0].relevance == 1.0
