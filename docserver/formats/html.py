"""HTML reader: a web page's main text as paragraphs, list items and table rows under their h1-h6 heading path.

Parsed with lxml's HTML parser (libxml2) with network access off. An HTML parser neither expands entities declared in
a DOCTYPE nor fetches external ones (an XHTML page with `<!DOCTYPE ... [<!ENTITY ...>]>` leaves `&name;` as text), and
nothing a page links to (scripts, stylesheets, images, frames) is loaded. The page is fed to the parser in pieces,
the deadline checked in between. libxml2 stops at a fatal error and keeps what it had: elements nested deeper than
its limit (256 levels), a text node of more than 10 MB, bytes that are not in the page's declared encoding. Such a
page is refused with the reason, never stored cut off.

What is not the page's text is dropped before reading: script, style, noscript, template, navigation (nav and
role="navigation"), the page banner and footer (header/footer outside article, main and section, where they would
be a section's own heading), aside, embedded objects, SVG drawings and MathML, hidden elements, and a table of
contents (ReSpec's nav#toc, any element whose id or class is "toc", "table-of-contents" or "inhoudsopgave") and
ReSpec's side label.

Every block element (p, li, dd, div with its own text, ...) ends a unit; headings become the path (`Unit.headings`)
of what follows and are not units themselves. Tables come out as rows, cells joined with " | ", one unit per table or
per group of rows when long (header rows repeated in each group); a nested table's rows follow the row that holds
it. The title is the official Dublin Core `DC.title`, else `og:title`, else `<title>`, else the first heading.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import lxml.html
from lxml import etree

from .base import Deadline, Extracted, Limits, Refused, Unit
from .common import HeadingPath, clean, feed, meaningful, nested_too_deeply, row_groups

__all__ = ["read"]


_DROPPED_TAGS = {
    "script", "style", "noscript", "template", "nav", "aside", "iframe", "object", "embed", "svg", "math", "button",
    "select", "textarea", "head",
}  # fmt: skip
_SECTIONING = {"article", "main", "section"}
_TOC_NAMES = {"toc", "table-of-contents", "inhoudsopgave"}
_CHROME_CLASSES = {"sidelabel", "removeonsave"}  # ReSpec's fixed side label and its editor-only controls
_HEADINGS = {f"h{level}": level for level in range(1, 7)}
_BLOCKS = {
    "address", "article", "blockquote", "body", "caption", "dd", "details", "dialog", "div", "dl", "dt", "fieldset",
    "figcaption", "figure", "footer", "form", "header", "hgroup", "hr", "html", "legend", "li", "main", "ol", "p",
    "pre", "section", "summary", "table", "ul",
}  # fmt: skip
_BREAKS = {"br", "wbr", "td", "th"}  # inline elements whose boundary is still a word boundary
_GENERIC_TITLES = {"untitled", "document", "default", "title", "titel", "naamloos", "home", "index"}
_META_KEYS = {
    "description": "description",
    "dc.description": "description",
    "og:description": "description",
    "author": "author",
    "dc.creator": "author",
    "dc.date": "date",
    "dcterms.issued": "date",
    "article:published_time": "date",
    "dcterms.modified": "modified",
    "article:modified_time": "modified",
    "dc.identifier": "identifier",
    "dc.publisher": "publisher",
    "dc.type": "type",
    "keywords": "keywords",
}
_LANGUAGE_META = ("dc.language", "dcterms.language", "content-language")
_EXCESSIVE_DEPTH = re.compile(r"Excessive depth in document: (\d+)")  # libxml2's message when it stops nesting


def read(data: bytes, limits: Limits, deadline: Deadline) -> Extracted:
    """An HTML page's text as units under their heading paths, with its title, metadata and language."""
    root = _parse(data, deadline)
    metadata, official_title = _head(root)
    language = _language(root, metadata)
    reader = _Page(deadline)
    with nested_too_deeply("page"):
        for element in list(_unwanted(root, deadline)):
            element.drop_tree()
        body = root.find("body")
        reader.walk(body if body is not None else root)
    reader.flush()
    if not reader.units:
        raise Refused("the HTML page has no text")
    if language:
        metadata["language"] = language
    return Extracted(
        format="html",
        title=official_title or reader.outline.first,
        units=tuple(reader.units),
        metadata=metadata,
        language=language,
    )


