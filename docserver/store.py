"""The persisted index: ingested documents and their chunks in one SQLite file.

Where: ``--index PATH``, else ``$DOCSERVER_INDEX``, else
``$XDG_CACHE_HOME/neo-nl/docserver.sqlite3`` (``~/.cache/neo-nl/...``).

Only parsed documents and chunks are stored; the BM25 statistics are rebuilt
in memory at start-up (they depend on the whole corpus, including the
bundled one, and take well under a second), so a restart re-reads this file
but never re-parses a source file.  Documents are keyed by
(collection, doc_id): saving a document again replaces all its chunks.
"""

import json
import os
import sqlite3
from collections.abc import Iterable
from contextlib import closing
from pathlib import Path

from .corpus import Chunk, Document

__all__ = ["INDEX_ENV", "DocumentStore", "load_documents", "resolve_index_path"]

INDEX_ENV = "DOCSERVER_INDEX"
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
    PRIMARY KEY (collection, doc_id, chunk_index),
    FOREIGN KEY (collection, doc_id) REFERENCES documents (collection, doc_id) ON DELETE CASCADE
);
"""


def resolve_index_path(index_path: Path | str | None = None) -> Path:
    """``index_path``, else ``$DOCSERVER_INDEX``, else the per-user cache location."""
    if index_path is not None and str(index_path):
        return Path(index_path).expanduser()
    if os.environ.get(INDEX_ENV):
        return Path(os.environ[INDEX_ENV]).expanduser()
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return cache / "neo-nl" / "docserver.sqlite3"


def _check_version(connection: sqlite3.Connection, path: Path) -> None:
    version = connection.execute("PRAGMA user_version").fetchone()[0]
    if version not in (0, SCHEMA_VERSION):
        raise RuntimeError(
            f"{path}: index schema version {version}, expected {SCHEMA_VERSION}; delete it and re-ingest"
        )


def _read(connection: sqlite3.Connection) -> list[Document]:
    chunks: dict[tuple[str, str], list[Chunk]] = {}
    for doc_id, collection, *fields in connection.execute(
        "SELECT doc_id, collection, chunk_index, title, section, text, url FROM chunks "
        "ORDER BY collection, doc_id, chunk_index"
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


def load_documents(index_path: Path | str | None = None) -> list[Document]:
    """Every stored document, or ``[]`` when the index file does not exist (it is never created here)."""
    path = resolve_index_path(index_path)
    if not path.is_file():
        return []
    with closing(sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)) as connection:
        _check_version(connection, path)
        return _read(connection)


class DocumentStore:
    """Read-write access to the index file, created (with its folder) when missing."""

    def __init__(self, index_path: Path | str | None = None) -> None:
        self.path = resolve_index_path(index_path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(self.path)
        self._db.execute("PRAGMA foreign_keys = ON")
        _check_version(self._db, self.path)
        self._db.executescript(_SCHEMA)
        self._db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
        self._db.commit()

    def save(self, documents: Iterable[tuple[Document, str | None]]) -> None:
        """Store ``(document, source file)`` pairs in one transaction, replacing earlier versions."""
        with self._db as db:  # commits, or rolls back on an exception
            for doc, source in documents:
                db.execute("DELETE FROM documents WHERE collection = ? AND doc_id = ?", (doc.collection, doc.doc_id))
                db.execute(
                    "INSERT INTO documents VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
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
                        source,
                    ),
                )
                db.executemany(
                    "INSERT INTO chunks VALUES (?, ?, ?, ?, ?, ?, ?)",
                    [(c.collection, c.doc_id, c.chunk_index, c.title, c.section, c.text, c.url) for c in doc.chunks],
                )

    def documents(self) -> list[Document]:
        return _read(self._db)

    def close(self) -> None:
        self._db.close()

    def __enter__(self) -> "DocumentStore":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
