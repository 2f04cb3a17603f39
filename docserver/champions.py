"""Searching a library whose postings live in tables (``postings.py``): the flow both table engines share.

The library in PostgreSQL (``postgres/search.py``) and the SQLite file searched on disk (``sqlite/search.py``) keep
the same tables in their own SQL; ``ChampionIndex.search`` is the search they share: the query's terms as the index
in memory counts them, its stems' document frequencies, the candidates (a document's own chunks, else the best by
the champion postings plus those of the articles the query names), each scored exactly from its own stems, ranked
as the index in memory ranks (``ranking.py``) and, with a query vector, fused with the nearest passages by meaning
(``hybrid.py``).  An engine gives the rows; the rule is here once.

A candidate row: (chunk id, doc_id, chunk_index, section, length, its document's kind, the query stems it holds,
their counts).  Both engines name their documents' and chunks' columns alike, so the reads of a document, a listing
and a search's passages are here once too; an engine gives its tables and its parameter mark.
"""

import json
from collections.abc import Callable, Iterable, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from . import hybrid, postings, ranking
from .documents import Chunk, Collection, Document
from .searchable import Hit
from .vocabulary import Vocabulary

__all__ = ["CHUNK", "DOCUMENT", "ChampionIndex", "Row", "Stats", "by_title_match", "chunk_of", "document_of",
           "passages_of"]

Row = tuple  # (id, doc_id, chunk_index, section, length, kind, stems, tfs): see the module docstring

# A document's and a chunk's columns as both engines name them (tables aliased d and c), read by ``document_of``
# and ``chunk_of``
DOCUMENT = "d.collection, d.doc_id, d.title, d.year, d.url, d.kind, d.language, d.disclaimer, d.metadata"
CHUNK = "c.id, c.doc_id, c.chunk_index, c.title, c.section, c.text, c.url, c.page, c.page_end"


def document_of(row: Sequence[object], chunks: tuple[Chunk, ...] = ()) -> Document:
    """A document from its ``DOCUMENT`` columns (metadata: SQLite's JSON text or PostgreSQL's jsonb)."""
    collection, doc_id, title, year, url, kind, language, disclaimer, metadata = row
    return Document(doc_id, collection, title, chunks, year, url, kind, language, disclaimer,  # type: ignore[arg-type]
                    json.loads(metadata) if isinstance(metadata, str) else dict(metadata))  # type: ignore[call-overload]


def chunk_of(collection: str, row: Sequence[object]) -> Chunk:
    """A chunk from its ``CHUNK`` columns (the first nine of ``row``)."""
    _, doc_id, index, title, section, text, url, page, page_end = row[:9]
    return Chunk(doc_id, collection, index, title, section, text, url, page, page_end)  # type: ignore[arg-type]


def passages_of(rows: Iterable[Sequence[object]]) -> dict[int, tuple[Document, Chunk]]:
    """Rows of ``CHUNK, DOCUMENT`` as (document without chunks, chunk) by chunk id; one document object per
    document."""
    documents: dict[str, Document] = {}
    found = {}
    for row in rows:
        chunk = chunk_of(row[9], row)  # type: ignore[arg-type]  # row[9]: the document's collection
        found[row[0]] = (documents.setdefault(chunk.doc_id, document_of(row[9:])), chunk)
    return found  # type: ignore[return-value]


@dataclass(frozen=True, slots=True)
class Stats:
    """A collection's chunk count and total length (BM25's average length)."""

    chunks: int
    length: float

    @property
    def avgdl(self) -> float:
        return (self.length / self.chunks if self.chunks else 0.0) or 1.0


def _ranked(row: Row, collection: str) -> tuple[Document, Chunk]:
    """A candidate as ranking reads it (doc_id, kind, chunk_index, section): the rest is read for the hits only."""
    return (Document(row[1], collection, "", (), kind=row[5]),
            Chunk(row[1], collection, row[2], "", row[3], ""))


def _frequencies(row: Row) -> dict[str, float]:
    """A candidate's counts of the query's stems."""
    return dict(zip(row[6] or (), row[7] or (), strict=True))


def _holds(row: Row) -> Callable[[frozenset[str]], bool]:
    """Whether a candidate holds any of some stems (of the query's: those it was read with)."""
    held = _frequencies(row)
    return lambda stems: any(stem in held for stem in stems)


