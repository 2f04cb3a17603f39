"""The PDF reader (docserver/formats/pdf.py) on real PDFs and on hostile ones built here.

The real PDFs are in ../shared/formats/ (or $NEO_SHARED_DIR/formats): Dutch parliamentary papers with running
headers and footers, a letter with a sidebar, a table-heavy normenbrief, a three-column Federal Register, US NRC
Standard Review Plan sections and a scanned PDF without a text layer. Tests that need them skip when they are
absent; the hostile PDFs (page-tree loop, truncated, encrypted, too many pages) are written byte by byte below.
"""

from __future__ import annotations

import os
import time
from functools import cache
from pathlib import Path

import pytest

from docserver.formats import pdf
from docserver.formats.base import Deadline, Extracted, Limits, Refused
from tests.fakes.pdf import build_pdf

ROOT = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("NEO_SHARED_DIR", ROOT.parent / "shared")) / "formats"


def _shared(name: str) -> bytes:
    path = SHARED / name
    if not path.is_file():
        pytest.skip(f"shared test file {path} is absent")
    return path.read_bytes()


@cache
def _extracted(name: str) -> Extracted:
    return pdf.read(_shared(name), Limits(), Deadline(60))


def _unit_with(extracted: Extracted, text: str):
    found = [unit for unit in extracted.units if text in unit.text]
    assert found, f"{text!r} is in no unit"
    return found[0]


# name, title, pages, (fewest, most) units, a sentence, the page it is on
CASES = [
    ("nl-kst-32545-143-motie.pdf",
     "32 545 Wet- en regelgeving financiële markten; Nr. 143 MOTIE VAN DE LEDEN INGE VAN DIJK EN GRINWIS", 1, (8, 40),
     "verzoekt de regering, om een grensspaarsaldo te definiëren waaronder een negatieve spaarrente onwenselijk is", 1),
    ("nl-ah-tk-20202021-3235-kamervragen.pdf", None, 3, (20, 90),  # its masthead is no title (the ingest names it after its file)
     "Negatieve rentepercentages komen op de markt van zakelijke bedrijfskredieten met hoge risico’s zonder "
     "zekerheden niet voor.", 2),
    ("nl-bnc-fiche-5-mifir-mifid-2021.pdf",
     "Fiche 5: Herziening verordening en richtlijn markten voor financiële instrumenten", 15, (50, 200),
     "Naar verwachting zijn er geen implicaties voor ontwikkelingslanden.", 15),
    ("nl-kamerbrief-draagmoederschap-2011.pdf", "Draagmoederschap", 3, (12, 60),
     "Het VUmc krijgt gemiddeld twintig verzoeken per jaar om in aanmerking te komen voor een dergelijk "
     "draagmoederschapstraject", 2),
    ("nl-normenbrief-szw-2026.pdf", "Normenbrief 1 januari 2026", 10, (80, 300),
     "- alleenstaande (ouder) zonder kostendelende medebewoners | € 1.369,06 | € 1.401,50", 2),
    ("nl-handleiding-herziene-who-1.1.0.pdf",
     "Handleiding Herziene Who nav de Wet implementatie open data richtlijn", 56, (300, 1000),
     "De herzieningsrichtlijn uit 2013 wijzigde richtlijn 2003/98 op vier belangrijke punten:", 20),
    ("en-federal-register-2020-17221.pdf", "Proposed Rules", 15, (120, 400),
     "The FAA proposes mandating the following changes to the 737 MAX type design, to address the various "
     "aspects of the unsafe condition.", 3),
    ("en-nureg0800-srp-5.2.3-rev3.pdf",
     "NUREG-0800 - Chapter 5, Section 5.2.3, Revision 3, Reactor Coolant Pressure Boundary Materials, dated "
     "March 2007.", 26, (150, 600),
     "General corrosion and stress corrosion cracking induced by impurities in the reactor coolant can cause "
     "failures of the reactor coolant pressure boundary.", 2),
    ("en-nureg0800-srp-5.2.5.pdf",
     "NUREG-0800 - Chapter 5, Section 5.2.5, Revision 2, Reactor Coolant Pressure Boundary Leakage Detection, "
     "dated March 2007.", 8, (50, 250),
     "5. Section 6.2.4: review of system containment isolation capability.", 2),
    ("en-nureg0800-srp-5.4.11.pdf",
     'NUREG-0800 - Chapter 5, Section 5.4.11, Revision 4, "Pressurizer Relief Tank."', 9, (60, 260),
     "4. Review of the steam condensing capacity of the tank compared to the largest anticipated plant step load "
     "decrease.", 2),
]


@pytest.mark.parametrize(("name", "title", "pages", "unit_range", "sentence", "page"), CASES,
                         ids=[case[0] for case in CASES])
