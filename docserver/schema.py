"""The index file's tables, how a file written by older code is brought up to them, and its change counters.

One SQLite file holds the documents and their chunks (``store.py``) and the library around them (``library.py``):
the files whose original bytes are kept beside it (``files``), the collections created before anything was put in
them (``collections``) and which file is attached to which collection (``attachments``).  Tables and columns were
added without a schema version change: a file written before them is read as if they were empty (a column as NULL)
and brought up to them when it is next written (``prepare``), and code from before them reads and writes a file
that has them.

Counters (table ``meta``), bumped in the transaction of the change they count:

* ``generation``: every change to what any collection holds (a running server reloads on it, ``live.py``);
* ``collection:<name>``: every change to what that collection holds (a client can tell that one collection
  changed: ``collection_versions``);
* ``epoch``: a random number drawn when this code first writes the file, so the version string of a file deleted
  and written anew (whose counters start again at 1) never repeats one of the old file's.
"""

import re
import secrets
import sqlite3
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path

__all__ = [
    "ADDED_COLUMNS",
    "SCHEMA_VERSION",
    "IndexSchemaError",
    "bump",
    "check_version",
    "columns",
    "connect",
    "connect_read_only",
    "collection_versions",
    "generation",
    "has_table",
    "prepare",
    "select",
    "select_in",
]

