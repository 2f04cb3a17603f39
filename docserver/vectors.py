"""Passage vectors in the index file: which passages still wait for one, embedding them, reading them back.

A vector is stored by the vector space it belongs to (``EmbeddingSettings.key``: the model and how texts are
prefixed) and a digest of that key and the passage text embedded (``chunk_text``: title, section and paragraphs),
not by document: an unchanged passage is never embedded again, however often its document is ingested, and a
model change finds every passage waiting.  A passage waits when its document is stored (it is searched by its
words at once) but no vector of the current space exists for it; ``embed_chunks`` embeds what waits, batch by
batch, each batch committed, so an endpoint that fails halfway loses nothing done before.  Whoever can reach the
endpoint catches up: the ingest command right after storing, and a running server for whatever is still waiting
(``live.py``); one process at a time per file (a lease renewed with every batch), so an ingest and the server it
feeds do not embed the same passages twice.  Vectors are committed by batch and announced (the generation and the
collections' counters bumped, ``schema.bump``) every ``ANNOUNCE_S`` and at the end, so a running server searches
them after its next reload.

With ``EmbeddingSettings.sentences`` each passage's sentences (``textkit.sentences.passage_sentences`` of its text)
are embedded too, after the passages, and stored as one row per passage (``sentence_vectors``, by the passage's
digest, float16: a sentence is only compared with a threshold, ``sentences.py``); a passage waits until both exist.

``cache``: a second file of the same tables (``make eval`` keeps one so that a rerun, which ingests into
a fresh index, embeds nothing).
"""

import hashlib
import logging
import os
import sqlite3
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from textkit.sentences import passage_sentences

from .corpus import load_corpus
from .documents import Chunk, chunk_text
from .embeddings import Embedder, EmbeddingError
from .schema import bump, connect, connect_read_only, has_table, prepare, select_in
from .store import load_documents

__all__ = [
    "ANNOUNCE_S",
    "Embedded",
    "embed_chunks",
    "file_digests",
    "file_vectors",
    "library_passages",
    "passage_digest",
    "prune",
    "read_sentence_rows",
    "read_vectors",
    "stored_digests",
]

logger = logging.getLogger("docserver")

ANNOUNCE_S = 5.0  # how often a long embedding run tells running servers about the vectors it has written
LEASE_S = 120.0  # a lease not renewed for this long is taken over (its holder died or hangs)
ROUND = 256  # texts per round between commits (the embedder sends them in its own batches, concurrently)


def library_passages(index_path: Path, corpus_dir: Path | str | None) -> list[Chunk]:
    """Every passage a server of the index file (and of the Markdown corpus in ``corpus_dir``, if any) searches:
    what waits for a vector is among them."""
    return [c for d in [*(load_corpus(corpus_dir) if corpus_dir is not None else []), *load_documents(index_path)]
            for c in d.chunks]


def passage_digest(key: str, text: str) -> str:
    """The vector's key within its space: a digest of the space and the text embedded."""
    return hashlib.sha256(f"{key}\0{text}".encode()).hexdigest()[:32]


@dataclass(frozen=True, slots=True)
class Embedded:
    """What one run did: texts (passages, and their sentences) embedded now, taken from the cache, still waiting,
    and why they wait."""

    embedded: int = 0
    cached: int = 0
    waiting: int = 0
    error: str | None = None  # the endpoint's failure, or "busy" when another process holds the lease


def _blob(vector: np.ndarray) -> bytes:
    return np.asarray(vector, dtype="<f4").tobytes()


def _vector(blob: bytes) -> np.ndarray:
    return np.frombuffer(blob, dtype="<f4")


def stored_digests(connection: sqlite3.Connection, key: str, table: str = "vectors") -> set[str]:
    """The digests the file holds a vector (``table="sentence_vectors"``: sentence vectors) for in space ``key``."""
    if table not in ("vectors", "sentence_vectors") or not has_table(connection, table):
        return set()
    return {row[0] for row in connection.execute(f"SELECT digest FROM {table} WHERE key = ?", (key,))}


