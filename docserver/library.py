"""The document library as the service's Files and Vector Stores API use it: files kept with their original bytes,
collections (a vector store is one, and may be empty) and which file is attached to which, read into a document.

Everything lives in the index file (``store.py``, tables of ``schema.py``) and the ``files/`` folder beside it, so a
running document server sees a change within a second (``live.py``) and ``python -m docserver`` lists and removes
what an upload added.  A file attached to a collection is read as an ingest reads a file it is given
(``ingest_attached``: the same limits, readers and refusal reasons), in whatever process the caller runs it.

Every call opens its own connection and short transaction (waiting up to ``schema.TIMEOUT_S`` for another
writer), so threads and processes may share one library.  Each change to what a collection holds bumps the index
file's generation and the collection's own counter in the transaction that makes it (``schema.bump``); attaching
a file does not, reading it in does.  Uploaded names and metadata are stored as plain lines
(``textkit.untrusted.plain``): they reach terminals, prompts and JSON.
"""

import json
import logging
import os
import re
import secrets
import sqlite3
import time
from collections.abc import Callable, Iterator
from contextlib import closing, contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path, PurePosixPath
from typing import Any, Literal

from textkit.untrusted import plain

from . import schema
from .documents import Document
from .formats import Limits
from .ingest import COLLECTION_NAME, file_sha256, read_file, with_id
from .originals import drop_unused_originals, incoming_dir, originals_dir
from .sqlite import words
from .store import SourceFile, resolve_index_path, write_document

__all__ = ["FILE_ID", "Attachment", "AttachmentStatus", "CollectionInfo", "Library", "StoredFile", "cancelled",
           "free_id", "ingest_attached", "open_library", "upload_name"]

logger = logging.getLogger("docserver")

FILE_ID = re.compile(r"^file-[0-9a-f]{24}$")
AttachmentStatus = Literal["in_progress", "completed", "failed", "cancelled"]


@dataclass(frozen=True, slots=True)
class StoredFile:
    """A file of the library: uploaded, or read by an ingest (purpose ``originals.INGEST_PURPOSE``)."""

    id: str
    filename: str
    bytes: int
    created_at: int  # unix seconds
    purpose: str
    sha256: str


@dataclass(frozen=True, slots=True)
class CollectionInfo:
    """A collection of the index file: created (``Library.create_collection``) or holding ingested documents."""

    name: str
    display_name: str
    created_at: int  # unix seconds; of its first document for a collection an ingest made
    documents: int
    chunks: int
    bytes: int  # the sizes of the original files of its documents
    metadata: dict[str, str] = field(default_factory=dict)
    version: str = ""  # changes whenever what it holds changes (as list_collections and search_collection say it)


@dataclass(frozen=True, slots=True)
class Attachment:
    """A file attached to a collection, and how reading it went."""

    collection: str
    file_id: str
    status: AttachmentStatus
    created_at: int  # unix seconds
    doc_id: str | None  # the document read from it, once completed
    last_error: str | None  # why it failed: the refusal reason the CLI gives for that file
    chunks: int
    bytes: int


_FILE = "SELECT id, filename, bytes, created_at, purpose, sha256 FROM files"
_ATTACHMENT = ("SELECT a.collection, a.file_id, a.status, a.created_at, a.doc_id, a.last_error, a.chunks, "
               "COALESCE(f.bytes, 0) FROM attachments a LEFT JOIN files f ON f.id = a.file_id")


def _unix(iso: str | None) -> int:
    """An ISO 8601 time (a document's ``ingested_at``) as unix seconds; 0 for none."""
    return int(datetime.fromisoformat(iso).timestamp()) if iso else 0


def _attachment(db: sqlite3.Connection, collection: str, file_id: str) -> Attachment | None:
    row = db.execute(f"{_ATTACHMENT} WHERE a.collection = ? AND a.file_id = ?", (collection, file_id)).fetchone()
    return Attachment(*row) if row is not None else None


