"""Writing the library in PostgreSQL: documents with their chunks and postings, the statistics BM25 reads, and the
originals of the files they were read from (in the database, table ``files``).

Every save and removal is one transaction under the writers' lock (``schema.WRITE_LOCK``): documents replaced are
dropped with their postings, the counts they gave taken off (document frequencies, the collection's length, the
tokens), the stored chunks whose compound splits the new vocabulary changes analysed again (``terms.py``), then
the new ones written with ``COPY``.
"""

from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime

import psycopg
from psycopg.types.json import Jsonb

from textkit import analyze

from .. import postings
from ..corpus import fingerprint
from ..documents import Chunk, Document
from ..originals import INGEST_PURPOSE, Original
from ..ranking import article_of
from ..store import SourceFile, StoredDocument, located
from ..vocabulary import Vocabulary, chunk_tokens
from . import schema
from .terms import merge_counts, resplit, update_vocabulary
from .vectors import text_sha

__all__ = ["PostgresStore"]

_FILES = """
CREATE TABLE IF NOT EXISTS files (
    id         text PRIMARY KEY,
    filename   text NOT NULL,
    bytes      bigint NOT NULL,
    sha256     text NOT NULL,
    purpose    text NOT NULL,
    created_at bigint NOT NULL,
    content    bytea NOT NULL,
    position   bigserial         -- the order files were kept in (newest first within one second)
);
CREATE TABLE IF NOT EXISTS attachments (
    collection text NOT NULL,
    file_id    text NOT NULL,
    status     text NOT NULL,  -- in_progress, completed, failed, cancelled
    doc_id     text,
    last_error text,
    created_at bigint NOT NULL,
    chunks     integer NOT NULL DEFAULT 0,
    position   bigserial,      -- the order files were attached in
    PRIMARY KEY (collection, file_id)
)"""


def _now() -> tuple[str, int]:
    now = datetime.now(UTC)
    return now.isoformat(timespec="seconds"), int(now.timestamp())