def _select(connection: sqlite3.Connection, table: str, columns: str, key: str, digests: Iterable[str]
            ) -> Iterator[tuple]:
    """The rows of ``digests`` in space ``key`` of ``table`` (read in slices: SQLite limits parameters)."""
    wanted = list(dict.fromkeys(digests))
    if not wanted or not has_table(connection, table):
        return
    yield from select_in(connection, f"SELECT digest, {columns} FROM {table} WHERE key = ? AND digest IN", wanted,
                         (key,))


def read_sentence_rows(connection: sqlite3.Connection, key: str, digests: Iterable[str]) -> dict[str, np.ndarray]:
    """Per passage digest the file holds sentence vectors of, their matrix (float32, one row a sentence)."""
    found: dict[str, np.ndarray] = {}
    for digest, count, blob in _select(connection, "sentence_vectors", "count, matrix", key, digests):
        matrix = np.frombuffer(blob, dtype="<f2").astype(np.float32)
        if count >= 0 and matrix.size % max(count, 1) == 0:
            found[digest] = matrix.reshape(count, -1) if count else np.zeros((0, 0), np.float32)
    return found


def read_vectors(connection: sqlite3.Connection, key: str, digests: Iterable[str]) -> dict[str, np.ndarray]:
    """The vectors of ``digests`` the file holds in space ``key``."""
    return {digest: _vector(blob) for digest, blob in _select(connection, "vectors", "vector", key, digests)}


def _write(connection: sqlite3.Connection, key: str, vectors: Mapping[str, np.ndarray],
           sentences: Mapping[str, np.ndarray] | None = None) -> None:
    """Passage vectors, and sentence matrices, by digest."""
    connection.executemany("INSERT OR REPLACE INTO vectors (key, digest, vector) VALUES (?, ?, ?)",
                           [(key, digest, _blob(v)) for digest, v in vectors.items()])
    connection.executemany("INSERT OR REPLACE INTO sentence_vectors (key, digest, count, matrix) VALUES (?, ?, ?, ?)",
                           [(key, digest, len(m), np.asarray(m, dtype="<f2").tobytes())
                            for digest, m in (sentences or {}).items()])


def _open(path: Path) -> sqlite3.Connection:
    connection = connect(path)
    prepare(connection, path)
    return connection


class _Lease:
    """The right to embed one file's waiting passages, held by one process at a time and renewed per batch."""

    def __init__(self, connection: sqlite3.Connection) -> None:
        self._connection = connection
        self._holder = f"{os.getpid()}-{os.urandom(4).hex()}"

    def take(self) -> bool:
        """Take or renew the lease: False when another holder's lease has not expired."""
        now = time.time()
        with self._connection:
            self._connection.execute("BEGIN IMMEDIATE")
            row = self._connection.execute("SELECT holder, expires FROM embedding_lease WHERE id = 1").fetchone()
            if row is not None and row[0] != self._holder and row[1] > now:
                return False
            self._connection.execute("INSERT OR REPLACE INTO embedding_lease (id, holder, expires) VALUES (1, ?, ?)",
                                     (self._holder, now + LEASE_S))
        return True

    def release(self) -> None:
        with self._connection:
            self._connection.execute("DELETE FROM embedding_lease WHERE id = 1 AND holder = ?", (self._holder,))


@dataclass(frozen=True, slots=True)
class _Wanted:
    """What waits under one digest: a passage's text (one vector) or its sentences (a matrix)."""

    texts: tuple[str, ...]
    sentences: bool
    collections: set[str]


Waiting = dict[tuple[bool, str], _Wanted]  # by (sentences, passage digest); passages first


