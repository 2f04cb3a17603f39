"""PDF reader: the text layer of a PDF as paragraphs in reading order, each with its page, via PDFium (pypdfium2).

PDFium (a C engine shipped in the pypdfium2 wheel) parses the file and gives every character with its box and
baseline; the layout is rebuilt here because a content stream's order is not the reading order (the Federal
Register draws its footnotes before its body text) and because PDFium's own line breaks merge columns:

1. characters -> fragments: runs on one baseline without a wide gap (a table cell, a column's line), measured along
   the direction most of the page's text runs in (a landscape page is often text turned a quarter, under /Rotate);
2. running headers and footers go: the top and bottom rows of the pages, digits normalised, that repeat on at
   least half of the pages ("Pagina # van #");
3. fragments -> blocks in reading order by a recursive XY cut: a vertical gap that runs through a region splits
   it into columns (left first) unless the two sides are rows of one table (their baselines line up and one side
   is not prose), otherwise the widest horizontal gaps split it into bands (top first);
4. blocks -> lines (cells of one row joined with " | ") -> paragraphs (vertical gaps, indentation, bullets, sentence
   ends, a change of font size or weight), hyphenated words joined; a paragraph never runs over a page break.

Headings (a short paragraph in a larger or bold font) are a `Unit` of their own and also the last entry of the
`headings` path of the units after them, so the ingest starts a new chunk there. The title is /Title when that
names the document, else a letter's subject line or the largest heading of page 1 that is no masthead (`_title`).
Pages without a usable text layer (`page_needs_ocr`: scans; a page with a few words and no page-sized image is
text) are read by OCR when Tesseract is installed (`docserver/formats/ocr.py`; metadata `ocr_pages` and `ocr` say
so), else read as blank and listed in `pages_without_text`; a PDF with no text layer at all is then refused with
the reason. Encrypted, damaged, too long or too slow files are refused.
PDFium is not thread-safe, so one lock serialises every PDFium call in this process (Tesseract runs outside it).
"""

from __future__ import annotations

import ctypes
import math
import re
import threading
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import pypdfium2 as pdfium
import pypdfium2.raw as pdfium_c

from . import ocr
from .base import Deadline, Extracted, Limits, Refused, Unit, is_placeholder_title

__all__ = ["page_needs_ocr", "read"]

_LOCK = threading.Lock()

_MIN_TEXT_CHARS = 20  # fewer letters and digits than this on a page over a page-sized image: a scan's stamp
_SCAN_COVER = 0.5  # images covering this share of a page make it a scan, unless its text layer says more
_QUARTER = math.pi / 2
_TURN_SAMPLES = 400  # characters looked at to find the direction a page's text runs in
_FORM_DEPTH = 4  # how deep form XObjects nested in each other are searched for a scan's image
_CELL_GAP = 1.2  # a horizontal gap wider than this many font heights separates two cells or columns
_EDGE_ROWS = 3  # how many rows at the top and at the bottom of a page may be running headers or footers
_MAX_CUT_DEPTH = 60  # recursion guard of the XY cut
_CHARS_PER_CHECK = 4096  # how many characters of a page are read between two checks of the deadline

_BULLET = re.compile(r"^(?:[-–•▪●◦*·]|\(?\d{1,2}[.)]|\(?[a-z][.)]|\([ivx]{1,4}\)|[ivx]{1,4}\.)\s")
_MARKER = re.compile(r"[-–•▪●◦*·]|\(?(?:\d{1,2}|[A-Za-z]|[ivxIVX]{1,4})[.)]|\d{1,3}")  # a list item's mark or a footnote's
_SENTENCE_END = re.compile(r"[.!?:;]['’”\")]?$")
_HYPHENATED = re.compile(r"(\w+)[-\u00ad]$")
_KEEP_HYPHEN_BEFORE = frozenset({"en", "of", "tot", "and", "or", "to", "nor", "und", "oder", "et", "ou"})
_LETTERS = re.compile(r"[^\W\d_]+")
_PDF_DATE = re.compile(r"^D:(\d{4})(\d{2})?(\d{2})?(\d{2})?(\d{2})?(\d{2})?")
_NUMBERED_CAPS = re.compile(r"^(?:[IVXLC]{1,5}|\d{1,2}(?:\.\d{1,2})*|[A-Z])\.\s+[A-Z][A-Z]+(?:\s+[A-Z&/-]+)+$")
_WORD = re.compile(r"[^\W\d_]{4,}")
_YEAR = re.compile(r"\b(?:19|20)\d\d\b")
_SUBJECT = re.compile(r"^(?:(?:onderwerp|betreft|subject)\b\s*:?|re:)\s*(?P<subject>\S.*)$", re.IGNORECASE)
_LABEL = re.compile(r"^(?:nr|no|nummer|number)?\.?\s*\d[\d .]*$", re.IGNORECASE)  # "32 545", "Nr. 143"
_CONTENTS = frozenset({"contents", "table of contents", "inhoud", "inhoudsopgave", "inhoudstafel", "index",
                       "sommaire", "inhalt", "inhaltsverzeichnis"})


