"""Search by meaning beside search by words (docserver/hybrid.py, vectors.py, index.py, live.py, the CLI).

The vectors come from the scripted fake embeddings endpoint over HTTP (``tests/fakes/fake_embeddings.py``: a
hashed bag of words, so a passage sharing words with a query is near it); the real model's hybrid suite is
``tests/llm/test_hybrid.py``.  Nothing is mocked: the real index file, the real MCP server and client, the CLI in a
subprocess.
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from docserver.documents import Chunk, Collection, Document, chunk_text
from docserver.embeddings import Embedder, EmbeddingSettings
from docserver.hybrid import RRF_K, SlotVectors, fuse
from docserver.index import Index
from docserver.ingest import ingest
from docserver.server import create_app
from docserver.store import load_documents
from docserver.vectors import embed_chunks, passage_digest, prune, stored_digests
from tests.fakes.fake_embeddings import FakeEmbeddings
from tests.fakes.servers import ServerThread
from tests.test_docserver import call, connect, split_result
from textkit import tokenize

ROOT = Path(__file__).resolve().parents[1]


def _doc(doc_id: str, *texts: str, collection: str = "notes") -> Document:
    chunks = tuple(Chunk(doc_id, collection, i, doc_id, f"Deel {i}", text) for i, text in enumerate(texts))
    return Document(doc_id, collection, doc_id, chunks)


DOCS = [
    _doc("zeolite", "The zeolite filter removes caesium from the cooling water.", "Filters are replaced yearly."),
    _doc("borssele", "De kerncentrale Borssele mag tot eind 2033 in bedrijf blijven.", "Exploitant is EPZ."),
    _doc("pallas", "PALLAS vervangt de Hoge Flux Reactor in Petten."),
]


@pytest.fixture
def fake() -> FakeEmbeddings:
    with FakeEmbeddings(dim=64) as server:
        yield server


def _settings(fake: FakeEmbeddings, **overrides: object) -> EmbeddingSettings:
    return EmbeddingSettings(**{"url": fake.url, "model": "fake-e5", "batch_size": 4, "timeout_s": 5, **overrides})


# --- the fusion rule ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("lexical", "semantic", "weights", "expected_order"),
    [
        ([(9.0, 1), (5.0, 2)], [], (1.0, 1.0), [1, 2]),  # words alone: their order
        ([], [(0.9, 3), (0.8, 4)], (1.0, 1.0), [3, 4]),  # meaning alone (a question in the other language)
        ([(9.0, 1), (5.0, 2)], [(0.9, 2), (0.8, 1)], (1.0, 1.0), [1, 2]),  # a tie on ranks: both 1/61 + 1/62
        ([(9.0, 1), (5.0, 2), (4.0, 3)], [(0.9, 3)], (1.0, 1.0), [3, 1, 2]),  # both like 3: it beats 1
        ([(9.0, 1)], [(0.9, 2)], (1.0, 2.0), [2, 1]),  # meaning weighted twice: its first beats words' first
        ([(9.0, 1)], [(0.9, 2)], (2.0, 1.0), [1, 2]),
    ],
)
def test_reciprocal_rank_fusion_adds_weight_over_k_plus_rank(lexical, semantic, weights, expected_order) -> None:
    fused = fuse(lexical, semantic, weights=weights)
    assert sorted(fused, key=lambda slot: (-fused[slot], slot)) == expected_order
    if lexical:
        first = lexical[0][1]
        in_semantic = [rank for rank, (_, slot) in enumerate(semantic, 1) if slot == first]
        expected = weights[0] / (RRF_K + 1) + sum(weights[1] / (RRF_K + r) for r in in_semantic)
        assert fused[first] == pytest.approx(expected)


def test_slot_vectors_skip_passages_without_a_vector_and_rank_by_cosine() -> None:
    vectors = {"a": np.array([1.0, 0.0], np.float32), "c": np.array([0.6, 0.8], np.float32)}
    slots = SlotVectors.of(["a", None, "b", "c"], vectors)
    assert slots is not None and slots.slots.tolist() == [0, 3]
    scores = slots.similarities(np.array([0.0, 1.0], np.float32))
    assert slots.nearest(scores, 5) == [(pytest.approx(0.8), 3), (0.0, 0)]
    assert slots.nearest(scores, 1) == [(pytest.approx(0.8), 3)]
    assert slots.nearest(scores, 5, np.array([True, False])) == [(0.0, 0)]
    assert slots.at(scores, [3, 1, 0]) == {3: pytest.approx(0.8), 0: 0.0}
    assert SlotVectors.of(["b", None], vectors) is None
    mixed = SlotVectors.of(["a", "c", "d"], vectors | {"d": np.ones(3, np.float32)})  # another model's length
    assert mixed is not None and mixed.slots.tolist() == [0, 1]


# --- the index ---------------------------------------------------------------------------------------------


def _vectors(fake: FakeEmbeddings, documents: list[Document]) -> tuple[Embedder, dict[str, np.ndarray]]:
    embedder = Embedder(_settings(fake))
    chunks = [c for d in documents for c in d.chunks]
    texts = [chunk_text(c) for c in chunks]
    rows = embedder.passages(texts)
    return embedder, {passage_digest(embedder.settings.key, t): row for t, row in zip(texts, rows, strict=True)}


def test_without_a_query_vector_the_ranking_is_bm25s_exactly(fake: FakeEmbeddings) -> None:
    embedder, vectors = _vectors(fake, DOCS)
    plain = Index(DOCS, [Collection("notes", "Notes")])
    hybrid = Index(DOCS, [Collection("notes", "Notes")], vector_key=embedder.settings.key, vectors=vectors)
    for query in ("zeolite filter", "Borssele 2033", "reactor"):
        assert hybrid.search(query, "notes") == plain.search(query, "notes")
        assert all(h.similarity is None for h in plain.search(query, "notes"))


def test_a_passage_that_shares_no_word_with_the_query_is_found_by_its_vector(fake: FakeEmbeddings) -> None:
    embedder, vectors = _vectors(fake, DOCS)
    index = Index(DOCS, [Collection("notes", "Notes")], vector_key=embedder.settings.key, vectors=vectors)
    # BM25 finds nothing for the Dutch words; the query's vector (here the fake's bag of the English words, as a
    # multilingual model would give for either wording) is nearest the zeolite passage
    query = "caesium cooling water"
    by_words = [h.document.doc_id for h in index.search("cesium koelwater", "notes")]
    assert by_words == []
    hits = index.search("cesium koelwater", "notes", query_vector=embedder.query(query))
    assert hits and hits[0].document.doc_id == "zeolite" and hits[0].score == 0.0
    assert hits[0].similarity is not None and hits[0].similarity > 0.3 and hits[0].relevance == 1.0
    assert all(h.similarity is not None for h in hits)  # every passage has a vector
    only = index.search("cesium koelwater", "notes", query_vector=embedder.query(query), doc_id="pallas")
    assert [h.document.doc_id for h in only] == ["pallas"]
    assert len(index.search("x", "notes", limit=2, query_vector=embedder.query(query))) == 2


def test_words_and_meaning_are_fused_and_a_query_in_another_language_leaves_the_ranking_to_meaning(
    fake: FakeEmbeddings,
) -> None:
    embedder, vectors = _vectors(fake, DOCS)
    index = Index(DOCS, [Collection("notes", "Notes")], vector_key=embedder.settings.key, vectors=vectors)
    by_words = index.search("Borssele exploitant", "notes")
    hybrid = index.search("Borssele exploitant", "notes", query_vector=embedder.query("zeolite filter"))
    # the words' best and the vector's best both make the top; the word match keeps its BM25 score
    assert {h.document.doc_id for h in hybrid[:3]} >= {"borssele", "zeolite"}
    assert next(h for h in hybrid if h.chunk == by_words[0].chunk).score == by_words[0].score
    # the words' weight is the share of the query's words the collection holds at all
    for query, share in (("Borssele exploitant", 1.0), ("Borssele qwxyz", 0.5), ("qwxyz vvbnm", 0.0)):
        held = index._bm25["notes"].postings.__contains__
        assert index._lexical.vocabulary.known_share(list(dict.fromkeys(tokenize(query))), held) == share
    # a query of small words alone: nothing for BM25, found by meaning, no word matched
    assert [h.matched_terms for h in index.search("de het een", "notes", query_vector=embedder.query("zeolite"))] == \
        [0.0] * 5
    none_known = index.search("qwxyz vvbnm", "notes", query_vector=embedder.query("zeolite filter"))
    assert none_known[0].document.doc_id == "zeolite" and none_known[0].score == 0.0


def test_a_passage_without_a_vector_waits_and_is_still_found_by_its_words(fake: FakeEmbeddings) -> None:
    embedder, vectors = _vectors(fake, DOCS[:1])
    index = Index(DOCS, [Collection("notes", "Notes")], vector_key=embedder.settings.key, vectors=vectors)
    assert sorted(c.doc_id for c in index.waiting()) == ["borssele", "borssele", "pallas"]
    hits = index.search("Borssele", "notes", query_vector=embedder.query("Borssele"))
    waiting = next(h for h in hits if h.document.doc_id == "borssele")
    assert waiting.similarity is None and waiting.score > 0
    assert Index(DOCS).waiting() == []  # no vector space: nothing waits


def test_a_query_vector_of_another_dimension_is_searched_by_words(fake: FakeEmbeddings) -> None:
    embedder, vectors = _vectors(fake, DOCS)
    index = Index(DOCS, [Collection("notes", "Notes")], vector_key=embedder.settings.key, vectors=vectors)
    assert index.search("Borssele", "notes", query_vector=np.ones(3, np.float32)) == index.search("Borssele", "notes")


# --- vectors in the index file -----------------------------------------------------------------------------


def _chunks(documents: list[Document]) -> list[Chunk]:
    return [c for d in documents for c in d.chunks]


def test_passages_are_embedded_once_per_text_and_space_and_a_model_change_embeds_again(
    fake: FakeEmbeddings, tmp_path: Path
) -> None:
    path = tmp_path / "index.sqlite3"
    embedder = Embedder(_settings(fake))
    first = embed_chunks(path, embedder, _chunks(DOCS))
    assert (first.embedded, first.waiting, first.error) == (5, 0, None)
    assert sorted(t for batch in fake.inputs for t in batch) == sorted(chunk_text(c) for c in _chunks(DOCS))
    requests = len(fake.requests)
    again = embed_chunks(path, embedder, _chunks(DOCS))
    assert again.embedded == 0 and len(fake.requests) == requests  # nothing new: not one request
    changed = [DOCS[0], _doc("borssele", "De kerncentrale Borssele sluit in 2033.", "Exploitant is EPZ.")]
    assert embed_chunks(path, embedder, _chunks(changed)).embedded == 1  # only the edited passage
    other = Embedder(_settings(fake, passage_prefix="passage: "))
    assert embed_chunks(path, other, _chunks(DOCS)).embedded == 5  # another space: all of them again
    assert fake.requests[-1].inputs[0].startswith("passage: ")
    connection = sqlite3.connect(path)
    assert len(stored_digests(connection, embedder.settings.key)) == 6
    assert prune(path, other.settings.key, _chunks(DOCS)) == 6  # the first space's vectors, none of the second's
    assert len(stored_digests(connection, other.settings.key)) == 5
    connection.close()


def test_an_endpoint_that_fails_halfway_keeps_what_was_done_and_the_rest_waits(
    fake: FakeEmbeddings, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import docserver.vectors as vectors

    monkeypatch.setattr(vectors, "ROUND", 2)  # rounds of two passages, committed one by one
    path = tmp_path / "index.sqlite3"
    embedder = Embedder(_settings(fake, batch_size=2, concurrency=1))
    fake.wrong_dim_after = 1  # the second request answers vectors of another length: unusable
    outcome = embed_chunks(path, embedder, _chunks(DOCS))
    assert (outcome.embedded, outcome.waiting) == (2, 3) and "dimension" in (outcome.error or "")
    fake.wrong_dim_after = None
    assert embed_chunks(path, embedder, _chunks(DOCS)).embedded == 3  # the rest, later


def test_the_cache_file_gives_a_fresh_index_its_vectors_without_a_request(fake: FakeEmbeddings, tmp_path: Path) -> None:
    cache = tmp_path / "cache" / "vectors.sqlite3"
    embedder = Embedder(_settings(fake))
    assert embed_chunks(tmp_path / "a.sqlite3", embedder, _chunks(DOCS), cache=cache).embedded == 5
    requests = len(fake.requests)
    outcome = embed_chunks(tmp_path / "b.sqlite3", embedder, _chunks(DOCS), cache=cache)
    assert (outcome.embedded, outcome.cached) == (0, 5) and len(fake.requests) == requests


def test_one_process_embeds_a_file_at_a_time(fake: FakeEmbeddings, tmp_path: Path) -> None:
    path = tmp_path / "index.sqlite3"
    embedder = Embedder(_settings(fake))
    embed_chunks(path, embedder, _chunks(DOCS[:1]))  # creates the file
    connection = sqlite3.connect(path)
    with connection:
        connection.execute("INSERT INTO embedding_lease (id, holder, expires) VALUES (1, 'someone', 1e12)")
    busy = embed_chunks(path, embedder, _chunks(DOCS))
    assert (busy.embedded, busy.waiting, busy.error) == (0, 3, "busy")
    with connection:
        connection.execute("UPDATE embedding_lease SET expires = 0")  # its holder died: the lease expired
    assert embed_chunks(path, embedder, _chunks(DOCS)).embedded == 3
    connection.close()


# --- a running server --------------------------------------------------------------------------------------

NOTE = """\
---
doc_id: {doc_id}
title: {title}
---

