"""The persisted index: ingested documents and their chunks in one SQLite file.

Where: ``--index PATH``, else ``$DOCSERVER_INDEX``, else a default that depends on how the package
is installed:

* in a source checkout (the ``docserver`` package directory has the project's ``pyproject.toml``
  beside it, as with ``pip install -e .`` or running from the repository): ``<checkout>/data/docserver.sqlite3``,
  so every checkout of the project has its own index (``data/`` is git-ignored);
* installed into site-packages (``pip install .``, no ``pyproject.toml`` beside the package):
  ``$XDG_CACHE_HOME/neo-nl/docserver.sqlite3`` (``~/.cache/neo-nl/...``), since site-packages is no
  place for data.  (The Docker image installs the package but also keeps the sources in its working
  directory, which ``python -m`` imports first; docker-compose sets ``DOCSERVER_INDEX`` to a volume.)

Only parsed documents and chunks are stored; the BM25 statistics are built in memory at start-up and brought up
to date whenever a running server sees the file change (only the documents that changed are indexed again:
``Index(..., previous=...)``), so a restart re-reads this file but never re-parses a source file.  Documents are keyed by
(collection, doc_id): saving a document again replaces all its chunks.  Each document records the file it came
from, the sha256 of that file's bytes and when it was stored, so an ingest can skip a file it has stored
unchanged (``stored_sources``) and ``python -m docserver list`` can say what is in the file (``list_stored``).

Every save and every removal also bumps a generation counter (table ``meta``) in the same transaction, so a running
server can tell cheaply that another process changed the file (``index_version``, ``live.py``).
The table was added without a schema version change: files written before it work as generation 0,
and code from before it reads (and writes) files that have it.
"""

import json
import os
import sqlite3
from collections.abc import Iterable, Sequence
from contextlib import closing
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from stat import S_ISREG

from .corpus import Chunk, Document

__all__ = [
    "INDEX_ENV",
    "DocumentStore",
    "IndexSchemaError",
    "IndexVersion",
    "SourceFile",
    "StoredDocument",
    "default_index_path",
    "index_version",
    "list_stored",
    "load_documents",
    "load_snapshot",
    "resolve_index_path",
    "stored_sources",
]

