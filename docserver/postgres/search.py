"""Searching the library in PostgreSQL: one version of it as the tools read it (``searchable.Searchable``).

``PostgresIndex.load`` reads what is small and changes with the library: the counters (its version, every
collection's), the collections, each collection's chunk count and average length, the files documents were read
from, and the vocabulary (only when the tokens changed: the compound splits of queries).  Everything else is read
per call: a search reads its query stems' document frequencies and their champion postings, ranks the chunks they
name, scores the best ``postings.candidates(limit)`` exactly and ranks those as the index in memory does
(``ranking.py``: named articles, long summaries, ties); with a query vector, fused with the nearest passages by
meaning (``vectors.py``).  A new document is searchable as soon as its save commits, on any server; the counters
reach a server at its next look (``live.py``), and with them the versions clients cache by.
"""

import threading
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import psycopg

from textkit import analyze

from .. import postings, ranking
from ..champions import CHUNK, DOCUMENT, ChampionIndex, Row, Stats, by_title_match, document_of, passages_of
from ..corpus import BUNDLED_CORPUS, load_collections, load_corpus
from ..documents import Chunk, Collection, Document
from ..searchable import Outline
from ..vocabulary import Vocabulary
from . import schema, vectors
from .store import PostgresStore

__all__ = ["PostgresIndex", "generation", "open_library"]

_CHAMPIONS = """
WITH q(stem, term, weight, idf) AS (SELECT * FROM unnest(%(stems)s::text[], %(terms)s::int[], %(weights)s::float8[],
                                                         %(idfs)s::float8[])),
p AS (SELECT q.term, q.weight * q.idf * p.impact AS s, p.chunk FROM q CROSS JOIN LATERAL (
        SELECT chunk, impact FROM postings WHERE collection = %(collection)s AND stem = q.stem
        ORDER BY impact DESC LIMIT %(champions)s) p),
t AS (SELECT chunk, term, max(s) AS s FROM p GROUP BY chunk, term)
SELECT chunk FROM t GROUP BY chunk ORDER BY sum(s) DESC, chunk LIMIT %(candidates)s
"""
_CANDIDATES = """
SELECT c.id, c.doc_id, c.chunk_index, c.section, c.length, d.kind, m.stems, m.tfs
FROM chunks c JOIN documents d ON d.id = c.document
CROSS JOIN LATERAL (SELECT array_agg(s.stem) AS stems, array_agg(s.tf) AS tfs FROM unnest(c.stems, c.tfs) s(stem, tf)
                    WHERE s.stem = ANY(%(stems)s)) m
WHERE c.id = ANY(%(ids)s) OR (c.collection = %(collection)s AND (c.doc_id = %(doc_id)s
                                                                 OR c.article = ANY(%(articles)s)))
"""


class _Connections(threading.local):
    """A connection per thread that reads the library, shared by the versions a server loads one after another
    (opened again after it broke: the database restarted)."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.connection: psycopg.Connection | None = None

    def get(self) -> psycopg.Connection:
        if self.connection is None or self.connection.closed or self.connection.broken:
            self.connection = schema.connect(self.url, autocommit=True)
        return self.connection


_WATCHED: dict[str, _Connections] = {}


def generation(url: str) -> int:
    """The library's generation counter: what a server looks at to tell that the library changed."""
    connections = _WATCHED.setdefault(url, _Connections(url))
    return schema.generation(connections.get())


def open_library(url: str, corpus_dir: Path | str | None = None, vector_key: str | None = None) -> "PostgresIndex":
    """The library in the database at ``url`` (its tables created when missing) with the corpus at
    ``corpus_dir`` (default: the bundled one) kept in step: what a server serves at start-up; ``vector_key``: it
    is searched by meaning too, in that space."""
    root = Path(corpus_dir) if corpus_dir is not None else BUNDLED_CORPUS
    with PostgresStore(url) as store:
        store.sync_corpus(load_corpus(root), [(c.name, c.display_name, c.focus) for c in load_collections(root)])
        if vector_key is not None:
            schema.prepare_vectors(store._db)
    return PostgresIndex.load(url, vector_key=vector_key)


