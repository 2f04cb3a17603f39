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

Every save and every removal also bumps a generation counter and the counter of each collection it changed (table
``meta``, see ``schema.py``) in the same transaction, so a running server can tell cheaply that another process
changed the file (``index_version``, ``live.py``) and a client that one collection changed (``Snapshot.versions``).
Files written before a table or column existed work (as generation 0, as NULL), and code from before it reads
(and writes) files that have it.

A document stored from a file records the original kept of that file's bytes (``file_id``, ``originals.py``): a
save moves the copies an ingest made into place, and drops those no document uses any more, in its transaction.
"""

import json
import os
import sqlite3
from collections.abc import Iterable, Mapping, Sequence
from contextlib import closing
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from stat import S_ISREG

from . import schema
from .documents import Chunk, Document
from .originals import Original, drop_unused_originals, keep_originals, originals_dir
from .schema import IndexSchemaError
from .sqlite import words

__all__ = [
    "INDEX_ENV",
    "DocumentStore",
    "IndexSchemaError",
    "IndexVersion",
    "Snapshot",
    "SourceFile",
    "StoredCollection",
    "StoredDocument",
    "by_source",
    "default_index_path",
    "index_version",
    "list_stored",
    "load_documents",
    "located",
    "load_snapshot",
    "read_snapshot",
    "resolve_index_path",
    "stored_sources",
]

INDEX_ENV = "DOCSERVER_INDEX"
INDEX_FILE = "docserver.sqlite3"
PACKAGE_DIR = Path(__file__).resolve().parent


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


def _read(connection: sqlite3.Connection) -> list[Document]:
    chunks: dict[tuple[str, str], list[Chunk]] = {}
    columns = schema.select(connection, "chunks",
                            "doc_id, collection, chunk_index, title, section, text, url, page, page_end")
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
    with closing(schema.connect_read_only(path)) as connection:
        return _version(stat, schema.generation(connection))


@dataclass(frozen=True, slots=True)
class StoredCollection:
    """A collection created in the library (table ``collections``): it exists before any document is in it."""

    name: str
    display_name: str
    created_at: int  # unix seconds
    metadata: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Snapshot:
    """What an index file holds, read in one transaction: its version, every document, the collections created in
    it, the version string of each collection it changed (``schema.collection_versions``) and the original file
    each document was read from, by (collection, doc_id)."""

    version: IndexVersion | None
    documents: list[Document]
    collections: list[StoredCollection] = field(default_factory=list)
    versions: dict[str, str] = field(default_factory=dict)
    file_ids: dict[tuple[str, str], str] = field(default_factory=dict)


def _created(connection: sqlite3.Connection) -> list[StoredCollection]:
    if not schema.has_table(connection, "collections"):
        return []
    rows = connection.execute("SELECT name, display_name, created_at, metadata FROM collections ORDER BY name")
    return [StoredCollection(name, display, created, json.loads(metadata)) for name, display, created, metadata in rows]


def _file_ids(connection: sqlite3.Connection) -> dict[tuple[str, str], str]:
    if "file_id" not in schema.columns(connection, "documents"):
        return {}
    rows = connection.execute("SELECT collection, doc_id, file_id FROM documents WHERE file_id IS NOT NULL")
    return {(collection, doc_id): file_id for collection, doc_id, file_id in rows}


def read_snapshot(index_path: Path | str | None = None) -> Snapshot:
    """Everything a server serves from the index file (``Snapshot(None, [])`` when it does not exist: it is never
    created here).

    The file is stat-ed before the rest is read, in one read transaction: a save that lands in between makes the
    version look older than the documents, which costs at most one needless reload, never a missed one.
    """
    path = resolve_index_path(index_path)
    stat = _stat(path)
    if stat is None:
        return Snapshot(None, [])
    with closing(schema.connect_read_only(path)) as connection:
        schema.check_version(connection, path)
        connection.execute("BEGIN")  # one snapshot for the counters, the documents and the collections
        snapshot = Snapshot(_version(stat, schema.generation(connection)), _read(connection), _created(connection),
                            schema.collection_versions(connection), _file_ids(connection))
        connection.rollback()
    return snapshot


def load_snapshot(index_path: Path | str | None = None) -> tuple[IndexVersion | None, list[Document]]:
    """Every stored document and the version they are of: ``(None, [])`` when the file does not exist
    (it is never created here)."""
    snapshot = read_snapshot(index_path)
    return snapshot.version, snapshot.documents


def load_documents(index_path: Path | str | None = None) -> list[Document]:
    """Every stored document, or ``[]`` when the index file does not exist (it is never created here)."""
    return load_snapshot(index_path)[1]


@dataclass(frozen=True, slots=True)
class SourceFile:
    """The file a document was read from: its absolute path as named (a symlink not resolved: its name is what the
    doc_id comes from), the sha256 of its bytes (hex), its path relative to the folder ingested (its name when named
    directly; None: the name of ``path``) and the original kept of it (``files``), if any."""

    path: str
    sha256: str
    name: str | None = None
    file_id: str | None = None


@dataclass(frozen=True, slots=True)
class StoredDocument:
    """What ``python -m docserver list`` shows of a stored document, without reading its chunks' text.

    ``source``, ``sha256`` and ``ingested_at`` are None for a document saved without a source file, and the last
    two for one saved before those columns existed; ``name`` (the path the doc_id comes from) and ``file_id`` for
    one saved before originals were kept."""

    collection: str
    doc_id: str
    title: str
    kind: str | None
    pages: int | None  # of a paged source (PDF)
    chunks: int
    source: str | None
    sha256: str | None
    ingested_at: str | None
    name: str | None = None
    file_id: str | None = None


def _pages(metadata: str) -> int | None:
    """The page count a PDF reader recorded in the document's metadata (a string of digits), else None."""
    pages = json.loads(metadata).get("pages")
    return int(pages) if isinstance(pages, str) and pages.isdigit() else None