@dataclass(slots=True)
class _Fragment:
    """A run of characters on one baseline with no wide gap: one column's line, or one table cell's line."""

    text: str
    x0: float
    x1: float
    bottom: float
    top: float
    base: float
    size: float  # the height of the font's line box (ascent to descent), in points: the largest of its characters
    bold: bool  # most of its characters are in a bold font


@dataclass(slots=True)
class _Line:
    """One line of one block: its fragments joined, " | " between cells."""

    text: str
    x0: float
    x1: float
    base: float
    size: float
    bold: bool
    cells: int
    block: int


@dataclass(slots=True)
class _Page:
    """One page's text layer as fragments, and the share of the page that images cover (measured only when the
    text layer is short: it tells a scan with a stamp from a page with a few words)."""

    fragments: list[_Fragment]
    image_share: float


@dataclass(slots=True)
class _TextLayer:
    """A PDF as its text layer reads, and the pages without one that `engine` is to read (none without OCR)."""

    units: list[Unit]
    title: str | None
    metadata: dict[str, str]
    pages: int
    scanned: list[int]
    engine: ocr.Tesseract | None


@dataclass(slots=True)
class _Paragraph:
    lines: list[_Line]

    @property
    def size(self) -> float:
        return max(line.size for line in self.lines)


def read(data: bytes, limits: Limits, deadline: Deadline) -> Extracted:
    """The text of a PDF as one `Unit` per paragraph or table row group, each with its 1-based page."""
    _check_complete(data)
    with _LOCK:
        document = _open(data)
    try:
        with _LOCK:
            layer = _read_document(document, limits, deadline)
        units = layer.units if layer.engine is None else _with_ocr(document, layer, layer.engine, deadline)
        if not units:
            raise Refused("no text in the PDF")
        return Extracted(format="pdf", title=layer.title, units=tuple(units), metadata=layer.metadata,
                         pages=layer.pages)
    finally:
        with _LOCK:
            document.close()


def page_needs_ocr(fragments: Sequence[_Fragment], image_share: float) -> bool:
    """True when a page has no usable text layer, where an OCR pass takes over: no letter or digit at all, or a
    few over images covering most of the page (a scan with a stamp or a page number in its text layer), or only a
    few digits (a page number on a blank page). A few words on a page without a page-sized image are its text (a
    one-line letter, a form's labels): read as they are, never refused as a scan."""
    characters = _usable_characters(fragments)
    if characters >= _MIN_TEXT_CHARS:
        return False
    has_letters = any(c.isalpha() for f in fragments for c in f.text)
    return characters == 0 or image_share >= _SCAN_COVER or not has_letters


def _usable_characters(fragments: Sequence[_Fragment]) -> int:
    return sum(c.isalnum() for f in fragments for c in f.text)


def _check_complete(data: bytes) -> None:
    """A PDF ends with %%EOF; without it the file was cut off (PDFium would silently read what is left)."""
    if b"%PDF-" not in data[:1024]:
        raise Refused("not a PDF file (no %PDF- header)")
    if b"%%EOF" not in data[-2048:]:
        raise Refused("the PDF is truncated or damaged (it does not end with %%EOF)")


def _open(data: bytes) -> pdfium.PdfDocument:
    try:
        return pdfium.PdfDocument(data)
    except pdfium.PdfiumError as exc:
        if exc.err_code == pdfium_c.FPDF_ERR_PASSWORD:
            raise Refused("the PDF is encrypted and cannot be opened without a password") from exc
        if exc.err_code == pdfium_c.FPDF_ERR_SECURITY:
            raise Refused("the PDF uses an unsupported security handler (encryption)") from exc
        raise Refused("the PDF is damaged and cannot be read") from exc