INDEX_ENV = "DOCSERVER_INDEX"
INDEX_FILE = "docserver.sqlite3"
PACKAGE_DIR = Path(__file__).resolve().parent
SCHEMA_VERSION = 1
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
    value INTEGER NOT NULL  -- 'generation': bumped by every save and removal
);
"""
_BUMP_GENERATION = (
    "INSERT INTO meta (key, value) VALUES ('generation', 1) ON CONFLICT (key) DO UPDATE SET value = value + 1"
)


def default_index_path(package_dir: Path = PACKAGE_DIR) -> Path:
    """``<checkout>/data/docserver.sqlite3`` when ``package_dir`` sits in a source checkout (``pyproject.toml``
    beside it), else the per-user cache location (an installed package: see the module docstring)."""
    root = package_dir.parent
    if (root / "pyproject.toml").is_file():
        return root / "data" / INDEX_FILE
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return cache / "neo-nl" / INDEX_FILE


def resolve_index_path(index_path: Path | str | None = None) -> Path:
    """``index_path``, else ``$DOCSERVER_INDEX``, else ``default_index_path()``."""
    if index_path is not None and str(index_path):
        return Path(index_path).expanduser()
    if os.environ.get(INDEX_ENV):
        return Path(os.environ[INDEX_ENV]).expanduser()
    return default_index_path()


@dataclass(frozen=True, slots=True)
class IndexVersion:
    """What changes whenever the documents in an index file change.

    The generation alone would miss a writer from before the ``meta`` table and a file deleted and
    written anew (its count starts again at 1); the file's identity, size and mtime alone would miss
    two saves within one tick of a coarse file-system clock.  Together they miss neither.
    """

    device: int
    inode: int
    size: int
    mtime_ns: int
    generation: int


class IndexSchemaError(RuntimeError):
    """The index file was written with another schema version."""


def _check_version(connection: sqlite3.Connection, path: Path) -> None:
    version = connection.execute("PRAGMA user_version").fetchone()[0]
    if version not in (0, SCHEMA_VERSION):
        raise IndexSchemaError(
            f"{path}: index schema version {version}, expected {SCHEMA_VERSION}; delete it and re-ingest"
        )


# Columns added after a table was first written: a file without them is read (as NULL) and, when written, migrated
# (ALTER TABLE ... ADD COLUMN), so no index needs re-ingesting for them.
_ADDED_COLUMNS = {
    "chunks": {"page": "INTEGER", "page_end": "INTEGER"},
    "documents": {"sha256": "TEXT", "ingested_at": "TEXT"},
}


def _columns(connection: sqlite3.Connection, table: str) -> set[str]:
    return {row[1] for row in connection.execute(f"PRAGMA table_info({table})")}


def _migrate(connection: sqlite3.Connection) -> None:
    for table, added in _ADDED_COLUMNS.items():
        present = _columns(connection, table)
        for column, kind in added.items():
            if column not in present:
                connection.execute(f"ALTER TABLE {table} ADD COLUMN {column} {kind}")


def _select(connection: sqlite3.Connection, table: str, columns: str) -> str:
    """The column list for a SELECT, NULL for a column added after this file was written."""
    present = _columns(connection, table)
    return ", ".join(c if c in present or c not in _ADDED_COLUMNS.get(table, {}) else "NULL"
                     for c in (part.strip() for part in columns.split(",")))


def _read(connection: sqlite3.Connection) -> list[Document]:
    chunks: dict[tuple[str, str], list[Chunk]] = {}
    columns = _select(connection, "chunks", "doc_id, collection, chunk_index, title, section, text, url, page, page_end")
    for doc_id, collection, *fields in connection.execute(
        f"SELECT {columns} FROM chunks ORDER BY collection, doc_id, chunk_index"
    ):
        chunks.setdefault((collection, doc_id), []).append(Chunk(doc_id, collection, *fields))
    return [
        Document(
            doc_id=doc_id,
            collection=collection,
            title=title,
            chunks=tuple(chunks.get((collection, doc_id), ())),
            year=year,
            url=url,
            kind=kind,
            language=language,
            disclaimer=disclaimer,
            metadata=json.loads(metadata),
        )
        for collection, doc_id, title, year, url, kind, language, disclaimer, metadata in connection.execute(
            "SELECT collection, doc_id, title, year, url, kind, language, disclaimer, metadata FROM documents "
            "ORDER BY collection, doc_id"
        )
    ]


def _connect_read_only(path: Path) -> sqlite3.Connection:
    return sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)


def _generation(connection: sqlite3.Connection) -> int:
    """The save counter; 0 for a file written before the ``meta`` table existed."""
    has_meta = connection.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'meta'").fetchone()
    if has_meta is None:
        return 0
    row = connection.execute("SELECT value FROM meta WHERE key = 'generation'").fetchone()
    return int(row[0]) if row is not None else 0


def _stat(path: Path) -> os.stat_result | None:
    """The file's stat, or None when there is no index file (nothing ingested yet)."""
    try:
        stat = path.stat()
    except FileNotFoundError:
        return None
    return stat if S_ISREG(stat.st_mode) else None


def _version(stat: os.stat_result, generation: int) -> IndexVersion:
    return IndexVersion(stat.st_dev, stat.st_ino, stat.st_size, stat.st_mtime_ns, generation)


def index_version(index_path: Path | str | None = None) -> IndexVersion | None:
    """The current version of the index file, or ``None`` when it does not exist: a stat and one tiny
    query, cheap enough to ask every second (it may wait briefly while a writer commits)."""
    path = resolve_index_path(index_path)
    stat = _stat(path)
    if stat is None:
        return None
    with closing(_connect_read_only(path)) as connection:
        return _version(stat, _generation(connection))


