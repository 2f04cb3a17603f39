"""The original files of the library: a copy of the bytes of every file a document was read from, kept beside the
index file so that the service can serve it back (``GET /v1/files/{id}/content``) and link a source to it.

Layout: ``<index file's folder>/files/<file id>``, recorded in the index file's table ``files``; a file is written in
``files/incoming/`` first and moved into place by a rename (one file system: atomic), so a half-written file is
never among the originals.  A file an ingest read gets the id ``file-`` + the first 24 hex of its sha256
(``file_id_of``: reading it again, or from another folder, keeps one copy) and the purpose ``"ingest"``; it goes
with the last document read from it (``drop_unused_originals``).  An upload (``library.py``) gets a random id and
stays until it is deleted.  Copies are moved into place and dropped inside a write transaction of the index file,
so two writers never race on one.
"""

import os
import sqlite3
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "INGEST_PURPOSE",
    "Original",
    "drop_unused_originals",
    "file_id_of",
    "incoming_dir",
    "keep_originals",
    "originals_dir",
    "write_copy",
]

INGEST_PURPOSE = "ingest"  # the purpose recorded for a file an ingest read (an upload records its own)


def originals_dir(index_file: Path) -> Path:
    """Where the original bytes of the library's files are kept: ``files/`` beside the index file."""
    return Path(index_file).parent / "files"


def incoming_dir(index_file: Path) -> Path:
    """Where a file is written before it is moved among the originals (same file system: a rename is atomic)."""
    return originals_dir(index_file) / "incoming"


def file_id_of(sha256: str) -> str:
    """The id of the original an ingest keeps of a file: the same bytes, the same id (one copy)."""
    return f"file-{sha256[:24]}"


def write_copy(data: bytes, folder: Path) -> Path:
    """``data`` written to a new file in ``folder`` (``incoming_dir``): a copy to keep as an original."""
    folder.mkdir(parents=True, exist_ok=True)
    handle, name = tempfile.mkstemp(dir=folder, prefix="ingest-")
    with os.fdopen(handle, "wb") as out:
        out.write(data)
    return Path(name)


@dataclass(frozen=True, slots=True)
class Original:
    """A copy of a file an ingest read, written in ``incoming_dir``: kept as the original of ``file_id`` when its
    document is saved (``store.DocumentStore.save``)."""

    file_id: str
    copy: Path
    filename: str
    size: int
    sha256: str


def keep_originals(db: sqlite3.Connection, folder: Path, originals: Iterable[Original], created_at: int) -> None:
    """Inside the caller's write transaction: record each original (an ingest's purpose) and move its copy into
    ``folder`` under its file id (replacing an identical copy of the same bytes)."""
    for original in originals:
        db.execute("INSERT OR IGNORE INTO files (id, filename, bytes, sha256, purpose, created_at) "
                   "VALUES (?, ?, ?, ?, ?, ?)",
                   (original.file_id, original.filename, original.size, original.sha256, INGEST_PURPOSE, created_at))
        os.replace(original.copy, folder / original.file_id)


def drop_unused_originals(db: sqlite3.Connection, folder: Path) -> list[str]:
    """Inside the caller's write transaction: forget the originals an ingest kept that no document and no
    attachment uses any more, and delete their copies; their ids."""
    unused = [row[0] for row in db.execute(
        "SELECT id FROM files WHERE purpose = ? AND id NOT IN "
        "(SELECT file_id FROM documents WHERE file_id IS NOT NULL) AND id NOT IN (SELECT file_id FROM attachments)",
        (INGEST_PURPOSE,),
    )]
    db.executemany("DELETE FROM files WHERE id = ?", [(file_id,) for file_id in unused])
    for file_id in unused:
        (folder / file_id).unlink(missing_ok=True)
    return unused
