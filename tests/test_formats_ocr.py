"""OCR of PDF pages without a text layer (docserver/formats/ocr.py, hooked into docserver/formats/pdf.py).

With Tesseract installed (Debian: tesseract-ocr, tesseract-ocr-nld, tesseract-ocr-eng) the real scanned
beslisnota in ../shared/formats (or $NEO_SHARED_DIR/formats) is read page by page and marked as machine-read; so
are image-only pages built here: a page of text rendered by PDFium and put back into a PDF as an image, with no
text layer. Without Tesseract (PATH without it) or with DOCSERVER_OCR=off a scan is refused with the reason,
never indexed empty. Tesseract's TSV is turned into paragraphs by pure functions, tested on TSV written here.
"""

from __future__ import annotations

import os
import re
import shutil
import threading
import time
import zlib
from pathlib import Path

import pypdfium2 as pdfium
import pypdfium2.raw as pdfium_c
import pytest

from docserver.formats import ocr, pdf
from docserver.formats.base import Deadline, Extracted, Limits, Refused
from tests.fakes.pdf import build_pdf

ROOT = Path(__file__).resolve().parents[1]
SCANNED = Path(os.environ.get("NEO_SHARED_DIR", ROOT.parent / "shared")) / "formats" / (
    "nl-blg-1007826-scan-beslisnota-nitraat.pdf")
needs_tesseract = pytest.mark.skipif(shutil.which("tesseract") is None, reason="tesseract is not installed")
needs_scan = pytest.mark.skipif(not SCANNED.is_file(), reason=f"{SCANNED} is absent")

FONT = b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>"
SENTENCE = "De minister besluit dat de regeling per 1 januari vervalt."


def _flat(text: str) -> str:
    return re.sub(r"\s+", " ", text).lower()


def _text_on(extracted: Extracted, page: int) -> str:
    return _flat(" ".join(unit.text for unit in extracted.units if unit.page == page))


# --- PDFs written here: text pages, image-only pages (text rendered by PDFium), blank pages ----------------------



def _stream(content: bytes, entries: bytes = b"") -> bytes:
    return b"<< /Length %d %s >>\nstream\n" % (len(content), entries) + content + b"\nendstream"


def _lines(lines: list[tuple[int, str]]) -> bytes:
    """A content stream that sets each (font size, text) line below the one before, from the top of an A4 page."""
    content, y = b"", 760
    for size, text in lines:
        content += b"BT /F1 %d Tf 72 %d Td (%s) Tj ET\n" % (size, y, text.encode("cp1252"))
        y -= 2 * size
    return content


def _document(pages: list[tuple[str, list[tuple[int, str]]]]) -> bytes:
    """A PDF of A4 pages, each ("text", lines) set in Helvetica, ("image", lines): the same rendered at 200 dpi and
    embedded as a grayscale image (no text layer), ("white", []): an image with nothing on it, or ("blank", [])."""
    objects = [b"<< /Type /Catalog /Pages 2 0 R >>", b"", FONT]
    kids = []
    for kind, lines in pages:
        number = len(objects) + 1
        kids.append(b"%d 0 R" % number)
        if kind == "blank":
            objects.append(b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 595 842] >>")
            continue
        if kind == "text":
            objects.append(b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 595 842] /Resources << /Font << /F1 3 0 R "
                           b">> >> /Contents %d 0 R >>" % (number + 1))
            objects.append(_stream(_lines(lines)))
            continue
        width, height, pixels = _scan(lines) if kind == "image" else (1654, 2339, b"\xff" * 1654 * 2339)
        objects.append(b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 595 842] /Resources << /XObject << /Im1 %d 0 R "
                       b">> >> /Contents %d 0 R >>" % (number + 2, number + 1))
        objects.append(_stream(b"q 595 0 0 842 0 0 cm /Im1 Do Q"))
        objects.append(_stream(zlib.compress(pixels), b"/Type /XObject /Subtype /Image /Width %d /Height %d "
                               b"/ColorSpace /DeviceGray /BitsPerComponent 8 /Filter /FlateDecode" % (width, height)))
    objects[1] = b"<< /Type /Pages /Kids [%s] /Count %d >>" % (b" ".join(kids), len(kids))
    return build_pdf(objects)


def _scan(lines: list[tuple[int, str]]) -> tuple[int, int, bytes]:
    """A text page rendered by PDFium at 200 dpi in grayscale: width, height and the rows of pixels."""
    document = pdfium.PdfDocument(_document([("text", lines)]))
    try:
        bitmap = document[0].render(scale=200 / 72, grayscale=True, force_bitmap_format=pdfium_c.FPDFBitmap_Gray)
        raw = bytes(bitmap.buffer)
        rows = b"".join(raw[r * bitmap.stride: r * bitmap.stride + bitmap.width] for r in range(bitmap.height))
        return bitmap.width, bitmap.height, rows
    finally:
        document.close()


