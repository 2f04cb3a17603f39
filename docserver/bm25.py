"""Okapi BM25 over per-chunk term frequencies, in stdlib arrays, updatable without a rebuild (``index.py`` uses one
model per collection).

Postings are two parallel arrays per stem (chunk slots ascending, term frequencies): about 12 bytes a posting instead
of a tuple and a float object each (~80), which at 20,000 chunks is most of the index's memory.  ``updated`` gives a
model with some chunks gone and some added without touching the one a server is searching meanwhile.
"""

import math
from array import array
from bisect import bisect_left
from collections import defaultdict
from collections.abc import Iterable, Sequence

__all__ = ["B", "BM25", "K1", "Term", "idf", "norm"]

Term = tuple[frozenset[str], float]  # the stems of one token and its weight
K1, B = 1.5, 0.75  # the defaults of ``Index`` and the database engine (``postings.py``)


def norm(length: float, avgdl: float, k1: float = K1, b: float = B) -> float:
    """A chunk's length normalisation as the scoring formula computes it."""
    return k1 * (1 - b + b * length / avgdl)


def idf(chunks: int, df: int) -> float:
    """Lucene-style IDF: always positive, even for terms in most chunks."""
    return math.log(1 + (chunks - df + 0.5) / (df + 0.5))


class BM25:
    """Okapi BM25 over per-chunk term frequencies (stem -> weighted count); ``lengths`` count whole tokens.

    A stem's postings are two parallel arrays (chunk slots ascending, term frequencies): about 12 bytes a posting
    instead of a tuple and a float object each (~80), which at 20,000 chunks is most of the index's memory.
    ``updated`` gives a model with some chunks gone and some added without touching this one, so a server can
    keep searching it meanwhile; a removed chunk leaves an empty slot (length None) until the next full build."""

    def __init__(self, k1: float, b: float) -> None:
        self.k1, self.b = k1, b
        self.lengths: list[int | None] = []
        self.live = self.total = 0  # chunks in the model, and the sum of their lengths
        self.postings: dict[str, tuple[array[int], array[float]]] = {}
        self.avgdl, self.norms, self.idf = 1.0, [0.0], {}

    @classmethod
    def build(cls, frequencies: Iterable[dict[str, float]], lengths: Sequence[int], k1: float, b: float) -> "BM25":
        bm25 = cls(k1, b)
        bm25._add(frequencies, lengths, None)
        bm25._finish()
        return bm25

    def updated(
        self, removed: dict[int, Iterable[str]], frequencies: Iterable[dict[str, float]], lengths: Sequence[int]
    ) -> "BM25":
        """A copy without the chunks of ``removed`` (slot -> its stems) and with new chunks in slots after the
        last; only the postings of the stems concerned are copied."""
        new = BM25(self.k1, self.b)
        new.lengths, new.live, new.total = list(self.lengths), self.live, self.total
        new.postings = dict(self.postings)
        by_stem: dict[str, set[int]] = defaultdict(set)
        for slot, slot_stems in removed.items():
            new.total -= new.lengths[slot] or 0
            new.live -= 1
            new.lengths[slot] = None
            for stem in slot_stems:
                by_stem[stem].add(slot)
        for stem, slots in by_stem.items():
            ids, tfs = new.postings[stem]
            kept = [k for k, i in enumerate(ids) if i not in slots]
            if kept:
                new.postings[stem] = (array("I", [ids[k] for k in kept]), array("d", [tfs[k] for k in kept]))
            else:
                del new.postings[stem]
        new._add(frequencies, lengths, set(by_stem))
        new._finish()
        return new

    def _add(self, frequencies: Iterable[dict[str, float]], lengths: Sequence[int], owned: set[str] | None) -> None:
        """Appends chunks; a posting not in ``owned`` (None: all are) is another model's and is copied first."""
        for counts, length in zip(frequencies, lengths, strict=True):
            i = len(self.lengths)
            self.lengths.append(length)
            self.live, self.total = self.live + 1, self.total + length
            for stem, tf in counts.items():
                posting = self.postings.get(stem)
                if posting is None or (owned is not None and stem not in owned):
                    posting = (array("I"), array("d")) if posting is None else (array("I", posting[0]),
                                                                                 array("d", posting[1]))
                    self.postings[stem] = posting
                    if owned is not None:
                        owned.add(stem)
                posting[0].append(i)
                posting[1].append(tf)

    def _finish(self) -> None:
        """The statistics over the chunks present: average length, each chunk's length normalisation (as the
        scoring formula computes it, precomputed: the same floats), and the IDF of every stem."""
        k1, b = self.k1, self.b
        self.avgdl = avgdl = (self.total / self.live if self.live else 0.0) or 1.0
        self.norms = [norm(length, avgdl, k1, b) if length is not None else 0.0 for length in self.lengths]
        self.idf = {t: idf(self.live, len(p[0])) for t, p in self.postings.items()}

    def scores(self, query: Iterable[Term]) -> list[float]:
        """Score per chunk slot, 0.0 where nothing matched (every match scores above 0); a query term counts once,
        via its best-matching stem, times its weight.  A list indexed by slot: cheaper than a dict when thousands
        of chunks match."""
        total = [0.0] * len(self.norms)
        k1p, norms = self.k1 + 1, self.norms
        for token_stems, weight in query:
            matched = [(self.idf[stem], self.postings[stem]) for stem in sorted(token_stems) if stem in self.idf]
            if len(matched) == 1:  # one stem: its score is the best one
                idf, (ids, tfs) = matched[0]
                if weight == 1.0:  # the same floats without the multiplication
                    for i, tf in zip(ids, tfs, strict=True):
                        total[i] += idf * tf * k1p / (tf + norms[i])
                else:
                    for i, tf in zip(ids, tfs, strict=True):
                        total[i] += weight * (idf * tf * k1p / (tf + norms[i]))
                continue
            best: dict[int, float] = {}
            for idf, (ids, tfs) in matched:
                for i, tf in zip(ids, tfs, strict=True):
                    score = idf * tf * k1p / (tf + norms[i])
                    if score > best.get(i, 0.0):
                        best[i] = score
            for i, score in best.items():
                total[i] += weight * score
        return total

    def contains(self, token_stems: frozenset[str], i: int) -> bool:
        """Whether stream ``i`` contains any of ``token_stems`` (a binary search in each stem's postings)."""
        for stem in token_stems:
            posting = self.postings.get(stem)
            if posting is not None:
                ids = posting[0]
                at = bisect_left(ids, i)
                if at < len(ids) and ids[at] == i:
                    return True
        return False