# {title}

## Bevindingen

{text}
"""


def _write(folder: Path, doc_id: str, title: str, text: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{doc_id}.md"
    path.write_text(NOTE.format(doc_id=doc_id, title=title, text=text), encoding="utf-8")
    return path


async def _search(url: str, query: str, collection: str = "notes") -> list[dict]:
    async with connect(url) as client:
        result = await call(client, "search_collection", {"query": query, "collection": collection})
    return split_result(result)[1]


@pytest.mark.asyncio
async def test_a_server_catches_up_with_waiting_passages_and_then_searches_by_meaning(
    fake: FakeEmbeddings, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import docserver.live as live

    monkeypatch.setattr(live, "RETRY_S", 0.0)  # the endpoint is asked again at once after a failure
    folder = tmp_path / "notes"
    _write(folder, "zeolite", "Zeolite", "The zeolite filter removes caesium from the cooling water.")
    _write(folder, "pallas", "Pallas", "PALLAS vervangt de Hoge Flux Reactor in Petten.")
    index_path = tmp_path / "index.sqlite3"
    ingest([folder], "notes", index_path=index_path)  # stored without vectors: they wait
    fake.down = True  # the endpoint is down when the server starts
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    app = create_app(corpus, index_path=index_path, token="", embeddings=_settings(fake))
    with ServerThread(app) as server:
        url = server.base_url + "/mcp"
        sources = await _search(url, "zeolite filter")
        assert sources and "similarity" not in sources[0]["metadata"]  # by words, no error
        fake.down = False
        for _ in range(200):  # the catch-up runs in the background; a reload then searches its vectors
            sources = await _search(url, "caesium cooling water")
            if sources and "similarity" in sources[0]["metadata"]:
                break
            await asyncio.sleep(0.1)
        assert sources[0]["metadata"]["doc_id"] == "zeolite"
        assert 0 < sources[0]["metadata"]["similarity"] <= 1
        embedded = [t for batch in fake.inputs for t in batch]
        assert any("zeolite filter" in t for t in embedded)
        assert stored_digests(sqlite3.connect(index_path), _settings(fake).key)
        # a query asked in several collections is embedded once
        before = [r.body.get("input") for r in fake.requests]
        await _search(url, "Hoge Flux Reactor")
        await _search(url, "Hoge Flux Reactor")
        queries = [r.body.get("input") for r in fake.requests[len(before):]]
        assert queries == [["Hoge Flux Reactor"]]


@pytest.mark.asyncio
async def test_a_slow_endpoint_never_holds_a_search_for_long(fake: FakeEmbeddings, tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    import docserver.live as live

    monkeypatch.setattr(live, "QUERY_WAIT_S", 0.3)
    folder = tmp_path / "notes"
    _write(folder, "zeolite", "Zeolite", "The zeolite filter removes caesium from the cooling water.")
    index_path = tmp_path / "index.sqlite3"
    ingest([folder], "notes", index_path=index_path)
    embed_chunks(index_path, Embedder(_settings(fake)), [c for d in load_documents(index_path) for c in d.chunks])
    fake.delay_s = 3.0
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    with ServerThread(create_app(corpus, index_path=index_path, token="", embeddings=_settings(fake))) as server:
        started = asyncio.get_running_loop().time()
        sources = await _search(server.base_url + "/mcp", "zeolite")
        assert asyncio.get_running_loop().time() - started < 2.5
        assert sources[0]["metadata"]["doc_id"] == "zeolite" and "similarity" not in sources[0]["metadata"]


# --- the CLI -----------------------------------------------------------------------------------------------


def _cli(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "docserver", *args], cwd=ROOT, capture_output=True, text=True,
                          env={**os.environ, **env}, timeout=120)


def test_ingest_embeds_what_it_stored_and_an_endpoint_that_is_down_leaves_it_waiting(
    fake: FakeEmbeddings, tmp_path: Path
) -> None:
    folder = tmp_path / "notes"
    _write(folder, "zeolite", "Zeolite", "The zeolite filter removes caesium from the cooling water.")
    index_path = tmp_path / "index.sqlite3"
    env = {"EMBEDDINGS_URL": fake.url, "EMBEDDINGS_MODEL": "fake-e5", "EMBEDDINGS_PASSAGE_PREFIX": "passage: "}
    fake.down = True
    down = _cli("ingest", str(folder), "--collection", "notes", "--index", str(index_path), env=env)
    assert down.returncode == 0, down.stderr  # stored: searched by its words
    assert "wait for a vector" in down.stderr and "python -m docserver embed" in down.stderr
    assert [d.doc_id for d in load_documents(index_path)] == ["zeolite"]
    fake.down = False
    _write(folder, "pallas", "Pallas", "PALLAS vervangt de Hoge Flux Reactor in Petten.")
    up = _cli("ingest", str(folder), "--collection", "notes", "--index", str(index_path), env=env)
    assert up.returncode == 0, up.stderr
    assert "texts embedded" in up.stdout
    key = EmbeddingSettings.from_env(env).key  # type: ignore[union-attr]
    (tmp_path / "empty-corpus").mkdir()
    waiting = Index.load(tmp_path / "empty-corpus", index_path=index_path, vector_key=key).waiting()
    assert waiting == []  # the waiting one embedded too, and the bundled corpus' passages
    again = _cli("embed", "--index", str(index_path), "--corpus", str(tmp_path / "empty-corpus"), env=env)
    assert again.returncode == 0 and "embedded" not in again.stdout
    assert _cli("embed", "--index", str(index_path), env={"EMBEDDINGS_URL": ""}).returncode == 2
    bad = _cli("embed", "--index", str(index_path), env={"EMBEDDINGS_URL": "ftp://x"})
    assert bad.returncode == 2 and "EMBEDDINGS_URL" in bad.stderr
