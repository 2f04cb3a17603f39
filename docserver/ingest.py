"""Ingesting files into the persisted index (``python -m docserver ingest``).

The format is chosen by content (``docserver.formats``): PDF, DOCX, ODT, HTML, BWB law XML and official-publication
XML are read by one reader each into units that carry their page, heading path or article, grouped here into
chunks whose section names that place ("2.3 Scope, p. 6"); a BWB law goes through the same article chunking as a
Markdown law text. A file that cannot be read is refused with its reason, and the others of the run are stored.
A document's doc_id comes from the file's path relative to the folder ingested (``ingest_files``); a file
stored before from the same path with the same bytes (sha256) is skipped without being read, unless forced, and every
document stored keeps a copy of its file's bytes (``originals.py``).
Markdown and plain text are read here:

* Dutch law texts as Markdown in the wetten.overheid.nl style (front matter
  with ``title``, ``identifier`` = BWB id, ``bron``, dates; ``### Hoofdstuk``
  and ``#### Artikel N`` headings, also ``####Artikel N`` and ``Article N``):
  one chunk per article, titled "Kernenergiewet, artikel 15a", with a deep
  link to the article; articles over ``ARTICLE_CHARS`` are split into parts
  at paragraph boundaries, preferably where a numbered "lid" starts.
* Other Markdown (the bundled corpus format) goes through ``parse_document``.
* Plain text: one document, blank-line paragraphs grouped to ``TEXT_CHARS``.

Which files a run reads, and how they are opened, is ``docserver/walk.py``'s business. A text file holding a NUL
or invalid UTF-8 anywhere is refused ("binary data at byte N"). Whatever a file carries besides its text (title,
section, author, the name it gets from the file, links) is written by somebody else: it is stored as one plain
line and links as http(s) only (``textkit.untrusted``), so no reader's output reaches the index raw.
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

from . import formats, walk
from .corpus import Chunk, Document, parse_document, split_front_matter
from .formats import Extracted, Limits, Refused, Unit
from .formats.base import is_placeholder_title
from .originals import Original, file_id_of, incoming_dir, write_copy
from .store import DocumentStore, SourceFile, StoredDocument, resolve_index_path, stored_sources

__all__ = [
    "ARTICLE_CHARS",
    "TEXT_CHARS",
    "Failure",
    "Report",
    "Skipped",
    "extracted_document",
    "ingest",
    "ingest_files",
    "is_law_text",
    "parse_bytes",
    "parse_file",
    "parse_law",
    "parse_text",
    "split_paragraphs",
]

ARTICLE_CHARS = 2500  # longer articles are split into parts
TEXT_CHARS = 1500  # plain-text chunk size
COLLECTION_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
_TEXT_SUFFIXES = (*formats.MARKDOWN_SUFFIXES, ".txt", ".text")  # named as text: a binary byte in them is named
_LINK_FIELDS = frozenset(("url", "bron"))  # metadata values that are links

_HEADING = re.compile(r"^(#{1,6})\s*(\S.*?)\s*$")
_ARTICLE = re.compile(
    r"^(?P<word>artikel|article)\s+(?P<number>\d+[a-z]*(?:\.\d+[a-z]*)*|[IVXLC]+[a-z]?)\b\.?\s*(?P<caption>.*)$",
    re.IGNORECASE,
)
_CHAPTER = re.compile(r"^(hoofdstuk|chapter)\b", re.IGNORECASE)
_ANNEX = re.compile(r"^(bijlage|annex)\b", re.IGNORECASE)
_LINK = re.compile(r"\[([^\]]*)\]\((?:[^()\s]|\([^()\s]*\))*\)")  # [text](url), url with one level of (...)
_BWB = re.compile(r"\bBWB[RV]\d{7}\b", re.IGNORECASE)
_SENTENCE_END = re.compile(r"(?<=[.!?;:])\s+(?=\S)")
_LID = re.compile(r"^\d+[a-z]?\.\s")  # "1. ", "2a. ": a numbered paragraph ("lid") of an article
_DUTCH_WORDS = frozenset("de het een van en dat op te zijn voor met niet worden wordt bij deze als".split())
_ENGLISH_WORDS = frozenset("the of and to that for be with by are shall this as any or which".split())


# --- shared helpers ------------------------------------------------------------------


def slug(name: str) -> str:
    """A doc_id from a file name: "Kernenergiewet (2024).md" -> "kernenergiewet-2024"."""
    return re.sub(r"[^a-z0-9]+", "-", normalize(name)).strip("-") or "document"


def detect_language(text: str) -> str:
    """ "nl" or "en", by counting a few frequent function words of each language."""
    words = re.findall(r"[a-z]+", normalize(text[:20000]))
    dutch = sum(w in _DUTCH_WORDS for w in words)
    english = sum(w in _ENGLISH_WORDS for w in words)
    return "en" if english > dutch else "nl"


def _clean(text: str) -> str:
    """Markdown links become their text (their URLs would be indexed as noise), blank runs collapse."""
    lines = [_LINK.sub(r"\1", line).rstrip() for line in text.strip().splitlines()]
    return re.sub(r"\n{3,}", "\n\n", "\n".join(lines)).strip()


def split_paragraphs(text: str, limit: int) -> list[str]:
    """``text`` in parts of at most ``limit`` characters, cut only between paragraphs.

    A numbered lid ("1. ...") is kept together with the list items that follow it
    when it fits; a longer lid is cut between its own paragraphs, and a paragraph
    longer than ``limit`` between its lines.  A single line is never cut.
    """
    if len(text) <= limit:
        return [text]
    pieces: list[str] = []
    for paragraph in re.split(r"\n\s*\n", text):
        pieces += [paragraph] if len(paragraph) <= limit else paragraph.splitlines()
    units: list[list[str]] = []  # a lid with its list items, or a single piece
    for piece in pieces:
        if units and not _LID.match(piece) and len("\n\n".join([*units[-1], piece])) <= limit:
            units[-1].append(piece)
        else:
            units.append([piece])
    parts: list[list[str]] = []
    for unit in units:
        if parts and len("\n\n".join(parts[-1] + unit)) <= limit:
            parts[-1] += unit
        else:
            parts.append(list(unit))
    return ["\n\n".join(p) for p in parts]


# --- law texts -----------------------------------------------------------------------


def is_law_text(meta: dict[str, str], body: str) -> bool:
    """wetten.overheid.nl-style: a BWB identifier, or several article headings, and no corpus front matter."""
    if meta.get("doc_id") or meta.get("kind"):
        return False
    if _BWB.search(meta.get("identifier", "")) or "wetten.overheid.nl" in meta.get("bron", ""):
        return True
    headings = (_HEADING.match(line) for line in body.splitlines() if line.startswith("#"))
    return sum(1 for h in headings if h and _ARTICLE.match(_clean(h.group(2)))) >= 2


@dataclass
class _Block:
    """The text under one heading while a law text is read."""

    heading: str | None  # cleaned heading text; None for the text before the first heading
    article: re.Match[str] | None
    chapter: str | None
    lines: list[str]


def parse_law(source: str, *, collection: str, default_id: str) -> Document:
    """A wetten.overheid.nl-style Markdown law text, one chunk per article (long ones in parts)."""
    meta, body = split_front_matter(source)
    h1: str | None = None
    blocks: list[_Block] = [_Block(None, None, None, [])]
    chapter: tuple[int, str] | None = None  # (heading level, text)
    for line in body.splitlines():
        heading = _HEADING.match(line)
        if heading is None:
            blocks[-1].lines.append(line)
            continue
        level, text = len(heading.group(1)), re.sub(r"\s+", " ", _clean(heading.group(2)))
        if level == 1 and h1 is None:
            h1 = text
            continue
        if _CHAPTER.match(text):
            chapter = (level, text)
        elif chapter is not None and (level < chapter[0] or _ANNEX.match(text)):  # "Afdeling 2." stays inside
            chapter = None
        article = _ARTICLE.match(text)
        blocks.append(_Block(text, article, chapter[1] if chapter and article else None, []))
    return law_document(meta, h1, blocks, collection=collection, default_id=default_id,
                        language=meta.get("language") or detect_language(body))


def law_blocks(units: Iterable[Unit]) -> list[_Block]:
    """A law read from its source format (`docserver/formats/bwb.py`) as the blocks a Markdown law text gives:
    an article's unit has `headings` (chapter, article heading) or (article heading,)."""
    blocks = []
    for unit in units:
        heading = unit.headings[-1] if unit.headings else None
        article = _ARTICLE.match(heading) if heading and unit.article else None
        chapter = unit.headings[0] if article and len(unit.headings) > 1 else None
        blocks.append(_Block(heading, article, chapter, unit.text.splitlines()))
    return blocks