def _parse(data: bytes, deadline: Deadline) -> lxml.html.HtmlElement:
    """The page's element tree; UTF-8 when the bytes decode as such, else what the page declares (or Windows-1252).
    Fed in pieces: the deadline is checked after each, and a page libxml2 stopped reading (`_check_whole`) is
    refused as soon as it stops, the rest of it not parsed."""
    try:
        data.decode("utf-8")
        encoding: str | None = "utf-8"
    except UnicodeDecodeError:
        encoding = None
    parser = lxml.html.HTMLParser(encoding=encoding, no_network=True, remove_comments=True, remove_pis=True)
    try:
        feed(parser, data, deadline, "parsing the HTML page", lambda: _check_whole(parser.feed_error_log))
        root = parser.close()
    except Refused:
        raise
    except (etree.LxmlError, ValueError) as exc:
        raise Refused(f"the HTML page has no text ({exc})") from exc
    _check_whole(parser.feed_error_log)
    if root is None:
        raise Refused("the HTML page has no text (the document is empty)")
    return root


def _check_whole(log: etree._ListErrorLog) -> None:
    """Refuse a page libxml2 stopped reading: a fatal error means it kept only what came before it."""
    fatal = next((error for error in log if error.level == etree.ErrorLevels.FATAL), None)
    if fatal is None:
        return
    if depth := _EXCESSIVE_DEPTH.search(fatal.message):
        raise Refused(f"the HTML page is nested deeper than {depth.group(1)} levels, the most the parser reads")
    raise Refused(f"the HTML page cannot be read to its end (line {fatal.line}: {fatal.message})")




def _head(root: lxml.html.HtmlElement) -> tuple[dict[str, str], str | None]:
    """The page's metadata and its title (DC.title, og:title, then <title>), read before anything is dropped."""
    metadata: dict[str, str] = {}
    titles: dict[str, str] = {}
    for meta in root.iter("meta"):
        name = (meta.get("name") or meta.get("property") or meta.get("http-equiv") or "").strip()
        value = clean(meta.get("content") or "")
        if not name or not value:
            continue
        key = name.lower()
        if key in ("dc.title", "og:title"):
            titles.setdefault(key, value)
        elif key in _META_KEYS:
            _add(metadata, _META_KEYS[key], value)
        elif key in _LANGUAGE_META:
            metadata.setdefault("language", value)
        elif key in ("og:url", "dc.source"):
            metadata.setdefault("url", value)
        elif "." in name and not key.startswith("twitter"):  # namespaced metadata (DCTERMS.*, OVERHEIDop.*) as is
            _add(metadata, name, value)
    for link in root.iter("link"):
        if "canonical" in (link.get("rel") or "").lower().split() and link.get("href"):
            metadata["url"] = link.get("href", "").strip()
    identifier = metadata.get("identifier", "")
    if "url" not in metadata and identifier.startswith(("http://", "https://")):
        metadata["url"] = identifier
    page_titles = [clean(title.text_content()) for title in root.iter("title")]
    candidates = [titles.get("dc.title"), titles.get("og:title"), *page_titles]
    title = next((text for text in candidates if text and _is_title(text)), None)
    return metadata, title


def _add(metadata: dict[str, str], key: str, value: str) -> None:
    """Set a metadata value; a key given more than once (several DC.type) keeps them all, "; " between."""
    if key not in metadata:
        metadata[key] = value
    elif value not in metadata[key].split("; "):
        metadata[key] = f"{metadata[key]}; {value}"


def _is_title(text: str) -> bool:
    return meaningful(text) and text.lower() not in _GENERIC_TITLES


def _language(root: lxml.html.HtmlElement, metadata: dict[str, str]) -> str | None:
    """The language the page states: <html lang>, xml:lang, or a DC/DCTERMS/Content-Language meta element."""
    for attribute in ("lang", "xml:lang", "{http://www.w3.org/XML/1998/namespace}lang"):
        if value := clean(root.get(attribute) or ""):
            return value
    return metadata.get("language", "").split(",")[0].strip() or None


def _unwanted(element: lxml.html.HtmlElement, deadline: Deadline) -> Iterator[lxml.html.HtmlElement]:
    """The outermost elements under `element` that are not the page's text (see the module docstring)."""
    for child in element:
        deadline.check("reading the HTML page")
        if not isinstance(child.tag, str):
            continue
        if _is_unwanted(child):
            yield child
        else:
            yield from _unwanted(child, deadline)


