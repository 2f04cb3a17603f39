"""Copying a library from the SQLite file into PostgreSQL (``python -m docserver copy --to URL``): what someone
moving to the database keeps.

Everything the file holds of its own: the documents ingested or uploaded (with the file each was read from: its
path, name and sha256, so an ingest of the same folder skips what is unchanged), the original files with their
bytes and purpose, the collections created (with their display names and metadata) and the attachments of files
to collections.  The bundled corpus is not copied: every server keeps it in step itself.  Copying again replaces
what an earlier copy wrote (the same ids); the documents are stamped with the time of the copy.
"""

import json
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path

from psycopg.types.json import Jsonb

from .. import schema as file_schema
from ..library import Library
from ..store import SourceFile, list_stored, read_snapshot, resolve_index_path
from .library import PostgresLibrary

__all__ = ["Copied", "copy_library"]

BATCH = 200  # documents per save


@dataclass(frozen=True, slots=True)
class Copied:
    documents: int
    files: int
    collections: int
    attachments: int


def copy_library(index_path: Path | str | None, url: str) -> Copied:
    """The library of the SQLite file at ``index_path`` copied into the database at ``url``."""
    path = resolve_index_path(index_path)
    if not path.is_file():
        raise FileNotFoundError(f"no index file {path}")
    source = Library(path)
    with closing(file_schema.connect_read_only(path)) as db:
        created = db.execute("SELECT name, display_name, created_at, metadata FROM collections").fetchall()
        attachments = db.execute("SELECT collection, file_id, status, doc_id, last_error, created_at, chunks "
                                 "FROM attachments ORDER BY created_at, rowid").fetchall()
    files = source.files()
    target = PostgresLibrary(url)
    try:
        db = target._db
        with db.transaction():
            for stored in reversed(files):  # oldest first
                bytes_path = source.file_path(stored.id)
                if bytes_path is not None:
                    db.execute("INSERT INTO files (id, filename, bytes, created_at, purpose, sha256, content) VALUES "
                               "(%s, %s, %s, %s, %s, %s, %s) ON CONFLICT (id) DO NOTHING",
                               (stored.id, stored.filename, stored.bytes, stored.created_at, stored.purpose,
                                stored.sha256, bytes_path.read_bytes()))
            for name, display, created_at, metadata in created:
                db.execute("INSERT INTO collections (name, display_name, created_at, metadata) VALUES (%s, %s, %s, %s) "
                           "ON CONFLICT (name) DO UPDATE SET display_name = excluded.display_name, created_at = "
                           "excluded.created_at, metadata = excluded.metadata, bundled = false",
                           (name, display, created_at, Jsonb(json.loads(metadata))))
        documents = _copy_documents(path, target)
        with db.transaction():
            for row in attachments:
                db.execute("INSERT INTO attachments (collection, file_id, status, doc_id, last_error, created_at, "
                           "chunks) VALUES (%s, %s, %s, %s, %s, %s, %s) ON CONFLICT DO NOTHING", row)
    finally:
        target.close()
    return Copied(documents, len(files), len(created), len(attachments))


def _copy_documents(path: Path, target: PostgresLibrary) -> int:
    """Every document of the file saved into the database with the record of the file it came from."""
    stored = {(d.collection, d.doc_id): d for d in list_stored(path)}
    documents = read_snapshot(path).documents
    for start in range(0, len(documents), BATCH):
        pairs = []
        for doc in documents[start:start + BATCH]:
            record = stored.get((doc.collection, doc.doc_id))
            source = (SourceFile(record.source, record.sha256, record.name, record.file_id)
                      if record is not None and record.source and record.sha256 else None)
            pairs.append((doc, source))
        target.store.save(pairs)
    return len(documents)
