"""The document library of the service's Files and Vector Stores API, in PostgreSQL: the calls of
``docserver.library.Library`` with the same answers, over the database every replica shares.

Files keep their bytes in the database (table ``files``); the service serves a file from a copy it writes once
per id into a local cache folder (a file's bytes never change under its id).  Documents read from a file are
saved and removed through ``store.PostgresStore`` (postings, statistics, the change counted), in the transaction
that records the attachment, under the writers' lock: any replica may read a file in while another searches.
"""

import functools
import os
import secrets
import tempfile
import threading
import time
from collections.abc import Callable
from datetime import datetime
from pathlib import Path

from psycopg.types.json import Jsonb

from textkit.untrusted import plain

from ..documents import Document
from ..ingest import COLLECTION_NAME, file_sha256, with_id
from ..library import FILE_ID, Attachment, CollectionInfo, StoredFile, cancelled, free_id
from ..store import SourceFile, resolve_index_path
from . import schema
from .store import PostgresStore

__all__ = ["PostgresLibrary"]

_FILE = "SELECT id, filename, bytes, created_at, purpose, sha256 FROM files"
_ATTACHMENT = ("SELECT a.collection, a.file_id, a.status, a.created_at, a.doc_id, a.last_error, a.chunks, "
               "COALESCE(f.bytes, 0) FROM attachments a LEFT JOIN files f ON f.id = a.file_id")
_KEYS = "CREATE TABLE IF NOT EXISTS keys (name text PRIMARY KEY, value bytea NOT NULL)"


def _serialized(method: Callable) -> Callable:
    """One call at a time on the library's connection (the service calls it from worker threads)."""
    @functools.wraps(method)
    def call(self: "PostgresLibrary", *args: object, **kwargs: object) -> object:
        with self._lock:
            return method(self, *args, **kwargs)
    return call


def _unix(iso: str | None) -> int:
    return int(datetime.fromisoformat(iso).timestamp()) if iso else 0