def law_document(meta: Mapping[str, str], h1: str | None, blocks: list[_Block], *, collection: str,
                 default_id: str, language: str) -> Document:
    """The chunks of a law, one per article (long ones in parts), whatever format it was read from."""
    bwb_match = _BWB.search(" ".join((meta.get("identifier", ""), meta.get("bron", ""), meta.get("url", ""))))
    bwb = bwb_match.group(0).upper() if bwb_match else None
    doc_id = bwb.lower() if bwb else default_id
    title = meta.get("citeertitel") or meta.get("title") or h1 or default_id
    url = meta.get("bron") or meta.get("url") or (f"https://wetten.overheid.nl/{bwb}" if bwb else None)
    chunks: list[Chunk] = []
    for block in blocks:
        text = _clean("\n".join(block.lines))
        if not text:
            continue
        if block.article is None:  # preamble, annex, or other text outside an article
            chunk_title, chunk_url = title, url
            section = block.heading or ("Aanhef" if language == "nl" else "Preamble")
            part_word = "deel" if language == "nl" else "part"
        else:
            word, number = block.article.group("word").lower(), block.article.group("number")
            chunk_title, section = f"{title}, {word} {number}", block.heading or ""
            chunk_url = f"https://wetten.overheid.nl/jci1.3:c:{bwb}&artikel={number}" if bwb else url
            part_word = "deel" if word == "artikel" else "part"
        parts = split_paragraphs(text, ARTICLE_CHARS)
        for n, part in enumerate(parts, start=1):
            suffix = f" ({part_word} {n})" if len(parts) > 1 else ""
            full_section = section + suffix + (f" — {block.chapter}" if block.chapter else "")
            chunks.append(Chunk(doc_id, collection, len(chunks), chunk_title + suffix, full_section, part, chunk_url))

    dates = [meta.get(k, "") for k in ("toestand", "laatste_update", "publicatiedatum")]
    return Document(
        doc_id=doc_id,
        collection=collection,
        title=title,
        chunks=tuple(chunks),
        year=next((int(d[:4]) for d in dates if d[:4].isdigit()), None),  # of the consolidated version
        url=url,
        kind="official",
        language=language,
        metadata=dict(meta),
    )