class PostgresIndex(ChampionIndex):
    """One version of the library in the database at ``url`` (``load``); searches read the database itself."""

    _TABLES = {"documents": "documents", "chunks": "chunks"}
    _MARK = "%s"

    def __init__(self, url: str, counters: dict[str, int], collections: list[Collection],
                 stats: dict[str, Stats], vocabulary: Vocabulary, file_ids: dict[tuple[str, str], str],
                 vector_key: str | None = None, meaning: set[str] | None = None) -> None:
        """``vector_key``: the vector space searched by meaning too (None: by words only); ``meaning``: the
        collections with vectors in it."""
        self.url = url
        self.vector_key = vector_key
        self._meaning = meaning or set()
        self.source_version = counters.get("generation", 0)
        self._counters = counters
        self.versions = schema.collection_versions(counters)
        self._collections = {c.name: c for c in collections}
        self._stats_by = stats
        self.vocabulary = vocabulary
        self.file_ids = file_ids
        self._connections = _Connections(url)

    @classmethod
    def load(cls, url: str, previous: "PostgresIndex | None" = None, vector_key: str | None = None
             ) -> "PostgresIndex":
        """The library's current version, reusing ``previous``'s vocabulary when the tokens did not change;
        ``vector_key``: searched by meaning too, in that space (``schema.prepare_vectors`` made its table)."""
        with schema.connect(url, autocommit=True) as db, db.transaction():
            db.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY")
            counters = schema.counters(db)
            stats = {name: Stats(chunks, length) for name, chunks, length in db.execute(
                "SELECT collection, chunks, length FROM collection_stats WHERE chunks > 0")}
            collections = [Collection(name, display, focus) for name, display, focus in db.execute(
                "SELECT name, display_name, focus FROM collections ORDER BY NOT bundled, created_at, name")]
            named = {c.name for c in collections}
            collections += [Collection(name, name) for name in sorted(stats) if name not in named]
            if previous is not None and previous._counters.get("vocabulary") == counters.get("vocabulary"):
                vocabulary = previous.vocabulary
            else:
                vocabulary = Vocabulary.of(Counter(dict(db.execute("SELECT token, count FROM tokens"))),
                                           decompound=True)
            file_ids = {(c, d): f for c, d, f in db.execute(
                "SELECT collection, doc_id, file_id FROM documents WHERE file_id IS NOT NULL")}
            meaning = vectors.collections_with_vectors(db, vector_key) if vector_key else set()
        index = cls(url, counters, collections, stats, vocabulary, file_ids, vector_key, meaning)
        if previous is not None:
            index._connections = previous._connections
        return index

    def _db(self) -> psycopg.Connection:
        return self._connections.get()

    # --- the library's outline -----------------------------------------------------------------

    @property
    def chunk_count(self) -> int:
        return sum(s.chunks for s in self._stats_by.values())

    @property
    def document_count(self) -> int:
        return int(self._db().execute("SELECT count(*) FROM documents").fetchone()[0])  # type: ignore[index]

    def version(self, collection: str) -> str:
        return self.versions.get(collection, "0")

    def file_id(self, collection: str, doc_id: str) -> str | None:
        return self.file_ids.get((collection, doc_id))

    def outline(self, collection: str, titles: int) -> Outline:
        db = self._db()
        documents = db.execute("SELECT count(*) FROM documents WHERE collection = %s", (collection,)).fetchone()
        first = db.execute("SELECT title FROM documents WHERE collection = %s ORDER BY doc_id LIMIT %s",
                           (collection, titles)).fetchall()
        sections = db.execute("SELECT title, section, count(*) FROM chunks WHERE collection = %s "
                              "GROUP BY title, section ORDER BY min(id)", (collection,)).fetchall()
        languages = db.execute("SELECT language, count(*) FROM documents WHERE collection = %s AND language IS NOT "
                               "NULL GROUP BY language ORDER BY min(doc_id)", (collection,)).fetchall()
        stats = self._stats_by.get(collection)
        return Outline(documents[0] if documents else 0, stats.chunks if stats else 0, [t for t, in first],
                       Counter({(t, s): n for t, s, n in sections}), Counter(dict(languages)))

    def match_titles(self, query: str, collection: str) -> list[Document]:
        """Documents whose title shares a stem with ``query``; most matched query words first, then by doc_id."""
        tokens = list(dict.fromkeys(analyze(query)))
        rows = self._db().execute(
            f"SELECT {DOCUMENT}, d.title_stems FROM documents d WHERE collection = %s AND title_stems && %s",
            (collection, sorted({s for token in tokens for s in token}))).fetchall()
        return [document_of(row) for row in by_title_match(tokens, ((row[:-1], set(row[-1])) for row in rows))]

    def searches_by_meaning(self, collection: str) -> bool:
        return collection in self._meaning

    def waiting(self) -> list[Chunk]:
        """Passages without a vector in the space searched (the oldest 10,000: a catch-up run embeds them, and
        the next load finds the rest)."""
        return vectors.waiting(self._db(), self.vector_key) if self.vector_key else []

    # --- what a search reads (``champions.ChampionIndex.search``) ------------------------------------

    def _stats(self, collection: str) -> Stats:
        return self._stats_by.get(collection) or Stats(0, 0.0)

    def _dfs(self, collection: str, stems: Sequence[str]) -> dict[str, int]:
        return dict(self._db().execute("SELECT stem, df FROM stems WHERE collection = %s AND stem = ANY(%s)",
                                       (collection, list(stems))).fetchall())

    def _rows(self, stems: Sequence[str], ids: Sequence[int]) -> list[Row]:
        return self._db().execute(_CANDIDATES, {"stems": list(stems), "collection": "", "doc_id": None,
                                                "ids": list(ids), "articles": []}).fetchall()

    def _nearest(self, collection: str, vector: np.ndarray, depth: int, doc_id: str | None
                 ) -> list[tuple[float, int]]:
        return vectors.nearest(self._db(), self.vector_key or "", collection, vector, depth, doc_id)

    def _similarities(self, ids: Sequence[int], vector: np.ndarray) -> dict[int, float]:
        return vectors.similarities(self._db(), self.vector_key or "", list(ids), vector)

    def _candidates(self, asked: postings.Query, idfs: dict[str, float], collection: str, doc_id: str | None,
                    query: str, count: int) -> list[Row]:
        """The chunks a search scores: the document's own, else the best by the champion postings and those of the
        articles the query names."""
        db = self._db()
        wanted = {"stems": asked.stems, "collection": collection, "doc_id": doc_id, "ids": [],
                  "articles": [] if doc_id is not None else ranking.named_articles(query)}
        if doc_id is None:
            rows = [(stem, number, weight, idfs[stem]) for number, (term, weight) in enumerate(asked.weights.items())
                    for stem in sorted(term) if stem in idfs]
            stems, numbers, weights, idf_values = (list(column) for column in zip(*rows, strict=True)) if rows else (
                [], [], [], [])
            wanted["ids"] = [row[0] for row in db.execute(_CHAMPIONS, {
                "stems": stems, "terms": numbers, "weights": weights, "idfs": idf_values, "collection": collection,
                "champions": postings.CHAMPIONS, "candidates": count})]
        return db.execute(_CANDIDATES, wanted).fetchall()

    def _passages(self, ids: Sequence[int]) -> dict[int, tuple[Document, Chunk]]:
        return passages_of(self._db().execute(f"SELECT {CHUNK}, {DOCUMENT} FROM chunks c JOIN documents d ON "
                                              "d.id = c.document WHERE c.id = ANY(%s)", (list(ids),)))
