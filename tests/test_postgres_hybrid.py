"""Search by meaning in the library in PostgreSQL (docserver/postgres/vectors.py): pgvector beside the postings,
fused as the index in memory fuses them, passages embedded once per text by a server's catch-up or the CLI.

A real PostgreSQL 16 with pgvector (pgserver, tests/conftest.py), the scripted fake embeddings endpoint over HTTP
(a hashed bag of words: tests/fakes/fake_embeddings.py), the real MCP server and client, the CLI in a process.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from docserver.documents import Collection
from docserver.embeddings import Embedder
from docserver.index import Index
from docserver.postgres import schema, vectors
from docserver.postgres.search import PostgresIndex
from docserver.postgres.store import PostgresStore
from docserver.server import create_app
from tests.fakes.fake_embeddings import FakeEmbeddings
from tests.fakes.servers import ServerThread
from tests.test_docserver import call, connect, split_result
from tests.test_hybrid_search import DOCS, _settings, _vectors

ROOT = Path(__file__).resolve().parents[1]
EMPTY_CORPUS: list = []


@pytest.fixture
def fake() -> FakeEmbeddings:
    with FakeEmbeddings(dim=64) as server:
        yield server


def _library(url: str, embedder: Embedder) -> PostgresIndex:
    """DOCS in the database, every passage embedded."""
    with PostgresStore(url) as store:
        store.save([(d, None) for d in DOCS])
        schema.prepare_vectors(store._db)
        waiting = vectors.waiting(store._db, embedder.settings.key)
    assert len(waiting) == sum(len(d.chunks) for d in DOCS)
    outcome = vectors.embed_chunks(url, embedder, waiting)
    assert outcome.embedded == len(waiting) and outcome.error is None
    return PostgresIndex.load(url, vector_key=embedder.settings.key)


def _ranking(hits: list) -> list[tuple]:
    return [(h.document.doc_id, h.chunk.chunk_index, round(h.score, 6), h.relevance, h.matched_terms) for h in hits]


def test_words_and_meaning_fuse_as_in_memory(postgres_url: str, fake: FakeEmbeddings) -> None:
    """The same passages and vectors: the same hits in the same order with the same scores as the index in memory,
    found by meaning alone too (no word in common), within one document too; cosines to float32 precision."""
    embedder, stored = _vectors(fake, DOCS)
    memory = Index(DOCS, [Collection("notes", "Notes")], vector_key=embedder.settings.key, vectors=stored)
    library = _library(postgres_url, embedder)
    assert library.searches_by_meaning("notes") and library.waiting() == []
    for text, meaning in [("cesium koelwater", "caesium cooling water"), ("Borssele 2033", "Borssele 2033"),
                          ("reactor", "reactor Petten"), ("de het", "filters replaced")]:
        vector = embedder.query(meaning)
        for doc_id in (None, "pallas"):
            a = memory.search(text, "notes", query_vector=vector, doc_id=doc_id)
            b = library.search(text, "notes", query_vector=vector, doc_id=doc_id)
            assert _ranking(b) == _ranking(a), (text, doc_id)
            for x, y in zip(a, b, strict=True):
                assert y.similarity is not None and abs(x.similarity - y.similarity) < 2e-4
    hits = library.search("cesium koelwater", "notes", query_vector=embedder.query("caesium cooling water"))
    assert hits[0].document.doc_id == "zeolite" and hits[0].score == 0.0  # by meaning alone
    assert library.search("zeolite filter", "notes") == [h for h in library.search("zeolite filter", "notes")]
    assert all(h.similarity is None for h in library.search("zeolite filter", "notes"))  # no vector: words only
    embedder.close()


def test_a_text_is_embedded_once_and_a_removed_ones_vector_is_pruned(postgres_url: str, fake: FakeEmbeddings,
                                                                      tmp_path: Path) -> None:
    """The CLI embeds what waits; saving a document again with the same texts embeds nothing; `embed --prune`
    drops the vectors of texts no passage has any more."""
    env = {**os.environ, "DOCSERVER_DATABASE_URL": postgres_url, "EMBEDDINGS_URL": fake.url,
           "EMBEDDINGS_MODEL": "fake-e5"}
    with PostgresStore(postgres_url) as store:
        store.save([(d, None) for d in DOCS])

    def embed(*extra: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "docserver", "embed", *extra], cwd=ROOT, env=env,
                              capture_output=True, text=True, timeout=120, check=False)

    first = embed()
    assert first.returncode == 0, first.stderr
    passages = sum(len(d.chunks) for d in DOCS)
    assert f"{passages} texts embedded" in first.stdout
    requests = len(fake.requests)
    with PostgresStore(postgres_url) as store:
        store.save([(DOCS[0], None)])  # the same texts again
    again = embed()
    assert again.returncode == 0 and "texts embedded" not in again.stdout and len(fake.requests) == requests
    with PostgresStore(postgres_url) as store:
        store.remove([DOCS[2].doc_id], "notes")
    pruned = embed("--prune")
    assert pruned.returncode == 0 and f"{len(DOCS[2].chunks)} vectors no passage needs deleted" in pruned.stdout


async def _search(url: str, query: str) -> list[dict]:
    async with connect(f"{url}/mcp") as client:
        return split_result(await call(client, "search_collection", {"query": query, "collection": "notes"}))[1]


def test_a_server_embeds_what_waits_and_then_searches_by_meaning(postgres_url: str, fake: FakeEmbeddings) -> None:
    """A server with an embedding endpoint on a database whose passages have no vectors yet: its first calls
    search by words and start the catch-up; once done, hits say their similarity."""
    with PostgresStore(postgres_url) as store:
        store.save([(d, None) for d in DOCS])
    server = ServerThread(create_app(database_url=postgres_url, embeddings=_settings(fake))).start()
    try:
        async def scenario() -> list[dict]:
            deadline = time.monotonic() + 10
            while True:
                sources = await _search(server.base_url, "zeolite filter")
                if sources and "similarity" in sources[0]["metadata"]:
                    return sources
                assert time.monotonic() < deadline, "never searched by meaning"
                await asyncio.sleep(0.1)

        sources = asyncio.run(scenario())
        assert sources[0]["metadata"]["doc_id"] == "zeolite"
        shas = sorted({vectors.text_sha(c) for d in DOCS for c in d.chunks})
        with schema.connect(postgres_url) as db:  # the bundled corpus's passages are embedded too
            count = db.execute("SELECT count(*) FROM vectors WHERE text_sha = ANY(%s)", (shas,)).fetchone()[0]
            waiting = vectors.waiting(db, _settings(fake).key)
        assert count == len(shas) and waiting == []
        assert json.dumps(sources)  # plain JSON for the client
    finally:
        server.stop()