# --- plain text and dispatch -----------------------------------------------------------


def parse_text(source: str, *, collection: str, title: str, doc_id: str) -> Document:
    """A plain-text file: one document, blank-line paragraphs grouped into chunks of about ``TEXT_CHARS``."""
    text = "\n".join(line.rstrip() for line in source.lstrip("\ufeff").strip().splitlines())
    language = detect_language(text)
    parts = split_paragraphs(re.sub(r"\n{3,}", "\n\n", text), TEXT_CHARS) if text else []
    part_word = "deel" if language == "nl" else "part"
    chunks = tuple(
        Chunk(doc_id, collection, i, title, f"{part_word} {i + 1}" if len(parts) > 1 else title, part)
        for i, part in enumerate(parts)
    )
    return Document(doc_id=doc_id, collection=collection, title=title, chunks=chunks, language=language)


def _sentences_within(text: str, limit: int) -> list[str]:
    """``split_paragraphs``, and a line longer than ``limit`` (a PDF paragraph is one line) cut between sentences."""
    out: list[str] = []
    for part in split_paragraphs(text, limit):
        if len(part) <= limit:
            out.append(part)
            continue
        current = ""
        for sentence in _SENTENCE_END.split(part):
            if current and len(current) + 1 + len(sentence) > limit:
                out.append(current)
                current = sentence
            else:
                current = f"{current} {sentence}" if current else sentence
        out.append(current)
    return out