def test_real_pdfs(name: str, title: str | None, pages: int, unit_range: tuple[int, int], sentence: str,
                   page: int) -> None:
    extracted = _extracted(name)
    assert extracted.format == "pdf"
    assert extracted.title == title
    assert extracted.pages == pages and extracted.metadata["pages"] == str(pages)
    assert unit_range[0] <= len(extracted.units) <= unit_range[1], len(extracted.units)
    assert _unit_with(extracted, sentence).page == page
    assert all(unit.text.strip() and 1 <= (unit.page or 0) <= pages for unit in extracted.units)


def test_metadata_has_author_producer_and_an_iso_creation_date() -> None:
    metadata = _extracted("nl-normenbrief-szw-2026.pdf").metadata
    assert metadata["author"] == "Ministerie van Sociale Zaken en Werkgelegenheid"
    assert metadata["producer"].startswith("Microsoft")
    assert metadata["created"] == "2025-06-10T12:36:35"


@pytest.mark.parametrize(("name", "running"), [
    ("nl-bnc-fiche-5-mifir-mifid-2021.pdf", "Pagina 2 van 15"),
    ("nl-kamerbrief-draagmoederschap-2011.pdf", "Pagina 1 van 3"),
    ("nl-normenbrief-szw-2026.pdf", "Pagina 5 van 10"),
    ("en-federal-register-2020-17221.pdf", "Federal Register / Vol. 85, No. 152"),
    ("nl-ah-tk-20202021-3235-kamervragen.pdf", "Tweede Kamer, vergaderjaar 2020–2021, Aanhangsel"),
    ("en-nureg0800-srp-5.2.3-rev3.pdf", "5.2.3-2"),
])
def test_running_headers_and_footers_are_gone(name: str, running: str) -> None:
    extracted = _extracted(name)
    assert not [unit.text for unit in extracted.units if running in unit.text and unit.page != 1]


def test_hyphenated_words_are_joined_and_compounds_kept() -> None:
    text = " ".join(unit.text for unit in _extracted("nl-ah-tk-20202021-3235-kamervragen.pdf").units)
    assert "disproportioneel" in text and "rentepercentages moeilijk" in text
    assert "disproportio neel" not in text and "rentepercen" + " tages" not in text
    letter = " ".join(unit.text for unit in _extracted("nl-kamerbrief-draagmoederschap-2011.pdf").units)
    assert "draag- en wensouders" in letter  # "draag-" + "en" is an elided compound, not a broken word


def test_three_columns_read_across_line_and_column_breaks() -> None:
    extracted = _extracted("en-federal-register-2020-17221.pdf")
    # runs from the foot of column 1 on page 2 to the top of column 2, over the footnotes between them
    unit = _unit_with(extracted, "These effects include stall warning activation, airspeed disagree alert, and "
                                 "altitude disagree alert,5 and may affect the flightcrew’s ability to accomplish "
                                 "continued safe flight and landing.")
    assert unit.page == 2
    assert _unit_with(extracted, "Since AD 2018–23–51 was issued, the agency has determined that final corrective "
                                 "action is necessary").page == 1
    footnote = _unit_with(extracted, "2 The flight control system for 737 MAX airplanes includes two flight control "
                                     "computers")
    assert footnote.page == 2


def test_sidebar_of_a_letter_is_not_interleaved_with_the_body() -> None:
    extracted = _extracted("nl-kamerbrief-draagmoederschap-2011.pdf")
    body = _unit_with(extracted, "Draagmoederschap is een complex onderwerp waar de samenleving zich betrokken bij "
                                 "voelt. Het onderwerp heeft door de toegenomen medische mogelijkheden")
    assert "Directoraat" not in body.text and "Postbus 20301" not in body.text
    assert _unit_with(extracted, "Directoraat-Generaal Preventie, Jeugd en Sancties").page == 1


def test_headings_are_units_and_head_the_units_below_them() -> None:
    extracted = _extracted("nl-bnc-fiche-5-mifir-mifid-2021.pdf")
    heading = _unit_with(extracted, "2. Essentie voorstel")
    assert heading.headings[-1] == "2. Essentie voorstel"
    assert _unit_with(extracted, "De CT werkt als een soort vergelijkingstool").headings[0] == "2. Essentie voorstel"


