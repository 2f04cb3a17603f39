"""ODT reader: the text of content.xml as paragraphs, list items and table rows under their heading path.

An ODT file is a ZIP of XML parts: content.xml holds the text, meta.xml the title, author, dates and language.
Both are read through `zipguard.read_members` (bounded against zip bombs) and parsed with `defusedxml` with DTDs
refused outright, so no entity is ever expanded and no external entity fetched.

Headings are `text:h` elements; their `text:outline-level` (1 when absent) places them in the heading path
(`Unit.headings`) of what follows, and they are not units themselves. Tables come out as rows, cells joined with
" | ", one unit per table or per group of rows when long (header rows repeated in each group); a nested table's rows
follow the row that holds it. Footnotes and text boxes are read after the paragraph that holds them. Not read: tables
of contents and other generated indexes, tracked deletions, comments, forms, the styles' page headers and footers,
list numbering (the application computes it; it is not in the text).
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Iterator
from itertools import takewhile

from .base import Deadline, Extracted, Limits, Refused, Unit
from .common import HeadingPath, clean, meaningful, nested_too_deeply, parse_part, row_groups
from .zipguard import read_members

__all__ = ["read"]

CONTENT = "content.xml"
META = "meta.xml"

TEXT = "urn:oasis:names:tc:opendocument:xmlns:text:1.0"
TABLE = "urn:oasis:names:tc:opendocument:xmlns:table:1.0"
OFFICE = "urn:oasis:names:tc:opendocument:xmlns:office:1.0"
DRAW = "urn:oasis:names:tc:opendocument:xmlns:drawing:1.0"
META_NS = "urn:oasis:names:tc:opendocument:xmlns:meta:1.0"
DC = "http://purl.org/dc/elements/1.1/"

# block elements that are left out with everything in them
_SKIPPED = {
    f"{{{TEXT}}}{name}"
    for name in (
        "table-of-content",
        "alphabetical-index",
        "illustration-index",
        "table-index",
        "object-index",
        "user-index",
        "bibliography",
        "tracked-changes",
        "sequence-decls",
        "variable-decls",
        "user-field-decls",
    )
} | {f"{{{OFFICE}}}forms", f"{{{OFFICE}}}annotation", f"{{{OFFICE}}}annotation-end"}
_ROW_CONTAINERS = {f"{{{TABLE}}}{name}" for name in ("table-header-rows", "table-rows", "table-row-group")}
_GENERIC_TITLES = {"untitled", "document", "default", "title", "titel", "naamloos", "sjabloon", "template"}
_META_KEYS = {
    f"{{{DC}}}creator": "author",
    f"{{{META_NS}}}initial-creator": "initial_creator",
    f"{{{DC}}}date": "modified",
    f"{{{META_NS}}}creation-date": "created",
    f"{{{DC}}}description": "description",
    f"{{{DC}}}subject": "subject",
    f"{{{META_NS}}}keyword": "keywords",
    f"{{{DC}}}language": "language",
}


def read(data: bytes, limits: Limits, deadline: Deadline) -> Extracted:
    """An ODT file's text as units under their heading paths, with the title and metadata of meta.xml."""
    parts = read_members(data, limits, deadline, CONTENT, (META,))
    root = parse_part(parts[CONTENT], CONTENT, deadline)
    text = root.find(f"{{{OFFICE}}}body/{{{OFFICE}}}text")
    if text is None:
        raise Refused(f"{CONTENT} holds no text document (office:body/office:text)")
    reader = _Body(deadline)
    with nested_too_deeply("document"):
        reader.blocks(text)
    metadata = _meta(parse_part(parts[META], META, deadline)) if META in parts else {}
    title = metadata.pop("title", None) or reader.outline.first
    return Extracted(
        format="odt", title=title, units=tuple(reader.units), metadata=metadata, language=metadata.get("language")
    )


