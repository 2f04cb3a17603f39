"""Ingesting files into the persisted index (``python -m docserver ingest``): walking folders, reading each file
by the reader its content calls for, and storing what was read.

The format is chosen by content (``docserver.formats``): PDF, DOCX, ODT, HTML, BWB law XML, official-publication XML,
Markdown (the corpus format and wetten.overheid.nl law texts) and plain text are read by one reader each into units
that carry their page, heading path or article, cut into chunks by ``chunking.py``. A file that cannot be read is
refused with its reason, and the others of the run are stored. A document's doc_id comes from the file's path
relative to the folder ingested (``ingest_files``); a file stored before from the same path with the same bytes
(sha256) is skipped without being read, unless forced, and every document stored keeps a copy of its file's bytes
(``originals.py``).

Which files a run reads, and how they are opened, is ``docserver/walk.py``'s business. Whatever a file carries
besides its text (title, section, author, the name it gets from the file, links) is written by somebody else: it is
stored as one plain line and links as http(s) only (``textkit.untrusted``), so no reader's output reaches the index
raw.
"""

import hashlib
import os
import re
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path, PurePosixPath
from typing import BinaryIO
from urllib.parse import quote, unquote

from textkit import normalize
from textkit.untrusted import plain, safe_url, terminal

from . import formats, location, walk
from .chunking import extracted_document
from .documents import Document
from .formats import Limits, Refused
from .formats.markdown import split_front_matter, unlinked
from .formats.text import decoded
from .location import open_store, stored_documents
from .originals import Original, file_id_of, incoming_dir, write_copy
from .store import SourceFile, StoredDocument, by_source, resolve_index_path

__all__ = [
    "COLLECTION_NAME",
    "Failure",
    "Report",
    "Skipped",
    "as_plain",
    "file_sha256",
    "ingest",
    "ingest_files",
    "parse_bytes",
    "parse_file",
    "published_at",
    "read_file",
    "slug",
    "with_id",
]

COLLECTION_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
_TEXT_KINDS = ("markdown", "text")  # whose doc_id is the file's name without its suffix (as before other formats)
_TEXT_SUFFIXES = (*formats.MARKDOWN_SUFFIXES, ".txt", ".text")  # named as text: a binary byte in them is named
_LINK_FIELDS = frozenset(("url", "bron"))  # metadata values that are links


def slug(name: str) -> str:
    """A doc_id from a file name: "Kernenergiewet (2024).md" -> "kernenergiewet-2024"."""
    return re.sub(r"[^a-z0-9]+", "-", normalize(name)).strip("-") or "document"


def parse_file(path: Path, collection: str, limits: Limits | None = None, *, follow_symlinks: bool = False) -> Document:
    """One file as a ``Document`` (``parse_bytes``), opened as an ingest opens a file named to it (``walk``: a
    symbolic link only with ``follow_symlinks``, never a FIFO, a device or a file under /proc). Raises ``Refused``
    with the reason when the file is not indexed."""
    limits = limits or Limits()
    named = walk.check_named(Path(path), follow_symlinks=follow_symlinks)
    if not isinstance(named, walk.Found):
        raise Refused(named.reason if isinstance(named, walk.Passed) else "a folder, not a file")
    with walk.opened(named) as stream:
        kind, data = load(stream, Path(path), limits)
    return parse_bytes(kind, data, Path(path), collection, limits)


def load(stream: BinaryIO, path: Path, limits: Limits) -> tuple[str, bytes]:
    """The format and bytes of the open file ``path`` (``formats.load``: size, ZIP end records, sniffing); a file
    named as text or Markdown that no reader takes is refused by the binary byte that turned the sniffer down."""
    try:
        return formats.load(stream, path.suffix, limits)
    except Refused:
        if path.suffix.lower() in _TEXT_SUFFIXES:
            stream.seek(0)
            decoded(stream.read(limits.max_bytes))
        raise


def parse_bytes(kind: str, data: bytes, path: Path, collection: str, limits: Limits | None = None) -> Document:
    """The bytes of the file ``path``, of format ``kind`` (``load``), as a ``Document``, read by the reader their
    content calls for (``docserver.formats``) and cut into chunks (``chunking.py``); stored ``as_plain``. Raises
    ``Refused`` with the reason when the file is not indexed."""
    extracted = formats.extract(kind, data, limits or Limits())
    # the suffix is part of the id of a file of the other formats: the same paper as PDF and as HTML are two
    # documents, each with a stable id
    default_id = slug(path.stem) if kind in _TEXT_KINDS else slug(path.name)
    doc = extracted_document(extracted, collection=collection, default_id=default_id,
                             default_title=_readable_name(path))
    return as_plain(doc, markdown=kind == "markdown")


