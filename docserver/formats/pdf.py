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
names the document, else a letter's subject line or the largest heading of page 1 that is no masthead
(`pdf_units.document_title`).
Pages without a usable text layer (`page_needs_ocr`: scans; a page with a few words and no page-sized image is
text) are read by OCR when Tesseract is installed (`docserver/formats/ocr.py`; metadata `ocr_pages` and `ocr` say
so), else read as blank and listed in `pages_without_text`; a PDF with no text layer at all is then refused with
the reason. Encrypted, damaged, too long or too slow files are refused.
PDFium is not thread-safe, so one lock serialises every PDFium call in this process (Tesseract runs outside it).

This module opens the file, runs the steps and hooks up OCR; step 1 is `pdf_text.py` (the text layer), steps 2 to 4
`pdf_layout.py` (the page layout), and the units, title and metadata `pdf_units.py`.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass

import pypdfium2 as pdfium
import pypdfium2.raw as pdfium_c

from . import ocr
from .base import Deadline, Extracted, Limits, Refused, Unit
from .pdf_layout import Paragraph, drop_running_lines, font_mode, lines_of, paragraphs_of, reading_order, repeated_rows
from .pdf_text import MIN_TEXT_CHARS, Fragment, Page, read_page, usable_characters
from .pdf_units import document_metadata, document_title, units_of

__all__ = ["Fragment", "page_needs_ocr", "read"]

_LOCK = threading.Lock()
_SCAN_COVER = 0.5  # images covering this share of a page make it a scan, unless its text layer says more


@dataclass(slots=True)
class _TextLayer:
    """A PDF as its text layer reads, and the pages without one that `engine` is to read (none without OCR)."""

    units: list[Unit]
    title: str | None
    metadata: dict[str, str]
    pages: int
    scanned: list[int]
    engine: ocr.Tesseract | None


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


def page_needs_ocr(fragments: Sequence[Fragment], image_share: float) -> bool:
    """True when a page has no usable text layer, where an OCR pass takes over: no letter or digit at all, or a
    few over images covering most of the page (a scan with a stamp or a page number in its text layer), or only a
    few digits (a page number on a blank page). A few words on a page without a page-sized image are its text (a
    one-line letter, a form's labels): read as they are, never refused as a scan."""
    characters = usable_characters(fragments)
    if characters >= MIN_TEXT_CHARS:
        return False
    has_letters = any(c.isalpha() for f in fragments for c in f.text)
    return characters == 0 or image_share >= _SCAN_COVER or not has_letters


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
    read: list[Page] = []
    for number in range(1, count + 1):
        deadline.check(f"page {number}")
        read.append(read_page(document, number, deadline))
    without_text = [n for n, page in enumerate(read, start=1) if page_needs_ocr(page.fragments, page.image_share)]
    pages = [page.fragments for page in read]
    engine, reason = _ocr_engine() if without_text else (None, "")
    if len(without_text) == count and engine is None:
        raise Refused(f"scanned PDF: no text layer on any of its {count} pages; {reason}")
    if engine is not None:  # OCR reads these pages whole, including the few characters of text layer they have
        scanned = set(without_text)
        pages = [[] if number in scanned else fragments for number, fragments in enumerate(pages, start=1)]
    repeated = repeated_rows(pages[1:])
    pages = drop_running_lines(pages)
    body = font_mode([f for fragments in pages for f in fragments])
    paragraphs: list[tuple[int, Paragraph]] = []
    for number, fragments in enumerate(pages, start=1):
        deadline.check(f"page {number}")
        blocks = reading_order(fragments, body, deadline, f"page {number}")
        paragraphs += [(number, p) for p in paragraphs_of(lines_of(blocks))]
    units = list(units_of(paragraphs, body))
    metadata = document_metadata(document, count, without_text)
    title = document_title(document, [p for number, p in paragraphs if number == 1], body, repeated)
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
