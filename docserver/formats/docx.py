"""DOCX reader: the body of word/document.xml as paragraphs and table rows under their heading path.

Why not python-docx: it opens the ZIP itself (past `zipguard`'s bounded reader), parses with lxml settings that do
not forbid DTDs, and its paragraph/table iteration skips content controls (`w:sdt`), which fill-in templates are made
of. Reading the few parts we need through `zipguard.read_members` and `defusedxml` (DTDs refused outright, so no
entity expansion and no external entity is ever fetched) is less code to trust and covers those cases.

Headings come from the paragraph style (its name "heading N", "Kop N" or "Title", or the style's outline level,
followed through `basedOn`) or the paragraph's own outline level. A heading is not a unit of its own: it becomes the
path (`Unit.headings`) of what follows. Tables come out as rows, cells joined with " | ", one unit per table or per
group of rows when long (header rows repeated in each group); a nested table's rows follow the row that holds it.
Text boxes are read after the paragraph that anchors them. Not read: headers, footers, footnotes, comments,
deleted revisions, placeholder text of empty content controls, a table of contents, list numbering (Word computes
it; it is not in the text).
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from itertools import takewhile

from .base import Deadline, Extracted, Limits, Refused, Unit
from .common import HeadingPath, clean, meaningful, nested_too_deeply, parse_part, row_groups
from .zipguard import read_members

__all__ = ["read"]

DOCUMENT = "word/document.xml"
STYLES = "word/styles.xml"
CORE = "docProps/core.xml"

_HEADING_NAME = re.compile(r"^(?:heading|kop)\s*(\d)$", re.IGNORECASE)
_TITLE_NAMES = {"title", "titel"}
_TOC_NAME = re.compile(r"^(?:toc|inhopg|inhoudsopgave)\s*\d*$|^toc heading$", re.IGNORECASE)
_WRAPPERS = {"sdtContent", "customXml", "ins", "moveTo"}  # block-level elements that only wrap others
MATH = "http://schemas.openxmlformats.org/officeDocument/2006/math"
_SKIP_INLINE = {"pPr", "rPr", "txbxContent", "Fallback", "del", "moveFrom", "instrText", "delText", "commentReference"}
_CORE_KEYS = {
    "creator": "author",
    "subject": "subject",
    "description": "description",
    "keywords": "keywords",
    "created": "created",
    "modified": "modified",
    "language": "language",
}
_GENERIC_TITLES = {"untitled", "document", "default", "title", "titel", "naamloos", "sjabloon", "template"}


def read(data: bytes, limits: Limits, deadline: Deadline) -> Extracted:
    """A DOCX file's text as units under their heading paths, with the title and metadata of docProps/core.xml."""
    parts = read_members(data, limits, deadline, DOCUMENT, (STYLES, CORE))
    root = parse_part(parts[DOCUMENT], DOCUMENT, deadline)
    w = _namespace(root)
    body = root.find(f"{{{w}}}body")
    if body is None:
        raise Refused(f"{DOCUMENT} has no document body")
    styles = _styles(parse_part(parts[STYLES], STYLES, deadline), w, deadline) if STYLES in parts else ({}, set())
    levels, toc_styles = styles
    reader = _Body(w, levels, toc_styles, deadline)
    with nested_too_deeply("document"):
        reader.blocks(body)
    metadata = _core(parse_part(parts[CORE], CORE, deadline)) if CORE in parts else {}
    title = metadata.pop("title", None) or reader.outline.first
    return Extracted(
        format="docx", title=title, units=tuple(reader.units), metadata=metadata, language=metadata.get("language")
    )


def _namespace(root: ET.Element) -> str:
    """The WordprocessingML namespace the document uses (transitional or strict OOXML)."""
    if not root.tag.startswith("{") or _local(root) != "document":
        raise Refused(f"{DOCUMENT} is not a WordprocessingML document")
    return root.tag[1:].split("}", 1)[0]


def _local(element: ET.Element) -> str:
    return element.tag.rsplit("}", 1)[-1] if isinstance(element.tag, str) else ""