def _exists(db: sqlite3.Connection, collection: str) -> bool:
    """Whether the index file has ``collection``: created, or holding a document."""
    return db.execute("SELECT 1 FROM collections WHERE name = ?1 UNION ALL SELECT 1 FROM documents "
                      "WHERE collection = ?1 LIMIT 1", (collection,)).fetchone() is not None


def _infos(db: sqlite3.Connection, name: str | None) -> list[CollectionInfo]:
    """The collections of the index file (``name`` only, when given), by name."""
    created = {row[0]: row[1:] for row in db.execute(
        "SELECT name, display_name, created_at, metadata FROM collections WHERE ?1 IS NULL OR name = ?1", (name,))}
    held = {row[0]: row[1:] for row in db.execute(
        "SELECT d.collection, COUNT(*), COALESCE(SUM(f.bytes), 0), MIN(d.ingested_at) FROM documents d "
        "LEFT JOIN files f ON f.id = d.file_id WHERE ?1 IS NULL OR d.collection = ?1 GROUP BY d.collection", (name,))}
    chunks = dict(db.execute(
        "SELECT collection, COUNT(*) FROM chunks WHERE ?1 IS NULL OR collection = ?1 GROUP BY collection", (name,)))
    versions, generation = schema.collection_versions(db), schema.generation(db)
    infos = []
    for key in sorted(created.keys() | held.keys()):
        display, created_at, metadata = created.get(key, (key, None, "{}"))
        documents, size, first = held.get(key, (0, 0, None))
        version = versions.get(key) or (f"g{generation}" if documents else "")  # g: written before the counters
        infos.append(CollectionInfo(key, display, _unix(first) if created_at is None else created_at, documents,
                                    chunks.get(key, 0), size, json.loads(metadata), version))
    return infos


def upload_name(filename: str) -> Path:
    """The name a stored file is read under (its suffix and stem: format hints, title, doc_id), without any
    folder a client put in front of it."""
    name = PurePosixPath(filename.replace("\\", "/")).name
    return Path(name if name not in ("", ".", "..") else "upload")


def free_id(doc_id: str, file_id: str, holder: Callable[[str], tuple[str | None] | None]) -> str:
    """``doc_id``, or (when a document of another file holds it in the collection: ``holder(doc_id)`` is the row
    of its file id, None when no document has that id) it with a suffix from ``file_id``: two uploads of one name
    are two documents."""
    suffix = file_id.removeprefix("file-")
    for candidate in (doc_id, f"{doc_id}-{suffix[:8]}", f"{doc_id}-{suffix}"):
        found = holder(candidate)
        if found is None or found[0] == file_id:
            return candidate
    return f"{doc_id}-{suffix}-{secrets.token_hex(4)}"


