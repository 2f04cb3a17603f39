"""A file as read by its format reader (``docserver.formats``: an ``Extracted``) cut into the chunks of a ``Document``.

Chunks by format:

* laws (BWB XML and wetten.overheid.nl Markdown alike): one chunk per article, titled "Kernenergiewet, artikel 15a",
  with a deep link to the article; articles over ``ARTICLE_CHARS`` are split into parts at paragraph boundaries,
  preferably where a numbered "lid" starts;
* corpus-style Markdown: one chunk per ``## `` section, the document as its front matter describes it;
* plain text: blank-line paragraphs grouped to ``TEXT_CHARS``;
* the others (PDF, DOCX, ODT, HTML, official publications): units grouped under their heading path into chunks of
  ``TEXT_CHARS`` whose section names the place ("2.3 Scope, p. 6"), a heading never a chunk alone.
"""

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace

from textkit.articles import ARTICLE_HEADING
from textkit.language import DOCUMENT_WINDOW, detect_language

from .documents import Chunk, Document
from .formats import Extracted, Unit
from .formats.base import is_placeholder_title
from .formats.markdown import BWB_ID, LAW_FORMAT, clean, law, split_front_matter

__all__ = [
    "ARTICLE_CHARS", "TEXT_CHARS", "extracted_document", "law_document", "parse_law", "sections_document",
    "split_paragraphs", "unit_chunks",
]  # fmt: skip

ARTICLE_CHARS = 2500  # longer articles are split into parts
TEXT_CHARS = 1500  # the chunk size of plain text and of the units of the other formats
_SENTENCE_END = re.compile(r"(?<=[.!?;:])\s+(?=\S)")
_LID = re.compile(r"^\d+[a-z]?\.\s")  # "1. ", "2a. ": a numbered paragraph ("lid") of an article
_LEAD_CHARS = 80  # a line at most this long, without a sentence end, may be a heading set as plain text
_LAWS = ("bwb", LAW_FORMAT)
_DATES = ("date", "created", "creationdate", "creation_date", "modified")  # of a document read by a format reader
_LAW_DATES = ("toestand", "laatste_update", "publicatiedatum")  # of the consolidated version of a law


def extracted_document(extracted: Extracted, *, collection: str, default_id: str, default_title: str) -> Document:
    """A file read by a format reader as a chunked ``Document``, ``default_id`` when it names none itself (front
    matter ``doc_id``, a law's BWB id). A reader's title that is a placeholder ("Microsoft Word - x.doc",
    "Untitled": ``is_placeholder_title``) gives way to ``default_title`` (the file's name made readable), as does
    none; a corpus-style Markdown document without one is titled by its doc_id, as the bundled corpus is."""
    if extracted.format in _LAWS:
        meta = extracted.metadata if extracted.format == LAW_FORMAT else _stated(extracted.metadata)
        return law_document(meta, extracted.title, extracted.units, collection=collection, default_id=default_id,
                            language=extracted.language or "nl")
    if extracted.format == "markdown":
        return sections_document(extracted, collection=collection, default_id=default_id)
    if extracted.format == "text":
        return _text_document(extracted, collection=collection, doc_id=default_id, title=default_title)
    meta = _stated(extracted.metadata)
    title = extracted.title if extracted.title and not is_placeholder_title(extracted.title) else default_title
    stated = (extracted.language or "")[:2].lower()  # "nl-NL" from an HTML lang attribute is Dutch
    language = stated if stated in ("nl", "en") else _language("\n".join(u.text for u in extracted.units))
    url = meta.get("url") or meta.get("bron") or None
    return Document(
        doc_id=default_id,
        collection=collection,
        title=title,
        chunks=unit_chunks(extracted.units, doc_id=default_id, collection=collection, title=title, url=url,
                           language=language),
        year=_year(meta, _DATES),
        url=url,
        kind="official" if extracted.format == "op" else None,
        language=language,
        metadata={"format": extracted.format, **({"pages": str(extracted.pages)} if extracted.pages else {}), **meta},
    )


def _stated(metadata: Mapping[str, str]) -> dict[str, str]:
    """The metadata a reader found a value for."""
    return {k: v for k, v in metadata.items() if v}