BODY = [(20, "Inleiding"), (12, SENTENCE), (12, "Deze tekst staat op een gescande pagina zonder tekstlaag.")]


# --- the real scan ------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def scanned() -> Extracted:
    """The shared scanned beslisnota read with OCR, once for the module (about 4 s a page on 2 cores)."""
    return pdf.read(SCANNED.read_bytes(), Limits(), Deadline(120))


@needs_scan
@needs_tesseract
def test_the_real_scan_is_read_with_ocr_page_by_page(scanned: Extracted) -> None:
    assert scanned.pages == 2 and {unit.page for unit in scanned.units} == {1, 2}
    assert "tweeminutendebat mestbeleid" in _text_on(scanned, 1)
    assert "geadviseerd in te stemmen" in _text_on(scanned, 1)
    assert "alternatieve maatwerkaanpak" in _text_on(scanned, 2)
    assert "effect op de waterkwaliteit" in _text_on(scanned, 2)


@needs_scan
@needs_tesseract
def test_the_real_scan_is_marked_machine_read_without_noise(scanned: Extracted) -> None:
    assert scanned.metadata["ocr_pages"] == "1, 2"
    assert re.fullmatch(r"tesseract \d+\.\d+.*", scanned.metadata["ocr"])
    assert "pages_without_text" not in scanned.metadata
    assert not any(_flat(unit.text).startswith("pagina ") for unit in scanned.units)  # "Pagina 1 van 2" footer
    for unit in scanned.units:
        alnum = sum(c.isalnum() for c in unit.text)
        assert alnum >= 3 and alnum >= 0.5 * len(unit.text.replace(" ", "")), unit.text