class PostgresStore:
    """Read-write access to the library in the database at ``url`` (its tables created when missing)."""

    def __init__(self, url: str) -> None:
        self.url = url
        self._db = schema.connect(url, autocommit=True)  # each ``transaction()`` block commits
        schema.prepare(self._db)
        with self._db.transaction():
            self._db.execute(_FILES)

    def save(self, documents: Iterable[tuple[Document, SourceFile | None]], originals: Iterable[Original] = (),
             *, corpus: Mapping[tuple[str, str], str] | None = None) -> None:
        """Store ``(document, source file)`` pairs in one transaction, replacing earlier versions (the same
        collection and doc_id), keep the ``originals`` of their files, and count the change (``schema.bump``).
        ``corpus``: documents of the bundled corpus, their fingerprints by (collection, doc_id) (``sync_corpus``)."""
        ingested_at, created_at = _now()
        pairs = list(documents)
        with self._db.transaction():
            self._db.execute("SELECT pg_advisory_xact_lock(%s)", (schema.WRITE_LOCK,))
            removed = _drop(self._db, self._ids(pairs))
            added = Counter(t for doc, _ in pairs for c in doc.chunks for x, y in [chunk_tokens(c)] for t in x + y)
            vocabulary, changed = update_vocabulary(self._db, removed, added)
            resplit(self._db, vocabulary, changed)
            _write(self._db, vocabulary, pairs, ingested_at, corpus or {})
            for original in originals:
                self._db.execute(
                    "INSERT INTO files (id, filename, bytes, sha256, purpose, created_at, content) "
                    "VALUES (%s, %s, %s, %s, %s, %s, %s) ON CONFLICT (id) DO NOTHING",
                    (original.file_id, original.filename, original.size, original.sha256, INGEST_PURPOSE,
                     created_at, original.copy.read_bytes()))
            _drop_unused_originals(self._db)
            schema.bump(self._db, (doc.collection for doc, _ in pairs), vocabulary=True)

    def _ids(self, pairs: Sequence[tuple[Document, SourceFile | None]]) -> list[int]:
        keys = [(doc.collection, doc.doc_id) for doc, _ in pairs]
        rows = self._db.execute(
            "SELECT d.id FROM documents d JOIN unnest(%s::text[], %s::text[]) k(collection, doc_id) "
            "USING (collection, doc_id)", ([c for c, _ in keys], [d for _, d in keys])).fetchall()
        return [row[0] for row in rows]

    def remove(self, doc_ids: Sequence[str], collection: str | None = None) -> list[tuple[str, str]]:
        """Delete the documents ``doc_ids`` (of ``collection``, else of whichever collection holds each); the
        (collection, doc_id) pairs removed.  All or nothing: ``ValueError`` naming every doc_id unknown, or held by
        several collections when none is named (as ``store.DocumentStore.remove``)."""
        with self._db.transaction():
            self._db.execute("SELECT pg_advisory_xact_lock(%s)", (schema.WRITE_LOCK,))
            found = self._db.execute(
                "SELECT doc_id, collection, id FROM documents WHERE doc_id = ANY(%s) "
                "AND (%s::text IS NULL OR collection = %s) ORDER BY collection",
                (list(doc_ids), collection, collection)).fetchall()
            holders: dict[str, list[str]] = defaultdict(list)
            for doc_id, name, _ in found:
                holders[doc_id].append(name)
            keys = located(doc_ids, holders, collection)
            self._remove_rows([(name, doc_id, row_id) for doc_id, name, row_id in found if (name, doc_id) in keys])
        return keys

    def remove_where(self, condition: str, parameters: Sequence[object]) -> list[tuple[str, str]]:
        """Delete the documents a condition on table ``documents`` selects (the library's own conditions: of a file,
        of a collection), in one transaction; their (collection, doc_id)."""
        with self._db.transaction():
            self._db.execute("SELECT pg_advisory_xact_lock(%s)", (schema.WRITE_LOCK,))
            found = self._db.execute(f"SELECT collection, doc_id, id FROM documents WHERE {condition}",
                                     parameters).fetchall()
            self._remove_rows(found)
        return [(name, doc_id) for name, doc_id, _ in found]

    def _remove_rows(self, found: Sequence[tuple[str, str, int]]) -> None:
        """Inside the caller's transaction: delete the documents (collection, doc_id, row id), split the rest again
        where their words change that, and count the change."""
        if not found:
            return
        removed = _drop(self._db, [row_id for _, _, row_id in found])
        resplit(self._db, *update_vocabulary(self._db, removed, Counter()))
        _drop_unused_originals(self._db)
        schema.bump(self._db, (name for name, _, _ in found), vocabulary=True)

    def sync_corpus(self, documents: Sequence[Document], collections: Iterable[tuple[str, str, str]]) -> bool:
        """The bundled corpus in the database as ``documents`` (its collections: name, display name, focus):
        documents added, changed or gone since the last start saved or removed (an ingested document of the same
        collection and doc_id stays); whether anything changed."""
        described = list(collections)
        stored = {(c, d): fingerprint for c, d, fingerprint in self._db.execute(
            "SELECT collection, doc_id, corpus FROM documents WHERE corpus IS NOT NULL")}
        ingested = {(c, d) for c, d in self._db.execute("SELECT collection, doc_id FROM documents "
                                                        "WHERE corpus IS NULL")}
        wanted = {(d.collection, d.doc_id): fingerprint(d) for d in documents if (d.collection, d.doc_id)
                  not in ingested}
        changed = [d for d in documents if (d.collection, d.doc_id) in wanted
                   and stored.get((d.collection, d.doc_id)) != wanted[(d.collection, d.doc_id)]]
        gone = [key for key in stored if key not in wanted]
        with self._db.transaction():
            for position, (name, display, focus) in enumerate(described):  # listed in the corpus's order
                self._db.execute("INSERT INTO collections (name, display_name, focus, created_at, bundled) "
                                 "VALUES (%s, %s, %s, %s, true) ON CONFLICT (name) DO UPDATE SET display_name = "
                                 "excluded.display_name, focus = excluded.focus, created_at = excluded.created_at",
                                 (name, display, focus, position))
        if changed:
            self.save([(d, None) for d in changed], corpus=wanted)
        if gone:  # one transaction: the words are counted and split again once
            self.remove_where("corpus IS NOT NULL AND (collection, doc_id) IN (SELECT * FROM unnest(%s::text[], "
                              "%s::text[]))", ([c for c, _ in gone], [d for _, d in gone]))
        return bool(changed or gone)

    def list_stored(self, collection: str | None = None) -> list[StoredDocument]:
        rows = self._db.execute(
            "SELECT collection, doc_id, title, kind, metadata->>'pages', (SELECT count(*) FROM chunks c "
            "WHERE c.document = d.id), source, sha256, ingested_at, source_name, file_id FROM documents d "
            "WHERE corpus IS NULL AND (%s::text IS NULL OR collection = %s) ORDER BY collection, doc_id",
            (collection, collection)).fetchall()
        return [StoredDocument(name, doc_id, title, kind, int(pages) if pages and pages.isdigit() else None, chunks,
                               source, sha256, ingested_at, relative, file_id)
                for name, doc_id, title, kind, pages, chunks, source, sha256, ingested_at, relative, file_id in rows]

    def generation(self) -> int:
        return schema.generation(self._db)

    def close(self) -> None:
        self._db.close()

    def __enter__(self) -> "PostgresStore":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _drop(db: psycopg.Connection, document_ids: Sequence[int]) -> Counter[str]:
    """Delete documents (row ids) with their chunks and postings, taking their counts off the statistics; the
    tokens they held."""
    if not document_ids:
        return Counter()
    tokens: Counter[str] = Counter()
    df: Counter[tuple[str, str]] = Counter()
    stats: dict[str, list[float]] = defaultdict(lambda: [0, 0.0])
    rows = db.execute("SELECT id, collection, doc_id, chunk_index, title, section, text, length, stems FROM chunks "
                      "WHERE document = ANY(%s)", (list(document_ids),)).fetchall()
    for _, collection, doc_id, index, title, section, text, length, stems in rows:
        text_tokens, header = chunk_tokens(Chunk(doc_id, collection, index, title, section, text))
        tokens.update(text_tokens + header)
        df.update((collection, stem) for stem in stems)
        stats[collection][0] += 1
        stats[collection][1] += length
    db.execute("DELETE FROM postings WHERE chunk = ANY(%s)", ([row[0] for row in rows],))
    db.execute("DELETE FROM documents WHERE id = ANY(%s)", (list(document_ids),))  # chunks cascade
    merge_counts(db, "stems", ("collection", "stem"), "df", [(c, s, -n) for (c, s), n in df.items()])
    with db.cursor() as cursor:
        cursor.executemany("UPDATE collection_stats SET chunks = chunks - %s, length = length - %s "
                           "WHERE collection = %s", [(n, length, c) for c, (n, length) in stats.items()])
    return tokens