def _readable_name(path: Path) -> str:
    """A file's name as the title of a document that states none: "Kamerbrief_over-draagmoederschap_2011.pdf" ->
    "Kamerbrief over draagmoederschap 2011". The suffix, %-escapes, underscores and hyphens between words go (they
    stand for spaces a file name cannot have); a hyphen between digits ("2011-03-01", "32545-143") stays."""
    words = re.sub(r"(?<!\d)-+|-+(?!\d)", " ", unquote(path.stem).replace("_", " "))
    return " ".join(words.split()) or path.stem


def as_plain(doc: Document, *, markdown: bool = False) -> Document:
    """``doc`` as stored: everything it carries besides its text is somebody else's, so its doc_id, title,
    sections, kind, language, disclaimer and metadata become one plain line (``textkit.untrusted.plain``: no
    newline can start a fake line, no escape sequence or bidi override reaches a screen) and its links http(s)
    or none (``safe_url``). ``markdown``: titles and sections were Markdown, whose links are read as their text."""

    def line(value: str | None) -> str:
        return plain(unlinked(value) if markdown and value else value)

    doc_id = plain(doc.doc_id) or slug(doc.doc_id)
    title = line(doc.title) or doc_id
    chunks = tuple(
        replace(c, doc_id=doc_id, title=line(c.title) or title, section=line(c.section), url=safe_url(c.url) or None)
        for c in doc.chunks
    )
    metadata = {plain(k): safe_url(v) if k in _LINK_FIELDS else plain(v) for k, v in doc.metadata.items()}
    return replace(doc, doc_id=doc_id, title=title, chunks=chunks, url=safe_url(doc.url) or None,
                   kind=plain(doc.kind) or None, language=plain(doc.language) or None,
                   disclaimer=plain(doc.disclaimer) or None, metadata={k: v for k, v in metadata.items() if k})


def _wanted(path: Path) -> bool:
    """What a folder walk picks up: a suffix a reader takes, and no README (which describes a folder)."""
    return path.suffix.lower() in formats.SUFFIXES and not path.name.lower().startswith("readme")


@dataclass(frozen=True, slots=True)
class Failure:
    """A file refused, and why."""

    path: Path
    reason: str


@dataclass(frozen=True, slots=True)
class Skipped:
    """A file not read because the index holds it unchanged: stored from a file of the same name and bytes."""

    path: Path
    doc_id: str
    chunks: int  # as stored


@dataclass
class Report:
    """What an ingest run did: the documents it stored, the files it skipped as unchanged and the files it
    refused, each with the reason."""

    documents: list[Document] = field(default_factory=list)
    skipped: list[Skipped] = field(default_factory=list)
    failures: list[Failure] = field(default_factory=list)


def file_sha256(stream: BinaryIO) -> str:
    """The sha256 of an opened file's bytes (hex), read in blocks: a file over the size limit is still hashed
    cheaply."""
    digest = hashlib.sha256()
    stream.seek(0)
    for block in iter(lambda: stream.read(1 << 20), b""):
        digest.update(block)
    return digest.hexdigest()


def published_at(doc: Document, url: str) -> Document:
    """``doc`` as published at ``url``: a chunk that stands on a page links to it (``url#page=N``, which browsers'
    PDF viewers open at that page)."""
    chunks = tuple(replace(c, url=f"{url}#page={c.page}") if c.page is not None else c for c in doc.chunks)
    return replace(doc, url=url, chunks=chunks)