def _year(meta: Mapping[str, str], keys: Iterable[str]) -> int | None:
    """The year of the first of ``keys`` whose value starts with one."""
    dates = [meta.get(k, "") for k in keys]
    return next((int(d[:4]) for d in dates if d[:4].isdigit()), None)


def _language(text: str) -> str:
    return detect_language(text, window=DOCUMENT_WINDOW)


def sections_document(extracted: Extracted, *, collection: str, default_id: str) -> Document:
    """A corpus-style Markdown document (``formats.markdown.sections``): each unit a chunk, its section the unit's
    heading (the title when it has none); doc_id, year, url and kind as the front matter gives them."""
    meta = extracted.metadata
    doc_id = meta.get("doc_id") or default_id
    title = extracted.title or doc_id
    chunks = tuple(Chunk(doc_id, collection, i, title, unit.headings[-1] if unit.headings else title, unit.text)
                   for i, unit in enumerate(extracted.units))
    year = meta.get("year", "")
    return Document(
        doc_id=doc_id,
        collection=collection,
        title=title,
        chunks=chunks,
        year=int(year) if year.isdigit() else None,
        url=meta.get("url") or None,
        kind=meta.get("kind") or None,
        language=extracted.language,
        disclaimer=extracted.disclaimer,
        metadata=meta,
    )


def _text_document(extracted: Extracted, *, collection: str, doc_id: str, title: str) -> Document:
    """A plain-text file: blank-line paragraphs grouped into chunks of about ``TEXT_CHARS``, "deel N" / "part N"."""
    text = "\n\n".join(unit.text for unit in extracted.units)
    language = extracted.language or "nl"
    parts = split_paragraphs(text, TEXT_CHARS) if text else []
    part_word = "deel" if language == "nl" else "part"
    chunks = tuple(
        Chunk(doc_id, collection, i, title, f"{part_word} {i + 1}" if len(parts) > 1 else title, part)
        for i, part in enumerate(parts)
    )
    return Document(doc_id=doc_id, collection=collection, title=title, chunks=chunks, language=language)


# --- laws ------------------------------------------------------------------------------------------------------------


def parse_law(source: str, *, collection: str, default_id: str) -> Document:
    """A wetten.overheid.nl-style Markdown law text, one chunk per article (long ones in parts)."""
    meta, body = split_front_matter(source)
    return extracted_document(law(meta, body), collection=collection, default_id=default_id, default_title=default_id)


@dataclass
class _Block:
    """The text under one heading of a law."""

    heading: str | None  # cleaned heading text; None for the text before the first heading
    article: re.Match[str] | None
    chapter: str | None
    lines: list[str]


def _blocks(units: Iterable[Unit]) -> list[_Block]:
    """A law's units (``formats.bwb``, ``formats.markdown.law``) as blocks: an article's unit has ``headings``
    (chapter, article heading) or (article heading,) and ``article`` its number."""
    blocks = []
    for unit in units:
        heading = unit.headings[-1] if unit.headings else None
        article = ARTICLE_HEADING.match(heading) if heading and unit.article else None
        chapter = unit.headings[0] if article and len(unit.headings) > 1 else None
        blocks.append(_Block(heading, article, chapter, unit.text.splitlines()))
    return blocks


def law_document(meta: Mapping[str, str], h1: str | None, units: Iterable[Unit], *, collection: str,
                 default_id: str, language: str) -> Document:
    """The chunks of a law, one per article (long ones in parts), whatever format it was read from."""
    bwb_match = BWB_ID.search(" ".join((meta.get("identifier", ""), meta.get("bron", ""), meta.get("url", ""))))
    bwb = bwb_match.group(0).upper() if bwb_match else None
    doc_id = bwb.lower() if bwb else default_id
    title = meta.get("citeertitel") or meta.get("title") or h1 or default_id
    url = meta.get("bron") or meta.get("url") or (f"https://wetten.overheid.nl/{bwb}" if bwb else None)
    chunks: list[Chunk] = []
    for block in _blocks(units):
        text = clean("\n".join(block.lines))
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
    return Document(
        doc_id=doc_id,
        collection=collection,
        title=title,
        chunks=tuple(chunks),
        year=_year(meta, _LAW_DATES),
        url=url,
        kind="official",
        language=language,
        metadata=dict(meta),
    )



# --- paragraphs and units into chunks ------------------------------------------------------------------------------


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