SCHEMA_VERSION = 1
TIMEOUT_S = 30  # how long a writer waits for another's write lock (a folder ingest commits in one transaction)
_SCHEMA = """
CREATE TABLE IF NOT EXISTS documents (
    collection TEXT NOT NULL,
    doc_id     TEXT NOT NULL,
    title      TEXT NOT NULL,
    year       INTEGER,
    url        TEXT,
    kind       TEXT,
    language   TEXT,
    disclaimer TEXT,
    metadata   TEXT NOT NULL,  -- JSON object of strings (front matter)
    source     TEXT,           -- the file it was ingested from
    sha256     TEXT,           -- of that file's bytes
    ingested_at TEXT,          -- when it was stored: UTC, ISO 8601
    file_id    TEXT,           -- the original kept of that file (table files)
    source_name TEXT,          -- that file's path relative to the folder ingested (its name when named directly)
    PRIMARY KEY (collection, doc_id)
);
CREATE TABLE IF NOT EXISTS chunks (
    collection  TEXT NOT NULL,
    doc_id      TEXT NOT NULL,
    chunk_index INTEGER NOT NULL,
    title       TEXT NOT NULL,
    section     TEXT NOT NULL,
    text        TEXT NOT NULL,
    url         TEXT,
    page        INTEGER,  -- the page of a paged source (PDF) the chunk starts on
    page_end    INTEGER,  -- the page it ends on, when that is another
    PRIMARY KEY (collection, doc_id, chunk_index),
    FOREIGN KEY (collection, doc_id) REFERENCES documents (collection, doc_id) ON DELETE CASCADE
);
CREATE TABLE IF NOT EXISTS meta (
    key   TEXT PRIMARY KEY,
    value INTEGER NOT NULL  -- 'generation', 'collection:<name>': bumped by every change; 'epoch': random
);
CREATE TABLE IF NOT EXISTS files (
    id         TEXT PRIMARY KEY,  -- "file-" + 24 hex: of the sha256 for a file an ingest read, random for an upload
    filename   TEXT NOT NULL,     -- one plain line
    bytes      INTEGER NOT NULL,
    sha256     TEXT NOT NULL,
    purpose    TEXT NOT NULL,     -- "ingest" for a file an ingest read, else what the upload said
    created_at INTEGER NOT NULL   -- unix seconds
);
CREATE TABLE IF NOT EXISTS collections (
    name         TEXT PRIMARY KEY,
    display_name TEXT NOT NULL,
    created_at   INTEGER NOT NULL,  -- unix seconds
    metadata     TEXT NOT NULL      -- JSON object of strings
);
CREATE TABLE IF NOT EXISTS attachments (
    collection TEXT NOT NULL,
    file_id    TEXT NOT NULL,
    status     TEXT NOT NULL,  -- in_progress, completed, failed, cancelled
    doc_id     TEXT,           -- the document read from the file, once completed
    last_error TEXT,           -- why it failed: the reason an ingest gives for that file
    created_at INTEGER NOT NULL,
    chunks     INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (collection, file_id)
);
CREATE TABLE IF NOT EXISTS vectors (
    key    TEXT NOT NULL,  -- the vector space: embedding model, prefixes and input types (EmbeddingSettings.key)
    digest TEXT NOT NULL,  -- of the key and the passage text embedded (vectors.passage_digest)
    vector BLOB NOT NULL,  -- float32, little-endian, L2-normalised
    PRIMARY KEY (key, digest)
);
CREATE TABLE IF NOT EXISTS sentence_vectors (
    key    TEXT NOT NULL,     -- the vector space, as in vectors
    digest TEXT NOT NULL,     -- the passage's digest (vectors.passage_digest)
    count  INTEGER NOT NULL,  -- its sentences (textkit.sentences.passage_sentences of its text), one row each
    matrix BLOB NOT NULL,     -- float16, little-endian, count rows, L2-normalised
    PRIMARY KEY (key, digest)
);
CREATE TABLE IF NOT EXISTS word_documents (  -- the search copy (sqlite/words.py): what a search on disk reads
    collection  TEXT NOT NULL,
    doc_id      TEXT NOT NULL,
    title       TEXT NOT NULL,
    year        INTEGER,
    url         TEXT,
    kind        TEXT,
    language    TEXT,
    disclaimer  TEXT,
    metadata    TEXT NOT NULL,
    corpus      TEXT,           -- a bundled corpus document's fingerprint; NULL: a document of table documents
    title_stems TEXT NOT NULL,  -- its title's stems, space-separated (a title look-up)
    PRIMARY KEY (collection, doc_id)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS word_chunks (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,  -- never reused: a server keeps what it read by id
    collection  TEXT NOT NULL,
    doc_id      TEXT NOT NULL,
    chunk_index INTEGER NOT NULL,
    title       TEXT NOT NULL,
    section     TEXT NOT NULL,
    text        TEXT NOT NULL,
    url         TEXT,
    page        INTEGER,
    page_end    INTEGER,
    article     TEXT,           -- the article its section starts with (ranking.article_of)
    length      REAL NOT NULL,  -- as BM25 counts it (postings.ChunkTerms)
    terms       TEXT NOT NULL   -- JSON: stem -> [weighted count, impact of its posting]
);
CREATE UNIQUE INDEX IF NOT EXISTS word_chunks_key ON word_chunks (collection, doc_id, chunk_index);
CREATE INDEX IF NOT EXISTS word_chunks_article ON word_chunks (collection, article) WHERE article IS NOT NULL;
CREATE TABLE IF NOT EXISTS word_postings (
    collection TEXT NOT NULL,
    stem       TEXT NOT NULL,
    impact     REAL NOT NULL,
    chunk      INTEGER NOT NULL,
    PRIMARY KEY (collection, stem, impact DESC, chunk)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS word_stems (
    collection TEXT NOT NULL,
    stem       TEXT NOT NULL,
    df         INTEGER NOT NULL,
    PRIMARY KEY (collection, stem)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS word_stats (
    collection TEXT PRIMARY KEY,
    chunks     INTEGER NOT NULL,
    length     REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS word_tokens (
    token TEXT PRIMARY KEY,
    count INTEGER NOT NULL
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS word_pending (  -- documents changed since the search copy was brought up to date
    collection TEXT NOT NULL,
    doc_id     TEXT NOT NULL,
    PRIMARY KEY (collection, doc_id)
) WITHOUT ROWID;
CREATE TRIGGER IF NOT EXISTS word_added AFTER INSERT ON documents BEGIN
    INSERT OR IGNORE INTO word_pending VALUES (new.collection, new.doc_id);
END;
CREATE TRIGGER IF NOT EXISTS word_removed AFTER DELETE ON documents BEGIN
    INSERT OR IGNORE INTO word_pending VALUES (old.collection, old.doc_id);
END;
CREATE TRIGGER IF NOT EXISTS word_changed AFTER UPDATE ON documents BEGIN
    INSERT OR IGNORE INTO word_pending VALUES (old.collection, old.doc_id);
    INSERT OR IGNORE INTO word_pending VALUES (new.collection, new.doc_id);
END;
CREATE TABLE IF NOT EXISTS embedding_lease (
    id      INTEGER PRIMARY KEY CHECK (id = 1),
    holder  TEXT NOT NULL,  -- who is embedding this file's passages now (one process at a time)
    expires REAL NOT NULL   -- unix seconds; renewed with every batch written
);
"""

_TABLES = frozenset(re.findall(r"CREATE TABLE IF NOT EXISTS (\w+)", _SCHEMA))

# Columns added after a table was first written: a file without them is read (as NULL) and, when written, migrated
# (ALTER TABLE ... ADD COLUMN), so no index needs re-ingesting for them.
ADDED_COLUMNS = {
    "chunks": {"page": "INTEGER", "page_end": "INTEGER"},
    "documents": {"sha256": "TEXT", "ingested_at": "TEXT", "file_id": "TEXT", "source_name": "TEXT"},
}


class IndexSchemaError(RuntimeError):
    """The index file was written with another schema version."""


WAL_KEPT = 64 * 2**20  # bytes of the write-ahead log kept after a checkpoint: a large ingest's log is cut back to it


def connect(path: Path) -> sqlite3.Connection:
    """A read-write connection that waits up to ``TIMEOUT_S`` for another writer, deletes chunks with their
    document (foreign keys on) and cuts the write-ahead log back to ``WAL_KEPT`` once it is checkpointed (else the
    log of a folder ingested in one transaction stays as large as the library)."""
    connection = sqlite3.connect(path, timeout=TIMEOUT_S)
    connection.execute("PRAGMA foreign_keys = ON")
    connection.execute(f"PRAGMA journal_size_limit = {WAL_KEPT}")
    return connection