def _page_label(first: int | None, last: int | None) -> str | None:
    """Where a chunk stands in a paged source: "p. 6", "pp. 6-7" (None without pages)."""
    if first is None:
        return None
    return f"p. {first}" if last is None else f"pp. {first}-{last}"


_LEAD_CHARS = 80  # a line at most this long, without a sentence end, may be a heading set as plain text


@dataclass(slots=True)
class _Group:
    """The units of one chunk while they are grouped: ``headings`` is the heading path of its text (not that of the
    headings leading into it), ``size`` its length with two characters between units."""

    headings: tuple[str, ...]
    units: list[Unit]
    size: int


def _leads_into(unit: Unit, following: Unit) -> bool:
    """Whether ``unit`` only introduces the text after it: a heading's own unit (its text is its heading, "5.4.11
    PRESSURIZER RELIEF TANK"), or a short line that looks like a heading ("Vraag 1": a capital or digit first, no
    sentence end, no table cells) above text under the same or a deeper heading path. Alone in a chunk it would be
    a search hit that says nothing, so it goes into the chunk of the text it introduces."""
    text = unit.text
    if unit.headings and text == unit.headings[-1]:
        return True
    looks_like_heading = (text[:1].isupper() or text[:1].isdigit()) and not re.search(r"[.!?;:,]$", text)
    return (looks_like_heading and len(text) <= _LEAD_CHARS and "\n" not in text and " | " not in text
            and sum(c.isalpha() for c in text) >= 3 and following.headings[:len(unit.headings)] == unit.headings)


def _place(groups: list[_Group], headings: tuple[str, ...], part: list[Unit]) -> None:
    """``part`` (leading headings and one piece of text under ``headings``) at the end of the last group when that
    holds text under the same headings and there is room, else as a new group."""
    size = sum(len(u.text) + 2 for u in part)
    last = groups[-1] if groups else None
    if last is not None and last.headings == headings and last.size + size - 2 <= TEXT_CHARS:
        last.units += part
        last.size += size
    else:
        groups.append(_Group(headings, list(part), size))


def _grouped(units: Iterable[Unit]) -> list[_Group]:
    """Units in groups of at most ``TEXT_CHARS`` under one heading path (a long unit cut between sentences); units
    that lead into the text after them (``_leads_into``) wait for it and go into its group. Headings that pile up
    past half a chunk with no text (a page of contents) are a group of their own."""
    listed = [replace(unit, text=unit.text.strip()) for unit in units if unit.text.strip()]
    groups: list[_Group] = []
    waiting: list[Unit] = []
    for n, unit in enumerate(listed):
        if n + 1 < len(listed) and _leads_into(unit, listed[n + 1]):
            waiting.append(unit)
            if sum(len(u.text) + 2 for u in waiting) > TEXT_CHARS // 2:
                _place(groups, unit.headings, waiting)
                waiting = []
            continue
        lead = sum(len(u.text) + 2 for u in waiting)
        limit = TEXT_CHARS - lead if lead + len(unit.text) > TEXT_CHARS else TEXT_CHARS
        for piece in _sentences_within(unit.text, limit):
            _place(groups, unit.headings, [*waiting, replace(unit, text=piece)])
            waiting = []
    return groups