def _styles(root: ET.Element, w: str, deadline: Deadline) -> tuple[dict[str, int], set[str]]:
    """Paragraph style id -> heading level (Title 0, heading N -> N), and the ids of table-of-contents styles.
    The deadline is checked per style: following `basedOn` chains costs the square of the number of styles."""
    names: dict[str, str] = {}
    based_on: dict[str, str] = {}
    outline: dict[str, int] = {}
    for style in root.iter(f"{{{w}}}style"):
        deadline.check("reading the DOCX styles")
        if style.get(f"{{{w}}}type") != "paragraph" or not (style_id := style.get(f"{{{w}}}styleId")):
            continue
        name = style.find(f"{{{w}}}name")
        names[style_id] = clean(name.get(f"{{{w}}}val", "")) if name is not None else ""
        parent = style.find(f"{{{w}}}basedOn")
        if parent is not None:
            based_on[style_id] = parent.get(f"{{{w}}}val", "")
        level = style.find(f"{{{w}}}pPr/{{{w}}}outlineLvl")
        if level is not None:
            outline[style_id] = _outline_level(level.get(f"{{{w}}}val", ""))
    levels: dict[str, int] = {}
    for style_id in names:
        deadline.check("reading the DOCX styles")
        seen: set[str] = set()
        current: str | None = style_id
        while current and current not in seen:
            seen.add(current)
            level = _named_level(names.get(current, ""))
            if level is None:
                level = _named_level(current)
            if level is None and current in outline:
                level = outline[current]
            if level is not None:
                if level >= 0:
                    levels[style_id] = level
                break
            current = based_on.get(current)
    toc = {style_id for style_id, name in names.items() if _TOC_NAME.match(name) or _TOC_NAME.match(style_id)}
    return levels, toc


def _named_level(name: str) -> int | None:
    """The heading level a style's name or id states ("heading 2", "Kop2", "Title"), if any."""
    if name.lower() in _TITLE_NAMES:
        return 0
    match = _HEADING_NAME.match(name)
    return int(match.group(1)) if match and match.group(1) != "0" else None


def _outline_level(value: str) -> int:
    """w:outlineLvl (0-8 are heading levels 1-9, 9 is body text) as a heading level, -1 for body text."""
    return int(value) + 1 if value.isdigit() and int(value) < 9 else -1


class _Body:
    """Walks the body in document order, keeping the heading path and collecting units."""

    def __init__(self, w: str, levels: dict[str, int], toc_styles: set[str], deadline: Deadline) -> None:
        self.w = w
        self.levels = levels
        self.toc_styles = toc_styles
        self.deadline = deadline
        self.units: list[Unit] = []
        self.outline = HeadingPath()

    def blocks(self, container: ET.Element) -> None:
        for element in _descend(container, {"p", "tbl"}, self.w):
            self.deadline.check("reading the DOCX body")
            if _local(element) == "p":
                self.paragraph(element)
            else:
                self.table(element)

    def paragraph(self, p: ET.Element) -> None:
        style = p.find(f"{{{self.w}}}pPr/{{{self.w}}}pStyle")
        style_id = style.get(f"{{{self.w}}}val", "") if style is not None else ""
        if style_id in self.toc_styles:
            return
        text = clean(_inline_text(p, self.w))
        level = self.heading_level(p, style_id)
        if level is not None and meaningful(text):
            self.enter_heading(level, text)
        elif meaningful(text):
            self.units.append(Unit(text, headings=self.outline.current()))
        for box in _text_boxes(p):
            self.blocks(box)

    def heading_level(self, p: ET.Element, style_id: str) -> int | None:
        own = p.find(f"{{{self.w}}}pPr/{{{self.w}}}outlineLvl")
        if own is not None:
            level = _outline_level(own.get(f"{{{self.w}}}val", ""))
            return level if level >= 0 else None
        if self.levels or not style_id:
            return self.levels.get(style_id)
        return _named_level(style_id)  # no styles.xml: trust the conventional ids ("Heading1", "Kop1", "Title")

    def enter_heading(self, level: int, text: str) -> None:
        self.outline.enter(level, text)


    def table(self, tbl: ET.Element) -> None:
        rows = list(self.rows(tbl))
        header = [text for text, is_header in takewhile(lambda row: row[1], rows)]
        body = [text for text, _ in rows[len(header) :]]
        for group in row_groups(header, body):
            self.units.append(Unit(group, headings=self.outline.current()))

    def rows(self, tbl: ET.Element) -> Iterator[tuple[str, bool]]:
        """(row text with cells joined by " | ", is a header row) for each row, nested tables' rows after theirs."""
        for tr in _descend(tbl, {"tr"}, self.w):
            self.deadline.check("reading a DOCX table")
            cells: list[str] = []
            nested: list[ET.Element] = []
            for tc in _descend(tr, {"tc"}, self.w):
                texts: list[str] = []
                for block in _descend(tc, {"p", "tbl"}, self.w):
                    if _local(block) == "tbl":
                        nested.append(block)
                    else:
                        texts.append(clean(_inline_text(block, self.w)))
                cell = " ".join(text for text in texts if meaningful(text))
                if cell:
                    cells.append(cell)
            if cells:
                yield " | ".join(cells), tr.find(f"{{{self.w}}}trPr/{{{self.w}}}tblHeader") is not None
            for table in nested:
                for text, _ in self.rows(table):
                    yield text, False


