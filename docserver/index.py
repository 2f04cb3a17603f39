"""In-memory BM25 index over document chunks, one BM25 model per collection.

BM25 is written out by hand (rather than taken from rank-bm25 or similar)
because we need things those packages do not give together: statistics and
filtering per collection, a field boost for title/section words, stem *sets*
per token (Dutch + English stems, see ``text.py``), and fully deterministic
ranking with ties broken on (doc_id, chunk_index).  A corpus of a few hundred
chunks needs no numpy; a dict-based inverted index answers in microseconds.
"""

import math
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from .corpus import Chunk, Collection, Document, load_collections, load_corpus
from .text import analyze

__all__ = ["Hit", "Index"]

# Title and section words are counted this many times in a chunk.
HEADER_BOOST = 3


@dataclass(frozen=True, slots=True)
class Hit:
    document: Document
    chunk: Chunk
    score: float
    relevance: float  # score / best score of the same query, 0..1, 4 decimals


class _BM25:
    """Okapi BM25 over a fixed list of token streams (stem sets per token)."""

    def __init__(self, streams: Sequence[Sequence[frozenset[str]]], k1: float, b: float) -> None:
        self.k1, self.b = k1, b
        self.lengths = [len(s) for s in streams]
        self.avgdl = (sum(self.lengths) / len(streams) if streams else 0.0) or 1.0
        self.postings: dict[str, list[tuple[int, int]]] = defaultdict(list)
        for i, stream in enumerate(streams):
            counts = Counter(stem for token in stream for stem in token)
            for stem, tf in counts.items():
                self.postings[stem].append((i, tf))
        n = len(streams)
        # Lucene-style IDF: always positive, even for terms in most chunks.
        self.idf = {t: math.log(1 + (n - len(p) + 0.5) / (len(p) + 0.5)) for t, p in self.postings.items()}

    def scores(self, query: Iterable[frozenset[str]]) -> dict[int, float]:
        """Score per stream index; a query token counts once, via its best-matching stem."""
        total: dict[int, float] = defaultdict(float)
        for token in dict.fromkeys(query):  # distinct query tokens, in order
            best: dict[int, float] = {}
            for stem in sorted(token):
                idf = self.idf.get(stem)
                if idf is None:
                    continue
                for i, tf in self.postings[stem]:
                    norm = self.k1 * (1 - self.b + self.b * self.lengths[i] / self.avgdl)
                    score = idf * tf * (self.k1 + 1) / (tf + norm)
                    if score > best.get(i, 0.0):
                        best[i] = score
            for i, score in best.items():
                total[i] += score
        return total


class Index:
    """Documents grouped by collection with a chunk-level BM25 model per collection."""

    def __init__(
        self,
        documents: Iterable[Document],
        collections: Iterable[Collection] = (),
        *,
        k1: float = 1.5,
        b: float = 0.75,
    ) -> None:
        self._collections = {c.name: c for c in collections}
        self._documents: dict[str, dict[str, Document]] = {name: {} for name in self._collections}
        for doc in sorted(documents, key=lambda d: (d.collection, d.doc_id)):
            if doc.collection not in self._collections:
                self._collections[doc.collection] = Collection(doc.collection, doc.collection)
                self._documents[doc.collection] = {}
            self._documents[doc.collection][doc.doc_id] = doc
        self._chunks: dict[str, list[tuple[Document, Chunk]]] = {}
        self._bm25: dict[str, _BM25] = {}
        self._titles: dict[str, dict[str, frozenset[str]]] = {}
        for name, docs in self._documents.items():
            pairs = [(d, c) for d in docs.values() for c in d.chunks]
            streams = [analyze(c.text) + analyze(f"{c.title} {c.section}") * HEADER_BOOST for _, c in pairs]
            self._chunks[name] = pairs
            self._bm25[name] = _BM25(streams, k1, b)
            self._titles[name] = {d.doc_id: frozenset().union(*analyze(d.title)) for d in docs.values()}

    @classmethod
    def from_directory(cls, corpus_dir: Path | str) -> "Index":
        return cls(load_corpus(corpus_dir), load_collections(corpus_dir))

    @property
    def collections(self) -> list[Collection]:
        return list(self._collections.values())

    def collection(self, name: str) -> Collection | None:
        return self._collections.get(name)

    def documents(self, collection: str | None = None) -> list[Document]:
        names = [collection] if collection is not None else list(self._documents)
        return [d for n in names for d in self._documents.get(n, {}).values()]

    def document(self, collection: str, doc_id: str) -> Document | None:
        return self._documents.get(collection, {}).get(doc_id)

    @property
    def chunk_count(self) -> int:
        return sum(len(pairs) for pairs in self._chunks.values())

    def search(self, query: str, collection: str, *, limit: int | None = 10, doc_id: str | None = None) -> list[Hit]:
        """Best chunks of ``collection`` (optionally of one document) for ``query``."""
        if collection not in self._bm25:
            raise KeyError(collection)
        pairs = self._chunks[collection]
        scored = [
            (score, pairs[i])
            for i, score in self._bm25[collection].scores(analyze(query)).items()
            if score > 0 and (doc_id is None or pairs[i][0].doc_id == doc_id)
        ]
        scored.sort(key=lambda s: (-s[0], s[1][0].doc_id, s[1][1].chunk_index))
        top = scored[0][0] if scored else 1.0
        return [Hit(doc, chunk, score, round(score / top, 4)) for score, (doc, chunk) in scored[:limit]]

    def match_titles(self, query: str, collection: str) -> list[Document]:
        """Documents whose title shares a stem with ``query``; most matched query words first."""
        query_tokens = dict.fromkeys(analyze(query))
        matches: list[tuple[int, str]] = []
        for doc_id, title_stems in self._titles.get(collection, {}).items():
            hits = sum(1 for token in query_tokens if token & title_stems)
            if hits:
                matches.append((-hits, doc_id))
        return [self._documents[collection][doc_id] for _, doc_id in sorted(matches)]