def test_scanned_pdf_is_refused_without_ocr(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DOCSERVER_OCR", "off")  # with OCR (tests/test_formats_ocr.py) the scan is read
    with pytest.raises(Refused, match="no text layer") as refused:
        pdf.read(_shared("nl-blg-1007826-scan-beslisnota-nitraat.pdf"), Limits(), Deadline(60))
    assert "OCR" in str(refused.value)


def test_first_half_of_a_real_pdf_is_refused() -> None:
    data = _shared("nl-kamerbrief-draagmoederschap-2011.pdf")
    with pytest.raises(Refused, match="truncated"):
        pdf.read(data[: len(data) // 2], Limits(), Deadline(60))


# --- hostile PDFs, written byte by byte --------------------------------------------------------------------------

FONT = b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>"



def _stream(content: bytes) -> bytes:
    return b"<< /Length %d >>\nstream\n" % len(content) + content + b"\nendstream"


WORDS = (b"alpha", b"bravo", b"charlie", b"delta", b"echo")


def _text_pdf(pages: int) -> bytes:
    """`pages` (at most 5) pages of one sentence each: catalog 1, pages 2, font 3, then a page and its content per
    page. The sentences differ in a word, not only in a number, or they would be a running header."""
    kids = b" ".join(b"%d 0 R" % (4 + 2 * i) for i in range(pages))
    objects = [b"<< /Type /Catalog /Pages 2 0 R >>", b"<< /Type /Pages /Kids [%s] /Count %d >>" % (kids, pages), FONT]
    for i in range(pages):
        objects.append(b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 595 842] /Resources << /Font << /F1 3 0 R >> "
                       b">> /Contents %d 0 R >>" % (5 + 2 * i))
        objects.append(_stream(b"BT /F1 12 Tf 72 720 Td (This is the text of page %s of the test.) Tj ET" % WORDS[i]))
    return build_pdf(objects)


def test_hand_built_pdf_reads() -> None:
    extracted = pdf.read(_text_pdf(3), Limits(), Deadline(10))
    assert [(unit.text, unit.page) for unit in extracted.units] == [
        (f"This is the text of page {WORDS[n - 1].decode()} of the test.", n) for n in (1, 2, 3)]
    assert extracted.pages == 3 and extracted.title is None


def test_more_pages_than_the_limit_is_refused_before_reading() -> None:
    with pytest.raises(Refused, match="3 pages, more than the limit of 1"):
        pdf.read(_text_pdf(3), Limits(max_pages=1), Deadline(10))


def test_expired_deadline_is_refused() -> None:
    with pytest.raises(Refused, match="took longer"):
        pdf.read(_text_pdf(3), Limits(), Deadline(0))


def test_truncated_and_random_pdfs_are_refused() -> None:
    whole = _text_pdf(3)
    with pytest.raises(Refused, match="truncated"):
        pdf.read(whole[: len(whole) // 2], Limits(), Deadline(10))
    noise = b"%PDF-1.4\n" + bytes((i * 7919 + 13) % 256 for i in range(4000)) + b"\n%%EOF\n"
    with pytest.raises(Refused):
        pdf.read(noise, Limits(), Deadline(10))
    with pytest.raises(Refused, match="not a PDF"):
        pdf.read(b"GIF89a" + b"\0" * 100 + b"%%EOF", Limits(), Deadline(10))


def test_encrypted_pdf_without_the_password_is_refused() -> None:
    """Standard security handler, RC4 40-bit: /U does not match the empty user password, so a password is needed."""
    encrypt = b"<< /Filter /Standard /V 1 /R 2 /O <%s> /U <%s> /P -44 >>" % (b"11" * 32, b"22" * 32)
    data = build_pdf([b"<< /Type /Catalog /Pages 2 0 R >>", b"<< /Type /Pages /Kids [] /Count 0 >>", encrypt],
                trailer=b"/Encrypt 3 0 R /ID [<0123456789abcdef0123456789abcdef> <0123456789abcdef0123456789abcdef>]")
    with pytest.raises(Refused, match="encrypted"):
        pdf.read(data, Limits(), Deadline(10))


@pytest.mark.parametrize("count", [2, 1_000_000])
@pytest.mark.parametrize("kids", [b"[2 0 R 3 0 R]", b"[3 0 R 5 0 R]", b"[5 0 R 3 0 R]"],
                         ids=["self", "ancestor-after-page", "ancestor-first"])
def test_page_tree_loop_is_refused_or_read_quickly(kids: bytes, count: int) -> None:
    """/Pages 2 lists itself, or lists /Pages 5 whose /Kids point back to 2: no hang, no crash."""
    page = (b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 595 842] /Resources << /Font << /F1 4 0 R >> >> "
            b"/Contents 6 0 R >>")
    objects = [b"<< /Type /Catalog /Pages 2 0 R >>", b"<< /Type /Pages /Kids %s /Count %d >>" % (kids, count), page,
               FONT, b"<< /Type /Pages /Parent 2 0 R /Kids [2 0 R] /Count %d >>" % count,
               _stream(b"BT /F1 12 Tf 72 720 Td (A page in a page tree that loops back on itself.) Tj ET")]
    start = time.monotonic()
    try:
        extracted = pdf.read(build_pdf(objects), Limits(max_pages=50), Deadline(10))
    except Refused:
        pass  # refusing it is as good as reading it
    else:
        assert extracted.pages is not None and extracted.pages <= 50
    assert time.monotonic() - start < 10


def test_a_page_without_text_is_what_ocr_takes_over() -> None:
    fragment = pdf.Fragment("ab", 0, 10, 0, 10, 2, 10, False)
    assert pdf.page_needs_ocr([], 0.0)
    assert pdf.page_needs_ocr([fragment], 1.0)  # two letters over a page-sized image: a scan's stamp
    assert not pdf.page_needs_ocr([fragment], 0.0)  # two letters on a page without an image: its text
    assert not pdf.page_needs_ocr([pdf.Fragment("A whole line of real text on a page", 0, 300, 0, 10, 2, 10, False)],
                                  1.0)