def _waiting(connection: sqlite3.Connection, key: str, chunks: Iterable[Chunk], sentences: bool) -> Waiting:
    """What the file lacks for ``chunks``: passage vectors, then (``sentences``) sentence matrices."""
    have = stored_digests(connection, key)
    have_sentences = stored_digests(connection, key, "sentence_vectors") if sentences else set()
    passages: Waiting = {}
    sentence_rows: Waiting = {}
    for chunk in chunks:
        text = chunk_text(chunk)
        digest = passage_digest(key, text)
        if digest not in have:
            passages.setdefault((False, digest), _Wanted((text,), False, set())).collections.add(chunk.collection)
        if sentences and digest not in have_sentences:
            wanted = _Wanted(tuple(passage_sentences(chunk.text)), True, set())
            sentence_rows.setdefault((True, digest), wanted).collections.add(chunk.collection)
    return passages | sentence_rows


def _split(keys: Iterable[tuple[bool, str]], found: Mapping[tuple[bool, str], np.ndarray]
           ) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """``found`` by table: (passage vectors, sentence matrices), by digest."""
    vectors = {digest: found[(s, digest)] for s, digest in keys if not s and (s, digest) in found}
    return vectors, {digest: found[(s, digest)] for s, digest in keys if s and (s, digest) in found}


def _from_cache(cache: Path | None, key: str, wanted: Sequence[tuple[bool, str]]) -> dict[tuple[bool, str], np.ndarray]:
    if cache is None or not cache.exists():
        return {}
    connection = sqlite3.connect(cache)
    try:
        vectors = read_vectors(connection, key, [d for s, d in wanted if not s])
        sentences = read_sentence_rows(connection, key, [d for s, d in wanted if s])
        return {(False, d): v for d, v in vectors.items()} | {(True, d): m for d, m in sentences.items()}
    finally:
        connection.close()


def _to_cache(cache: Path | None, key: str, vectors: Mapping[str, np.ndarray], sentences: Mapping[str, np.ndarray]
              ) -> None:
    if cache is None or not (vectors or sentences):
        return
    cache.parent.mkdir(parents=True, exist_ok=True)
    connection = _open(cache)
    try:
        with connection:
            _write(connection, key, vectors, sentences)
    finally:
        connection.close()


def embed_chunks(
    index_path: Path,
    embedder: Embedder,
    chunks: Iterable[Chunk],
    *,
    cache: Path | None = None,
    progress: Callable[[int], None] | None = None,
    total: Callable[[int], None] | None = None,
) -> Embedded:
    """Embed what the index file lacks for ``chunks`` in ``embedder``'s space (passages, and their sentences with
    ``EmbeddingSettings.sentences``) and store it there.  ``total(n)`` is told how many texts wait before the first
    request, ``progress(n)`` after each batch with how many more are done.  An endpoint failure ends the run with
    what was done kept (``Embedded.error``); it never raises for one."""
    key = embedder.settings.key
    connection = _open(index_path)
    try:
        waiting = _waiting(connection, key, chunks, embedder.settings.sentences)
        if not waiting:
            return Embedded()
        cached = _from_cache(cache, key, list(waiting))
        if cached:
            with connection:
                _write(connection, key, *_split(cached, cached))
                bump(connection, {c for wanted in cached for c in waiting[wanted].collections})
        todo = [wanted for wanted in waiting if wanted not in cached]
        texts = sum(len(waiting[w].texts) for w in todo)
        from_cache = sum(len(waiting[w].texts) for w in cached)
        if total is not None:
            total(texts)
        if not todo:
            return Embedded(cached=from_cache)
        lease = _Lease(connection)
        if not lease.take():
            return Embedded(cached=from_cache, waiting=texts, error="busy")
        try:
            done, error = _embed_rounds(connection, lease, embedder, todo, waiting, cache, progress)
        finally:
            lease.release()
        return Embedded(done, from_cache, texts - done, error)
    finally:
        connection.close()