def _descend(container: ET.Element, wanted: set[str], w: str) -> Iterator[ET.Element]:
    """The children of `container` named in `wanted`, looking through content controls and other wrappers;
    a content control still showing its placeholder, or that is a table of contents, is skipped."""
    for child in container:
        name = _local(child)
        if name in wanted:
            yield child
        elif name == "sdt":
            if not _is_placeholder_or_toc(child, w):
                yield from _descend(child, wanted, w)
        elif name in _WRAPPERS:
            yield from _descend(child, wanted, w)


def _is_placeholder_or_toc(sdt: ET.Element, w: str) -> bool:
    properties = sdt.find(f"{{{w}}}sdtPr")
    if properties is None:
        return False
    if properties.find(f"{{{w}}}showingPlcHdr") is not None:
        return True
    gallery = properties.find(f"{{{w}}}docPartObj/{{{w}}}docPartGallery")
    return gallery is not None and "table of contents" in gallery.get(f"{{{w}}}val", "").lower()


def _inline_text(element: ET.Element, w: str) -> str:
    """The text of a paragraph's runs and equations (tabs and breaks as spaces), without text boxes, deleted text,
    field codes or the text of drawings other than text boxes."""
    parts: list[str] = []
    for child in element:
        name = _local(child)
        if name in _SKIP_INLINE:
            continue
        if child.tag in (f"{{{w}}}t", f"{{{MATH}}}t"):
            parts.append(child.text or "")
        elif name in {"tab", "br", "cr", "ptab"}:
            parts.append(" ")
        elif name == "noBreakHyphen":
            parts.append("-")
        elif name == "sdt" and _is_placeholder_or_toc(child, w):
            continue
        else:
            parts.append(_inline_text(child, w))
    return "".join(parts)


def _text_boxes(element: ET.Element) -> Iterator[ET.Element]:
    """The outermost text boxes anchored in a paragraph (the VML fallback copy of a drawing is not read twice)."""
    for child in element:
        name = _local(child)
        if name == "txbxContent":
            yield child
        elif name != "Fallback":
            yield from _text_boxes(child)


def _core(root: ET.Element) -> dict[str, str]:
    """docProps/core.xml as metadata ("title" among them when it is a meaningful title)."""
    metadata: dict[str, str] = {}
    for child in root:
        value = clean(child.text or "")
        name = _local(child)
        if not value:
            continue
        if name == "title":
            if meaningful(value) and value.lower() not in _GENERIC_TITLES:
                metadata["title"] = value
        elif name in _CORE_KEYS:
            metadata[_CORE_KEYS[name]] = value
    return metadata