def _read_document(document: pdfium.PdfDocument, limits: Limits, deadline: Deadline) -> _TextLayer:
    count = len(document)
    if count > limits.max_pages:
        raise Refused(f"the PDF has {count} pages, more than the limit of {limits.max_pages}")
    if count == 0:
        raise Refused("the PDF has no pages (its page tree is empty or damaged)")
    read: list[_Page] = []
    for number in range(1, count + 1):
        deadline.check(f"page {number}")
        read.append(_read_page(document, number, deadline))
    without_text = [n for n, page in enumerate(read, start=1) if page_needs_ocr(page.fragments, page.image_share)]
    pages = [page.fragments for page in read]
    engine, reason = _ocr_engine() if without_text else (None, "")
    if len(without_text) == count and engine is None:
        raise Refused(f"scanned PDF: no text layer on any of its {count} pages; {reason}")
    if engine is not None:  # OCR reads these pages whole, including the few characters of text layer they have
        scanned = set(without_text)
        pages = [[] if number in scanned else fragments for number, fragments in enumerate(pages, start=1)]
    repeated = _repeated_rows(pages[1:])
    pages = _drop_running_lines(pages)
    body = _font_mode([f for fragments in pages for f in fragments])
    paragraphs: list[tuple[int, _Paragraph]] = []
    for number, fragments in enumerate(pages, start=1):
        deadline.check(f"page {number}")
        blocks = _reading_order(fragments, body, deadline, f"page {number}")
        paragraphs += [(number, p) for p in _paragraphs(_lines(blocks))]
    units = list(_units(paragraphs, body))
    metadata = _metadata(document, count, without_text)
    title = _title(document, [p for number, p in paragraphs if number == 1], body, repeated)
    return _TextLayer(units, title, metadata, count, without_text if engine is not None else [], engine)


def _ocr_engine() -> tuple[ocr.Tesseract | None, str]:
    """The Tesseract that reads pages without a text layer, or None and the reason OCR cannot run."""
    try:
        return ocr.tesseract(), ""
    except ocr.Unavailable as exc:
        return None, str(exc)


def _with_ocr(document: pdfium.PdfDocument, layer: _TextLayer, engine: ocr.Tesseract, deadline: Deadline) -> list[Unit]:
    """The units of the text layer and, in page order, those OCR reads on the pages without one (they carry the
    heading path of the text before them); `layer.metadata` then names the machine-read pages and the engine."""
    read = ocr.read_pages(engine, document, layer.scanned, _LOCK, deadline)
    by_page: dict[int | None, list[Unit]] = {}
    for unit in layer.units:
        by_page.setdefault(unit.page, []).append(unit)
    units: list[Unit] = []
    for number in range(1, layer.pages + 1):
        if number in read.paragraphs:
            headings = units[-1].headings if units else ()
            units += [Unit(text, page=number, headings=headings) for text in read.paragraphs[number]]
        else:
            units += by_page.get(number, [])
    machine_read = [number for number, paragraphs in read.paragraphs.items() if paragraphs]
    if not units and len(layer.scanned) == layer.pages:
        raise Refused(f"scanned PDF: OCR ({engine.name}) found no readable text on any of its "
                      f"{layer.pages} pages")
    blank = [number for number in layer.scanned if number not in machine_read]
    layer.metadata.pop("pages_without_text", None)
    if blank:
        layer.metadata["pages_without_text"] = ", ".join(map(str, blank))
    if machine_read:
        layer.metadata["ocr_pages"] = ", ".join(map(str, machine_read))
        layer.metadata["ocr"] = engine.name
    if read.reduced:
        layer.metadata["ocr_reduced_resolution_pages"] = ", ".join(map(str, read.reduced))
    return units


# --- characters to fragments ------------------------------------------------------------------------------------


def _read_page(document: pdfium.PdfDocument, number: int, deadline: Deadline) -> _Page:
    try:
        page = document[number - 1]
    except pdfium.PdfiumError as exc:
        raise Refused(f"the PDF is damaged: page {number} cannot be loaded") from exc
    try:
        textpage = page.get_textpage()
        try:
            fragments = list(_fragments(textpage.raw, deadline, f"page {number}"))
        finally:
            textpage.close()
        short = _usable_characters(fragments) < _MIN_TEXT_CHARS
        return _Page(fragments, _image_share(page, deadline, f"page {number}") if short else 0.0)
    finally:
        page.close()


def _image_share(page: pdfium.PdfPage, deadline: Deadline, where: str) -> float:
    """The share of the page's area its images cover (overlaps counted twice, at most 1): a scan is one image over
    the whole page, drawn on it or inside a form XObject."""
    left, bottom, right, top = page.get_mediabox()
    area = (right - left) * (top - bottom)
    if area <= 0:
        return 0.0
    covered = 0.0
    for x0, y0, x1, y1 in _image_boxes(page.raw, None, 0, deadline, where):
        covered += max(0.0, min(x1, right) - max(x0, left)) * max(0.0, min(y1, top) - max(y0, bottom))
    return min(1.0, covered / area)


