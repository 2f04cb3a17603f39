"""Search by meaning in the library in PostgreSQL: the passages' vectors in pgvector, embedded once per text.

Table ``vectors`` holds one vector per vector space (``EmbeddingSettings.key``) and passage text (``chunks.text_sha``,
the sha256 of what is embedded, ``chunk_text``): a text saved again (a document ingested again, the same paragraph
in two documents) is never embedded again.  A passage without a vector in the space a server searches waits
(``waiting``) and is embedded by a catch-up run (``embed_chunks``, one process at a time on a database: a session
advisory lock), which counts each batch as a change of the collections concerned, so servers and caches follow.
A search's side by meaning is an exact nearest-neighbour scan of the collection (``nearest``: pgvector's cosine
distance); an approximate index (HNSW) is for libraries where that scan is too slow (bench section 12).

The passages' sentences (``EMBEDDINGS_SENTENCE_MATCH``) are not embedded here yet: hits name no matching sentences.
"""

import hashlib
from collections.abc import Callable, Sequence

import numpy as np
import psycopg

from ..documents import Chunk, chunk_text
from ..embeddings import Embedder, EmbeddingError
from ..vectors import Embedded
from . import schema

__all__ = ["EMBED_LOCK", "all_waiting", "collections_with_vectors", "embed_chunks", "nearest", "prune", "similarities",
           "text_sha", "waiting"]

EMBED_LOCK = 0x6E656F656D62  # pg_try_advisory_lock key of the one process embedding ("neoemb")
BATCH = 64


def text_sha(chunk: Chunk) -> str:
    """What identifies a passage's vector within its space: the sha256 of the text embedded."""
    return hashlib.sha256(chunk_text(chunk).encode()).hexdigest()


def _literal(vector: np.ndarray) -> str:
    """A vector as pgvector reads it: '[x,y,...]'."""
    return "[" + ",".join(f"{x:.7g}" for x in np.asarray(vector, dtype=np.float32)) + "]"


def waiting(db: psycopg.Connection, key: str, limit: int = 10_000) -> list[Chunk]:
    """Passages without a vector in space ``key`` (at most ``limit``, the oldest first)."""
    rows = db.execute(
        "SELECT c.doc_id, c.collection, c.chunk_index, c.title, c.section, c.text, c.url, c.page, c.page_end "
        "FROM chunks c WHERE NOT EXISTS (SELECT 1 FROM vectors v WHERE v.key = %s AND v.text_sha = c.text_sha) "
        "ORDER BY c.id LIMIT %s", (key, limit)).fetchall()
    return [Chunk(*row) for row in rows]


def all_waiting(url: str, key: str) -> list[Chunk]:
    """Every passage of the library at ``url`` without a vector in space ``key`` (its table made when missing)."""
    with schema.connect(url, autocommit=True) as db:
        schema.prepare_vectors(db)
        return waiting(db, key, limit=2**62)


def prune(url: str, key: str) -> int:
    """Delete the vectors of space ``key`` whose text no passage has any more; how many."""
    with schema.connect(url, autocommit=True) as db:
        return db.execute("DELETE FROM vectors v WHERE key = %s AND NOT EXISTS (SELECT 1 FROM chunks c "
                          "WHERE c.text_sha = v.text_sha)", (key,)).rowcount


def collections_with_vectors(db: psycopg.Connection, key: str) -> set[str]:
    """The collections some passage of which has a vector in space ``key``."""
    rows = db.execute("SELECT DISTINCT c.collection FROM chunks c JOIN vectors v ON v.key = %s AND "
                      "v.text_sha = c.text_sha", (key,))
    return {row[0] for row in rows}


def nearest(db: psycopg.Connection, key: str, collection: str, vector: np.ndarray, depth: int,
            doc_id: str | None = None) -> list[tuple[float, int]]:
    """The ``depth`` passages of ``collection`` (of ``doc_id`` only, when given) nearest ``vector``: (cosine, chunk
    id), nearest first."""
    rows = db.execute(
        "SELECT 1 - (v.embedding <=> %(q)s::vector) AS cosine, c.id FROM chunks c JOIN vectors v "
        "ON v.key = %(key)s AND v.text_sha = c.text_sha WHERE c.collection = %(collection)s "
        "AND (%(doc)s::text IS NULL OR c.doc_id = %(doc)s) AND vector_dims(v.embedding) = %(dims)s "
        "ORDER BY v.embedding <=> %(q)s::vector, c.doc_id, c.chunk_index LIMIT %(depth)s",
        {"q": _literal(vector), "key": key, "collection": collection, "doc": doc_id, "dims": len(vector),
         "depth": depth}).fetchall()
    return [(float(cosine), chunk_id) for cosine, chunk_id in rows]


def similarities(db: psycopg.Connection, key: str, chunk_ids: Sequence[int], vector: np.ndarray) -> dict[int, float]:
    """The cosine of each passage's vector (of those that have one) to ``vector``."""
    rows = db.execute(
        "SELECT c.id, 1 - (v.embedding <=> %s::vector) FROM chunks c JOIN vectors v ON v.key = %s AND "
        "v.text_sha = c.text_sha WHERE c.id = ANY(%s) AND vector_dims(v.embedding) = %s",
        (_literal(vector), key, list(chunk_ids), len(vector))).fetchall()
    return {chunk_id: float(cosine) for chunk_id, cosine in rows}


def embed_chunks(url: str, embedder: Embedder, chunks: Sequence[Chunk],
                 progress: Callable[[int], None] | None = None) -> Embedded:
    """Embed the passages of ``chunks`` the database has no vector for in ``embedder``'s space, in batches, each
    stored and counted as a change when it is done; an endpoint failure ends the run with what was done kept."""
    key = embedder.settings.key
    with schema.connect(url, autocommit=True) as db:
        if not db.execute("SELECT pg_try_advisory_lock(%s)", (EMBED_LOCK,)).fetchone()[0]:  # type: ignore[index]
            return Embedded(waiting=len(chunks), error="busy")
        try:
            shas = {text_sha(c): c for c in chunks}
            have = {row[0] for row in db.execute("SELECT text_sha FROM vectors WHERE key = %s AND text_sha = ANY(%s)",
                                                 (key, list(shas)))}
            todo = [(sha, chunk) for sha, chunk in shas.items() if sha not in have]
            done = 0
            for start in range(0, len(todo), BATCH):
                batch = todo[start:start + BATCH]
                try:
                    rows = embedder.passages([chunk_text(c) for _, c in batch])
                except EmbeddingError as exc:
                    return Embedded(done, 0, len(todo) - done, str(exc))
                with db.transaction():
                    with db.cursor() as cursor:
                        cursor.executemany("INSERT INTO vectors (key, text_sha, embedding) VALUES (%s, %s, %s::vector) "
                                           "ON CONFLICT DO NOTHING",
                                           [(key, sha, _literal(row))
                                            for (sha, _), row in zip(batch, rows, strict=True)])
                    schema.bump(db, {c.collection for _, c in batch})
                done += len(batch)
                if progress is not None:
                    progress(len(batch))
            return Embedded(done)
        finally:
            db.execute("SELECT pg_advisory_unlock(%s)", (EMBED_LOCK,))
