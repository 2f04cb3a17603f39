"""Searching the SQLite file on disk: one version of the library as the tools read it (``searchable.Searchable``).

``SqliteIndex.load`` brings the file's search copy up to date first when it has to (documents pending, the bundled
corpus changed: ``words.refresh``, the one write a server makes here) and then keeps only what a search cannot read
cheaply: the vocabulary (read again when the words changed: the compound splits of queries) and, searched by
meaning, the vectors.  Everything else is read from the file per call: a search (``champions.ChampionIndex.search``:
its query stems' champion postings, its candidates' terms, the hits' text) and the collections, their versions,
statistics and the files documents came from, so neither start-up time nor memory grows with the library, and a
document saved by another process is searchable, with its collection's new version, once its save commits.

With a vector space (``vector_key``) the passages are searched by meaning too: their vectors are held per collection
as a matrix (``meaning.py``: 1.5 KB a passage), and with matching sentences on, hits name theirs (``sentences.py``).
A server that cannot write a file whose copy is behind holds the index in memory instead (``index.py``).
"""

import json
import sqlite3
import threading
from collections import Counter
from collections.abc import Sequence
from contextlib import closing
from dataclasses import replace
from pathlib import Path

import numpy as np

from textkit import analyze

from .. import postings, ranking, schema
from ..champions import CHUNK, DOCUMENT, ChampionIndex, Row, Stats, by_title_match, chunk_of, document_of, passages_of
from ..corpus import BUNDLED_CORPUS, load_collections, load_corpus
from ..documents import Chunk, Collection, Document
from ..index import collection_versions, corpus_digests
from ..searchable import Hit, Outline
from ..sentences import SentenceVectors
from ..store import IndexVersion, index_version
from ..vocabulary import Vocabulary
from . import words
from .meaning import Meaning

__all__ = ["SqliteIndex", "bring_up_to_date"]

def bring_up_to_date(path: Path, corpus: Sequence[Document]) -> int:
    """The file's search copy up to date with its documents and ``corpus`` (the file created when missing); how
    many documents were indexed again.  ``sqlite3.Error``/``OSError``: the file cannot be written."""
    if path.exists():
        with closing(schema.connect_read_only(path)) as db:
            schema.check_version(db, path)
            if schema.has_table(db, "word_pending") and not words.pending(db) and not words.stale_corpus(db, corpus):
                return 0
    path.parent.mkdir(parents=True, exist_ok=True)
    with closing(schema.connect(path)) as db:
        schema.prepare(db, path)
        with db:
            db.execute("BEGIN IMMEDIATE")
            return words.refresh(db, corpus)


# A query's stems that choose its candidates, at most (1,000: a query pages long; its first ones), and twice that many
# score them (SQLite takes at most 32,766 parameters a statement).
MOST_STEMS = 1000
_GROUP = 200  # stems per compound SELECT (SQLite allows 500 terms in one)


def _champions(asked: postings.Query, idfs: dict[str, float], collection: str, count: int) -> tuple[str, list]:
    """The SQL (and its parameters) of a search's first ranking: per query stem its ``CHAMPIONS`` postings of
    highest impact, scored ``weight × idf × impact``, the best per chunk and term, summed per chunk; the ``count``
    best chunks (ties by id).  Worked out in SQLite, as PostgreSQL's ``_CHAMPIONS`` does: in Python it cost more
    than the rest of a search."""
    parts, stems = [], []
    for number, (term, weight) in enumerate(asked.weights.items()):
        for stem in sorted(term):
            if stem in idfs and len(stems) < MOST_STEMS:
                stems.append(stem)  # numbers are ours (repr of a float is a SQL literal), stems the query's
                parts.append(f"SELECT {number} AS term, {weight * idfs[stem]!r} * impact AS s, chunk FROM (SELECT "
                             f"impact, chunk FROM word_postings WHERE collection = ?1 AND stem = ?{len(stems) + 1} "
                             f"ORDER BY impact DESC LIMIT {postings.CHAMPIONS})")
    if not parts:
        return "SELECT NULL WHERE 0", []
    groups = [" UNION ALL ".join(parts[i:i + _GROUP]) for i in range(0, len(parts), _GROUP)]
    scored = " UNION ALL ".join(f"SELECT * FROM ({group})" for group in groups)
    return (f"WITH p AS ({scored}), t AS (SELECT chunk, term, max(s) AS s FROM p GROUP BY chunk, term) "
            f"SELECT chunk FROM t GROUP BY chunk ORDER BY sum(s) DESC, chunk LIMIT {int(count)}", [collection, *stems])