def _rounds(todo: Sequence[tuple[bool, str]], waiting: Waiting) -> list[list[tuple[bool, str]]]:
    """``todo`` in rounds of about ``ROUND`` texts (a passage's sentences are never split between two)."""
    rounds: list[list[tuple[bool, str]]] = [[]]
    size = 0
    for wanted in todo:
        if size >= ROUND:
            rounds.append([])
            size = 0
        rounds[-1].append(wanted)
        size += len(waiting[wanted].texts)
    return rounds


def _embed_rounds(
    connection: sqlite3.Connection,
    lease: _Lease,
    embedder: Embedder,
    todo: Sequence[tuple[bool, str]],
    waiting: Waiting,
    cache: Path | None,
    progress: Callable[[int], None] | None,
) -> tuple[int, str | None]:
    """(texts embedded, the failure that stopped the run): rounds of about ``ROUND`` texts committed one by one,
    announced every ``ANNOUNCE_S`` and at the end."""
    key, done, error = embedder.settings.key, 0, None
    unannounced: set[str] = set()
    announced = time.monotonic()
    rounds = _rounds(todo, waiting)
    for number, part in enumerate(rounds, start=1):
        texts = [text for wanted in part for text in waiting[wanted].texts]
        try:
            rows = embedder.passages(texts, progress=_steps(progress) if progress is not None else None)
        except EmbeddingError as exc:
            error = str(exc)
            break
        found, at = {}, 0
        for wanted in part:
            n = len(waiting[wanted].texts)
            found[wanted] = rows[at : at + n] if wanted[0] else rows[at]
            at += n
        vectors, sentences = _split(part, found)
        with connection:
            _write(connection, key, vectors, sentences)
        _to_cache(cache, key, vectors, sentences)
        done += len(texts)
        unannounced.update(c for wanted in part for c in waiting[wanted].collections)
        if time.monotonic() - announced >= ANNOUNCE_S:
            _announce(connection, unannounced)
            announced = time.monotonic()
        if number < len(rounds) and not lease.take():
            error = "busy"
            break
    _announce(connection, unannounced)
    return done, error


def _steps(progress: Callable[[int], None]) -> Callable[[int], None]:
    """``Embedder.passages`` counts the texts done in one call; ``progress`` is told how many more each time."""
    told = 0

    def step(done: int) -> None:
        nonlocal told
        progress(done - told)
        told = done

    return step


def _announce(connection: sqlite3.Connection, collections: set[str]) -> None:
    if collections:
        with connection:
            bump(connection, collections)
        collections.clear()


def prune(index_path: Path, key: str, chunks: Iterable[Chunk]) -> int:
    """Delete the vectors no passage of ``chunks`` needs in space ``key`` (other spaces' vectors, and those of
    passages changed or removed), and their sentences' likewise; the number of rows deleted."""
    keep = {passage_digest(key, chunk_text(c)) for c in chunks}
    connection = _open(index_path)
    try:
        deleted = 0
        for table in ("vectors", "sentence_vectors"):
            rows = connection.execute(f"SELECT key, digest FROM {table}").fetchall()
            gone = [(k, d) for k, d in rows if k != key or d not in keep]
            with connection:
                connection.executemany(f"DELETE FROM {table} WHERE key = ? AND digest = ?", gone)
            deleted += len(gone)
        return deleted
    finally:
        connection.close()


def file_vectors(index_path: Path, key: str, digests: Sequence[str], *, sentences: bool = False
                 ) -> dict[str, np.ndarray]:
    """The vectors of ``digests`` in space ``key`` the index file holds (``sentences``: the sentence matrices of
    those passages), read without writing to it (none when there is no file)."""
    if not digests or not index_path.is_file():
        return {}
    connection = connect_read_only(index_path)
    try:
        return (read_sentence_rows if sentences else read_vectors)(connection, key, digests)
    finally:
        connection.close()


def file_digests(index_path: Path, key: str, table: str) -> set[str]:
    """``stored_digests`` of the index file, read without writing to it (none when there is no file)."""
    if not index_path.is_file():
        return set()
    connection = connect_read_only(index_path)
    try:
        return stored_digests(connection, key, table)
    finally:
        connection.close()