def ingest_files(
    paths: Sequence[Path | str],
    collection: str,
    *,
    index_path: Path | str | None = None,
    progress: bool = False,
    limits: Limits | None = None,
    force: bool = False,
    base_url: str | None = None,
    on_file: Callable[[Path, Document | Skipped | Failure], None] | None = None,
    follow_symlinks: bool = False,
    database_url: str | None = None,
) -> Report:
    """Parse ``paths`` into ``collection`` and store every file that could be read (in the SQLite file at
    ``index_path``, or in the database at ``database_url``, default ``$DOCSERVER_DATABASE_URL``: ``location.py``); the
    others are reported.

    A document's doc_id comes from the file's path relative to the folder given ("2023/bijlage-1-pdf": each part
    slugged, ``_named_id``), or from its name as before when it was named directly or lies at the top of the folder
    ("notitie" for notitie.txt), unless the document names itself (front
    matter ``doc_id:``, a law's BWB id): so ``Bijlage 1.pdf`` in two folders are two documents, and only two files
    named directly with the same name (or naming themselves alike) are refused as giving one doc_id.
    Re-ingesting a file replaces its document (same collection and doc_id). A file the index holds unchanged (a
    document of ``collection`` stored from a file of the same path and sha256, see ``stored_sources``) is skipped
    without being read, unless ``force``. Each document stored keeps a copy of its file's bytes beside the index
    file (``originals.py``: the service serves and links it) under a file id from its sha256.
    ``progress`` shows a tqdm bar counting the files on stderr, with the
    PDF pages read so far (only when stderr is a terminal); ``on_file(path, outcome)`` hears of each file as it
    is done: the document stored, the file skipped, or the failure. ``base_url``: where the files are published
    (an intranet folder); a document without a URL of its own gets ``base_url/<its path>``, its PDF chunks
    ``...#page=N``. Only regular files inside ``paths`` are read (``docserver/walk.py``; symbolic links only with
    ``follow_symlinks``, and then only inside the folders given); the others are refused by name, with the reason.
    """
    if not COLLECTION_NAME.match(collection):
        raise ValueError(f"invalid collection name {collection!r}")
    database_url = location.database_url(database_url)
    files, passed = walk.discover(paths, wanted=_wanted, follow_symlinks=follow_symlinks)
    names = _relative_names(paths, files)
    stored = {} if force else by_source(stored_documents(index_path, database_url, collection))
    report = Report()
    for not_read in passed:
        report.failures.append(Failure(not_read.path, not_read.reason))
        if on_file is not None:
            on_file(not_read.path, report.failures[-1])
    run = _Run(collection, limits or Limits(), stored, {}, base_url, incoming_dir(resolve_index_path(index_path)))
    parsed: dict[str, _Read] = {}
    try:
        _read_all(files, names, run, report, parsed, on_file=on_file, progress=progress)
        if parsed:
            with open_store(index_path, database_url) as store:
                store.save([(r.document, r.source) for r in parsed.values()], [r.original for r in parsed.values()])
    finally:  # the copies not moved among the originals (the save failed, or never came)
        for read in parsed.values():
            read.original.copy.unlink(missing_ok=True)
    report.documents = [r.document for r in parsed.values()]
    return report


def _read_all(files: Sequence[walk.Found], names: Mapping[Path, str], run: "_Run", report: Report,
              parsed: dict[str, "_Read"], *, on_file: Callable[[Path, Document | Skipped | Failure], None] | None,
              progress: bool) -> None:
    """Every file of a run read into ``parsed`` (by doc_id), or skipped or refused into ``report``, on a progress bar
    counting the files and the PDF pages read so far (``_progress_bar``); ``run.seen`` learns each doc_id given."""
    pages = 0
    with _progress_bar(len(files), run.collection, progress) as bar:
        for found in files:
            outcome = _ingest_one(found, names[found.path], run)
            if isinstance(outcome, Failure):
                report.failures.append(outcome)
            elif isinstance(outcome, Skipped):
                report.skipped.append(outcome)
                run.seen[outcome.doc_id] = found.path
            else:
                parsed[outcome.document.doc_id] = outcome
                run.seen[outcome.document.doc_id] = found.path
                pages += _page_count(outcome.document)
            if on_file is not None:
                on_file(found.path, outcome.document if isinstance(outcome, _Read) else outcome)
            bar.set_postfix(pages=pages, refresh=False)
            bar.update()


def _progress_bar(total: int, collection: str, wanted: bool):  # -> tqdm; not annotated: tqdm is imported lazily
    """A tqdm bar on stderr counting the documents of a run, drawn when ``wanted`` and stderr is a terminal
    (else a disabled bar, which does nothing)."""
    # Imported lazily: serving never needs it (the mcp 1.x compatibility venv does not even install it).
    from tqdm import tqdm

    return tqdm(total=total, desc=terminal(f"ingest {collection}"), unit="doc", file=sys.stderr,
                disable=not (wanted and sys.stderr.isatty()))


def _page_count(document: Document) -> int:
    """The pages of a document read from a paged source (a PDF records them in its metadata), else 0."""
    pages = document.metadata.get("pages", "")
    return int(pages) if document.metadata.get("format") == "pdf" and pages.isdigit() else 0


def _relative_names(paths: Sequence[Path | str], files: Iterable[walk.Found]) -> dict[Path, str]:
    """Per file found, the path its doc_id comes from: relative to the outermost folder given that holds it
    ("2023/Bijlage 1.pdf"), else (a file named directly) its name."""
    folders = sorted((Path(p) for p in paths if Path(p).is_dir()), key=lambda folder: len(folder.parts))
    names = {}
    for found in files:
        root = next((f for f in folders if found.path != f and found.path.is_relative_to(f)), None)
        names[found.path] = found.path.relative_to(root).as_posix() if root is not None else found.path.name
    return names