def _same_file(one: IndexVersion | None, other: IndexVersion | None) -> bool:
    return one is not None and other is not None and (one.device, one.inode) == (other.device, other.inode)


class _Connections(threading.local):
    """A read-only connection per thread that searches the file, shared by the versions a server loads."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.connection: sqlite3.Connection | None = None

    def get(self) -> sqlite3.Connection:
        if self.connection is None:
            self.connection = schema.connect_read_only(self.path)
        return self.connection


class SqliteIndex(ChampionIndex):
    """One version of the library in the SQLite file at ``path`` (``load``); searches read the file itself."""

    _TABLES = {"documents": "word_documents", "chunks": "word_chunks"}
    _MARK = "?"

    def __init__(self, path: Path, described: list[Collection], vocabulary: Vocabulary,
                 source_version: IndexVersion | None, corpus: Sequence[Document], words_version: int,
                 meaning: Meaning | None = None, sentences: SentenceVectors | None = None) -> None:
        """``described``: the corpus's collections (listed first, in its order); ``corpus``: its documents (a
        collection's version includes their digest); ``meaning``:
        the passages' vectors of the space searched by meaning too (None: by words only); ``sentences``: their
        sentences' vectors, when hits name the sentences that match."""
        self.path = path
        self.vector_key = meaning.key if meaning is not None else None
        self._vectors = meaning
        self._meaning: set[str] = meaning.collections() if meaning is not None else set()
        self._sentences = sentences if meaning is not None else None
        self._described = described
        self.vocabulary = vocabulary
        self.source_version = source_version
        self._digests = corpus_digests(corpus)
        self._words_version = words_version
        self._connections = _Connections(path)

    @classmethod
    def load(cls, path: Path, corpus_dir: Path | str | None = None, previous: "SqliteIndex | None" = None, *,
             vector_key: str | None = None, sentences: bool = False) -> "SqliteIndex":
        """The library in the file at ``path`` with the corpus at ``corpus_dir`` (default: the bundled one), its
        search copy brought up to date first; ``previous``'s vocabulary (when the tokens did not change) and
        vectors reused.  ``vector_key``: searched by meaning too, with the passages' vectors of that space in the
        file (``meaning.py``); ``sentences``: and their sentences' vectors (``sentences.py``)."""
        root = Path(corpus_dir) if corpus_dir is not None else BUNDLED_CORPUS
        corpus = load_corpus(root)
        bring_up_to_date(path, corpus)
        version = index_version(path)
        with closing(schema.connect_read_only(path)) as db:
            db.execute("BEGIN")  # one state of the file for everything read here
            counters = dict(db.execute("SELECT key, value FROM meta"))
            words_version = int(counters.get("words", 0))
            if previous is not None and previous._words_version == words_version:
                vocabulary = previous.vocabulary
            else:
                vocabulary = Vocabulary.of(Counter(dict(db.execute("SELECT token, count FROM word_tokens"))),
                                           decompound=True)
            meaning = Meaning.load(db, vector_key, previous._vectors if previous is not None else None
                                   ) if vector_key is not None else None
            db.rollback()
        index = cls(path, load_collections(root), vocabulary, version, corpus, words_version, meaning,
                    SentenceVectors.of_file(path, vector_key) if vector_key is not None and sentences else None)
        if previous is not None and _same_file(previous.source_version, version):
            index._connections = previous._connections  # a file deleted and written anew is opened anew
        return index

    def _db(self) -> sqlite3.Connection:
        return self._connections.get()

    # --- the library's outline -----------------------------------------------------------------

    @property
    def _collections(self) -> dict[str, Collection]:  # type: ignore[override]
        """Read from the file (as a search is): the corpus's collections, those created in the library (by name),
        then any other a document is in."""
        db = self._db()
        found = {c.name: c for c in self._described}
        for name, display in db.execute("SELECT name, display_name FROM collections ORDER BY name"):
            found.setdefault(name, Collection(name, display))
        for (name,) in db.execute("SELECT DISTINCT collection FROM word_documents ORDER BY collection"):
            found.setdefault(name, Collection(name, name))
        return found

    @property
    def chunk_count(self) -> int:
        return int(self._db().execute("SELECT coalesce(sum(chunks), 0) FROM word_stats").fetchone()[0])

    @property
    def document_count(self) -> int:
        return int(self._db().execute("SELECT count(*) FROM word_documents").fetchone()[0])

    def version(self, collection: str) -> str:
        """Read from the file (as a search is): what a search answers and the version it is of agree."""
        db = self._db()
        with db:  # one read transaction: the counters and the documents of one state of the file
            db.execute("BEGIN")
            in_file = db.execute("SELECT 1 FROM documents WHERE collection = ? LIMIT 1", (collection,)).fetchone()
            return collection_versions([collection], self._digests, schema.collection_versions(db),
                                       {collection} if in_file else set(), schema.generation(db))[collection]

    def file_id(self, collection: str, doc_id: str) -> str | None:
        """Read from the file (as a search is): a document saved since the load has its file at once."""
        row = self._db().execute("SELECT file_id FROM documents WHERE collection = ? AND doc_id = ?",
                                 (collection, doc_id)).fetchone()
        return row[0] if row else None

    def outline(self, collection: str, titles: int) -> Outline:
        db = self._db()
        documents = db.execute("SELECT count(*) FROM word_documents WHERE collection = ?", (collection,)).fetchone()
        first = db.execute("SELECT title FROM word_documents WHERE collection = ? ORDER BY doc_id LIMIT ?",
                           (collection, titles)).fetchall()
        sections = db.execute(  # in the order each first occurs (by doc_id, chunk_index), as the index counts them
            "SELECT d.title, c.section, count(*) FROM word_chunks c JOIN word_documents d USING (collection, doc_id) "
            "WHERE collection = ? GROUP BY d.title, c.section "
            "ORDER BY min(c.doc_id || char(1) || printf('%012d', c.chunk_index))", (collection,)).fetchall()
        languages = db.execute("SELECT language, count(*) FROM word_documents WHERE collection = ? AND language IS "
                               "NOT NULL GROUP BY language ORDER BY min(doc_id)", (collection,)).fetchall()
        return Outline(documents[0] if documents else 0, self._stats(collection).chunks, [t for t, in first],
                       Counter({(t, s): n for t, s, n in sections}), Counter(dict(languages)))

    def match_titles(self, query: str, collection: str) -> list[Document]:
        """Documents whose title shares a stem with ``query``; most matched query words first, then by doc_id."""
        tokens = list(dict.fromkeys(analyze(query)))
        if not tokens:
            return []
        rows = self._db().execute(f"SELECT {DOCUMENT}, d.title_stems FROM word_documents d WHERE collection = ?",
                                  (collection,)).fetchall()
        return [document_of(row) for row in by_title_match(tokens, ((row[:-1], set(row[-1].split())) for row in rows))]

    def searches_by_meaning(self, collection: str) -> bool:
        return collection in self._meaning

    def waiting(self) -> list[Chunk]:
        """The passages searched by words only because no vector of ``vector_key`` exists for them yet (or, when
        hits name matching sentences, none of their sentences)."""
        if self._vectors is None:
            return []
        ids = set(self._vectors.missing())
        if self._sentences is not None:
            ids |= {i for i, digest in self._vectors.digests.items() if digest not in self._sentences.stored}
        return [chunk for _, chunk in sorted(self._chunks(sorted(ids)).items())]

    def _chunks(self, ids: Sequence[int]) -> dict[int, Chunk]:
        return {row[0]: chunk_of(row[9], row) for row in schema.select_in(
            self._db(), f"SELECT {CHUNK}, c.collection FROM word_chunks c WHERE c.id IN", ids)}

    # --- what a search reads (``champions.ChampionIndex.search``) ------------------------------------

    def _stats(self, collection: str) -> Stats:
        """Read with each search (as its postings are): a document saved since the load counts at once."""
        row = self._db().execute("SELECT chunks, length FROM word_stats WHERE collection = ?",
                                 (collection,)).fetchone()
        return Stats(*row) if row else Stats(0, 0.0)

    def _dfs(self, collection: str, stems: Sequence[str]) -> dict[str, int]:
        if not stems:
            return {}
        return dict(self._db().execute(f"SELECT stem, df FROM word_stems WHERE collection = ? AND stem IN "
                                       f"({', '.join('?' * len(stems))})", (collection, *stems)).fetchall())

    def _candidates(self, asked: postings.Query, idfs: dict[str, float], collection: str, doc_id: str | None,
                    query: str, count: int) -> list[Row]:
        db = self._db()
        if doc_id is not None:
            ids = [i for (i,) in db.execute("SELECT id FROM word_chunks WHERE collection = ? AND doc_id = ?",
                                            (collection, doc_id))]
            return self._rows(asked.stems, ids)
        ids = [chunk for (chunk,) in db.execute(*_champions(asked, idfs, collection, count))]
        articles = ranking.named_articles(query)
        if articles:
            ids += [i for (i,) in db.execute(f"SELECT id FROM word_chunks WHERE collection = ? AND article IN "
                                             f"({', '.join('?' * len(articles))})", (collection, *articles))]
        return self._rows(asked.stems, list(dict.fromkeys(ids)))

    def _rows(self, stems: Sequence[str], ids: Sequence[int]) -> list[Row]:
        """Each chunk's counts of the query's ``stems`` picked out of its stored terms by SQLite (``json_each``):
        decoding every candidate's terms in Python cost as much as the rest of a search."""
        rows, asked = [], list(stems)[:MOST_STEMS * 2]
        held = (f"(SELECT json_group_object(key, json_extract(value, '$[0]')) FROM json_each(c.terms) WHERE key IN "
                f"({', '.join('?' * len(asked))}))") if asked else "'{}'"
        for chunk_id, doc_id, index, section, length, kind, counts in schema.select_in(
                self._db(), f"SELECT c.id, c.doc_id, c.chunk_index, c.section, c.length, d.kind, {held} FROM "
                "word_chunks c JOIN word_documents d USING (collection, doc_id) WHERE c.id IN", ids, asked):
            found = json.loads(counts)
            rows.append((chunk_id, doc_id, index, section, length, kind, list(found), list(found.values())))
        return rows

    def _passages(self, ids: Sequence[int]) -> dict[int, tuple[Document, Chunk]]:
        if not ids:
            return {}
        return passages_of(self._db().execute(
            f"SELECT {CHUNK}, {DOCUMENT} FROM word_chunks c JOIN word_documents d USING (collection, doc_id) "
            f"WHERE c.id IN ({', '.join('?' * len(ids))})", list(ids)))

    def _nearest(self, collection: str, vector: np.ndarray, depth: int, doc_id: str | None
                 ) -> list[tuple[float, int]]:
        if self._vectors is None:
            return []
        allowed = None if doc_id is None else [i for (i,) in self._db().execute(
            "SELECT id FROM word_chunks WHERE collection = ? AND doc_id = ?", (collection, doc_id))]
        return self._vectors.nearest(collection, vector, depth, allowed)

    def _similarities(self, ids: Sequence[int], vector: np.ndarray) -> dict[int, float]:
        return self._vectors.similarities(ids, vector) if self._vectors is not None else {}

    def _with_sentences(self, hits: list[Hit], ids: Sequence[int], vector: np.ndarray, threshold: float
                        ) -> list[Hit]:
        if self._sentences is None or self._vectors is None:
            return hits
        digests = self._vectors.digests
        found = self._sentences.matching([(digests.get(i), hit.chunk.text) for hit, i in zip(hits, ids, strict=True)],
                                         vector, threshold)
        return [replace(hit, sentences=matches) if matches else hit for hit, matches in zip(hits, found, strict=True)]