BATCH = 500  # documents analysed and copied at a time: a folder of thousands is never held as postings at once


def _write(db: psycopg.Connection, vocabulary: Vocabulary, pairs: Sequence[tuple[Document, SourceFile | None]],
           ingested_at: str, corpus: Mapping[tuple[str, str], str]) -> None:
    """Insert the documents, their chunks with their terms, their postings and the statistics they add, ``BATCH``
    documents at a time (a posting's impact takes the average length of its collection so far)."""
    df: Counter[tuple[str, str]] = Counter()
    for start in range(0, len(pairs), BATCH):
        batch = pairs[start:start + BATCH]
        terms = {(doc.collection, doc.doc_id): [postings.chunk_terms(vocabulary, c) for c in doc.chunks]
                 for doc, _ in batch}
        averages = _add_stats(db, terms)
        ids = _insert_documents(db, batch, ingested_at, corpus)
        chunk_ids = [row[0] for row in db.execute(
            "SELECT nextval('chunks_id_seq') FROM generate_series(1, %s)", (sum(len(t) for t in terms.values()),))]
        numbers = iter(chunk_ids)
        rows = [(next(numbers), ids[(doc.collection, doc.doc_id)], chunk, chunk_terms) for doc, _ in batch
                for chunk, chunk_terms in zip(doc.chunks, terms[(doc.collection, doc.doc_id)], strict=True)]
        _copy_chunks(db, rows)
        with db.cursor().copy("COPY postings (collection, stem, impact, chunk, tf) FROM STDIN") as copy:
            for chunk_id, _, chunk, chunk_terms in rows:
                average = averages[chunk.collection]
                for stem, tf in chunk_terms.frequencies.items():
                    copy.write_row((chunk.collection, stem, postings.impact(tf, chunk_terms.length, average),
                                    chunk_id, tf))
                df.update((chunk.collection, stem) for stem in chunk_terms.frequencies)
    merge_counts(db, "stems", ("collection", "stem"), "df", [(c, s, n) for (c, s), n in df.items()])


