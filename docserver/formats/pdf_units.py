"""A PDF's paragraphs (`pdf_layout.py`) as units under their headings, and the document's title and metadata.

Headings (a short paragraph in a larger or bold font) are a `Unit` of their own and also the last entry of the
`headings` path of the units after them. The title is /Title when that names the document, else a letter's subject
line or the largest heading of page 1 that is no masthead (`document_title`).
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import pypdfium2 as pdfium

from .base import Unit, is_placeholder_title
from .pdf_layout import Paragraph, paragraph_text, words_key

__all__ = ["document_metadata", "document_title", "units_of"]

_PDF_DATE = re.compile(r"^D:(\d{4})(\d{2})?(\d{2})?(\d{2})?(\d{2})?(\d{2})?")
_NUMBERED_CAPS = re.compile(r"^(?:[IVXLC]{1,5}|\d{1,2}(?:\.\d{1,2})*|[A-Z])\.\s+[A-Z][A-Z]+(?:\s+[A-Z&/-]+)+$")
_WORD = re.compile(r"[^\W\d_]{4,}")
_YEAR = re.compile(r"\b(?:19|20)\d\d\b")
_SUBJECT = re.compile(r"^(?:(?:onderwerp|betreft|subject)\b\s*:?|re:)\s*(?P<subject>\S.*)$", re.IGNORECASE)
_LABEL = re.compile(r"^(?:nr|no|nummer|number)?\.?\s*\d[\d .]*$", re.IGNORECASE)  # "32 545", "Nr. 143"
_CONTENTS = frozenset({"contents", "table of contents", "inhoud", "inhoudsopgave", "inhoudstafel", "index",
                       "sommaire", "inhalt", "inhaltsverzeichnis"})


def units_of(paragraphs: list[tuple[int, Paragraph]], body: float) -> Iterator[Unit]:
    """One unit per paragraph; a heading is a unit too and the last entry of the path of the units after it."""
    path: list[tuple[float, str]] = []
    for page, paragraph in paragraphs:
        text = re.sub(r"[ \t]+", " ", paragraph_text(paragraph.lines)).strip()
        if not text:
            continue
        level = _heading_level(paragraph, text, body)
        if level is not None:
            while path and path[-1][0] <= level:
                path.pop()
            path.append((level, text))
        yield Unit(text, page=page, headings=tuple(heading for _, heading in path))


def _heading_level(paragraph: Paragraph, text: str, body: float) -> float | None:
    """The font height of a heading (bold body text ranks just above the body), None when it is not a heading."""
    if len(paragraph.lines) > 2 or len(text.split()) > 14 or paragraph.lines[0].cells > 1:
        return None
    if re.search(r"[.,;]$", text) or sum(c.isalpha() for c in text) < 3:
        return None
    if paragraph.size >= 1.15 * body:
        return paragraph.size
    if all(line.bold for line in paragraph.lines) and paragraph.size >= 0.95 * body:
        return body + 0.05
    if _NUMBERED_CAPS.match(text) and text.upper() == text and paragraph.size >= 0.95 * body:
        return body + 0.05  # "II. ACCEPTANCE CRITERIA": a numbered heading in capitals, not set in bold
    return None


def document_title(document: pdfium.PdfDocument, first_page: list[Paragraph], body: float, repeated: set[str]
           ) -> str | None:
    """The title people know the document by: /Title when it names this document (`_names_document`), else a
    letter's subject ("Onderwerp Draagmoederschap"), else the heading of page 1 in the largest font (the first of
    equals) that is not a masthead, a running header or a table of contents' heading (`_is_masthead`); None when
    there is none (the ingest then names the document after its file). `repeated`: the running rows of the other
    pages (`repeated_rows`)."""
    first_text = " ".join(line.text for paragraph in first_page for line in paragraph.lines)
    stated = _one_line(document.get_metadata_value("Title") or "")
    if _names_document(stated, first_text):
        return stated[:300]
    subject = _subject(first_page)
    if subject is not None:
        return subject[:300]
    author = words_key(document.get_metadata_value("Author") or "")
    headings: list[tuple[float, int, str]] = []
    for n, paragraph in enumerate(first_page):
        heading = _title_heading(paragraph, body)
        if heading is not None and not _is_masthead(heading[1], author, repeated):
            headings.append((heading[0], -n, heading[1]))
    if not headings:
        return None
    _, position, text = max(headings, key=lambda h: h[:2])
    if _labelled(first_page[-position]) is not None:
        text = _with_series(text, first_page[1 - position:])
    return text[:300]


def _one_line(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip()


def _names_document(title: str, first_text: str) -> bool:
    """Whether /Title names this document: not a file name or a generator's default (`is_placeholder_title`), at
    least half of its words on page 1 (not the title of the template it was made from), and no year page 1 does
    not name ("Normenbrief 1 januari 2025" on the letter of 2026: the title of last year's edition)."""
    if is_placeholder_title(title):
        return False
    words = _WORD.findall(title.lower())
    lower = first_text.lower()
    if words and sum(word in lower for word in words) < 0.5 * len(words):
        return False
    return all(year in first_text for year in _YEAR.findall(title))


def _subject(first_page: list[Paragraph]) -> str | None:
    """A letter's subject line on page 1 ("Onderwerp Draagmoederschap", "Betreft: ...", "Subject: ..."): a letter
    has no heading, and its subject is how its readers name it."""
    for paragraph in first_page:
        if len(paragraph.lines) > 2:
            continue
        match = _SUBJECT.match(_one_line(paragraph_text(paragraph.lines).replace(" | ", " ")))
        subject = match.group("subject").rstrip(" .") if match else ""
        if sum(c.isalpha() for c in subject) >= 3 and len(subject.split()) <= 20:
            return subject
    return None


def _title_heading(paragraph: Paragraph, body: float) -> tuple[float, str] | None:
    """A paragraph of page 1 that may be the title, with its rank: a heading (`_heading_level`), or a labelled
    heading row (`_labelled`) ranked by its font size."""
    text = _one_line(paragraph_text(paragraph.lines))
    level = _heading_level(paragraph, text, body)
    if level is not None:
        return level, text
    labelled = _labelled(paragraph)
    return (paragraph.size, labelled) if labelled is not None else None


def _labelled(paragraph: Paragraph) -> str | None:
    """A bold line of two cells, a number and a heading: "32 545 | Wet- en regelgeving financiële markten" and "Nr.
    143 | MOTIE VAN DE LEDEN ..." name a Kamerstuk's dossier and the paper itself. As "label heading", else None."""
    line = paragraph.lines[0]
    if len(paragraph.lines) > 1 or line.cells != 2 or not line.bold:
        return None
    label, text = line.text.split(" | ", 1)
    if not _LABEL.match(label) or re.search(r"[.,;]$", text) or len(text.split()) > 14:
        return None
    return f"{label} {text}" if sum(c.isalpha() for c in text) >= 3 else None


def _with_series(title: str, after: list[Paragraph]) -> str:
    """A labelled heading row joined with the labelled rows right below it ("; " between), as the dossier of a
    Kamerstuk and its number are one title: "32 545 Wet- en regelgeving financiële markten; Nr. 143 MOTIE ..."
    (paragraphs without words, a large decorative digit, may stand between)."""
    parts = [title]
    for paragraph in after:
        labelled = _labelled(paragraph)
        if labelled is not None:
            parts.append(labelled)
        elif any(c.isalpha() for line in paragraph.lines for c in line.text):
            break
    return "; ".join(parts)


def _is_masthead(text: str, author: str, repeated: set[str]) -> bool:
    """Whether a heading of page 1 names the publisher or a series, not the document: it is the /Author ("Tweede
    Kamer der Staten-Generaal" on every Kamerstuk), a running header of the other pages, or the heading of a table
    of contents ("Contents", "Inhoudsopgave")."""
    key = words_key(text)
    return key in _CONTENTS or key == author or key in repeated


def document_metadata(document: pdfium.PdfDocument, pages: int, without_text: list[int]) -> dict[str, str]:
    info = document.get_metadata_dict(skip_empty=True)
    metadata = {
        key: re.sub(r"\s+", " ", info[name]).strip()
        for key, name in (("author", "Author"), ("subject", "Subject"), ("keywords", "Keywords"),
                          ("creator", "Creator"), ("producer", "Producer"))
        if info.get(name, "").strip()
    }
    for key, name in (("created", "CreationDate"), ("modified", "ModDate")):
        date = _iso_date(info.get(name, ""))
        if date:
            metadata[key] = date
    metadata["pages"] = str(pages)
    if without_text:
        metadata["pages_without_text"] = ", ".join(map(str, without_text))
    return metadata


def _iso_date(value: str) -> str | None:
    """A PDF date ("D:20200806095125Z") as ISO 8601 ("2020-08-06T09:51:25"), None when it is not one."""
    match = _PDF_DATE.match(value.strip())
    if not match:
        return None
    year, month, day, hour, minute, second = match.groups()
    date = f"{year}-{month or '01'}-{day or '01'}"
    return f"{date}T{hour}:{minute or '00'}:{second or '00'}" if hour else date