def _is_unwanted(element: lxml.html.HtmlElement) -> bool:
    tag = element.tag.lower()
    if tag in _DROPPED_TAGS or element.get("hidden") is not None or element.get("aria-hidden") == "true":
        return True
    if (element.get("role") or "").lower() in ("navigation", "doc-toc", "banner", "contentinfo"):
        return True
    if tag in ("header", "footer") and not any(parent.tag in _SECTIONING for parent in element.iterancestors()):
        return True
    classes = set((element.get("class") or "").lower().split())
    return bool(({(element.get("id") or "").lower()} | classes) & _TOC_NAMES or classes & _CHROME_CLASSES)


class _Page:
    """Walks the body in document order, gathering inline text into units at block boundaries."""

    def __init__(self, deadline: Deadline) -> None:
        self.deadline = deadline
        self.units: list[Unit] = []
        self.outline = HeadingPath()
        self.buffer: list[str] = []

    def walk(self, element: lxml.html.HtmlElement) -> None:
        self.deadline.check("reading the HTML page")
        if element.text:
            self.buffer.append(element.text)
        for child in element:
            if isinstance(child.tag, str):
                self.element(child)
            if child.tail:
                self.buffer.append(child.tail)

    def element(self, element: lxml.html.HtmlElement) -> None:
        tag = element.tag.lower()
        if tag in _HEADINGS:
            self.flush()
            self.heading(_HEADINGS[tag], clean(element.text_content()))
        elif tag == "table":
            self.flush()
            self.table(element)
        elif tag in _BLOCKS:
            self.flush()
            self.walk(element)
            self.flush()
        else:
            if tag in _BREAKS:
                self.buffer.append(" ")
            self.walk(element)

    def flush(self) -> None:
        text = clean("".join(self.buffer))
        self.buffer = []
        if meaningful(text):
            self.units.append(Unit(text, headings=self.outline.current()))

    def heading(self, level: int, text: str) -> None:
        if not meaningful(text):
            return
        self.outline.enter(level, text)


    def table(self, table: lxml.html.HtmlElement) -> None:
        for caption in table.findall("caption"):
            if meaningful(text := clean(caption.text_content())):
                self.units.append(Unit(text, headings=self.outline.current()))
        header: list[str] = []
        body: list[str] = []
        for text, is_header in self.rows(table):
            (header if is_header and not body else body).append(text)
        for group in row_groups(header, body):
            self.units.append(Unit(group, headings=self.outline.current()))

    def rows(self, table: lxml.html.HtmlElement) -> Iterator[tuple[str, bool]]:
        """(row text with cells joined by " | ", is a header row) for each row, nested tables' rows after theirs."""
        for row in _table_rows(table):
            self.deadline.check("reading an HTML table")
            cells: list[str] = []
            nested: list[lxml.html.HtmlElement] = []
            all_th = True
            for cell in row:
                if not isinstance(cell.tag, str) or cell.tag.lower() not in ("td", "th"):
                    continue
                all_th = all_th and cell.tag.lower() == "th"
                if meaningful(text := _cell_text(cell, nested)):
                    cells.append(text)
            if cells:
                in_head = row.getparent() is not None and row.getparent().tag.lower() == "thead"
                yield " | ".join(cells), in_head or all_th
            for inner in nested:
                for text, _ in self.rows(inner):
                    yield text, False


def _table_rows(table: lxml.html.HtmlElement) -> Iterator[lxml.html.HtmlElement]:
    """A table's own rows (directly or in thead/tbody/tfoot), not those of tables nested in its cells."""
    for child in table:
        if not isinstance(child.tag, str):
            continue
        tag = child.tag.lower()
        if tag == "tr":
            yield child
        elif tag in ("thead", "tbody", "tfoot"):
            yield from (row for row in child if isinstance(row.tag, str) and row.tag.lower() == "tr")


def _cell_text(cell: lxml.html.HtmlElement, nested: list[lxml.html.HtmlElement]) -> str:
    """A cell's text with word boundaries kept between its blocks; nested tables are left to `nested`."""
    parts = [cell.text or ""]
    for child in cell:
        if isinstance(child.tag, str) and child.tag.lower() == "table":
            nested.append(child)
        elif isinstance(child.tag, str):
            gap = " " if child.tag.lower() in _BLOCKS or child.tag.lower() in _BREAKS else ""
            parts.append(gap + _cell_text(child, nested) + gap)
        parts.append(child.tail or "")
    return clean("".join(parts))