def load_snapshot(index_path: Path | str | None = None) -> tuple[IndexVersion | None, list[Document]]:
    """Every stored document and the version they are of: ``(None, [])`` when the file does not exist
    (it is never created here).

    The file is stat-ed before the documents and the generation are read, in one read transaction:
    a save that lands in between makes the version look older than the documents, which costs at
    most one needless reload, never a missed one.
    """
    path = resolve_index_path(index_path)
    stat = _stat(path)
    if stat is None:
        return None, []
    with closing(_connect_read_only(path)) as connection:
        _check_version(connection, path)
        connection.execute("BEGIN")  # one snapshot for the generation and the documents
        generation, documents = _generation(connection), _read(connection)
        connection.rollback()
    return _version(stat, generation), documents


def load_documents(index_path: Path | str | None = None) -> list[Document]:
    """Every stored document, or ``[]`` when the index file does not exist (it is never created here)."""
    return load_snapshot(index_path)[1]


@dataclass(frozen=True, slots=True)
class SourceFile:
    """The file a document was read from: its absolute path as named (a symlink not resolved: its name is what the
    doc_id comes from) and the sha256 of its bytes (hex)."""

    path: str
    sha256: str


@dataclass(frozen=True, slots=True)
class StoredDocument:
    """What ``python -m docserver list`` shows of a stored document, without reading its chunks' text.

    ``source``, ``sha256`` and ``ingested_at`` are None for a document saved without a source file, and the last
    two for one saved before those columns existed."""

    collection: str
    doc_id: str
    title: str
    kind: str | None
    pages: int | None  # of a paged source (PDF)
    chunks: int
    source: str | None
    sha256: str | None
    ingested_at: str | None


def _pages(metadata: str) -> int | None:
    """The page count a PDF reader recorded in the document's metadata (a string of digits), else None."""
    pages = json.loads(metadata).get("pages")
    return int(pages) if isinstance(pages, str) and pages.isdigit() else None


def _stored(connection: sqlite3.Connection, collection: str | None) -> list[StoredDocument]:
    columns = _select(connection, "documents", "collection, doc_id, title, kind, metadata, source, sha256, ingested_at")
    rows = connection.execute(
        f"SELECT {columns}, (SELECT COUNT(*) FROM chunks c "
        "WHERE c.collection = documents.collection AND c.doc_id = documents.doc_id) "
        "FROM documents WHERE ?1 IS NULL OR collection = ?1 ORDER BY collection, doc_id",
        (collection,),
    )
    return [
        StoredDocument(name, doc_id, title, kind, _pages(metadata), chunks, source, sha256, ingested_at)
        for name, doc_id, title, kind, metadata, source, sha256, ingested_at, chunks in rows
    ]


def list_stored(index_path: Path | str | None = None, collection: str | None = None) -> list[StoredDocument]:
    """The stored documents (of ``collection``, else all), by collection and doc_id; ``[]`` when the index file
    does not exist (it is never created here)."""
    path = resolve_index_path(index_path)
    if _stat(path) is None:
        return []
    with closing(_connect_read_only(path)) as connection:
        _check_version(connection, path)
        return _stored(connection, collection)


def stored_sources(index_path: Path | str | None, collection: str) -> dict[tuple[str, str], StoredDocument]:
    """The documents of ``collection`` stored with a content hash, by (file name, sha256) of their source file.

    A document's doc_id and text follow from its file's name and bytes alone, so a file with the same name and
    sha256 as a stored document's source would be read into that same document again (as long as the readers
    do not change: ``ingest --force`` re-reads).  ``{}`` when the index file does not exist (not created here).
    """
    return {(Path(d.source).name, d.sha256): d for d in list_stored(index_path, collection) if d.source and d.sha256}