def _stored(connection: sqlite3.Connection, collection: str | None) -> list[StoredDocument]:
    columns = schema.select(connection, "documents", "collection, doc_id, title, kind, metadata, source, sha256, "
                            "ingested_at, source_name, file_id")
    rows = connection.execute(
        f"SELECT {columns}, (SELECT COUNT(*) FROM chunks c "
        "WHERE c.collection = documents.collection AND c.doc_id = documents.doc_id) "
        "FROM documents WHERE ?1 IS NULL OR collection = ?1 ORDER BY collection, doc_id",
        (collection,),
    )
    return [
        StoredDocument(name, doc_id, title, kind, _pages(metadata), chunks, source, sha256, ingested_at, relative,
                       file_id)
        for name, doc_id, title, kind, metadata, source, sha256, ingested_at, relative, file_id, chunks in rows
    ]


def list_stored(index_path: Path | str | None = None, collection: str | None = None) -> list[StoredDocument]:
    """The stored documents (of ``collection``, else all), by collection and doc_id; ``[]`` when the index file
    does not exist (it is never created here)."""
    path = resolve_index_path(index_path)
    if _stat(path) is None:
        return []
    with closing(schema.connect_read_only(path)) as connection:
        schema.check_version(connection, path)
        return _stored(connection, collection)


def stored_sources(index_path: Path | str | None, collection: str) -> dict[tuple[str, str], StoredDocument]:
    """The documents of ``collection`` stored with a content hash, by (name, sha256) of their source file, the name
    being the file's path relative to the folder ingested ("2023/Bijlage 1.pdf"; its name when it was named
    directly, and for a document stored before these paths were).

    A document's doc_id and text follow from that path and its file's bytes alone, so a file with the same path and
    sha256 as a stored document's source would be read into that same document again (as long as the readers
    do not change: ``ingest --force`` re-reads).  ``{}`` when the index file does not exist (not created here).
    """
    return by_source(list_stored(index_path, collection))


def by_source(documents: Iterable[StoredDocument]) -> dict[tuple[str, str], StoredDocument]:
    """``documents`` stored with a content hash by (name, sha256) of their source file (``stored_sources``)."""
    return {(d.name or Path(d.source).name, d.sha256): d for d in documents if d.source and d.sha256}


def _locate(connection: sqlite3.Connection, doc_ids: Sequence[str], collection: str | None) -> list[tuple[str, str]]:
    """The (collection, doc_id) of each of ``doc_ids``, or ``ValueError`` naming the unknown and ambiguous ones."""
    holders = {doc_id: [row[0] for row in connection.execute(
        "SELECT collection FROM documents WHERE doc_id = ?1 AND (?2 IS NULL OR collection = ?2) ORDER BY collection",
        (doc_id, collection),
    )] for doc_id in dict.fromkeys(doc_ids)}
    return located(doc_ids, holders, collection)