class PostgresLibrary:
    """Read-write access to the library in the database at ``url`` (the service's uploads)."""

    def __init__(self, url: str, cache: Path | None = None) -> None:
        """``cache``: where the copies served and the uploads being written are kept (default: ``files-cache/``
        beside where the index file would be, ``store.resolve_index_path``: a volume in Docker)."""
        self.url = url
        self.store = PostgresStore(url)
        self._db = self.store._db
        self.cache = cache if cache is not None else resolve_index_path().parent / "files-cache"
        self._lock = threading.RLock()
        with self._db.transaction():
            self._db.execute(_KEYS)
        self.incoming()

    @_serialized
    def close(self) -> None:
        self.store.close()

    def _write_lock(self) -> None:
        self._db.execute("SELECT pg_advisory_xact_lock(%s)", (schema.WRITE_LOCK,))

    @_serialized
    def key(self, name: str) -> bytes:
        """A random key kept in the database (made at first use): one for every replica on it."""
        with self._db.transaction():
            self._db.execute("INSERT INTO keys (name, value) VALUES (%s, %s) ON CONFLICT (name) DO NOTHING",
                             (name, secrets.token_bytes(32)))
            return bytes(self._db.execute("SELECT value FROM keys WHERE name = %s", (name,)).fetchone()[0])

    # --- files ------------------------------------------------------------------------------------------------------

    def incoming(self) -> Path:
        """A folder to write an upload to before ``add_file`` takes it."""
        self.cache.mkdir(parents=True, exist_ok=True, mode=0o700)  # copies of users' files: the owner's only
        folder = self.cache / "incoming"
        folder.mkdir(exist_ok=True, mode=0o700)
        return folder

    @_serialized
    def add_file(self, written: Path, filename: str, purpose: str) -> StoredFile:
        """Keep the file ``written`` (in ``incoming()``; its bytes go into the database, the file is deleted) under a
        new random id.  ``ValueError`` for a file outside ``incoming()``."""
        written = Path(written)
        if written.resolve().parent != self.incoming().resolve() or not written.is_file():
            raise ValueError(f"not a file in the incoming folder {self.incoming()}: {written}")
        content = written.read_bytes()
        with written.open("rb") as stream:
            sha256 = file_sha256(stream)
        stored = StoredFile(f"file-{secrets.token_hex(12)}", plain(filename) or "upload", len(content),
                            int(time.time()), plain(purpose), sha256)
        with self._db.transaction():
            self._db.execute("INSERT INTO files (id, filename, bytes, created_at, purpose, sha256, content) "
                             "VALUES (%s, %s, %s, %s, %s, %s, %s)", (*_row(stored), content))
        written.unlink(missing_ok=True)
        return stored

    @_serialized
    def files(self) -> list[StoredFile]:
        return [StoredFile(*row) for row in self._db.execute(f"{_FILE} ORDER BY created_at DESC, position DESC")]

    @_serialized
    def file(self, file_id: str) -> StoredFile | None:
        if not FILE_ID.fullmatch(file_id):
            return None
        row = self._db.execute(f"{_FILE} WHERE id = %s", (file_id,)).fetchone()
        return StoredFile(*row) if row is not None else None

    @_serialized
    def file_path(self, file_id: str) -> Path | None:
        """A local copy of the file's bytes (written once per id); None for an unknown id."""
        if not FILE_ID.fullmatch(file_id):
            return None
        path = self.cache / file_id
        if path.is_file():
            return path
        row = self._db.execute("SELECT content FROM files WHERE id = %s", (file_id,)).fetchone()
        if row is None:
            return None
        handle, name = tempfile.mkstemp(dir=self.incoming(), prefix="copy-")
        with os.fdopen(handle, "wb") as out:
            out.write(row[0])
        os.replace(name, path)  # whole or not at all, even with another process writing the same copy
        return path

    @_serialized
    def file_collections(self, file_id: str) -> list[str]:
        rows = self._db.execute("SELECT collection FROM attachments WHERE file_id = %(f)s UNION "
                                "SELECT collection FROM documents WHERE file_id = %(f)s ORDER BY 1", {"f": file_id})
        return [row[0] for row in rows]

    @_serialized
    def delete_file(self, file_id: str) -> bool:
        """Delete the file, its attachments and the documents read from it; False when the library has none."""
        if not FILE_ID.fullmatch(file_id):
            return False
        with self._db.transaction():
            self._write_lock()
            documents = self.store.remove_where("file_id = %s", (file_id,))
            deleted = sum(self._db.execute(f"DELETE FROM {table} WHERE {column} = %s", (file_id,)).rowcount
                          for table, column in (("attachments", "file_id"), ("files", "id")))
        (self.cache / file_id).unlink(missing_ok=True)
        return bool(documents) or deleted > 0

    # --- collections ------------------------------------------------------------------------------------------------

    def _exists(self, name: str) -> bool:
        """Whether the library has ``name``: created, or holding an ingested document (the bundled corpus's
        collections are not the library's, as with the SQLite file)."""
        return self._db.execute("SELECT 1 FROM collections WHERE name = %(n)s AND NOT bundled UNION ALL "
                                "SELECT 1 FROM documents WHERE collection = %(n)s AND corpus IS NULL LIMIT 1",
                                {"n": name}).fetchone() is not None

    @_serialized
    def create_collection(self, name: str, display_name: str | None = None,
                          metadata: dict[str, str] | None = None) -> CollectionInfo:
        """A new, empty collection (``ValueError``: an invalid name or metadata; ``FileExistsError``: it exists)."""
        if not COLLECTION_NAME.match(name):
            raise ValueError(f"invalid collection name {name!r}")
        pairs = (metadata or {}).items()
        if not all(isinstance(key, str) and isinstance(value, str) for key, value in pairs):
            raise ValueError("collection metadata maps strings to strings")
        with self._db.transaction():
            self._write_lock()
            if self._exists(name):
                raise FileExistsError(f"collection {name!r} exists")
            self._db.execute("INSERT INTO collections (name, display_name, created_at, metadata) VALUES "
                             "(%s, %s, %s, %s) ON CONFLICT (name) DO UPDATE SET display_name = excluded.display_name, "
                             "created_at = excluded.created_at, metadata = excluded.metadata, bundled = false",
                             (name, plain(display_name) or name, int(time.time()),
                              Jsonb({plain(k): plain(v) for k, v in pairs})))
            schema.bump(self._db, [name])
        return self._infos(name)[0]

    @_serialized
    def collections(self) -> list[CollectionInfo]:
        return self._infos(None)

    @_serialized
    def collection(self, name: str) -> CollectionInfo | None:
        found = self._infos(name)
        return found[0] if found else None

    def _infos(self, name: str | None) -> list[CollectionInfo]:
        """The collections created (not the bundled corpus's) or holding ingested documents, by name."""
        created = {row[0]: row[1:] for row in self._db.execute(
            "SELECT name, display_name, created_at, metadata FROM collections WHERE NOT bundled "
            "AND (%(n)s::text IS NULL OR name = %(n)s)", {"n": name})}
        held = {row[0]: row[1:] for row in self._db.execute(
            "SELECT d.collection, count(*), COALESCE(sum(f.bytes), 0), min(d.ingested_at), "
            "sum((SELECT count(*) FROM chunks c WHERE c.document = d.id)) FROM documents d "
            "LEFT JOIN files f ON f.id = d.file_id WHERE d.corpus IS NULL AND (%(n)s::text IS NULL OR "
            "d.collection = %(n)s) GROUP BY d.collection", {"n": name})}
        versions = schema.collection_versions(schema.counters(self._db))
        infos = []
        for key in sorted(created.keys() | held.keys()):
            display, created_at, metadata = created.get(key, (key, None, {}))
            documents, size, first, chunks = held.get(key, (0, 0, None, 0))
            infos.append(CollectionInfo(key, display, _unix(first) if created_at is None else created_at, documents,
                                        int(chunks), int(size), dict(metadata), versions.get(key, "")))
        return infos

    @_serialized
    def delete_collection(self, name: str) -> bool:
        """Delete the collection with its documents and attachments; False when there is no such collection."""
        with self._db.transaction():
            self._write_lock()
            if not self._exists(name):
                return False
            self.store.remove_where("collection = %s AND corpus IS NULL", (name,))
            self._db.execute("DELETE FROM attachments WHERE collection = %s", (name,))
            self._db.execute("DELETE FROM collections WHERE name = %s AND NOT bundled", (name,))
            schema.bump(self._db, [name])
        return True

    # --- attachments ------------------------------------------------------------------------------------------------

    @_serialized
    def attach(self, collection: str, file_id: str) -> Attachment:
        """Attach the file to the collection (in_progress); ``KeyError``: an unknown collection or file."""
        with self._db.transaction():
            self._write_lock()
            if not self._exists(collection):
                raise KeyError(f"no collection {collection!r}")
            if self._db.execute("SELECT 1 FROM files WHERE id = %s", (file_id,)).fetchone() is None:
                raise KeyError(f"no file {file_id!r}")
            self._db.execute("INSERT INTO attachments (collection, file_id, status, created_at) VALUES "
                             "(%s, %s, 'in_progress', %s) ON CONFLICT DO NOTHING", (collection, file_id,
                                                                                    int(time.time())))
            found = self.attachment(collection, file_id)
        assert found is not None
        return found

    @_serialized
    def attachments(self, collection: str) -> list[Attachment]:
        rows = self._db.execute(f"{_ATTACHMENT} WHERE a.collection = %s ORDER BY a.created_at, a.position",
                                (collection,))
        return [Attachment(*row) for row in rows]

    @_serialized
    def attachment(self, collection: str, file_id: str) -> Attachment | None:
        row = self._db.execute(f"{_ATTACHMENT} WHERE a.collection = %s AND a.file_id = %s",
                               (collection, file_id)).fetchone()
        return Attachment(*row) if row is not None else None

    @_serialized
    def detach(self, collection: str, file_id: str) -> bool:
        """Detach the file from the collection and remove the document read from it; False when not attached."""
        with self._db.transaction():
            self._write_lock()
            found = self.attachment(collection, file_id)
            if found is None:
                return False
            self._db.execute("DELETE FROM attachments WHERE collection = %s AND file_id = %s", (collection, file_id))
            self._drop_document(found)
        return True

    def _drop_document(self, attached: Attachment) -> None:
        if attached.doc_id is not None:
            self.store.remove_where("collection = %s AND doc_id = %s AND file_id = %s",
                                    (attached.collection, attached.doc_id, attached.file_id))

    @_serialized
    def completed(self, doc: Document, source: SourceFile, attached: Attachment) -> Attachment:
        """Store the document read from an attachment's file and record it completed, unless it was detached
        meanwhile (then cancelled, nothing stored)."""
        with self._db.transaction():
            self._write_lock()
            now = self.attachment(attached.collection, attached.file_id)
            if now is None:
                return cancelled(attached)
            doc = with_id(doc, now.doc_id or free_id(doc.doc_id, now.file_id, self._holder(now.collection)))
            self.store.save([(doc, source)])
            self._db.execute("UPDATE attachments SET status = 'completed', doc_id = %s, chunks = %s, last_error = NULL "
                             "WHERE collection = %s AND file_id = %s", (doc.doc_id, len(doc.chunks), now.collection,
                                                                        now.file_id))
            return self.attachment(now.collection, now.file_id) or cancelled(now)

    def _holder(self, collection: str) -> Callable[[str], tuple[str | None] | None]:
        """The file id of the document of ``collection`` with a given doc_id, as a row (None: no such document)."""
        return lambda doc_id: self._db.execute("SELECT file_id FROM documents WHERE collection = %s AND doc_id = %s",
                                               (collection, doc_id)).fetchone()

    @_serialized
    def fail(self, collection: str, file_id: str, reason: str) -> Attachment | None:
        with self._db.transaction():
            self._write_lock()
            now = self.attachment(collection, file_id)
            if now is None:
                return None
            self._drop_document(now)
            self._db.execute("UPDATE attachments SET status = 'failed', doc_id = NULL, chunks = 0, last_error = %s "
                             "WHERE collection = %s AND file_id = %s", (plain(reason), collection, file_id))
            return self.attachment(collection, file_id)


def _row(stored: StoredFile) -> tuple[object, ...]:
    return stored.id, stored.filename, stored.bytes, stored.created_at, stored.purpose, stored.sha256