def _image_boxes(page: pdfium_c.FPDF_PAGE, form: pdfium_c.FPDF_PAGEOBJECT | None, depth: int, deadline: Deadline,
                 where: str) -> Iterator[tuple[float, float, float, float]]:
    """The bounds of the images on a page (`form` None) or in a form XObject, in the page's space (a form's
    objects have their bounds in the form's space, mapped here by its matrix); forms nested deeper than
    _FORM_DEPTH are not looked into. Only images and forms are wrapped: a page can hold millions of paths."""
    count = pdfium_c.FPDFPage_CountObjects(page) if form is None else pdfium_c.FPDFFormObj_CountObjects(form)
    for index in range(max(0, count)):
        if index % _CHARS_PER_CHECK == 0:
            deadline.check(where)
        item = pdfium_c.FPDFPage_GetObject(page, index) if form is None else pdfium_c.FPDFFormObj_GetObject(form, index)
        kind = pdfium_c.FPDFPageObj_GetType(item) if item else None
        if kind == pdfium_c.FPDF_PAGEOBJ_IMAGE:
            x0, y0, x1, y1 = (ctypes.c_float() for _ in range(4))
            if pdfium_c.FPDFPageObj_GetBounds(item, x0, y0, x1, y1):
                yield x0.value, y0.value, x1.value, y1.value
        elif kind == pdfium_c.FPDF_PAGEOBJ_FORM and depth < _FORM_DEPTH:
            matrix = pdfium_c.FS_MATRIX()
            if pdfium_c.FPDFPageObj_GetMatrix(item, matrix):
                mapping = pdfium.PdfMatrix.from_raw(matrix)
                yield from (mapping.on_rect(*box) for box in _image_boxes(page, item, depth + 1, deadline, where))