def _named_id(doc: Document, name: str, kind: str, data: bytes) -> str:
    """The doc_id of ``doc``, read (as format ``kind``, from ``data``) from the file at ``name``
    (``_relative_names``): for a file in a sub-folder each part of that path slugged ("2023/bijlage-1-pdf",
    "2023/notitie-txt"), else the id the reader took from the file's name, as before folders counted ("notitie");
    an id the document gives itself (front matter ``doc_id:``, a law's BWB id) as it is."""
    *folders, file = PurePosixPath(name).parts
    from_name = doc.doc_id in (slug(PurePosixPath(file).stem), slug(file))
    if not folders or not from_name or (kind == "markdown" and split_front_matter(decoded(data))[0].get("doc_id")):
        return doc.doc_id
    return "/".join(map(slug, [*folders, file]))


def with_id(doc: Document, doc_id: str) -> Document:
    """``doc`` and its chunks under another doc_id."""
    if doc_id == doc.doc_id:
        return doc
    return replace(doc, doc_id=doc_id, chunks=tuple(replace(c, doc_id=doc_id) for c in doc.chunks))


def read_file(stream: BinaryIO, path: Path, collection: str, limits: Limits) -> tuple[Document, str, bytes]:
    """The open file ``path`` as an ingest reads every file, with its format and bytes: ``load`` (size, ZIP end
    records, sniffing), then ``parse_bytes``; ``Refused`` with the reason when it is not indexed, also when it
    holds no text to index."""
    kind, data = load(stream, path, limits)
    doc = parse_bytes(kind, data, path, collection, limits)
    if not doc.chunks:
        raise Refused("no text to index")
    return doc, kind, data


@dataclass(frozen=True, slots=True)
class _Run:
    """What every file of one ingest run is read with: ``stored`` the documents it may skip as unchanged, ``seen``
    the doc_ids the run gave so far (and the files they came from), ``incoming`` where the copies are written."""

    collection: str
    limits: Limits
    stored: Mapping[tuple[str, str], StoredDocument]
    seen: dict[str, Path]
    base_url: str | None
    incoming: Path


@dataclass(frozen=True, slots=True)
class _Read:
    """A file of a run read into its document, the source file to record and the copy of its bytes to keep."""

    document: Document
    source: SourceFile
    original: Original


def _ingest_one(found: walk.Found, name: str, run: _Run) -> _Read | Skipped | Failure:
    """One file of a run, at ``name`` (``_relative_names``): skipped when ``run.stored`` holds it unchanged, else
    parsed; refused when it cannot be read, holds no text, changed while it was read, or gives the doc_id of
    another file of the run (``run.seen``). The file is hashed and read through one descriptor (``walk.opened``):
    what is read is what was checked, and what is kept (``originals.write_copy``) is what was read."""
    file = found.path
    try:
        with walk.opened(found) as stream:
            sha256 = file_sha256(stream)
            unchanged = run.stored.get((name, sha256))
            if unchanged is not None:
                _check_unseen(unchanged.doc_id, run)
                return Skipped(file, unchanged.doc_id, unchanged.chunks)
            doc, kind, data = read_file(stream, file, run.collection, run.limits)
        if hashlib.sha256(data).hexdigest() != sha256:
            raise Refused("the file changed while it was read: not read")
        doc = with_id(doc, _named_id(doc, name, kind, data))
        if run.base_url and not doc.url:
            doc = published_at(doc, f"{run.base_url.rstrip('/')}/{quote(name)}")
        _check_unseen(doc.doc_id, run)
        file_id = file_id_of(sha256)
        original = Original(file_id, write_copy(data, run.incoming), plain(file.name) or file_id, len(data), sha256)
    except (OSError, ValueError) as exc:  # Refused is a ValueError; OSError: unreadable file
        return Failure(file, str(exc) or type(exc).__name__)
    return _Read(doc, SourceFile(os.path.abspath(file), sha256, name, file_id), original)


def _check_unseen(doc_id: str, run: _Run) -> None:
    """``Refused`` when another file of the run gave ``doc_id`` already."""
    if doc_id in run.seen:
        raise Refused(f"doc_id {doc_id!r} also comes from {run.seen[doc_id].resolve()}")


def ingest(
    paths: Sequence[Path | str],
    collection: str,
    *,
    index_path: Path | str | None = None,
    progress: bool = False,
    limits: Limits | None = None,
    follow_symlinks: bool = False,
) -> list[Document]:
    """``ingest_files`` for callers that expect every file to be read: the documents stored, or ``ValueError``
    naming each refused file and its reason (the files that could be read are stored all the same).

    Every file is read, unchanged or not (``force``): the caller gets the document of each file as this code
    reads it, never a stored copy it did not check."""
    report = ingest_files(paths, collection, index_path=index_path, progress=progress, limits=limits, force=True,
                          follow_symlinks=follow_symlinks)
    if report.failures:
        raise ValueError("; ".join(f"{f.path}: {f.reason}" for f in report.failures))
    return report.documents