def _copy_chunks(db: psycopg.Connection, rows: Sequence[tuple[int, int, Chunk, postings.ChunkTerms]]) -> None:
    with db.cursor().copy("COPY chunks (id, document, collection, doc_id, chunk_index, title, section, text, url, "
                          "page, page_end, article, length, stems, tfs, text_sha) FROM STDIN") as copy:
        for chunk_id, document, chunk, chunk_terms in rows:
            stems = sorted(chunk_terms.frequencies)
            copy.write_row((chunk_id, document, chunk.collection, chunk.doc_id, chunk.chunk_index, chunk.title,
                            chunk.section, chunk.text, chunk.url, chunk.page, chunk.page_end, article_of(chunk),
                            chunk_terms.length, stems, [chunk_terms.frequencies[s] for s in stems], text_sha(chunk)))


def _add_stats(db: psycopg.Connection, terms: dict[tuple[str, str], list[postings.ChunkTerms]]) -> dict[str, float]:
    """Count the chunks and length added per collection; each collection's average length after the save."""
    added: dict[str, list[float]] = defaultdict(lambda: [0, 0.0])
    for (collection, _), chunk_terms in terms.items():
        added[collection][0] += len(chunk_terms)
        added[collection][1] += sum(t.length for t in chunk_terms)
    averages = {}
    for collection, (chunks, length) in added.items():
        row = db.execute("INSERT INTO collection_stats (collection, chunks, length) VALUES (%s, %s, %s) "
                         "ON CONFLICT (collection) DO UPDATE SET chunks = collection_stats.chunks + excluded.chunks, "
                         "length = collection_stats.length + excluded.length RETURNING chunks, length",
                         (collection, chunks, length)).fetchone()
        averages[collection] = row[1] / row[0] if row and row[0] else 1.0
    return averages


def _insert_documents(db: psycopg.Connection, pairs: Sequence[tuple[Document, SourceFile | None]], ingested_at: str,
                      corpus: Mapping[tuple[str, str], str]) -> dict[tuple[str, str], int]:
    ids = {}
    for doc, source in pairs:
        row = db.execute(
            "INSERT INTO documents (collection, doc_id, title, year, url, kind, language, disclaimer, metadata, "
            "source, sha256, ingested_at, file_id, source_name, corpus, title_stems) "
            "VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s) RETURNING id",
            (doc.collection, doc.doc_id, doc.title, doc.year, doc.url, doc.kind, doc.language, doc.disclaimer,
             Jsonb(dict(doc.metadata)),
             source.path if source else None, source.sha256 if source else None,
             None if (doc.collection, doc.doc_id) in corpus else ingested_at, source.file_id if source else None,
             source.name if source else None, corpus.get((doc.collection, doc.doc_id)),
             sorted(frozenset().union(*analyze(doc.title)))),
        ).fetchone()
        ids[(doc.collection, doc.doc_id)] = row[0]  # type: ignore[index]
    return ids


def _drop_unused_originals(db: psycopg.Connection) -> None:
    db.execute("DELETE FROM files WHERE purpose = %s AND id NOT IN "
               "(SELECT file_id FROM documents WHERE file_id IS NOT NULL) "
               "AND id NOT IN (SELECT file_id FROM attachments)",
               (INGEST_PURPOSE,))
