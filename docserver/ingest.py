"""Ingesting Markdown and plain-text files into the persisted index (``python -m docserver ingest``).

Three kinds of files:

* Dutch law texts as Markdown in the wetten.overheid.nl style (front matter
  with ``title``, ``identifier`` = BWB id, ``bron``, dates; ``### Hoofdstuk``
  and ``#### Artikel N`` headings, also ``####Artikel N`` and ``Article N``):
  one chunk per article, titled "Kernenergiewet, artikel 15a", with a deep
  link to the article; articles over ``ARTICLE_CHARS`` are split into parts
  at paragraph boundaries, preferably where a numbered "lid" starts.
* Other Markdown (the bundled corpus format) goes through ``parse_document``.
* Plain text: one document, blank-line paragraphs grouped to ``TEXT_CHARS``.
"""

import re
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from textkit import normalize

from .corpus import Chunk, Document, parse_document, split_front_matter
from .store import DocumentStore

__all__ = [
    "ARTICLE_CHARS",
    "TEXT_CHARS",
    "discover",
    "ingest",
    "is_law_text",
    "parse_file",
    "parse_law",
    "parse_text",
    "split_paragraphs",
]

ARTICLE_CHARS = 2500  # longer articles are split into parts
TEXT_CHARS = 1500  # plain-text chunk size
MARKDOWN_SUFFIXES = (".md", ".markdown")
TEXT_SUFFIXES = (".txt", ".text")
COLLECTION_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")

_HEADING = re.compile(r"^(#{1,6})\s*(\S.*?)\s*$")
_ARTICLE = re.compile(
    r"^(?P<word>artikel|article)\s+(?P<number>\d+[a-z]*(?:\.\d+[a-z]*)*|[IVXLC]+[a-z]?)\b\.?\s*(?P<caption>.*)$",
    re.IGNORECASE,
)
_CHAPTER = re.compile(r"^(hoofdstuk|chapter)\b", re.IGNORECASE)
_ANNEX = re.compile(r"^(bijlage|annex)\b", re.IGNORECASE)
_LINK = re.compile(r"\[([^\]]*)\]\([^)\s]*\)")
_BWB = re.compile(r"\bBWB[RV]\d{7}\b", re.IGNORECASE)
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
    bwb_match = _BWB.search(" ".join((meta.get("identifier", ""), meta.get("bron", ""), meta.get("url", ""))))
    bwb = bwb_match.group(0).upper() if bwb_match else None
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

    doc_id = bwb.lower() if bwb else default_id
    title = meta.get("citeertitel") or meta.get("title") or h1 or default_id
    url = meta.get("bron") or meta.get("url") or (f"https://wetten.overheid.nl/{bwb}" if bwb else None)
    language = meta.get("language") or detect_language(body)
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
        metadata=meta,
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


def parse_file(path: Path, collection: str) -> Document:
    """One file as a ``Document``: law text, corpus-style Markdown or plain text, by suffix and content."""
    source = path.read_text(encoding="utf-8-sig")
    default_id = slug(path.stem)
    if path.suffix.lower() not in MARKDOWN_SUFFIXES:
        return parse_text(source, collection=collection, title=path.stem, doc_id=default_id)
    meta, body = split_front_matter(source)
    if is_law_text(meta, body):
        return parse_law(source, collection=collection, default_id=default_id)
    doc = parse_document(source, collection=collection, default_id=default_id)
    return doc if doc.language else replace(doc, language=detect_language(body))


def discover(paths: Iterable[Path | str]) -> list[Path]:
    """The files to ingest: named files as given, directories walked recursively for Markdown
    and text files (skipping hidden entries and README files, which describe a folder)."""
    found: dict[Path, None] = {}
    for raw in paths:
        path = Path(raw)
        if path.is_file():
            found[path] = None
        elif path.is_dir():
            for file in sorted(path.rglob("*")):
                relative = file.relative_to(path).parts
                if (
                    file.is_file()
                    and file.suffix.lower() in MARKDOWN_SUFFIXES + TEXT_SUFFIXES
                    and not any(part.startswith(".") for part in relative)
                    and not file.name.lower().startswith("readme")
                ):
                    found[file] = None
        else:
            raise FileNotFoundError(f"no such file or directory: {path}")
    return list(found)


def ingest(
    paths: Sequence[Path | str],
    collection: str,
    *,
    index_path: Path | str | None = None,
    progress: bool = False,
) -> list[Document]:
    """Parse ``paths`` into ``collection`` and store them in the index (all or nothing).

    Re-ingesting a file replaces its document (same collection and doc_id).
    ``progress`` shows a tqdm bar on stderr (only when stderr is a terminal).
    """
    if not COLLECTION_NAME.match(collection):
        raise ValueError(f"invalid collection name {collection!r}")
    files: Iterable[Path] = discover(paths)
    if progress:
        # Imported lazily: serving never needs it (the mcp 1.x compatibility venv does not even install it).
        from tqdm import tqdm

        files = tqdm(files, desc=f"ingest {collection}", unit="file", file=sys.stderr, disable=not sys.stderr.isatty())
    parsed: dict[str, tuple[Document, str]] = {}
    for file in files:
        try:
            doc = parse_file(file, collection)
        except (OSError, ValueError) as exc:  # includes UnicodeDecodeError
            raise ValueError(f"{file}: {exc}") from exc
        if not doc.chunks:
            raise ValueError(f"{file}: no text to index")
        if doc.doc_id in parsed:
            raise ValueError(f"{file}: doc_id {doc.doc_id!r} also comes from {parsed[doc.doc_id][1]}")
        parsed[doc.doc_id] = (doc, str(file.resolve()))
    with DocumentStore(index_path) as store:
        store.save(parsed.values())
    return [doc for doc, _ in parsed.values()]
