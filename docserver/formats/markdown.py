"""Markdown reader: the bundled corpus's format, and Dutch law texts in the wetten.overheid.nl style.

Both open with front matter (``key: value`` lines between two ``---`` lines), returned as the metadata; which of the
two a file is, is read from it (``is_law_text``):

* A law text (front matter with ``title``, ``identifier`` = BWB id, ``bron``, dates; ``### Hoofdstuk`` and
  ``#### Artikel N`` headings, also ``####Artikel N`` and ``Article N``; or several article headings and no corpus
  front matter): one unit per heading, an article's with ``article`` its number and ``headings`` (chapter, article
  heading) or (article heading,), as the BWB reader gives them (``bwb.py``); format "law-markdown". The ingest cuts
  it into one chunk per article (``docserver/chunking.py``).
* Corpus-style Markdown (front matter ``doc_id``, ``title``, ``year``, ``url``, ``kind``, ``language``; an H1, a
  quoted disclaimer ``> ...`` and ``## `` sections): one unit per section that holds text, its heading the one entry
  of ``headings``; a text without sections is one unit. Format "markdown"; the ingest makes each unit a chunk.

A document that states no ``language`` gets the one its words say (``textkit.language``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import replace

from textkit.articles import ARTICLE_HEADING
from textkit.language import DOCUMENT_WINDOW, detect_language

from .base import Deadline, Extracted, Limits, Refused, Unit
from .text import decoded

__all__ = ["BWB_ID", "LAW_FORMAT", "clean", "is_law_text", "law", "read", "sections", "split_front_matter", "unlinked"]

LAW_FORMAT = "law-markdown"

_HEADING = re.compile(r"^(#{1,6})\s*(\S.*?)\s*$")
_CHAPTER = re.compile(r"^(hoofdstuk|chapter)\b", re.IGNORECASE)
_ANNEX = re.compile(r"^(bijlage|annex)\b", re.IGNORECASE)
_LINK = re.compile(r"\[([^\]]*)\]\((?:[^()\s]|\([^()\s]*\))*\)")  # [text](url), url with one level of (...)
BWB_ID = re.compile(r"\bBWB[RV]\d{7}\b", re.IGNORECASE)  # a law's id in the BWB repository, in a field or a link


def read(data: bytes, limits: Limits, deadline: Deadline) -> Extracted:
    """A Markdown file as a law text's articles or a corpus document's sections; ``Refused`` when it holds binary
    data or no text, ``ValueError`` when its front matter is not closed."""
    meta, body = split_front_matter(decoded(data))
    extracted = law(meta, body) if is_law_text(meta, body) else sections(meta, body, detect=True)
    if not any(unit.text.strip() for unit in extracted.units):
        raise Refused("no text to index")
    return extracted


def _language(body: str) -> str:
    return detect_language(body, window=DOCUMENT_WINDOW)


def split_front_matter(source: str) -> tuple[dict[str, str], str]:
    """(``key: value`` pairs of a leading ``---`` block, the rest of the text)."""
    lines = source.lstrip("\ufeff").splitlines()
    if not lines or lines[0].strip() != "---":
        return {}, "\n".join(lines)
    meta: dict[str, str] = {}
    for end in range(1, len(lines)):
        line = lines[end]
        if line.strip() == "---":
            return meta, "\n".join(lines[end + 1 :])
        key, sep, value = line.partition(":")
        if sep and key.strip() and not line.startswith((" ", "\t", "#")):
            meta[key.strip()] = _unquote(value.strip())
    raise ValueError("unterminated front matter")


def _unquote(value: str) -> str:
    if len(value) >= 2 and value[0] == value[-1] == '"':
        try:
            return str(json.loads(value))
        except json.JSONDecodeError:
            return value[1:-1]
    if len(value) >= 2 and value[0] == value[-1] == "'":
        return value[1:-1].replace("''", "'")
    return value


def unlinked(text: str) -> str:
    """Markdown links as their text: "[Artikel 1](https://...)" -> "Artikel 1"."""
    return _LINK.sub(r"\1", text)


def clean(text: str) -> str:
    """Markdown links become their text (their URLs would be indexed as noise), blank runs collapse."""
    lines = [unlinked(line).rstrip() for line in text.strip().splitlines()]
    return re.sub(r"\n{3,}", "\n\n", "\n".join(lines)).strip()


# --- corpus-style Markdown -------------------------------------------------------------------------------------------


def sections(meta: Mapping[str, str], body: str, *, detect: bool = False) -> Extracted:
    """A corpus-style document: one unit per ``## `` section with text, titled by its front matter or H1 (None
    when it has neither), its language as the front matter states it; when it states none, the one its words say
    with ``detect`` (a file ingested), else None (the bundled corpus, ``docserver/corpus.py``)."""
    heading, disclaimer, parts = _split_sections(body)
    units = tuple(Unit(text, headings=(name,) if name else ()) for name, text in parts)
    language = meta.get("language") or (_language(body) if detect else None)
    return Extracted(format="markdown", title=meta.get("title") or heading or None, units=units, metadata=meta,
                     language=language, disclaimer=disclaimer)


def _split_sections(body: str) -> tuple[str | None, str | None, list[tuple[str, str]]]:
    """(H1 text, disclaimer, [(section heading, section text), ...])."""
    heading: str | None = None
    quote: list[str] = []
    preamble: list[str] = []
    sections: list[tuple[str, list[str]]] = []
    for line in body.splitlines():
        if line.startswith("## "):
            sections.append((line[3:].strip(), []))
        elif sections:
            sections[-1][1].append(line)
        elif line.startswith("# ") and heading is None:
            heading = line[2:].strip()
        elif line.startswith(">"):
            quote.append(line[1:].strip())
        else:
            preamble.append(line)
    disclaimer = " ".join(q for q in quote if q) or None
    texts = [(name, "\n".join(lines).strip()) for name, lines in sections]
    chunks = [(name, text) for name, text in texts if text]
    if not sections and "\n".join(preamble).strip():
        chunks = [("", "\n".join(preamble).strip())]
    return heading, disclaimer, chunks


# --- law texts -------------------------------------------------------------------------------------------------------


def is_law_text(meta: Mapping[str, str], body: str) -> bool:
    """wetten.overheid.nl-style: a BWB identifier, or several article headings, and no corpus front matter."""
    if meta.get("doc_id") or meta.get("kind"):
        return False
    if BWB_ID.search(meta.get("identifier", "")) or "wetten.overheid.nl" in meta.get("bron", ""):
        return True
    headings = (_HEADING.match(line) for line in body.splitlines() if line.startswith("#"))
    return sum(1 for h in headings if h and ARTICLE_HEADING.match(clean(h.group(2)))) >= 2


def law(meta: Mapping[str, str], body: str) -> Extracted:
    """A law text: the text under each heading one unit (the text before the first heading too, without
    headings), titled by its H1; its language as the front matter states it, else the one its words say."""
    h1: str | None = None
    units: list[Unit] = [Unit("")]
    lines: list[list[str]] = [[]]
    chapter: tuple[int, str] | None = None  # (heading level, text)
    for line in body.splitlines():
        heading = _HEADING.match(line)
        if heading is None:
            lines[-1].append(line)
            continue
        level, text = len(heading.group(1)), re.sub(r"\s+", " ", clean(heading.group(2)))
        if level == 1 and h1 is None:
            h1 = text
            continue
        if _CHAPTER.match(text):
            chapter = (level, text)
        elif chapter is not None and (level < chapter[0] or _ANNEX.match(text)):  # "Afdeling 2." stays inside
            chapter = None
        article = ARTICLE_HEADING.match(text)
        within = (chapter[1],) if chapter and article else ()
        units.append(Unit("", headings=(*within, text), article=article.group("number") if article else None))
        lines.append([])
    return Extracted(format=LAW_FORMAT, title=h1, metadata=meta, language=meta.get("language") or _language(body),
                     units=tuple(replace(unit, text="\n".join(text)) for unit, text in zip(units, lines, strict=True)))