@needs_scan
def test_without_tesseract_the_scan_is_refused_naming_it(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # no tesseract there
    with pytest.raises(Refused, match=r"no text layer on any of its 2 pages; OCR needs Tesseract \(apt-get install"):
        pdf.read(SCANNED.read_bytes(), Limits(), Deadline(60))


@needs_scan
@pytest.mark.parametrize(("setting", "reason"), [("off", r"OCR is turned off \(DOCSERVER_OCR=off\)"),
                                                 ("sometimes", "DOCSERVER_OCR='sometimes' is neither 'auto' nor 'off'")])
def test_ocr_turned_off_refuses_the_scan(monkeypatch: pytest.MonkeyPatch, setting: str, reason: str) -> None:
    monkeypatch.setenv("DOCSERVER_OCR", setting)
    with pytest.raises(Refused, match="scanned PDF: no text layer on any of its 2 pages; " + reason):
        pdf.read(SCANNED.read_bytes(), Limits(), Deadline(60))


# --- image-only pages built here ----------------------------------------------------------------------------------


@needs_tesseract
def test_an_image_only_pdf_is_read_with_ocr() -> None:
    extracted = pdf.read(_document([("image", BODY)]), Limits(), Deadline(60))
    text = _text_on(extracted, 1)
    assert "minister besluit dat de regeling" in text and "zonder tekstlaag" in text
    assert {unit.page for unit in extracted.units} == {1}
    assert extracted.metadata["ocr_pages"] == "1" and extracted.metadata["ocr"].startswith("tesseract ")


@needs_tesseract
def test_a_scanned_page_in_a_text_pdf_takes_its_place_and_heading() -> None:
    data = _document([("text", BODY), ("image", [(12, "Het besluit wordt bekendgemaakt in de Staatscourant.")]),
                      ("blank", [])])
    extracted = pdf.read(data, Limits(), Deadline(60))
    assert [unit.page for unit in extracted.units] == sorted(unit.page or 0 for unit in extracted.units)
    assert "bekendgemaakt in de staatscourant" in _text_on(extracted, 2)
    assert all(unit.headings == ("Inleiding",) for unit in extracted.units if unit.page == 2)
    assert extracted.metadata["ocr_pages"] == "2"
    assert extracted.metadata["pages_without_text"] == "3"  # nothing on it: not even sent to OCR


@needs_tesseract
def test_a_scan_ocr_finds_nothing_in_is_refused_not_indexed_empty() -> None:
    with pytest.raises(Refused, match="OCR .* found no readable text on any of its 1 pages"):
        pdf.read(_document([("white", [])]), Limits(), Deadline(60))


@needs_tesseract
def test_ocr_of_many_pages_stops_at_the_deadline() -> None:
    data = _document([("image", BODY)] * 6)
    start = time.monotonic()
    with pytest.raises(Refused, match="took longer than 1 s"):
        pdf.read(data, Limits(), Deadline(1))
    assert time.monotonic() - start < 4


@needs_tesseract
def test_pdfium_is_free_for_other_reads_while_tesseract_runs() -> None:
    scan = _document([("image", [(11, f"Regel {n}: {SENTENCE}") for n in range(12)])])
    results: list[Extracted] = []
    reading = threading.Thread(target=lambda: results.append(pdf.read(scan, Limits(), Deadline(60))))
    reading.start()
    time.sleep(0.5)  # rendered by now (0.1 s); Tesseract takes a second or more on this page
    start = time.monotonic()
    pdf.read(_document([("text", BODY)]), Limits(), Deadline(10))
    took = time.monotonic() - start
    assert reading.is_alive(), "the OCR finished too soon for this test to tell"
    reading.join()
    assert took < 0.5 and "regel 11" in _text_on(results[0], 1)


def test_with_ocr_off_a_scanned_page_in_a_text_pdf_is_blank(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DOCSERVER_OCR", "off")
    extracted = pdf.read(_document([("text", BODY), ("image", BODY)]), Limits(), Deadline(60))
    assert {unit.page for unit in extracted.units} == {1}
    assert extracted.metadata["pages_without_text"] == "2" and "ocr" not in extracted.metadata


def test_a_huge_page_is_rendered_within_the_pixel_cap() -> None:
    """A 5 x 5 m page would be 3.5 billion pixels at 300 dpi: it is rendered at a lower resolution instead."""
    page = b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 14400 14400] /Contents 3 0 R >>"
    data = build_pdf([b"<< /Type /Catalog /Pages 2 0 R >>", b"<< /Type /Pages /Kids [4 0 R] /Count 1 >>",
                 _stream(b"0 0 1000 1000 re f"), page])
    document = pdfium.PdfDocument(data)
    try:
        image = ocr._render(document, 1)
    finally:
        document.close()
    assert image is not None and 10 <= image.dpi < 300
    assert len(image.pgm) <= ocr._MAX_PIXELS + 64


# --- Tesseract's TSV to paragraphs --------------------------------------------------------------------------------

HEADER = "level\tpage_num\tblock_num\tpar_num\tline_num\tword_num\tleft\ttop\twidth\theight\tconf\ttext"


def _tsv(words: list[tuple[int, int, int, float, str]]) -> str:
    """TSV rows of words: (block, paragraph, line, confidence, text), with the non-word rows Tesseract adds."""
    rows = [HEADER, "1\t1\t0\t0\t0\t0\t0\t0\t2480\t3508\t-1\t"]
    for number, (block, par, line, conf, text) in enumerate(words, start=1):
        rows.append(f"4\t1\t{block}\t{par}\t{line}\t0\t0\t0\t100\t20\t-1\t")
        rows.append(f"5\t1\t{block}\t{par}\t{line}\t{number}\t0\t0\t100\t20\t{conf}\t{text}")
    return "\n".join(rows) + "\n"


def test_tsv_paragraphs_join_their_lines_and_broken_words() -> None:
    tsv = _tsv([(1, 1, 1, 96, "De"), (1, 1, 1, 95, "regel-"), (1, 1, 2, 93, "geving"), (1, 1, 2, 94, "voor"),
                (1, 1, 2, 90, "klei-"), (1, 1, 3, 96, "en"), (1, 1, 3, 96, "Noord-"), (1, 1, 4, 91, "Brabant."),
                (2, 1, 1, 88, "e"), (2, 1, 1, 95, "Het"), (2, 1, 1, 95, "besluit.")])
    assert ocr._paragraphs(tsv) == ["De regelgeving voor klei- en Noord-Brabant.", "- Het besluit."]


def test_tsv_noise_is_dropped() -> None:
    tsv = _tsv([(1, 1, 1, 96, "Aanleiding"), (1, 1, 1, 12, "ti"),  # an unsure word in a good paragraph
                (2, 1, 1, 31, "of"), (2, 1, 1, 40, "ilk"), (2, 1, 1, 45, "7"),  # a signature read as words
                (3, 1, 1, 95, "—"), (3, 1, 1, 95, "'"), (3, 1, 1, 90, "|"),  # specks
                (4, 1, 1, 95, " ")])  # an empty word on a picture
    assert ocr._paragraphs(tsv) == ["Aanleiding"]


def test_running_lines_and_page_numbers_at_page_edges_are_dropped() -> None:
    pages = {1: ["Ministerie van Financiën", "Tekst op de eerste pagina.", "Pagina 1 van 2"],
             2: ["Directie Begrotingszaken", "Tekst op de tweede pagina.", "Pagina 2 van 2", "2"]}
    assert ocr._drop_running(pages) == {1: ["Ministerie van Financiën", "Tekst op de eerste pagina."],
                                        2: ["Directie Begrotingszaken", "Tekst op de tweede pagina."]}
