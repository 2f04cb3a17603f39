"""Search by meaning beside search by words: exact cosine over a collection's passage vectors, fused with the BM25
ranking by reciprocal rank fusion.

Exact search, not an approximate index: a collection of 20,000 passages at 384 dimensions is one 30 MB float32
matrix and one matrix-vector product (a few milliseconds, ``python -m bench --only scale``), and exact ranks keep
the ranking deterministic.  An approximate index (HNSW: hnswlib, FAISS) pays off from a few hundred thousand
passages, which is issue 61's store.

Reciprocal rank fusion (Cormack et al., 2009) adds ``weight / (RRF_K + rank)`` per ranking a passage is in: it
needs no calibration between BM25 scores and cosines, which live on unrelated scales, and a passage both rankings
place well beats one only one of them likes.  Each side contributes its best ``FUSION_DEPTH`` passages.  The words'
weight is scaled by the share of the query's words the collection holds at all (``Vocabulary.known_share``): a question
in the collection's language keeps it whole, one in the other language (a Dutch question over English review plans)
leaves the ranking to meaning, where BM25 would only rank the passages that happen to share a name or a number.
"""

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

__all__ = ["FUSION_DEPTH", "LEXICAL_WEIGHT", "RRF_K", "SEMANTIC_WEIGHT", "SlotVectors", "fuse"]

RRF_K = 60  # the fusion's damping constant: the usual 60 (a rank-1 passage counts 1/61, a rank-10 one 1/70)
LEXICAL_WEIGHT = 1.0
# Chosen on the HotpotQA tuning half (one search, 200 questions over 3,974 paragraphs, multilingual-e5-small; `make
# eval EMBEDDINGS=local`, docs/EVAL.md "Fusion weight"): gold recall at 5 0.797 by words alone, 0.835 at 1, 0.840 at 3
# (flat from 1 to 3; meaning alone 0.833). The Dutch gold set's tuning half (15 questions, offline) preferred 1 (key
# facts 0.825 at 1, 0.795 at 3, 0.808 by words alone): the larger tuning set decided.
SEMANTIC_WEIGHT = 3.0
FUSION_DEPTH = 50  # passages each side contributes


@dataclass(frozen=True, slots=True)
class SlotVectors:
    """The vectors of one collection's passages that have one: ``matrix`` row i belongs to slot ``slots[i]``."""

    slots: np.ndarray  # int64, ascending
    matrix: np.ndarray  # float32 (len(slots), dimension), rows L2-normalised

    @classmethod
    def of(cls, digests: Sequence[str | None], vectors: Mapping[str, np.ndarray]) -> "SlotVectors | None":
        """Per slot a digest (None: no passage there); the slots whose digest has a vector. None: no vector.  Vectors
        of another length than the commonest (a model swapped under the same name) are left out of the search: give
        the new model its own EMBEDDINGS_MODEL name, and its vectors form a space of their own."""
        slots = [slot for slot, digest in enumerate(digests) if digest is not None and digest in vectors]
        if not slots:
            return None
        lengths = Counter(len(vectors[digests[slot]]) for slot in slots)  # type: ignore[index]
        if len(lengths) > 1:
            common = lengths.most_common(1)[0][0]
            slots = [slot for slot in slots if len(vectors[digests[slot]]) == common]  # type: ignore[index]
        matrix = np.stack([vectors[digests[slot]] for slot in slots]).astype(np.float32, copy=False)  # type: ignore[index]
        return cls(np.asarray(slots, dtype=np.int64), matrix)

    @property
    def dimension(self) -> int:
        return int(self.matrix.shape[1])

    def similarities(self, query: np.ndarray) -> np.ndarray:
        """Cosine of every row to ``query`` (normalised vectors: the dot product)."""
        return self.matrix @ query.astype(np.float32, copy=False)

    def nearest(self, scores: np.ndarray, depth: int, allowed: np.ndarray | None = None) -> list[tuple[float, int]]:
        """Of ``similarities``' ``scores``, the ``depth`` best passages as (cosine, slot), best first (ties: lower
        slot first); ``allowed``: a boolean mask over rows (one document's passages)."""
        rows = np.flatnonzero(allowed) if allowed is not None else np.arange(len(scores))
        if len(rows) > depth:
            rows = rows[np.argpartition(-scores[rows], depth - 1)[:depth]]
        ordered = sorted(rows.tolist(), key=lambda r: (-float(scores[r]), r))
        return [(float(scores[r]), int(self.slots[r])) for r in ordered]

    def at(self, scores: np.ndarray, slots: Sequence[int]) -> dict[int, float]:
        """Of ``similarities``' ``scores``, those of ``slots`` that have a vector."""
        rows = np.searchsorted(self.slots, slots)
        return {slot: float(scores[row]) for slot, row in zip(slots, rows.tolist(), strict=True)
                if row < len(self.slots) and self.slots[row] == slot}


def fuse(lexical: Sequence[tuple[float, int]], semantic: Sequence[tuple[float, int]],
         *, weights: tuple[float, float] = (LEXICAL_WEIGHT, SEMANTIC_WEIGHT), k: int = RRF_K) -> dict[int, float]:
    """Per slot in either ranking (each best first), its fused score: the sum of ``weight / (k + rank)``."""
    fused: dict[int, float] = {}
    for weight, ranking in zip(weights, (lexical, semantic), strict=True):
        for rank, (_, slot) in enumerate(ranking, start=1):
            fused[slot] = fused.get(slot, 0.0) + weight / (k + rank)
    return fused