def connect_read_only(path: Path) -> sqlite3.Connection:
    """A connection that never writes the file (nor creates it)."""
    return sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)


def check_version(connection: sqlite3.Connection, path: Path) -> None:
    version = connection.execute("PRAGMA user_version").fetchone()[0]
    if version not in (0, SCHEMA_VERSION):
        raise IndexSchemaError(
            f"{path}: index schema version {version}, expected {SCHEMA_VERSION}; delete it (with its -wal and -shm "
            "files) and re-ingest"
        )


def prepare(connection: sqlite3.Connection, path: Path) -> None:
    """The file at ``path`` with every table and column of this schema and an epoch (``IndexSchemaError``: of
    another schema version).  The columns are added under the write lock, so processes preparing one file at
    once do not both add one."""
    check_version(connection, path)
    if _prepared(connection):
        return
    searched = has_table(connection, "word_pending")
    # Write-ahead log: searches read the file while a long ingest writes it (sqlite/search.py); without it a
    # transaction larger than the page cache locks every reader out until it commits.
    connection.execute("PRAGMA journal_mode = WAL")
    connection.executescript(_SCHEMA)
    with connection:
        connection.execute("BEGIN IMMEDIATE")
        if not searched:  # a file from before the search copy: every document waits for it (sqlite/words.py)
            connection.execute("INSERT OR IGNORE INTO word_pending SELECT collection, doc_id FROM documents")
        for table, added in ADDED_COLUMNS.items():
            present = columns(connection, table)
            for column, kind in added.items():
                if column not in present:
                    connection.execute(f"ALTER TABLE {table} ADD COLUMN {column} {kind}")
        connection.execute("INSERT OR IGNORE INTO meta (key, value) VALUES ('epoch', ?)", (secrets.randbits(62),))
        connection.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")


def _prepared(connection: sqlite3.Connection) -> bool:
    """Whether the file has every table and column and an epoch already (then preparing it writes nothing, so
    it need not wait for a writer's lock)."""
    tables = {row[0] for row in connection.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    if not _TABLES <= tables:
        return False
    if any(not added.keys() <= columns(connection, table) for table, added in ADDED_COLUMNS.items()):
        return False
    epoch = connection.execute("SELECT 1 FROM meta WHERE key = 'epoch'").fetchone()
    return epoch is not None and connection.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION


def columns(connection: sqlite3.Connection, table: str) -> set[str]:
    return {row[1] for row in connection.execute(f"PRAGMA table_info({table})")}


def has_table(connection: sqlite3.Connection, table: str) -> bool:
    found = connection.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (table,)).fetchone()
    return found is not None


def select(connection: sqlite3.Connection, table: str, names: str) -> str:
    """The column list for a SELECT, NULL for a column added after this file was written."""
    present = columns(connection, table)
    return ", ".join(c if c in present or c not in ADDED_COLUMNS.get(table, {}) else "NULL"
                     for c in (part.strip() for part in names.split(",")))


IN_SLICE = 500  # values of one ``IN (…)`` list per statement: SQLite limits a statement's parameters


def select_in(connection: sqlite3.Connection, sql: str, values: Sequence[object], before: Sequence[object] = ()
              ) -> Iterator[tuple]:
    """The rows of ``sql``, a statement ending in ``IN``, for the list of all ``values``: read in slices of
    ``IN_SLICE``, each with the parameters ``before`` ahead of its values."""
    for start in range(0, len(values), IN_SLICE):
        part = values[start:start + IN_SLICE]
        yield from connection.execute(f"{sql} ({', '.join('?' * len(part))})", (*before, *part))


def bump(connection: sqlite3.Connection, collections: Iterable[str]) -> None:
    """Count a change to what ``collections`` hold: the generation once, and each collection's own counter."""
    keys = ["generation", *(f"collection:{name}" for name in sorted(set(collections)))]
    connection.executemany(
        "INSERT INTO meta (key, value) VALUES (?, 1) ON CONFLICT (key) DO UPDATE SET value = value + 1",
        [(key,) for key in keys],
    )


def generation(connection: sqlite3.Connection) -> int:
    """The change counter; 0 for a file written before the ``meta`` table existed."""
    if not has_table(connection, "meta"):
        return 0
    row = connection.execute("SELECT value FROM meta WHERE key = 'generation'").fetchone()
    return int(row[0]) if row is not None else 0


def collection_versions(connection: sqlite3.Connection) -> dict[str, str]:
    """Per collection whose contents this code changed: ``"<count>.<epoch>"``, a string that changes whenever
    what the collection holds changes (a collection's count only grows, also across its deletion)."""
    if not has_table(connection, "meta"):
        return {}
    rows = dict(connection.execute("SELECT key, value FROM meta WHERE key = 'epoch' OR key LIKE 'collection:%'"))
    epoch = int(rows.pop("epoch", 0))
    return {key.removeprefix("collection:"): f"{value}.{epoch:x}" for key, value in rows.items()}