def by_title_match(tokens: Sequence[frozenset[str]], rows: Iterable[tuple[Sequence, AbstractSet[str]]]
                   ) -> list[Sequence]:
    """Of (document row, its title's stems) pairs, the rows whose title shares a stem with a query token, most
    matched tokens first, then by doc_id (a row's second column): a title look-up in either table engine."""
    scored = [(-n, row[1], row) for row, stems in rows if (n := sum(bool(token & stems) for token in tokens))]
    return [row for _, _, row in sorted(scored, key=lambda s: s[:2])]


class ChampionIndex:
    """The search of a library kept in tables; an engine implements the reads below ``search``."""

    vector_key: str | None
    vocabulary: Vocabulary
    _collections: dict[str, Collection]
    _meaning: set[str]
    _TABLES: ClassVar[dict[str, str]]  # the engine's tables of documents and of chunks: {"documents": …, "chunks": …}
    _MARK: str  # the engine's parameter mark

    def _read(self, sql: str, parameters: Sequence[object]) -> list[tuple]:
        """The rows of ``sql``, written with ``{p}`` for each parameter and ``{documents}``/``{chunks}`` for the
        engine's tables."""
        return self._db().execute(sql.format(p=self._MARK, **self._TABLES), parameters).fetchall()

    def _db(self) -> Any:  # noqa: ANN401  # sqlite3's or psycopg's connection
        """The engine's connection of this thread."""
        raise NotImplementedError

    @property
    def collections(self) -> list[Collection]:
        return list(self._collections.values())

    def collection(self, name: str) -> Collection | None:
        return self._collections.get(name)

    def listing(self, collection: str, limit: int) -> list[Document]:
        """The first ``limit`` documents of ``collection`` (by doc_id), without their chunks."""
        rows = self._read(f"SELECT {DOCUMENT} FROM {{documents}} d WHERE collection = {{p}} ORDER BY doc_id "
                          "LIMIT {p}", (collection, limit))
        return [document_of(row) for row in rows]

    def document(self, collection: str, doc_id: str) -> Document | None:
        """A document of ``collection`` with its chunks, in order."""
        found = self._read(f"SELECT {DOCUMENT} FROM {{documents}} d WHERE collection = {{p}} AND doc_id = {{p}}",
                           (collection, doc_id))
        if not found:
            return None
        chunks = self._read(f"SELECT {CHUNK} FROM {{chunks}} c WHERE collection = {{p}} AND doc_id = {{p}} "
                            "ORDER BY chunk_index", (collection, doc_id))
        return document_of(found[0], tuple(chunk_of(collection, row) for row in chunks))

    def search(self, query: str, collection: str, *, limit: int | None = 10, doc_id: str | None = None,
               query_vector: np.ndarray | None = None, fusion: tuple[float, float] | None = None,
               sentence_match: float | None = None) -> list[Hit]:
        """Best chunks of ``collection`` (optionally of one document) for ``query``: by its words (see the module
        docstring), and with ``query_vector`` by meaning too, the two fused as the index in memory fuses them
        (``hybrid.py``); with ``sentence_match`` too, each hit names its sentences whose cosine to the query reaches
        it, where the engine keeps sentence vectors (``_with_sentences``)."""
        if collection not in self._collections:
            raise KeyError(collection)
        stats = self._stats(collection)
        asked = postings.query(self.vocabulary, query)
        meaning = (query_vector is not None and self.vector_key is not None and collection in self._meaning)
        if not asked.tokens and not meaning:
            return []
        dfs = self._dfs(collection, asked.stems)
        idfs = {stem: postings.idf(stats.chunks, df) for stem, df in dfs.items()}
        candidates = self._candidates(asked, idfs, collection, doc_id, query, postings.candidates(limit))
        scored = [(score, i) for i, row in enumerate(candidates)
                  if (score := postings.score(asked.weights, _frequencies(row), row[4], idfs, stats.avgdl)) > 0]
        pairs = [_ranked(row, collection) for row in candidates]
        scored = ranking.boost_articles(scored, pairs, query)
        similarity: dict[int, float] = {}
        if meaning:
            lexical, semantic = fusion or (hybrid.LEXICAL_WEIGHT, hybrid.SEMANTIC_WEIGHT)
            weights = (lexical * self.vocabulary.known_share(asked.tokens, dfs.__contains__), semantic)
            ranked, similarity = self._fused((collection, doc_id), scored, candidates, pairs, asked,
                                             query_vector, limit, weights)  # type: ignore[arg-type]
        else:
            ranked = ranking.best(scored, pairs, limit)  # type: ignore[arg-type]
        raw = {i: score for score, i in scored}  # before a long summary's discount, as the index reports it
        top = ranked[0][0] if ranked else 1.0
        ids = [candidates[i][0] for _, i in ranked]
        found = self._passages(ids)
        hits = [Hit(*found[candidates[i][0]], raw.get(i, 0.0), round(score / top, 4),
                    self.vocabulary.matched_share(asked.tokens, asked.compounds, _holds(candidates[i])),
                    round(similarity[i], 4) if i in similarity else None) for score, i in ranked]
        if sentence_match is None or not similarity:
            return hits
        return self._with_sentences(hits, ids, query_vector, sentence_match)  # type: ignore[arg-type]

    def _fused(self, where: tuple[str, str | None], scored: list[tuple[float, int]], candidates: list[Row],
               pairs: list[tuple[Document, Chunk]], asked: postings.Query, vector: np.ndarray, limit: int | None,
               weights: tuple[float, float]) -> tuple[list[tuple[float, int]], dict[int, float]]:
        """The words' ranking fused with the nearest passages by meaning (``ranking.fused``); the passages found by
        meaning alone join ``candidates`` and ``pairs``.  The ranking, and the cosines of its passages."""
        collection, doc_id = where
        depth = max(limit or postings.CANDIDATES, hybrid.FUSION_DEPTH)
        near = self._nearest(collection, vector, depth, doc_id)
        slot = {row[0]: i for i, row in enumerate(candidates)}
        missing = [chunk_id for _, chunk_id in near if chunk_id not in slot]
        for row in self._rows(asked.stems, missing) if missing else ():
            slot[row[0]] = len(candidates)
            candidates.append(row)
            pairs.append(_ranked(row, collection))
        cosines = {slot[chunk_id]: cosine for cosine, chunk_id in near}
        fused = hybrid.fuse(ranking.best(scored, pairs, depth), [(c, slot[i]) for c, i in near], weights=weights)
        ranked = ranking.ordered(fused, pairs, limit)
        unknown = [candidates[i][0] for _, i in ranked if i not in cosines]
        if unknown:
            cosines |= {slot[chunk_id]: cosine for chunk_id, cosine in self._similarities(unknown, vector).items()}
        return ranked, {i: cosines[i] for _, i in ranked if i in cosines}

    # --- what an engine reads -------------------------------------------------------------------------

    def _with_sentences(self, hits: list[Hit], ids: Sequence[int], vector: np.ndarray, threshold: float
                        ) -> list[Hit]:
        """``hits`` (of the chunks ``ids``) naming their sentences that match ``vector`` (``sentences.py``); as
        they are where the engine keeps no sentence vectors."""
        return hits

    def _stats(self, collection: str) -> Stats:
        raise NotImplementedError

    def _dfs(self, collection: str, stems: Sequence[str]) -> dict[str, int]:
        """The document frequency of each of ``stems`` the collection holds."""
        raise NotImplementedError

    def _candidates(self, asked: postings.Query, idfs: dict[str, float], collection: str, doc_id: str | None,
                    query: str, count: int) -> list[Row]:
        """The chunks a search scores: the document's own, else the best ``count`` by the champion postings and
        those of the articles the query names."""
        raise NotImplementedError

    def _rows(self, stems: Sequence[str], ids: Sequence[int]) -> list[Row]:
        """The chunks ``ids`` as candidate rows (found by meaning alone)."""
        raise NotImplementedError

    def _passages(self, ids: Sequence[int]) -> dict[int, tuple[Document, Chunk]]:
        """The chunks ``ids`` whole, with their documents (without chunks), by chunk id."""
        raise NotImplementedError

    def _nearest(self, collection: str, vector: np.ndarray, depth: int, doc_id: str | None
                 ) -> list[tuple[float, int]]:
        """The ``depth`` passages nearest ``vector`` as (cosine, chunk id), best first."""
        raise NotImplementedError

    def _similarities(self, ids: Sequence[int], vector: np.ndarray) -> dict[int, float]:
        """The cosine of each of the passages ``ids`` that has a vector to ``vector``."""
        raise NotImplementedError
