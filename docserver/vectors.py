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

``cache``: a second file of the same ``vectors`` table (``make eval`` keeps one so that a rerun, which ingests into
a fresh index, embeds nothing).
"""

import hashlib
import logging
import os
import sqlite3
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .corpus import Chunk, chunk_text, load_corpus
from .embeddings import Embedder, EmbeddingError
from .schema import bump, connect, connect_read_only, has_table, prepare
from .store import load_documents

__all__ = [
    "ANNOUNCE_S",
    "Embedded",
    "embed_chunks",
    "file_vectors",
    "library_passages",
    "passage_digest",
    "prune",
    "read_vectors",
    "stored_digests",
]

logger = logging.getLogger("docserver")

ANNOUNCE_S = 5.0  # how often a long embedding run tells running servers about the vectors it has written
LEASE_S = 120.0  # a lease not renewed for this long is taken over (its holder died or hangs)
ROUND = 256  # passages per round between commits (the embedder sends them in its own batches, concurrently)


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
    """What one run did: passages embedded now, taken from the cache, still waiting, and why they wait."""

    embedded: int = 0
    cached: int = 0
    waiting: int = 0
    error: str | None = None  # the endpoint's failure, or "busy" when another process holds the lease


def _blob(vector: np.ndarray) -> bytes:
    return np.asarray(vector, dtype="<f4").tobytes()


def _vector(blob: bytes) -> np.ndarray:
    return np.frombuffer(blob, dtype="<f4")


def stored_digests(connection: sqlite3.Connection, key: str) -> set[str]:
    """The digests the file holds a vector for in space ``key``."""
    if not has_table(connection, "vectors"):
        return set()
    return {row[0] for row in connection.execute("SELECT digest FROM vectors WHERE key = ?", (key,))}


def read_vectors(connection: sqlite3.Connection, key: str, digests: Iterable[str]) -> dict[str, np.ndarray]:
    """The vectors of ``digests`` the file holds in space ``key`` (read in slices: SQLite limits parameters)."""
    wanted = list(dict.fromkeys(digests))
    if not wanted or not has_table(connection, "vectors"):
        return {}
    found: dict[str, np.ndarray] = {}
    for start in range(0, len(wanted), 500):
        part = wanted[start : start + 500]
        marks = ",".join("?" * len(part))
        rows = connection.execute(f"SELECT digest, vector FROM vectors WHERE key = ? AND digest IN ({marks})",
                                  (key, *part))
        found.update((digest, _vector(blob)) for digest, blob in rows)
    return found


def _write(connection: sqlite3.Connection, key: str, vectors: Mapping[str, np.ndarray]) -> None:
    connection.executemany("INSERT OR REPLACE INTO vectors (key, digest, vector) VALUES (?, ?, ?)",
                           [(key, digest, _blob(v)) for digest, v in vectors.items()])


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


def _waiting(connection: sqlite3.Connection, key: str, chunks: Iterable[Chunk]) -> dict[str, tuple[str, set[str]]]:
    """Per digest not yet in the file: (the text to embed, the collections holding it)."""
    have = stored_digests(connection, key)
    waiting: dict[str, tuple[str, set[str]]] = {}
    for chunk in chunks:
        text = chunk_text(chunk)
        digest = passage_digest(key, text)
        if digest not in have:
            waiting.setdefault(digest, (text, set()))[1].add(chunk.collection)
    return waiting


def _from_cache(cache: Path | None, key: str, digests: Sequence[str]) -> dict[str, np.ndarray]:
    if cache is None or not cache.exists():
        return {}
    connection = sqlite3.connect(cache)
    try:
        return read_vectors(connection, key, digests)
    finally:
        connection.close()


def _to_cache(cache: Path | None, key: str, vectors: Mapping[str, np.ndarray]) -> None:
    if cache is None or not vectors:
        return
    cache.parent.mkdir(parents=True, exist_ok=True)
    connection = _open(cache)
    try:
        with connection:
            _write(connection, key, vectors)
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
    """Embed the passages of ``chunks`` that have no vector of ``embedder``'s space in the index file, and store
    them there.  ``total(n)`` is told how many wait before the first request, ``progress(n)`` after each batch.
    An endpoint failure ends the run with what was done kept (``Embedded.error``); it never raises for one."""
    key = embedder.settings.key
    connection = _open(index_path)
    try:
        waiting = _waiting(connection, key, chunks)
        if not waiting:
            return Embedded()
        cached = _from_cache(cache, key, list(waiting))
        if cached:
            with connection:
                _write(connection, key, cached)
                bump(connection, {c for digest in cached for c in waiting[digest][1]})
        todo = [digest for digest in waiting if digest not in cached]
        if total is not None:
            total(len(todo))
        if not todo:
            return Embedded(cached=len(cached))
        lease = _Lease(connection)
        if not lease.take():
            return Embedded(cached=len(cached), waiting=len(todo), error="busy")
        try:
            done, error = _embed_rounds(connection, lease, embedder, todo, waiting, cache, progress)
        finally:
            lease.release()
        return Embedded(done, len(cached), len(todo) - done, error)
    finally:
        connection.close()


def _embed_rounds(
    connection: sqlite3.Connection,
    lease: _Lease,
    embedder: Embedder,
    todo: Sequence[str],
    waiting: Mapping[str, tuple[str, set[str]]],
    cache: Path | None,
    progress: Callable[[int], None] | None,
) -> tuple[int, str | None]:
    """(passages embedded, the failure that stopped the run): rounds of ``ROUND`` committed one by one, announced
    every ``ANNOUNCE_S`` and at the end."""
    key, done, error = embedder.settings.key, 0, None
    unannounced: set[str] = set()
    announced = time.monotonic()
    for start in range(0, len(todo), ROUND):
        part = todo[start : start + ROUND]
        try:
            rows = embedder.passages([waiting[d][0] for d in part], progress=progress)
        except EmbeddingError as exc:
            error = str(exc)
            break
        vectors = dict(zip(part, rows, strict=True))
        with connection:
            _write(connection, key, vectors)
        _to_cache(cache, key, vectors)
        done += len(part)
        unannounced.update(c for d in part for c in waiting[d][1])
        if time.monotonic() - announced >= ANNOUNCE_S:
            _announce(connection, unannounced)
            announced = time.monotonic()
        if start + ROUND < len(todo) and not lease.take():
            error = "busy"
            break
    _announce(connection, unannounced)
    return done, error


def _announce(connection: sqlite3.Connection, collections: set[str]) -> None:
    if collections:
        with connection:
            bump(connection, collections)
        collections.clear()


def prune(index_path: Path, key: str, chunks: Iterable[Chunk]) -> int:
    """Delete the vectors no passage of ``chunks`` needs in space ``key`` (other spaces' vectors, and those of
    passages changed or removed); the number deleted."""
    keep = {passage_digest(key, chunk_text(c)) for c in chunks}
    connection = _open(index_path)
    try:
        rows = connection.execute("SELECT key, digest FROM vectors").fetchall()
        gone = [(k, d) for k, d in rows if k != key or d not in keep]
        with connection:
            connection.executemany("DELETE FROM vectors WHERE key = ? AND digest = ?", gone)
        return len(gone)
    finally:
        connection.close()


def file_vectors(index_path: Path, key: str, digests: Sequence[str]) -> dict[str, np.ndarray]:
    """The vectors of ``digests`` in space ``key`` the index file holds, read without writing to it (none when
    there is no file)."""
    if not digests or not index_path.is_file():
        return {}
    connection = connect_read_only(index_path)
    try:
        return read_vectors(connection, key, digests)
    finally:
        connection.close()