class Library:
    """Read-write access to the library in the index file (``DOCSERVER_INDEX``, ``store.resolve_index_path``).
    Each call opens its own short SQLite transaction, so several threads and processes may use it."""

    def __init__(self, index_path: Path | str | None = None) -> None:
        self.path = resolve_index_path(index_path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.originals = originals_dir(self.path)
        self.incoming()
        with closing(schema.connect(self.path)) as db:
            schema.prepare(db, self.path)

    def close(self) -> None:
        """Nothing to close: every call opens and closes its own connection."""

    @contextmanager
    def _reading(self) -> Iterator[sqlite3.Connection]:
        """A connection in one read transaction: every query sees the same state of the file."""
        with closing(schema.connect(self.path)) as db:
            db.execute("BEGIN")
            try:
                yield db
            finally:
                db.rollback()

    @contextmanager
    def _writing(self) -> Iterator[sqlite3.Connection]:
        """A connection holding the file's write lock: committed when the block ends, rolled back on an exception."""
        with closing(schema.connect(self.path)) as db, db:
            db.execute("BEGIN IMMEDIATE")
            yield db
            words.refresh(db)  # the search copy follows the documents written (sqlite/words.py)

    # --- files ------------------------------------------------------------------------------------------------------

    def incoming(self) -> Path:
        """A folder on the file system of the originals, to write an upload to before ``add_file`` takes it."""
        folder = incoming_dir(self.path)
        folder.mkdir(parents=True, exist_ok=True)
        return folder

    def add_file(self, written: Path, filename: str, purpose: str) -> StoredFile:
        """Keep the file ``written`` (in ``incoming()``; moved into place by an atomic rename) under a new random id,
        as ``filename`` (one plain line) with ``purpose``.  ``ValueError`` for a file outside ``incoming()``."""
        written = Path(written)
        if written.resolve().parent != self.incoming().resolve() or not written.is_file():
            raise ValueError(f"not a file in the incoming folder {self.incoming()}: {written}")
        with written.open("rb") as stream:
            sha256, size = file_sha256(stream), os.fstat(stream.fileno()).st_size
        stored = StoredFile(f"file-{secrets.token_hex(12)}", plain(filename) or "upload", size, int(time.time()),
                            plain(purpose), sha256)
        self.originals.mkdir(parents=True, exist_ok=True)
        with self._writing() as db:
            db.execute("INSERT INTO files (id, filename, bytes, created_at, purpose, sha256) VALUES (?, ?, ?, ?, ?, ?)",
                       (stored.id, stored.filename, stored.bytes, stored.created_at, stored.purpose, stored.sha256))
            os.replace(written, self.originals / stored.id)
        return stored

    def files(self) -> list[StoredFile]:
        """Every file of the library, newest first."""
        with self._reading() as db:
            return [StoredFile(*row) for row in db.execute(f"{_FILE} ORDER BY created_at DESC, rowid DESC")]

    def file(self, file_id: str) -> StoredFile | None:
        if not FILE_ID.fullmatch(file_id):
            return None
        with self._reading() as db:
            row = db.execute(f"{_FILE} WHERE id = ?", (file_id,)).fetchone()
        return StoredFile(*row) if row is not None else None

    def file_path(self, file_id: str) -> Path | None:
        """Where the original bytes of ``file_id`` are; None for an unknown id (or bytes gone)."""
        path = self.originals / file_id
        return path if self.file(file_id) is not None and path.is_file() else None

    def file_collections(self, file_id: str) -> list[str]:
        """The collections the file is attached to or holding a document read from it (by an ingest too)."""
        with self._reading() as db:
            rows = db.execute("SELECT collection FROM attachments WHERE file_id = ?1 UNION "
                              "SELECT collection FROM documents WHERE file_id = ?1 ORDER BY 1", (file_id,))
            return [row[0] for row in rows]

    def delete_file(self, file_id: str) -> bool:
        """Delete the file, its attachments and the documents read from it, in every collection; False when the
        library has none of them."""
        if not FILE_ID.fullmatch(file_id):
            return False
        with self._writing() as db:
            holders = [row[0] for row in db.execute("SELECT DISTINCT collection FROM documents WHERE file_id = ?",
                                                    (file_id,))]
            deleted = sum(db.execute(f"DELETE FROM {table} WHERE {column} = ?", (file_id,)).rowcount
                          for table, column in (("documents", "file_id"), ("attachments", "file_id"), ("files", "id")))
            if holders:
                schema.bump(db, holders)
            (self.originals / file_id).unlink(missing_ok=True)
        return deleted > 0

    # --- collections ------------------------------------------------------------------------------------------------

    def create_collection(self, name: str, display_name: str | None = None,
                          metadata: dict[str, str] | None = None) -> CollectionInfo:
        """A new, empty collection.  ``ValueError``: an invalid name (as an ingest takes them) or metadata that is
        not strings; ``FileExistsError``: the collection exists (created, or holding ingested documents)."""
        if not COLLECTION_NAME.match(name):
            raise ValueError(f"invalid collection name {name!r}")
        pairs = (metadata or {}).items()
        if not all(isinstance(key, str) and isinstance(value, str) for key, value in pairs):
            raise ValueError("collection metadata maps strings to strings")
        described = {plain(key): plain(value) for key, value in pairs}
        with self._writing() as db:
            if _exists(db, name):
                raise FileExistsError(f"collection {name!r} exists")
            db.execute("INSERT INTO collections (name, display_name, created_at, metadata) VALUES (?, ?, ?, ?)",
                       (name, plain(display_name) or name, int(time.time()), json.dumps(described, ensure_ascii=False)))
            schema.bump(db, [name])
            return _infos(db, name)[0]

    def collections(self) -> list[CollectionInfo]:
        """The collections of the index file (created, or holding ingested documents), by name; the bundled
        corpus's only when documents were ingested into one."""
        with self._reading() as db:
            return _infos(db, None)

    def collection(self, name: str) -> CollectionInfo | None:
        with self._reading() as db:
            found = _infos(db, name)
        return found[0] if found else None

    def delete_collection(self, name: str) -> bool:
        """Delete the collection with its documents and attachments (uploaded files stay; the originals an ingest
        kept go with their last document); False when there is no such collection."""
        with self._writing() as db:
            if not _exists(db, name):
                return False
            for table, column in (("documents", "collection"), ("attachments", "collection"), ("collections", "name")):
                db.execute(f"DELETE FROM {table} WHERE {column} = ?", (name,))
            schema.bump(db, [name])
            drop_unused_originals(db, self.originals)
        return True

    # --- attachments ------------------------------------------------------------------------------------------------

    def attach(self, collection: str, file_id: str) -> Attachment:
        """Attach the file to the collection (status in_progress: ``ingest_attached`` reads it in); the attachment
        there is when the pair is attached already.  ``KeyError``: an unknown collection or file."""
        with self._writing() as db:
            if not _exists(db, collection):
                raise KeyError(f"no collection {collection!r}")
            if db.execute("SELECT 1 FROM files WHERE id = ?", (file_id,)).fetchone() is None:
                raise KeyError(f"no file {file_id!r}")
            db.execute("INSERT OR IGNORE INTO attachments (collection, file_id, status, created_at) "
                       "VALUES (?, ?, 'in_progress', ?)", (collection, file_id, int(time.time())))
            found = _attachment(db, collection, file_id)
        assert found is not None  # inserted or there, under the write lock
        return found

    def attachments(self, collection: str) -> list[Attachment]:
        """The files attached to ``collection``, in the order they were attached."""
        with self._reading() as db:
            rows = db.execute(f"{_ATTACHMENT} WHERE a.collection = ? ORDER BY a.created_at, a.rowid", (collection,))
            return [Attachment(*row) for row in rows]

    def attachment(self, collection: str, file_id: str) -> Attachment | None:
        with self._reading() as db:
            return _attachment(db, collection, file_id)

    def detach(self, collection: str, file_id: str) -> bool:
        """Detach the file from the collection and remove the document read from it; False when not attached."""
        with self._writing() as db:
            found = _attachment(db, collection, file_id)
            if found is None:
                return False
            db.execute("DELETE FROM attachments WHERE collection = ? AND file_id = ?", (collection, file_id))
            self._drop_document(db, found)
            drop_unused_originals(db, self.originals)
        return True

    def _drop_document(self, db: sqlite3.Connection, attached: Attachment) -> None:
        """Remove the document read from an attachment's file (counted as a change when there was one)."""
        if attached.doc_id is None:
            return
        removed = db.execute("DELETE FROM documents WHERE collection = ? AND doc_id = ? AND file_id = ?",
                             (attached.collection, attached.doc_id, attached.file_id)).rowcount
        if removed:
            schema.bump(db, [attached.collection])

    def completed(self, doc: Document, source: SourceFile, attached: Attachment) -> Attachment:
        """Store the document read from an attachment's file and record it completed, unless it was detached
        meanwhile (then cancelled, and nothing is stored)."""
        with self._writing() as db:
            now = _attachment(db, attached.collection, attached.file_id)
            if now is None:
                return cancelled(attached)
            doc = with_id(doc, now.doc_id or free_id(doc.doc_id, now.file_id, lambda candidate: db.execute(
                "SELECT file_id FROM documents WHERE collection = ? AND doc_id = ?", (now.collection, candidate)
            ).fetchone()))
            write_document(db, doc, source, datetime.now(UTC).isoformat(timespec="seconds"))
            db.execute("UPDATE attachments SET status = 'completed', doc_id = ?, chunks = ?, last_error = NULL "
                       "WHERE collection = ? AND file_id = ?", (doc.doc_id, len(doc.chunks), now.collection,
                                                                 now.file_id))
            schema.bump(db, [now.collection])
            return _attachment(db, now.collection, now.file_id) or cancelled(now)

    def fail(self, collection: str, file_id: str, reason: str) -> Attachment | None:
        """Record the attachment failed with ``reason`` (say, the worker reading it died), removing a document read
        from its file before; None when the file is not attached there."""
        with self._writing() as db:
            now = _attachment(db, collection, file_id)
            if now is None:
                return None
            self._drop_document(db, now)
            db.execute("UPDATE attachments SET status = 'failed', doc_id = NULL, chunks = 0, last_error = ? "
                       "WHERE collection = ? AND file_id = ?", (plain(reason), collection, file_id))
            return _attachment(db, collection, file_id)



def cancelled(attached: Attachment) -> Attachment:
    """What became of an attachment detached (or its file deleted) while its file was read: nothing stored."""
    return Attachment(attached.collection, attached.file_id, "cancelled", attached.created_at, None, None, 0,
                      attached.bytes)


def ingest_attached(index_path: Path | str | None, collection: str, file_id: str,
                    limits: Limits | None = None) -> Attachment:
    """Read the attached file into its collection, as the CLI reads a file (``ingest.read_file``: the size, ZIP
    and sniffing limits of ``formats.load``, ``parse_bytes``, the same refusal reasons), and record it completed
    (doc_id, chunks) or failed (``last_error``: the reason).  Module-level with picklable arguments: the app runs it
    in a worker process.  An attachment detached meanwhile (or never made) comes back cancelled, nothing stored.
    ``index_path`` may be a postgresql:// URL: the library in that database (``postgres/library.py``).

    The doc_id is the slug of the uploaded file's name (as an ingest names a file named to it), with a suffix from
    the file id when another file's document holds it in the collection."""
    library = open_library(index_path)
    try:
        return _ingest_attached(library, collection, file_id, limits)
    finally:
        library.close()


def open_library(location: Path | str | None) -> Any:
    """The library at ``location``: the SQLite file at a path, the database at a postgresql:// URL."""
    if isinstance(location, str) and location.startswith(("postgresql://", "postgres://")):
        from .postgres.library import PostgresLibrary

        return PostgresLibrary(location)
    return Library(location)


def _ingest_attached(library: Any, collection: str, file_id: str, limits: Limits | None) -> Attachment:
    attached = library.attachment(collection, file_id)
    if attached is None:
        return Attachment(collection, file_id, "cancelled", int(time.time()), None, None, 0, 0)
    stored, path = library.file(file_id), library.file_path(file_id)

    def failed(reason: str) -> Attachment:  # or cancelled: detached while its file was read
        return library.fail(collection, file_id, reason) or cancelled(attached)

    if stored is None or path is None:
        return failed("the file's original bytes are gone")
    try:
        with path.open("rb") as stream:
            doc, _, _ = read_file(stream, upload_name(stored.filename), collection, limits or Limits())
    except (OSError, ValueError) as exc:  # Refused is a ValueError: the reason the CLI gives
        return failed(str(exc) or type(exc).__name__)
    except Exception as exc:  # a reader's bug must not leave the attachment in progress for ever: recorded, logged
        logger.exception("reading %s for collection %s failed", file_id, collection)
        return failed(f"the file could not be read ({type(exc).__name__})")
    return library.completed(doc, SourceFile(str(path), stored.sha256, None, file_id), attached)