def unit_chunks(units: Iterable[Unit], *, doc_id: str, collection: str, title: str, url: str | None,
                language: str) -> tuple[Chunk, ...]:
    """Units grouped into chunks of at most ``TEXT_CHARS``: a new heading path starts a new chunk, a heading goes
    into the chunk of the text under it (never a chunk alone, ``_grouped``), and a chunk's section names the heading
    of its text and its page(s) ("2.3 Scope, p. 6"; "pp. 6-7" when it runs over a page break)."""
    groups = _grouped(units)
    part_word = "deel" if language == "nl" else "part"
    chunks = []
    for i, group in enumerate(groups):
        pages = sorted({u.page for u in group.units if u.page is not None})
        page, page_end = (pages[0], pages[-1] if len(pages) > 1 else None) if pages else (None, None)
        place = [p for p in (group.headings[-1] if group.headings else None, _page_label(page, page_end)) if p]
        section = ", ".join(place) or (f"{part_word} {i + 1}" if len(groups) > 1 else title)
        chunk_url = f"{url.split('#')[0]}#page={page}" if url and page else url
        chunks.append(Chunk(doc_id, collection, i, title, section, "\n\n".join(u.text for u in group.units),
                            chunk_url, page, page_end))
    return tuple(chunks)


def extracted_document(extracted: Extracted, *, collection: str, default_id: str, default_title: str) -> Document:
    """A file read by a format reader (`docserver.formats`) as a chunked ``Document``, titled ``default_title``
    (the file's name made readable, ``_readable_name``) when the file states no title or only a placeholder
    ("Microsoft Word - x.doc", "Untitled": ``is_placeholder_title``)."""
    meta = {k: v for k, v in extracted.metadata.items() if v}
    if extracted.format == "bwb":
        language = extracted.language or "nl"
        h1 = extracted.title
        return law_document(meta, h1, law_blocks(extracted.units), collection=collection, default_id=default_id,
                            language=language)
    title = extracted.title if extracted.title and not is_placeholder_title(extracted.title) else default_title
    stated = (extracted.language or "")[:2].lower()  # "nl-NL" from an HTML lang attribute is Dutch
    language = stated if stated in ("nl", "en") else detect_language("\n".join(u.text for u in extracted.units))
    url = meta.get("url") or meta.get("bron") or None
    dates = [meta.get(k, "") for k in ("date", "created", "creationdate", "creation_date", "modified")]
    return Document(
        doc_id=default_id,
        collection=collection,
        title=title,
        chunks=unit_chunks(extracted.units, doc_id=default_id, collection=collection, title=title, url=url,
                           language=language),
        year=next((int(d[:4]) for d in dates if d[:4].isdigit()), None),
        url=url,
        kind="official" if extracted.format == "op" else None,
        language=language,
        metadata={"format": extracted.format, **({"pages": str(extracted.pages)} if extracted.pages else {}), **meta},
    )


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
            _text(stream.read(limits.max_bytes))
        raise


def parse_bytes(kind: str, data: bytes, path: Path, collection: str, limits: Limits | None = None) -> Document:
    """The bytes of the file ``path``, of format ``kind`` (``load``), as a ``Document``, read by the reader their
    content calls for (``docserver.formats``): PDF, DOCX, ODT, HTML, BWB law XML, official-publication XML; Markdown
    (law texts, corpus-style) and plain text here; stored ``as_plain``. Raises ``Refused`` with the reason when the
    file is not indexed."""
    if kind == "text":
        doc = parse_text(_text(data), collection=collection, title=_readable_name(path), doc_id=slug(path.stem))
    elif kind == "markdown":
        source = _text(data)
        meta, body = split_front_matter(source)
        if is_law_text(meta, body):
            doc = parse_law(source, collection=collection, default_id=slug(path.stem))
        else:
            doc = parse_document(source, collection=collection, default_id=slug(path.stem))
            doc = doc if doc.language else replace(doc, language=detect_language(body))
    else:  # the suffix is part of the id: the same paper as PDF and as HTML are two documents, each with a stable id
        doc = extracted_document(formats.extract(kind, data, limits or Limits()), collection=collection,
                                 default_id=slug(path.name), default_title=_readable_name(path))
    return as_plain(doc, markdown=kind == "markdown")


