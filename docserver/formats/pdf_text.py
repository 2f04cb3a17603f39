"""The text layer of a PDF page: its characters gathered into fragments, runs on one baseline without a wide gap (a
table cell, a column's line), measured along the direction most of the page's text runs in (a landscape page is
often text turned a quarter, under /Rotate); and the share of the page its images cover, which tells a scan with a
stamp from a page with a few words (`pdf.page_needs_ocr`). Callers hold the PDFium lock (`pdf.py`).
"""

from __future__ import annotations

import ctypes
import math
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import pypdfium2 as pdfium
import pypdfium2.raw as pdfium_c

from .base import Deadline, Refused

__all__ = ["CELL_GAP", "MIN_TEXT_CHARS", "Fragment", "Page", "read_page", "usable_characters"]

MIN_TEXT_CHARS = 20  # fewer letters and digits than this on a page over a page-sized image: a scan's stamp
_QUARTER = math.pi / 2
_TURN_SAMPLES = 400  # characters looked at to find the direction a page's text runs in
_FORM_DEPTH = 4  # how deep form XObjects nested in each other are searched for a scan's image
CELL_GAP = 1.2  # a horizontal gap wider than this many font heights separates two cells or columns
_SPACES = (32, 9, 0xA0, 0x2002, 0x2003, 0x2009)  # the code points of a word boundary
_CHARS_PER_CHECK = 4096  # how many characters of a page are read between two checks of the deadline


@dataclass(slots=True)
class Fragment:
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
class Page:
    """One page's text layer as fragments, and the share of the page that images cover (measured only when the
    text layer is short: it tells a scan with a stamp from a page with a few words)."""

    fragments: list[Fragment]
    image_share: float


def usable_characters(fragments: Sequence[Fragment]) -> int:
    return sum(c.isalnum() for f in fragments for c in f.text)


def read_page(document: pdfium.PdfDocument, number: int, deadline: Deadline) -> Page:
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
        short = usable_characters(fragments) < MIN_TEXT_CHARS
        return Page(fragments, _image_share(page, deadline, f"page {number}") if short else 0.0)
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


def _character(raw: pdfium_c.FPDF_TEXTPAGE, index: int) -> str | None:
    """The character at `index` of a text page: " " for a word boundary (a space, or one PDFium generated), "-" for
    a hyphen that breaks a word at a line end, None for a control character or a glyph without a Unicode value."""
    code = pdfium_c.FPDFText_GetUnicode(raw, index)
    if code in _SPACES or pdfium_c.FPDFText_IsGenerated(raw, index):
        return " "
    if code in (2, 0xAD):  # 2: PDFium's mark for a hyphen that breaks a word at the end of a line
        return "-"
    if code < 32 or code in (0xFFFD, 0xFFFE, 0xFFFF) or 0xE000 <= code <= 0xF8FF:
        return None
    return chr(code)


def _fragments(raw: pdfium_c.FPDF_TEXTPAGE, deadline: Deadline, where: str) -> Iterator[Fragment]:
    """The characters of a text page, in content-stream order, gathered into fragments along the direction most
    of its text runs in (`_main_turn`); the deadline is checked every _CHARS_PER_CHECK characters (one page can
    hold millions)."""
    turn = _main_turn(raw)
    box = pdfium_c.FS_RECTF()
    ox, oy = ctypes.c_double(), ctypes.c_double()
    chars: list[str] = []
    current: Fragment | None = None
    space = False
    words = bold = 0  # the words of the current fragment, and how many of them start in a bold font
    for index in range(pdfium_c.FPDFText_CountChars(raw)):
        if index % _CHARS_PER_CHECK == 0:
            deadline.check(where)
        char = _character(raw, index)
        if char == " ":
            space = True  # a word boundary; whether it is a gap is decided by the geometry
            continue
        if char is None:
            continue
        pdfium_c.FPDFText_GetLooseCharBox(raw, index, box)
        pdfium_c.FPDFText_GetCharOrigin(raw, index, ox, oy)
        left, right, bottom, top, base = _turned(turn, box, ox.value, oy.value)
        size = top - bottom
        if size <= 0.5:
            continue
        if current is not None and abs(base - current.base) <= 0.35 * current.size:
            gap = left - current.x1
            if -0.6 * current.size <= gap <= CELL_GAP * current.size:
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
        current = Fragment("", left, right, bottom, top, base, size, False)
        chars, space = [char], False
    if current is not None:
        current.text, current.bold = "".join(chars).strip(), bold >= 0.5 * words
        yield current