class _Body:
    """Walks office:text in document order, keeping the heading path and collecting units."""

    def __init__(self, deadline: Deadline) -> None:
        self.deadline = deadline
        self.units: list[Unit] = []
        self.outline = HeadingPath()

    def blocks(self, container: ET.Element) -> None:
        for child in container:
            self.deadline.check("reading the ODT body")
            tag = child.tag
            if tag in _SKIPPED:
                continue
            if tag == f"{{{TEXT}}}h":
                self.heading(child)
            elif tag == f"{{{TEXT}}}p":
                self.paragraph(child)
            elif tag == f"{{{TABLE}}}table":
                self.table(child)
            else:  # sections, lists and list items, frames and text boxes, soft page breaks: look inside
                self.blocks(child)

    def heading(self, h: ET.Element) -> None:
        text = clean(_inline_text(h))
        level_value = h.get(f"{{{TEXT}}}outline-level", "1")
        level = int(level_value) if level_value.isdigit() else 1
        if meaningful(text):
            self.outline.enter(level, text)
        self.embedded(h)

    def paragraph(self, p: ET.Element) -> None:
        text = clean(_inline_text(p))
        if meaningful(text):
            self.units.append(Unit(text, headings=self.outline.current()))
        self.embedded(p)

    def embedded(self, element: ET.Element) -> None:
        """Footnote bodies and text boxes inside a paragraph, read as blocks of their own after it."""
        for block in _embedded_blocks(element):
            self.blocks(block)

    def table(self, table: ET.Element) -> None:
        rows = list(self.rows(table))
        header = [text for text, is_header in takewhile(lambda row: row[1], rows)]
        body = [text for text, _ in rows[len(header) :]]
        headings = self.outline.current()
        for group in row_groups(header, body):
            self.units.append(Unit(group, headings=headings))

    def rows(self, table: ET.Element) -> Iterator[tuple[str, bool]]:
        """(row text with cells joined by " | ", is a header row) for each row, nested tables' rows after theirs.
        Repeated rows and cells (table:number-*-repeated) are read once: repeats are layout, mostly empty."""
        for row, is_header in _table_rows(table, False):
            self.deadline.check("reading an ODT table")
            cells: list[str] = []
            nested: list[ET.Element] = []
            for cell in row:
                if cell.tag != f"{{{TABLE}}}table-cell":  # table:covered-table-cell is a merged cell's shadow
                    continue
                texts = [clean(_inline_text(block)) for block in _cell_blocks(cell, nested)]
                text = " ".join(part for part in texts if meaningful(part))
                if text:
                    cells.append(text)
            if cells:
                yield " | ".join(cells), is_header
            for inner in nested:
                for text, _ in self.rows(inner):
                    yield text, False


def _table_rows(table: ET.Element, in_header: bool) -> Iterator[tuple[ET.Element, bool]]:
    """A table's rows in order, with whether they are header rows (inside table:table-header-rows)."""
    for child in table:
        if child.tag == f"{{{TABLE}}}table-row":
            yield child, in_header
        elif child.tag in _ROW_CONTAINERS:
            yield from _table_rows(child, in_header or child.tag == f"{{{TABLE}}}table-header-rows")


def _cell_blocks(container: ET.Element, nested: list[ET.Element]) -> Iterator[ET.Element]:
    """The paragraphs and headings of a cell, looking through lists and sections; nested tables go to `nested`."""
    for child in container:
        if child.tag in (f"{{{TEXT}}}p", f"{{{TEXT}}}h"):
            yield child
        elif child.tag == f"{{{TABLE}}}table":
            nested.append(child)
        elif child.tag not in _SKIPPED:
            yield from _cell_blocks(child, nested)


def _inline_text(element: ET.Element) -> str:
    """A paragraph's text: spans and links followed, text:s as spaces, tabs and line breaks as spaces; footnotes,
    frames and comments left out (footnotes and text boxes are read as blocks of their own)."""
    parts = [element.text or ""]
    for child in element:
        tag = child.tag
        if tag == f"{{{TEXT}}}s":
            count = child.get(f"{{{TEXT}}}c", "1")
            parts.append(" " * min(int(count) if count.isdigit() else 1, 100))
        elif tag in (f"{{{TEXT}}}tab", f"{{{TEXT}}}line-break"):
            parts.append(" ")
        elif tag in (f"{{{TEXT}}}note", f"{{{DRAW}}}frame", f"{{{DRAW}}}a") or tag in _SKIPPED:
            pass
        else:
            parts.append(_inline_text(child))
        parts.append(child.tail or "")
    return "".join(parts)


def _embedded_blocks(element: ET.Element) -> Iterator[ET.Element]:
    """The footnote bodies and text boxes in a paragraph (outermost ones; their own inner ones are theirs)."""
    for child in element:
        if child.tag == f"{{{TEXT}}}note-body" or child.tag == f"{{{DRAW}}}text-box":
            yield child
        elif child.tag not in _SKIPPED:
            yield from _embedded_blocks(child)


def _meta(root: ET.Element) -> dict[str, str]:
    """meta.xml as metadata ("title" among them when it is a meaningful title); user-defined fields keep their
    names, and those named *DC.identifier and *DC.creator also give "identifier" and "author" when those lack."""
    metadata: dict[str, str] = {}
    office_meta = root.find(f"{{{OFFICE}}}meta")
    for child in office_meta if office_meta is not None else ():
        value = clean(child.text or "")
        if not value:
            continue
        if child.tag == f"{{{DC}}}title":
            if meaningful(value) and value.lower() not in _GENERIC_TITLES:
                metadata["title"] = value
        elif child.tag in _META_KEYS:
            key = _META_KEYS[child.tag]
            metadata[key] = f"{metadata[key]}; {value}" if key in metadata else value
        elif child.tag == f"{{{META_NS}}}user-defined" and (name := child.get(f"{{{META_NS}}}name", "")):
            metadata[name] = f"{metadata[name]}; {value}" if name in metadata else value
    for name, value in list(metadata.items()):
        if name.endswith("DC.identifier"):
            metadata.setdefault("identifier", value)
        elif name.endswith("DC.creator"):
            metadata.setdefault("author", value)
    return metadata