def _main_turn(raw: pdfium_c.FPDF_TEXTPAGE) -> int:
    """The quarter turns (clockwise, as PDFium measures a character's angle) of the direction most of a page's text
    runs in: 0 for upright text, 1 or 3 for text set sideways on a landscape page, found from a sample of the
    characters (a page can hold millions)."""
    count = pdfium_c.FPDFText_CountChars(raw)
    turns: Counter[int] = Counter()
    for index in range(0, count, max(1, count // _TURN_SAMPLES)):
        if pdfium_c.FPDFText_GetUnicode(raw, index) in (32, 9, 10, 13) or pdfium_c.FPDFText_IsGenerated(raw, index):
            continue
        angle = pdfium_c.FPDFText_GetCharAngle(raw, index)
        turn = round(angle / _QUARTER)
        if angle >= 0 and abs(angle - turn * _QUARTER) <= 0.05:
            turns[turn % 4] += 1
    return turns.most_common(1)[0][0] if turns else 0


def _along(angle: float, turn: int) -> bool:
    """Whether a character's angle is the page's text direction (`turn` quarter turns); other text (a margin note
    set at an angle) is not part of the page's flow."""
    off = (angle - turn * _QUARTER) % (2 * math.pi)
    return min(off, 2 * math.pi - off) <= 0.05


def _turned(turn: int, box: pdfium_c.FS_RECTF, x: float, y: float) -> tuple[float, float, float, float, float]:
    """A character's box (left, right, bottom, top) and baseline in the page turned `turn` quarter turns back, so
    that text running down (1), upside down (2) or up (3) the page reads left to right with its top up."""
    if turn == 1:
        return -box.top, -box.bottom, box.left, box.right, x
    if turn == 2:
        return -box.right, -box.left, -box.top, -box.bottom, -y
    if turn == 3:
        return box.bottom, box.top, -box.right, -box.left, -x
    return box.left, box.right, box.bottom, box.top, y


def _fragments(raw: pdfium_c.FPDF_TEXTPAGE, deadline: Deadline, where: str) -> Iterator[_Fragment]:
    """The characters of a text page, in content-stream order, gathered into fragments along the direction most
    of its text runs in (`_main_turn`); the deadline is checked every _CHARS_PER_CHECK characters (one page can
    hold millions)."""
    turn = _main_turn(raw)
    box = pdfium_c.FS_RECTF()
    ox, oy = ctypes.c_double(), ctypes.c_double()
    chars: list[str] = []
    current: _Fragment | None = None
    space = False
    words = bold = 0  # the words of the current fragment, and how many of them start in a bold font
    for index in range(pdfium_c.FPDFText_CountChars(raw)):
        if index % _CHARS_PER_CHECK == 0:
            deadline.check(where)
        code = pdfium_c.FPDFText_GetUnicode(raw, index)
        if code in (32, 9, 0xA0, 0x2002, 0x2003, 0x2009) or pdfium_c.FPDFText_IsGenerated(raw, index):
            space = True  # a word boundary; whether it is a gap is decided by the geometry
            continue
        if code == 2:
            code = 0xAD  # PDFium's mark for a hyphen that breaks a word at the end of a line
        elif code < 32 or code in (0xFFFD, 0xFFFE, 0xFFFF) or 0xE000 <= code <= 0xF8FF:
            continue  # a control character, or a glyph without a Unicode value
        pdfium_c.FPDFText_GetLooseCharBox(raw, index, box)
        pdfium_c.FPDFText_GetCharOrigin(raw, index, ox, oy)
        left, right, bottom, top, base = _turned(turn, box, ox.value, oy.value)
        size = top - bottom
        if size <= 0.5:
            continue
        char = "-" if code == 0xAD else chr(code)
        if current is not None and abs(base - current.base) <= 0.35 * current.size:
            gap = left - current.x1
            if -0.6 * current.size <= gap <= _CELL_GAP * current.size:
                if space or gap > 0.2 * current.size:
                    chars.append(" ")
                    words += 1
                    bold += pdfium_c.FPDFText_GetFontWeight(raw, index) >= 600  # per word: a font call is slow
                chars.append(char)
                current.x1, current.size = max(current.x1, right), max(current.size, size)
                current.bottom, current.top = min(current.bottom, bottom), max(current.top, top)
                space = False
                continue
        if current is not None:
            current.text, current.bold = "".join(chars).strip(), bold >= 0.5 * words
            yield current
        if not _along(pdfium_c.FPDFText_GetCharAngle(raw, index), turn):
            current, chars, space = None, [], False  # text at another angle (a margin note): not the page's flow
            continue
        words, bold = 1, int(pdfium_c.FPDFText_GetFontWeight(raw, index) >= 600)
        current = _Fragment("", left, right, bottom, top, base, size, False)
        chars, space = [char], False
    if current is not None:
        current.text, current.bold = "".join(chars).strip(), bold >= 0.5 * words
        yield current


# --- running headers and footers --------------------------------------------------------------------------------


def _rows(fragments: Sequence[_Fragment]) -> list[list[_Fragment]]:
    """A page's fragments grouped by baseline across the whole width, top row first."""
    rows: list[list[_Fragment]] = []
    for fragment in sorted(fragments, key=lambda f: -f.base):
        if rows and abs(rows[-1][0].base - fragment.base) <= 0.4 * fragment.size:
            rows[-1].append(fragment)
        else:
            rows.append([fragment])
    return rows


def _words_key(text: str) -> str:
    """A text's words in lower case without numbers or punctuation: how a row or a heading is compared."""
    return " ".join(_LETTERS.findall(text.lower()))


def _row_key(row: Sequence[_Fragment]) -> str:
    """A row's words without its numbers ("Pagina 3 van 15" -> "pagina van"); "#" for a bare page number."""
    text = " ".join(f.text for f in sorted(row, key=lambda f: f.x0))
    key = _words_key(text)
    return key or ("#" if any(c.isdigit() for c in text) and len(text) <= 12 else "")


def _edge_rows(fragments: Sequence[_Fragment]) -> list[list[_Fragment]]:
    """The top and bottom _EDGE_ROWS rows of a page: where running headers, footers and page numbers stand."""
    rows = [row for row in _rows(fragments) if any(f.text for f in row)]
    return rows[:_EDGE_ROWS] + rows[max(_EDGE_ROWS, len(rows) - _EDGE_ROWS):]


def _repeated_rows(pages: Sequence[Sequence[_Fragment]]) -> set[str]:
    """The keys (`_row_key`) of the edge rows that stand on at least 40% of `pages` (at least one): a heading of
    page 1 that is one of them is the running header of the other pages, not the document's title."""
    seen: Counter[str] = Counter()
    for fragments in pages:
        seen.update({_row_key(row) for row in _edge_rows(fragments)})
    needed = max(1, round(0.4 * len(pages)))
    return {key for key, n in seen.items() if n >= needed and key and key != "#"}


def _drop_running_lines(pages: list[list[_Fragment]]) -> list[list[_Fragment]]:
    """Pages without the top and bottom rows that repeat (digits normalised) on at least 40% of the pages, and
    without a bare page number there."""
    if len(pages) < 2:
        return pages
    edges: list[list[list[_Fragment]]] = []
    seen: Counter[str] = Counter()
    for fragments in pages:
        edge = _edge_rows(fragments)
        edges.append(edge)
        seen.update({_row_key(row) for row in edge})
    needed = max(2, round(0.4 * len(pages)))
    running = {key for key, n in seen.items() if n >= needed and key} | {"#"}
    kept = []
    for fragments, edge in zip(pages, edges, strict=True):
        drop = {id(f) for row in edge if _row_key(row) in running for f in row}
        kept.append([f for f in fragments if id(f) not in drop])
    return kept


# --- reading order: a recursive XY cut --------------------------------------------------------------------------


def _reading_order(fragments: Sequence[_Fragment], body: float, deadline: Deadline, where: str
                   ) -> list[list[_Fragment]]:
    """The fragments of a page as blocks in reading order; footnotes (print smaller than the document's `body` size
    in the lower 60% of the page) go last, so that a paragraph running on in the next column is not cut by them."""
    fragments = [f for f in fragments if f.text]
    if not fragments:
        return []
    blocks = _cut(fragments, 0, deadline, where)
    low, high = min(f.bottom for f in fragments), max(f.top for f in fragments)
    small = [b for b in blocks if _font_mode(b) < 0.88 * body and max(f.top for f in b) < low + 0.6 * (high - low)]
    return [b for b in blocks if not any(b is s for s in small)] + small


def _font_mode(fragments: Sequence[_Fragment]) -> float:
    """The font height most characters of the fragments are set in."""
    sizes: Counter[float] = Counter()
    for fragment in fragments:
        sizes[round(fragment.size, 1)] += len(fragment.text)
    return sizes.most_common(1)[0][0] if sizes else 0.0


def _cut(fragments: list[_Fragment], depth: int, deadline: Deadline, where: str) -> list[list[_Fragment]]:
    """A region's blocks in reading order; the deadline is checked per region, as a page of many thousands of
    fragments is cut in many steps of a cost that grows with the square of them."""
    if len(fragments) <= 1 or depth >= _MAX_CUT_DEPTH:
        return [fragments] if fragments else []
    deadline.check(where)
    columns = _column_cut(fragments, deadline, where)
    if columns:
        return [block for side in columns for block in _cut(side, depth + 1, deadline, where)]
    bands = _band_cut(fragments)
    if len(bands) > 1:
        return [block for band in bands for block in _cut(band, depth + 1, deadline, where)]
    return [fragments]


def _column_cut(fragments: list[_Fragment], deadline: Deadline, where: str
                ) -> tuple[list[_Fragment], list[_Fragment]] | None:
    """The region split at its widest vertical gap that separates columns (not the cells of a table); each gap tried
    costs a pass over the region, so the deadline is checked per gap."""
    size = _median([f.size for f in fragments])
    spans = sorted((f.x0, f.x1) for f in fragments)
    gaps: list[tuple[float, float]] = []
    right = spans[0][1]
    for x0, x1 in spans[1:]:
        if x0 - right >= max(4.0, 0.4 * size):
            gaps.append((right, x0))
        right = max(right, x1)
    for start, _ in sorted(gaps, key=lambda g: g[0] - g[1]):
        deadline.check(where)
        left = [f for f in fragments if f.x1 <= start + 0.01]
        rest = [f for f in fragments if f.x1 > start + 0.01]
        if _are_columns(left, rest):
            return left, rest
    return None


def _are_columns(left: list[_Fragment], right: list[_Fragment]) -> bool:
    """Two sides of a vertical gap are columns when both are prose, or when their lines do not line up in rows."""
    if _is_prose(left) and _is_prose(right):
        return True
    small, other = (left, right) if len(left) <= len(right) else (right, left)
    bases = sorted(f.base for f in other)
    aligned = sum(1 for f in small if _has_near(bases, f.base, 1.0))
    return aligned < 0.5 * len(small)


def _is_prose(fragments: list[_Fragment]) -> bool:
    wordy = sum(1 for f in fragments if sum(c.isalpha() for c in f.text) >= 15)
    return len(fragments) >= 3 and wordy >= 0.6 * len(fragments)


def _has_near(sorted_values: list[float], value: float, tolerance: float) -> bool:
    low, high = 0, len(sorted_values)
    while low < high:
        middle = (low + high) // 2
        if sorted_values[middle] < value - tolerance:
            low = middle + 1
        else:
            high = middle
    return low < len(sorted_values) and sorted_values[low] <= value + tolerance


def _band_cut(fragments: list[_Fragment]) -> list[list[_Fragment]]:
    """The region split at its widest horizontal gaps (those at least half as wide as the widest), top band first."""
    spans = sorted(((f.top - 0.15 * f.size, f.bottom + 0.15 * f.size) for f in fragments), reverse=True)
    gaps: list[tuple[float, float]] = []  # (upper edge of the gap, lower edge)
    low = spans[0][1]
    for top, bottom in spans[1:]:
        if top < low:
            gaps.append((low, top))
        low = min(low, bottom)
    if not gaps:
        return [fragments]
    widest = max(upper - lower for upper, lower in gaps)
    cuts = sorted((lower + upper) / 2 for upper, lower in gaps if upper - lower >= 0.5 * widest)
    bands: list[list[_Fragment]] = [[] for _ in range(len(cuts) + 1)]
    for fragment in fragments:
        middle = (fragment.top + fragment.bottom) / 2
        bands[len(cuts) - sum(1 for cut in cuts if middle > cut)].append(fragment)
    return [band for band in bands if band]


def _median(values: Sequence[float]) -> float:
    ordered = sorted(values)
    return ordered[len(ordered) // 2] if ordered else 0.0


# --- lines and paragraphs ---------------------------------------------------------------------------------------


def _lines(blocks: list[list[_Fragment]]) -> list[_Line]:
    """The lines of the blocks in reading order; fragments of one baseline in one block are one line."""
    lines: list[_Line] = []
    for number, block in enumerate(blocks):
        for row in _rows(block):
            row.sort(key=lambda f: f.x0)
            text, cells = row[0].text, 1
            for before, fragment in zip(row, row[1:], strict=False):
                gap = fragment.x0 - before.x1
                if gap > _CELL_GAP * fragment.size and not (cells == 1 and _MARKER.fullmatch(text)):
                    text, cells = f"{text} | {fragment.text}", cells + 1
                else:
                    text += ("" if gap < 0.1 * fragment.size else " ") + fragment.text
            size = max(f.size for f in row)
            bold = all(f.bold for f in row)
            lines.append(_Line(text, row[0].x0, max(f.x1 for f in row), row[0].base, size, bold, cells, number))
    return lines


def _paragraphs(lines: list[_Line]) -> list[_Paragraph]:
    """Lines joined into paragraphs (a table's consecutive rows are one row group)."""
    pitch = _line_pitch(lines)
    paragraphs: list[_Paragraph] = []
    for line in lines:
        if paragraphs and not _breaks(paragraphs[-1], line, pitch):
            paragraphs[-1].lines.append(line)
        else:
            paragraphs.append(_Paragraph([line]))
    return paragraphs


def _line_pitch(lines: list[_Line]) -> float:
    """The most common distance between the baselines of consecutive lines, as a multiple of their font height."""
    ratios = Counter(
        round((a.base - b.base) / b.size, 1)
        for a, b in zip(lines, lines[1:], strict=False)
        if abs(a.size - b.size) < 0.5 and 0.8 * b.size < a.base - b.base < 3 * b.size and a.x0 < b.x1 and b.x0 < a.x1
    )
    return ratios.most_common(1)[0][0] if ratios else 1.1


def _breaks(paragraph: _Paragraph, line: _Line, pitch: float) -> bool:
    """Whether `line` starts a new paragraph after `paragraph`."""
    last = paragraph.lines[-1]
    ends_sentence = bool(_SENTENCE_END.search(last.text))
    if re.fullmatch(r"\d{1,3}|[*†]", last.text) and len(paragraph.lines) == 1 and 0 < last.base - line.base < 2 * line.size:
        return False  # a footnote's number, raised above its text
    if line.cells > 1 or last.cells > 1:
        return not (line.cells > 1 and last.cells > 1 and line.block - last.block <= 1)
    if abs(line.size - last.size) > 0.15 * max(line.size, last.size):
        return True
    if line.bold != last.bold and last.x1 < line.x1 - line.size:  # a heading's line is shorter than the text's
        return True
    if _BULLET.match(line.text) or (ends_sentence and re.match(r"\d{1,3}\s", line.text)):
        return True  # a list item, or the next footnote
    if line.base >= last.base or line.x0 >= last.x1:  # the next column: the paragraph may go on there
        return ends_sentence
    if last.base - line.base > (pitch + 0.35) * line.size:
        return True
    if ends_sentence and abs(line.x0 - last.x0) > 0.8 * line.size:
        return True  # a first-line indent, or the end of an indented item
    right = max(x.x1 for x in (*paragraph.lines, line))
    left = min(x.x0 for x in (*paragraph.lines, line))
    if last.x1 - left < 0.6 * (right - left) and (line.text[:1].isupper() or line.text[:1].isdigit()):
        return True  # a short line ends its paragraph (or is a heading), unless a new one starts in lower case
    return ends_sentence and last.x1 < right - 4 * line.size


def _join(lines: Sequence[_Line]) -> str:
    """The lines of a paragraph as one text: words broken over a line end joined, rows of a table one per line."""
    text = lines[0].text
    for before, line in zip(lines, lines[1:], strict=False):
        if before.cells > 1 and line.cells > 1:
            text += "\n" + line.text
            continue
        hyphenated = _HYPHENATED.search(text[-80:])
        first = line.text.split(" ", 1)[0]
        if re.search(r"\S[–/@]$", text[-2:]):  # "2018–" + "23–51", "https://" + "www.nrc.gov"
            text += line.text
        elif hyphenated and _joins_hyphen(hyphenated.group(1), first):
            text = text[:-1] + line.text
        elif hyphenated:
            text = text[:-1] + "-" + (" " if first.lower().strip(",") in _KEEP_HYPHEN_BEFORE else "") + line.text
        else:
            text += " " + line.text
    return text


def _joins_hyphen(before: str, after: str) -> bool:
    """A word broken at a line end ("regel-" + "geving"), not a compound ("Noord-" + "Brabant", "EU-" + "landen")."""
    if len(before) < 2 or (before.isupper() and len(before) >= 2) or not before[-1].isalpha():
        return False
    if not after or not after[0].islower():
        return False
    return after.lower().strip(",.;:") not in _KEEP_HYPHEN_BEFORE


# --- units, headings, title and metadata ------------------------------------------------------------------------


def _units(paragraphs: list[tuple[int, _Paragraph]], body: float) -> Iterator[Unit]:
    """One unit per paragraph; a heading is a unit too and the last entry of the path of the units after it."""
    path: list[tuple[float, str]] = []
    for page, paragraph in paragraphs:
        text = re.sub(r"[ \t]+", " ", _join(paragraph.lines)).strip()
        if not text:
            continue
        level = _heading_level(paragraph, text, body)
        if level is not None:
            while path and path[-1][0] <= level:
                path.pop()
            path.append((level, text))
        yield Unit(text, page=page, headings=tuple(heading for _, heading in path))


def _heading_level(paragraph: _Paragraph, text: str, body: float) -> float | None:
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


def _title(document: pdfium.PdfDocument, first_page: list[_Paragraph], body: float, repeated: set[str]
           ) -> str | None:
    """The title people know the document by: /Title when it names this document (`_names_document`), else a
    letter's subject ("Onderwerp Draagmoederschap"), else the heading of page 1 in the largest font (the first of
    equals) that is not a masthead, a running header or a table of contents' heading (`_is_masthead`); None when
    there is none (the ingest then names the document after its file). `repeated`: the running rows of the other
    pages (`_repeated_rows`)."""
    first_text = " ".join(line.text for paragraph in first_page for line in paragraph.lines)
    stated = _one_line(document.get_metadata_value("Title") or "")
    if _names_document(stated, first_text):
        return stated[:300]
    subject = _subject(first_page)
    if subject is not None:
        return subject[:300]
    author = _words_key(document.get_metadata_value("Author") or "")
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


def _subject(first_page: list[_Paragraph]) -> str | None:
    """A letter's subject line on page 1 ("Onderwerp Draagmoederschap", "Betreft: ...", "Subject: ..."): a letter
    has no heading, and its subject is how its readers name it."""
    for paragraph in first_page:
        if len(paragraph.lines) > 2:
            continue
        match = _SUBJECT.match(_one_line(_join(paragraph.lines).replace(" | ", " ")))
        subject = match.group("subject").rstrip(" .") if match else ""
        if sum(c.isalpha() for c in subject) >= 3 and len(subject.split()) <= 20:
            return subject
    return None


def _title_heading(paragraph: _Paragraph, body: float) -> tuple[float, str] | None:
    """A paragraph of page 1 that may be the title, with its rank: a heading (`_heading_level`), or a labelled
    heading row (`_labelled`) ranked by its font size."""
    text = _one_line(_join(paragraph.lines))
    level = _heading_level(paragraph, text, body)
    if level is not None:
        return level, text
    labelled = _labelled(paragraph)
    return (paragraph.size, labelled) if labelled is not None else None


def _labelled(paragraph: _Paragraph) -> str | None:
    """A bold line of two cells, a number and a heading: "32 545 | Wet- en regelgeving financiële markten" and "Nr.
    143 | MOTIE VAN DE LEDEN ..." name a Kamerstuk's dossier and the paper itself. As "label heading", else None."""
    line = paragraph.lines[0]
    if len(paragraph.lines) > 1 or line.cells != 2 or not line.bold:
        return None
    label, text = line.text.split(" | ", 1)
    if not _LABEL.match(label) or re.search(r"[.,;]$", text) or len(text.split()) > 14:
        return None
    return f"{label} {text}" if sum(c.isalpha() for c in text) >= 3 else None


def _with_series(title: str, after: list[_Paragraph]) -> str:
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
    key = _words_key(text)
    return key in _CONTENTS or key == author or key in repeated


def _metadata(document: pdfium.PdfDocument, pages: int, without_text: list[int]) -> dict[str, str]:
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