def located(doc_ids: Sequence[str], holders: Mapping[str, Sequence[str]], collection: str | None
            ) -> list[tuple[str, str]]:
    """The (collection, doc_id) of each of ``doc_ids`` given the collections holding each (``holders``, sorted),
    or ``ValueError`` naming every doc_id no collection holds and, without ``collection``, every one several do."""
    unknown = [repr(d) for d in dict.fromkeys(doc_ids) if not holders.get(d)]
    ambiguous = [f"{d!r} is in collections {', '.join(holders[d])}" for d in dict.fromkeys(doc_ids)
                 if len(holders.get(d, ())) > 1]
    problems = []
    if unknown:
        where = f"in collection {collection!r}" if collection is not None else "in the index"
        problems.append(f"no document {', '.join(unknown)} {where}")
    if ambiguous:
        problems.append("; ".join(ambiguous) + ": name the collection")
    if problems:
        raise ValueError("; ".join(problems))
    return [(holders[d][0], d) for d in dict.fromkeys(doc_ids)]


def write_document(db: sqlite3.Connection, doc: Document, source: SourceFile | None, ingested_at: str) -> None:
    """Store ``doc`` (replacing the document of its collection and doc_id) inside the caller's transaction.

    A document that an ingest from before these paths stored from the same file under another doc_id (one read
    from a folder's sub-folder then took the bare file name) is replaced too."""
    db.execute("DELETE FROM documents WHERE collection = ? AND doc_id = ?", (doc.collection, doc.doc_id))
    if source is not None and source.name is not None:
        db.execute("DELETE FROM documents WHERE collection = ? AND source = ? AND source_name IS NULL "
                   "AND file_id IS NULL", (doc.collection, source.path))
    db.execute(
        "INSERT INTO documents (collection, doc_id, title, year, url, kind, language, disclaimer, metadata, source, "
        "sha256, ingested_at, file_id, source_name) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
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
            source.file_id if source else None,
            source.name if source else None,
        ),
    )
    db.executemany(
        "INSERT INTO chunks (collection, doc_id, chunk_index, title, section, text, url, page, page_end) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
        [(c.collection, c.doc_id, c.chunk_index, c.title, c.section, c.text, c.url, c.page, c.page_end)
         for c in doc.chunks],
    )


def _now() -> tuple[str, int]:
    """The time of a save: as stored with a document (UTC, ISO 8601) and as unix seconds."""
    now = datetime.now(UTC)
    return now.isoformat(timespec="seconds"), int(now.timestamp())


class DocumentStore:
    """Read-write access to the index file, created (with its folder) when missing."""

    def __init__(self, index_path: Path | str | None = None) -> None:
        self.path = resolve_index_path(index_path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.originals = originals_dir(self.path)
        self._db = schema.connect(self.path)
        schema.prepare(self._db, self.path)

    def save(self, documents: Iterable[tuple[Document, SourceFile | None]], originals: Iterable[Original] = ()) -> None:
        """Store ``(document, source file)`` pairs in one transaction, replacing earlier versions, keep the
        ``originals`` of their files, and bump the generation and the counters of the collections concerned in the
        same transaction (running servers reload on it, see ``live.py``).  Each document is stamped with the time
        of this save (UTC).  An original no document uses any more (the file was edited) is dropped."""
        ingested_at, created_at = _now()
        pairs, originals = list(documents), list(originals)
        if originals:
            self.originals.mkdir(parents=True, exist_ok=True)
        with self._db as db:  # commits, or rolls back on an exception
            db.execute("BEGIN IMMEDIATE")
            schema.bump(db, (doc.collection for doc, _ in pairs))
            for doc, source in pairs:
                write_document(db, doc, source, ingested_at)
            keep_originals(db, self.originals, originals, created_at)
            drop_unused_originals(db, self.originals)
            words.refresh(db)

    def remove(self, doc_ids: Sequence[str], collection: str | None = None) -> list[tuple[str, str]]:
        """Delete the documents ``doc_ids`` (of ``collection``, else of whichever collection holds each) with
        their chunks, bumping the generation and their collections' counters in the same transaction; the
        (collection, doc_id) pairs removed.  The originals kept of their files go with them when no other document
        uses them.

        All or nothing: ``ValueError`` naming every doc_id that is not stored, or (without ``collection``) that
        several collections hold, and then nothing is removed."""
        with self._db as db:  # commits, or rolls back on an exception
            db.execute("BEGIN IMMEDIATE")  # the look-ups and the deletes see one state of the file
            keys = _locate(db, doc_ids, collection)
            schema.bump(db, (name for name, _ in keys))
            db.executemany("DELETE FROM documents WHERE collection = ? AND doc_id = ?", keys)  # chunks cascade
            drop_unused_originals(db, self.originals)
            words.refresh(db)
        return keys

    def documents(self) -> list[Document]:
        return _read(self._db)

    def generation(self) -> int:
        """How many saves this file has seen since the generation counter was added."""
        return schema.generation(self._db)

    def close(self) -> None:
        self._db.close()

    def __enter__(self) -> "DocumentStore":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
