"""The passages' vectors of one space for a library searched on disk: per collection a matrix in memory.

A search by meaning compares the query with every passage of the collection (exact, as the index in memory and the
database do), so every vector is read for every query: kept in a memory-mapped file or in sqlite-vec they would be
paged in all the same, and sqlite-vec would be a native extension more to install.  So the vectors of the space
searched are held as one float32 matrix per collection (1.5 KB per passage at 384 dimensions, against the 12 KB per
chunk the whole index in memory takes), read from the file's ``vectors`` table (``vectors.py``) by passage digest.
The digests follow from the passages' text (``vectors.passage_digest``); a reload reuses what the previous load read
by chunk id (``word_chunks`` ids are never reused) and reads only the passages new since then and the vectors that
were waiting.  Rows are in (doc_id, chunk_index) order, so equal cosines rank as the index in memory ranks them.
"""

import sqlite3
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from ..documents import Chunk, chunk_text
from ..schema import select_in
from ..vectors import passage_digest, read_vectors

__all__ = ["Meaning"]


@dataclass(frozen=True, slots=True)
class _Matrix:
    """One collection's passages that have a vector: row i is chunk ``ids[i]``."""

    ids: np.ndarray  # int64, in (doc_id, chunk_index) order
    matrix: np.ndarray  # float32 (len(ids), dimension), rows L2-normalised
    rows: dict[int, int]


class Meaning:
    """The vectors of space ``key`` of every passage of a file that has one, by collection; and the digest of every
    passage (what its vector, and its sentences' vectors, are stored under)."""

    def __init__(self, key: str, digests: dict[int, str], matrices: dict[str, _Matrix]) -> None:
        self.key = key
        self.digests = digests
        self._matrices = matrices

    @classmethod
    def load(cls, db: sqlite3.Connection, key: str, previous: "Meaning | None") -> "Meaning":
        """The vectors of ``key`` for the passages in ``db`` (a read transaction on the file), reusing
        ``previous``'s digests and vectors.  Vectors of another length than the commonest (a model swapped under
        one name) are left out: give the new model its own name."""
        known = previous if previous is not None and previous.key == key else None
        listing = db.execute("SELECT collection, id FROM word_chunks ORDER BY collection, doc_id, chunk_index"
                             ).fetchall()
        digests = {i: known.digests[i] for _, i in listing if known is not None and i in known.digests}
        digests |= _digests(db, key, [i for _, i in listing if i not in digests])
        widths = Counter(n for (n,) in db.execute("SELECT length(vector) FROM vectors WHERE key = ? LIMIT 1000",
                                                  (key,)))
        matrices: dict[str, _Matrix] = {}
        if not widths:
            return cls(key, digests, matrices)
        by_collection: dict[str, list[int]] = {}
        for collection, i in listing:
            by_collection.setdefault(collection, []).append(i)
        for collection, ids in by_collection.items():
            matrix = _filled(db, key, ids, digests, widths.most_common(1)[0][0] // 4, known)
            if matrix is not None:
                matrices[collection] = matrix
        return cls(key, digests, matrices)

    def vector(self, chunk_id: int) -> np.ndarray | None:
        """The vector of the passage ``chunk_id`` read by this load, if it has one."""
        for matrix in self._matrices.values():
            row = matrix.rows.get(chunk_id)
            if row is not None:
                return matrix.matrix[row]
        return None

    def collections(self) -> set[str]:
        return set(self._matrices)

    def missing(self) -> list[int]:
        """The passages without a vector (of those the load saw), by chunk id."""
        held = {i for m in self._matrices.values() for i in m.rows}
        return [i for i in self.digests if i not in held]

    def nearest(self, collection: str, query: np.ndarray, depth: int, allowed: Iterable[int] | None = None
                ) -> list[tuple[float, int]]:
        """The ``depth`` passages of ``collection`` nearest ``query`` as (cosine, chunk id), best first (ties in
        (doc_id, chunk_index) order); ``allowed``: only these chunk ids (one document's)."""
        matrix = self._matrices.get(collection)
        if matrix is None or matrix.matrix.shape[1] != len(query):
            return []
        scores = matrix.matrix @ np.asarray(query, dtype=np.float32)
        rows = (np.asarray(sorted(matrix.rows[i] for i in allowed if i in matrix.rows), dtype=np.int64)
                if allowed is not None else np.arange(len(scores)))
        if len(rows) > depth:
            rows = rows[np.argpartition(-scores[rows], depth - 1)[:depth]]
        ordered = sorted(rows.tolist(), key=lambda r: (-float(scores[r]), r))
        return [(float(scores[r]), int(matrix.ids[r])) for r in ordered]

    def similarities(self, ids: Sequence[int], query: np.ndarray) -> dict[int, float]:
        """The cosine to ``query`` of each of the passages ``ids`` that has a vector of its width."""
        vector = np.asarray(query, dtype=np.float32)
        return {i: float(v @ vector) for i in ids if (v := self.vector(i)) is not None and len(v) == len(vector)}

def _digests(db: sqlite3.Connection, key: str, ids: Sequence[int]) -> dict[int, str]:
    """The passage digest (``vectors.passage_digest``) of each chunk of ``ids``, from its text."""
    found = {}
    for i, collection, doc_id, index, title, section, text in select_in(
            db, "SELECT id, collection, doc_id, chunk_index, title, section, text FROM word_chunks WHERE id IN", ids):
        found[i] = passage_digest(key, chunk_text(Chunk(doc_id, collection, index, title, section, text)))
    return found


def _filled(db: sqlite3.Connection, key: str, ids: list[int], digests: dict[int, str], dimension: int,
            known: "Meaning | None") -> _Matrix | None:
    """The matrix of the passages ``ids`` that have a vector of ``dimension``, filled in place (no vector is held
    twice): from ``known`` where it has one, else read from the file in slices."""
    matrix = np.empty((len(ids), dimension), dtype=np.float32)
    kept: list[int] = []
    for start in range(0, len(ids), 500):
        part = ids[start:start + 500]
        reused = {i: v for i in part if known is not None and (v := known.vector(i)) is not None}
        read = read_vectors(db, key, [digests[i] for i in part if i not in reused])
        for i in part:
            vector = reused[i] if i in reused else read.get(digests[i])
            if vector is not None and len(vector) == dimension:
                matrix[len(kept)] = vector
                kept.append(i)
    if not kept:
        return None
    matrix = matrix[:len(kept)].copy() if len(kept) < len(ids) else matrix
    return _Matrix(np.asarray(kept, dtype=np.int64), matrix, {i: r for r, i in enumerate(kept)})