def _readable_name(path: Path) -> str:
    """A file's name as the title of a document that states none: "Kamerbrief_over-draagmoederschap_2011.pdf" ->
    "Kamerbrief over draagmoederschap 2011". The suffix, %-escapes, underscores and hyphens between words go (they
    stand for spaces a file name cannot have); a hyphen between digits ("2011-03-01", "32545-143") stays."""
    words = re.sub(r"(?<!\d)-+|-+(?!\d)", " ", unquote(path.stem).replace("_", " "))
    return " ".join(words.split()) or path.stem


def _text(data: bytes) -> str:
    """A Markdown or text file's bytes as text; ``Refused`` at the first NUL or invalid UTF-8 byte anywhere in it
    (the sniffer looks only at the start: a NUL further on would be indexed and handed out)."""
    nul = data.find(b"\x00")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        nul = exc.start if nul < 0 else min(nul, exc.start)
    if nul >= 0:
        raise Refused(f"binary data at byte {nul}")
    return text.removeprefix("\ufeff")


def as_plain(doc: Document, *, markdown: bool = False) -> Document:
    """``doc`` as stored: everything it carries besides its text is somebody else's, so its doc_id, title,
    sections, kind, language, disclaimer and metadata become one plain line (``textkit.untrusted.plain``: no
    newline can start a fake line, no escape sequence or bidi override reaches a screen) and its links http(s)
    or none (``safe_url``). ``markdown``: titles and sections were Markdown, whose links are read as their text."""

    def line(value: str | None) -> str:
        return plain(_LINK.sub(r"\1", value) if markdown and value else value)

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
) -> Report:
    """Parse ``paths`` into ``collection`` and store every file that could be read; the others are reported.

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
    files, passed = walk.discover(paths, wanted=_wanted, follow_symlinks=follow_symlinks)
    names = _relative_names(paths, files)
    stored = {} if force else stored_sources(index_path, collection)
    parsed: dict[str, _Read] = {}
    seen: dict[str, Path] = {}  # doc_id -> the file of this run it comes from
    report = Report()
    for not_read in passed:
        report.failures.append(Failure(not_read.path, not_read.reason))
        if on_file is not None:
            on_file(not_read.path, report.failures[-1])
    pages = 0
    run = _Run(collection, limits or Limits(), stored, seen, base_url, incoming_dir(resolve_index_path(index_path)))
    try:
        with _progress_bar(len(files), collection, progress) as bar:
            for found in files:
                outcome = _ingest_one(found, names[found.path], run)
                if isinstance(outcome, Failure):
                    report.failures.append(outcome)
                elif isinstance(outcome, Skipped):
                    report.skipped.append(outcome)
                    seen[outcome.doc_id] = found.path
                else:
                    parsed[outcome.document.doc_id] = outcome
                    seen[outcome.document.doc_id] = found.path
                    pages += _page_count(outcome.document)
                if on_file is not None:
                    on_file(found.path, outcome.document if isinstance(outcome, _Read) else outcome)
                bar.set_postfix(pages=pages, refresh=False)
                bar.update()
        if parsed:
            with DocumentStore(index_path) as store:
                store.save([(r.document, r.source) for r in parsed.values()], [r.original for r in parsed.values()])
    finally:  # the copies not moved among the originals (the save failed, or never came)
        for read in parsed.values():
            read.original.copy.unlink(missing_ok=True)
    report.documents = [r.document for r in parsed.values()]
    return report


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
    if not folders or not from_name or (kind == "markdown" and split_front_matter(_text(data))[0].get("doc_id")):
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
    seen: Mapping[str, Path]
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