def _locate(connection: sqlite3.Connection, doc_ids: Sequence[str], collection: str | None) -> list[tuple[str, str]]:
    """The (collection, doc_id) of each of ``doc_ids``, or ``ValueError`` naming the unknown and ambiguous ones."""
    keys: list[tuple[str, str]] = []
    unknown: list[str] = []
    ambiguous: list[str] = []
    for doc_id in dict.fromkeys(doc_ids):
        holders = [row[0] for row in connection.execute(
            "SELECT collection FROM documents WHERE doc_id = ?1 AND (?2 IS NULL OR collection = ?2) ORDER BY collection",
            (doc_id, collection),
        )]
        if not holders:
            unknown.append(repr(doc_id))
        elif len(holders) > 1:
            ambiguous.append(f"{doc_id!r} is in collections {', '.join(holders)}")
        else:
            keys.append((holders[0], doc_id))
    problems = []
    if unknown:
        where = f"in collection {collection!r}" if collection is not None else "in the index"
        problems.append(f"no document {', '.join(unknown)} {where}")
    if ambiguous:
        problems.append("; ".join(ambiguous) + ": name the collection")
    if problems:
        raise ValueError("; ".join(problems))
    return keys


class DocumentStore:
    """Read-write access to the index file, created (with its folder) when missing."""

    def __init__(self, index_path: Path | str | None = None) -> None:
        self.path = resolve_index_path(index_path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(self.path)
        self._db.execute("PRAGMA foreign_keys = ON")
        _check_version(self._db, self.path)
        self._db.executescript(_SCHEMA)
        _migrate(self._db)
        self._db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
        self._db.commit()

    def save(self, documents: Iterable[tuple[Document, SourceFile | None]]) -> None:
        """Store ``(document, source file)`` pairs in one transaction, replacing earlier versions, and
        bump the generation in the same transaction (running servers reload on it, see ``live.py``).
        Each document is stamped with the time of this save (UTC)."""
        ingested_at = datetime.now(UTC).isoformat(timespec="seconds")
        with self._db as db:  # commits, or rolls back on an exception
            db.execute(_BUMP_GENERATION)
            for doc, source in documents:
                db.execute("DELETE FROM documents WHERE collection = ? AND doc_id = ?", (doc.collection, doc.doc_id))
                db.execute(
                    "INSERT INTO documents (collection, doc_id, title, year, url, kind, language, disclaimer, "
                    "metadata, source, sha256, ingested_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (
                        doc.collection,
                        doc.doc_id,
                        doc.title,
                        doc.year,
                        doc.url,
                        doc.kind,
                        doc.language,
                        doc.disclaimer,
                        json.dumps(dict(doc.metadata), ensure_ascii=False, sort_keys=True),
                        source.path if source else None,
                        source.sha256 if source else None,
                        ingested_at,
                    ),
                )
                db.executemany(
                    "INSERT INTO chunks (collection, doc_id, chunk_index, title, section, text, url, page, page_end) "
                    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    [(c.collection, c.doc_id, c.chunk_index, c.title, c.section, c.text, c.url, c.page, c.page_end)
                     for c in doc.chunks],
                )

    def remove(self, doc_ids: Sequence[str], collection: str | None = None) -> list[tuple[str, str]]:
        """Delete the documents ``doc_ids`` (of ``collection``, else of whichever collection holds each) with
        their chunks, bumping the generation in the same transaction; the (collection, doc_id) pairs removed.

        All or nothing: ``ValueError`` naming every doc_id that is not stored, or (without ``collection``) that
        several collections hold, and then nothing is removed."""
        with self._db as db:  # commits, or rolls back on an exception
            db.execute("BEGIN IMMEDIATE")  # the look-ups and the deletes see one state of the file
            keys = _locate(db, doc_ids, collection)
            db.execute(_BUMP_GENERATION)
            db.executemany("DELETE FROM documents WHERE collection = ? AND doc_id = ?", keys)  # chunks cascade
        return keys

    def documents(self) -> list[Document]:
        return _read(self._db)

    def generation(self) -> int:
        """How many saves this file has seen since the generation counter was added."""
        return _generation(self._db)

    def close(self) -> None:
        self._db.close()

    def __enter__(self) -> "DocumentStore":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
