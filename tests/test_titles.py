"""Titles people recognise, headings that never stand alone as a chunk, and short or rotated text layers read
(issue 58, item 6).

The real PDFs are in ../shared/formats/ (or $NEO_SHARED_DIR/formats; tests that need them skip when it is absent):
Kamerstukken whose masthead "Tweede Kamer der Staten-Generaal" is no title, a letter whose /Title is a Word file
name, a normenbrief whose /Title names last year's edition, NRC review-plan sections whose first page is a stack of
headings. The other PDFs are written here byte by byte: mastheads, a contents page, a letter's subject, a page of a
few words with and without a page-sized image, pages turned a quarter, half and three quarters.
"""

from __future__ import annotations

import io
import os
import zipfile
from pathlib import Path

import pytest

from docserver.chunking import TEXT_CHARS, unit_chunks
from docserver.documents import Chunk
from docserver.formats import pdf
from docserver.formats.base import Deadline, Extracted, Limits, Refused, Unit, is_placeholder_title
from docserver.ingest import parse_file
from tests.fakes.pdf import build_pdf

ROOT = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("NEO_SHARED_DIR", ROOT.parent / "shared")) / "formats"
FONTS = (b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>",
         b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica-Bold /Encoding /WinAnsiEncoding >>")
SENTENCES = ("De vergunninghouder meldt elke afwijking binnen vierentwintig uur aan de toezichthouder.",
             "De toezichthouder beoordeelt de melding en legt de bevindingen vast in een rapport.",
             "Het rapport wordt binnen zes weken na de inspectie openbaar gemaakt op de website.")


def _shared(name: str) -> Path:
    path = SHARED / name
    if not path.is_file():
        pytest.skip(f"shared test file {path} is absent")
    return path


# --- PDFs written here ----------------------------------------------------------------------------------------------


def _stream(content: bytes, entries: bytes = b"") -> bytes:
    return b"<< /Length %d %s >>\nstream\n" % (len(content), entries) + content + b"\nendstream"


def _text(lines: list[tuple[int, bool, str]], *, matrix: tuple[int, int, int, int] = (1, 0, 0, 1),
          start: tuple[int, int] = (72, 760), step: tuple[int, int] = (0, -1)) -> bytes:
    """A content stream setting (size, bold, text) lines one below the other, 2 font sizes apart: `matrix` turns
    the text, `step` is the direction the next line goes in (for text turned a quarter: sideways)."""
    content, (x, y) = b"", start
    for size, bold, text in lines:
        tm = b"%d %d %d %d %d %d" % (*matrix, x, y)
        content += b"BT /F%d %d Tf %s Tm (%s) Tj ET\n" % (2 if bold else 1, size, tm, text.encode("cp1252"))
        x, y = x + step[0] * 2 * size, y + step[1] * 2 * size
    return content


IMAGE = _stream(b"\x80\x90\xa0\xb0", b"/Type /XObject /Subtype /Image /Width 2 /Height 2 /ColorSpace /DeviceGray "
                                         b"/BitsPerComponent 8")  # 2 x 2 grey pixels, scaled to whatever it covers
FORM = _stream(b"/Im1 Do", b"/Type /XObject /Subtype /Form /BBox [0 0 1 1] /Resources << /XObject << /Im1 5 0 R >> >>")


def _pdf(pages: list[bytes], *, info: dict[str, str] | None = None, rotate: int = 0, image: str = "") -> bytes:
    """A PDF of A4 pages with the given content streams (Helvetica as /F1, Helvetica-Bold as /F2), each page
    turned `rotate` degrees; `image` "page": a grey image drawn over the whole of each page first (a scan), "form":
    the same inside a form XObject."""
    objects = [b"<< /Type /Catalog /Pages 2 0 R >>", b"", *FONTS, IMAGE, FORM]
    kids = []
    for content in pages:
        if image:
            content = b"q 595 0 0 842 0 0 cm /%s Do Q\n" % (b"Im1" if image == "page" else b"Fm1") + content
        kids.append(b"%d 0 R" % (len(objects) + 1))
        objects.append(b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 595 842] /Rotate %d /Resources << /Font << /F1 "
                       b"3 0 R /F2 4 0 R >> /XObject << /Im1 5 0 R /Fm1 6 0 R >> >> /Contents %d 0 R >>"
                       % (rotate, len(objects) + 2))
        objects.append(_stream(content))
    objects[1] = b"<< /Type /Pages /Kids [%s] /Count %d >>" % (b" ".join(kids), len(kids))
    trailer = b""
    if info:
        entries = b" ".join(b"/%s (%s)" % (key.encode(), value.encode("cp1252")) for key, value in info.items())
        objects.append(b"<< %s >>" % entries)
        trailer = b"/Info %d 0 R" % len(objects)
    return build_pdf(objects, trailer=trailer)


def _read(data: bytes) -> Extracted:
    return pdf.read(data, Limits(), Deadline(30))


def _texts(extracted: Extracted) -> list[str]:
    return [unit.text for unit in extracted.units]




def _body(word: str) -> list[tuple[int, bool, str]]:
    """Three body lines naming `word` (each page its own: lines repeated on other pages are running headers)."""
    return [(11, False, sentence) for sentence in _sentences(word)]


def _sentences(word: str) -> list[str]:
    return [f"{sentence[:-1]} in {word}." for sentence in SENTENCES]


BODY = _body("Borssele")


@pytest.fixture(autouse=True)
def _no_ocr(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without OCR a page the reader takes for a scan is refused or left blank, never read by Tesseract: what the
    reader makes of the text layer shows."""
    monkeypatch.setenv("DOCSERVER_OCR", "off")


# --- titles of the real PDFs ----------------------------------------------------------------------------------------

REAL_TITLES = [
    # the masthead "Tweede Kamer der Staten-Generaal" (its /Author) is no title: the dossier and the paper are
    ("nl-kst-32545-143-motie.pdf",
     "32 545 Wet- en regelgeving financiële markten; Nr. 143 MOTIE VAN DE LEDEN INGE VAN DIJK EN GRINWIS"),
    ("nl-ah-tk-20202021-3235-kamervragen.pdf", "nl ah tk 20202021-3235 kamervragen"),  # no heading but the masthead
    ("nl-kamerbrief-draagmoederschap-2011.pdf", "Draagmoederschap"),  # /Title "Microsoft Word - 20110301_....doc"
    ("nl-normenbrief-szw-2026.pdf", "Normenbrief 1 januari 2026"),  # /Title "Brief - Normenbrief 1 januari 2025"
    ("nl-bnc-fiche-5-mifir-mifid-2021.pdf",  # /Title "Toelichting invullen fiche mededeling", the template's
     "Fiche 5: Herziening verordening en richtlijn markten voor financiële instrumenten"),
    ("en-nureg0800-srp-5.4.11.pdf", 'NUREG-0800 - Chapter 5, Section 5.4.11, Revision 4, "Pressurizer Relief Tank."'),
    ("en-nureg0800-srp-5.2.3-rev3.pdf", "NUREG-0800 - Chapter 5, Section 5.2.3, Revision 3, Reactor Coolant Pressure "
                                        "Boundary Materials, dated March 2007."),
    ("en-federal-register-2020-17221.pdf", "Proposed Rules"),
]


@pytest.mark.parametrize(("name", "title"), REAL_TITLES, ids=[name for name, _ in REAL_TITLES])
def test_real_pdfs_get_the_title_people_know_them_by(name: str, title: str) -> None:
    document = parse_file(_shared(name), "formats")
    assert document.title == title
    assert {chunk.title for chunk in document.chunks} == {title}


# --- titles of PDFs written here ------------------------------------------------------------------------------------


def test_a_masthead_repeated_atop_the_other_pages_is_not_the_title() -> None:
    masthead = (20, True, "Autoriteit Nucleaire Veiligheid")
    address = [(8, False, "Postbus 16001"), (8, False, "2500 BA Den Haag"), (8, False, "www.anvs.nl")]
    data = _pdf([_text([*address, masthead, (16, True, "Jaarverslag toezicht kerncentrales"), *BODY]),
                 _text([(9, False, "Autoriteit Nucleaire Veiligheid"), *_body("Dodewaard")]),
                 _text([(9, False, "Autoriteit Nucleaire Veiligheid"), *_body("Petten")])],
                info={"Title": "Microsoft Word - jaarverslag_v3.docx"})
    assert _read(data).title == "Jaarverslag toezicht kerncentrales"


def test_the_author_set_as_a_masthead_is_not_the_title() -> None:
    data = _pdf([_text([(20, True, "Gemeente Utrecht"), (14, True, "Besluit parkeervergunningen binnenstad"),
                        *BODY])], info={"Author": "Gemeente Utrecht"})
    assert _read(data).title == "Besluit parkeervergunningen binnenstad"


def test_a_contents_page_is_no_title_and_the_file_name_is_made_readable(tmp_path: Path) -> None:
    contents = [(20, True, "Contents"), (11, False, "1 Introduction 2"), (11, False, "2 Review procedures 2")]
    data = _pdf([_text(contents), _text(BODY)], info={"Title": "untitled"})
    assert _read(data).title is None
    path = tmp_path / "LaTeX_outline-sample_2019-03-01.pdf"
    path.write_bytes(data)
    assert parse_file(path, "c").title == "LaTeX outline sample 2019-03-01"


def test_a_letters_subject_is_its_title() -> None:
    letter = [(9, False, "Aan de Voorzitter van de Tweede Kamer"), (11, False, "Datum 1 maart 2011"),
              (11, False, "Betreft: Vergunning kerncentrale Borssele"), *BODY]
    assert _read(_pdf([_text(letter)], info={"Title": "Document1"})).title == "Vergunning kerncentrale Borssele"


def test_a_title_that_names_a_year_page_one_does_not_is_last_years() -> None:
    page = _text([(14, True, "Normenbrief 1 januari 2026"), *BODY])
    assert _read(_pdf([page], info={"Title": "Normenbrief 1 januari 2025"})).title == "Normenbrief 1 januari 2026"
    assert _read(_pdf([page], info={"Title": "Normenbrief 2026"})).title == "Normenbrief 2026"


@pytest.mark.parametrize(("title", "placeholder"), [
    ("Microsoft Word - 20110301_5687928a draagmoederschap.doc", True),
    ("Microsoft PowerPoint - presentatie.pptx", True),
    ("untitled", True), ("Untitled 3", True), ("Document1", True), ("Presentatie1", True), ("Slide 1", True),
    ("Kamerbrief_draagmoederschap_2011", True), ("C:\\Users\\jan\\Documents\\brief.rtf", True),
    ("/home/jan/rapport", True), ("20110301", True), ("  ", True), ("", True),
    ("Normenbrief 1 januari 2026", False), ("NUREG-0800", False), ("Wet- en regelgeving financiële markten", False),
    ("Document of the month: the 2024 review", False),
])
def test_placeholder_titles(title: str, placeholder: bool) -> None:
    assert is_placeholder_title(title) is placeholder


def _docx(paragraph: str) -> bytes:
    namespace = "http://schemas.openxmlformats.org/wordprocessingml/2006/main"
    document = (f'<?xml version="1.0"?><w:document xmlns:w="{namespace}"><w:body><w:p><w:r><w:t>{paragraph}'
                f"</w:t></w:r></w:p></w:body></w:document>")
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("[Content_Types].xml", b"<Types/>")
        archive.writestr("word/document.xml", document.encode())
    return buffer.getvalue()


@pytest.mark.parametrize(("name", "content", "title"), [
    ("Notulen_overleg-ANVS_2024-03-01.docx", _docx(SENTENCES[0]), "Notulen overleg ANVS 2024-03-01"),
    ("Kamerbrief_over-draagmoederschap_2011.html",
     f"<html><head><title>Microsoft Word - brief.docx</title></head><body><p>{SENTENCES[1]}</p></body></html>"
     .encode(), "Kamerbrief over draagmoederschap 2011"),
    ("Inspectie%20notities_2024.txt", SENTENCES[2].encode(), "Inspectie notities 2024"),
])
def test_a_document_without_a_title_is_named_after_its_file_made_readable(tmp_path: Path, name: str, content: bytes,
                                                                           title: str) -> None:
    path = tmp_path / name
    path.write_bytes(content)
    document = parse_file(path, "c")
    assert document.title == title and document.chunks


# --- a heading is never a chunk alone --------------------------------------------------------------------------------


def _chunks(units: list[Unit]) -> list[Chunk]:
    return list(unit_chunks(units, doc_id="d", collection="c", title="T", url="https://example.org/d.pdf",
                            language="en"))


def test_headings_go_into_the_chunk_of_the_text_under_them() -> None:
    srp, tank, review = "STANDARD REVIEW PLAN", "5.4.11 PRESSURIZER RELIEF TANK", "REVIEW RESPONSIBILITIES"
    units = [Unit(srp, 1, (srp,)), Unit(tank, 1, (srp, tank)), Unit(review, 1, (srp, review)),
             Unit(SENTENCES[0], 1, (srp, review)), Unit(SENTENCES[1], 2, (srp, review))]
    (chunk,) = _chunks(units)
    assert chunk.text == "\n\n".join([srp, tank, review, SENTENCES[0], SENTENCES[1]])
    assert (chunk.section, chunk.page, chunk.page_end) == ("REVIEW RESPONSIBILITIES, pp. 1-2", 1, 2)
    assert chunk.url == "https://example.org/d.pdf#page=1"


def test_a_heading_at_the_foot_of_a_page_goes_with_its_text_on_the_next() -> None:
    method = ("2 Review", "2.1 Method")
    units = [Unit(SENTENCES[0], 3, ("1 Scope",)), Unit("2 Review", 3, ("2 Review",)), Unit("2.1 Method", 4, method),
             Unit(SENTENCES[1], 4, method)]
    assert [(c.section, c.text, c.page, c.page_end) for c in _chunks(units)] == [
        ("1 Scope, p. 3", SENTENCES[0], 3, None),
        ("2.1 Method, pp. 3-4", f"2 Review\n\n2.1 Method\n\n{SENTENCES[1]}", 3, 4),
    ]


def test_a_short_heading_like_line_at_a_chunk_boundary_opens_the_next_chunk() -> None:
    long = " ".join([SENTENCES[0]] * 16)[:TEXT_CHARS - 20]
    units = [Unit(long, 1, ("Vragen",)), Unit("Vraag 2", 1, ("Vragen",)), Unit(SENTENCES[1], 1, ("Vragen",))]
    assert [c.text for c in _chunks(units)] == [long, f"Vraag 2\n\n{SENTENCES[1]}"]


def test_a_page_of_headings_is_cut_into_chunks_that_fit() -> None:
    units = [Unit(f"{n} Chapter number {n} of the review plan", 1, (f"{n} Chapter number {n} of the review plan",))
             for n in range(1, 80)] + [Unit(SENTENCES[0], 2, ("79 Chapter number 79 of the review plan",))]
    chunks = _chunks(units)
    assert all(len(chunk.text) <= TEXT_CHARS for chunk in chunks)
    assert "\n\n".join(c.text for c in chunks) == "\n\n".join(u.text for u in units)
    assert len(chunks) == 5 and chunks[-1].text.endswith(SENTENCES[0])  # about 800 characters of headings each


def test_no_chunk_of_a_real_pdf_is_only_a_heading() -> None:
    for name in ("en-nureg0800-srp-5.4.11.pdf", "en-nureg0800-srp-5.2.5.pdf", "nl-normenbrief-szw-2026.pdf",
                 "nl-bnc-fiche-5-mifir-mifid-2021.pdf"):
        path = _shared(name)
        headings = {u.text for u in pdf.read(path.read_bytes(), Limits(), Deadline(60)).units
                    if u.headings and u.text == u.headings[-1]}
        alone = [chunk.text for chunk in parse_file(path, "c").chunks if chunk.text in headings]
        assert alone == [], (name, alone)
    first = parse_file(_shared("en-nureg0800-srp-5.4.11.pdf"), "c").chunks[0]
    assert first.text.startswith("U.S. NUCLEAR REGULATORY COMMISSION\n\nSTANDARD REVIEW PLAN\n\nNUREG-0800\n\n"
                                 "5.4.11 PRESSURIZER RELIEF TANK\n\nREVIEW RESPONSIBILITIES\n\nPrimary - ")
    assert (first.section, first.page, first.page_end) == ("REVIEW RESPONSIBILITIES, p. 1", 1, None)


# --- short text layers are text, scans are not ---------------------------------------------------------------------


def test_a_one_line_letter_is_read_not_refused_as_a_scan() -> None:
    extracted = _read(_pdf([_text([(11, False, "Akkoord.")])]))
    assert _texts(extracted) == ["Akkoord."] and "pages_without_text" not in extracted.metadata


def test_a_forms_labels_are_read() -> None:
    labels = [(11, False, "Naam:"), (11, False, "Datum:"), (11, False, "Paraaf:")]
    assert " ".join(_texts(_read(_pdf([_text(labels)])))) == "Naam: Datum: Paraaf:"


@pytest.mark.parametrize("image", ["page", "form"])
def test_a_stamp_over_a_page_sized_image_is_a_scan(image: str) -> None:
    stamp = _text([(9, False, "Kenmerk 21286882")])
    with pytest.raises(Refused, match="scanned PDF: no text layer on any of its 1 pages"):
        _read(_pdf([stamp], image=image))
    assert _texts(_read(_pdf([stamp]))) == ["Kenmerk 21286882"]  # the same few words without the image: text


def test_a_page_number_alone_is_no_text_layer() -> None:
    extracted = _read(_pdf([_text(BODY), _text([(9, False, "2")])]))
    assert extracted.metadata["pages_without_text"] == "2" and {u.page for u in extracted.units} == {1}


# --- rotated pages ----------------------------------------------------------------------------------------------------

LANDSCAPE = [(18, True, "Landschapsplan Zuid"), *BODY]


@pytest.mark.parametrize(("rotate", "matrix", "start", "step"), [
    (90, (0, 1, -1, 0), (100, 72), (1, 0)),  # text runs up the page; /Rotate 90 shows it upright
    (270, (0, -1, 1, 0), (500, 770), (-1, 0)),  # text runs down the page
    (180, (-1, 0, 0, -1), (520, 80), (0, 1)),  # upside down
], ids=["90", "270", "180"])
def test_a_turned_page_is_read_in_order(rotate: int, matrix: tuple[int, int, int, int], start: tuple[int, int],
                                        step: tuple[int, int]) -> None:
    extracted = _read(_pdf([_text(LANDSCAPE, matrix=matrix, start=start, step=step)], rotate=rotate))
    assert _texts(extracted) == ["Landschapsplan Zuid", " ".join(_sentences("Borssele"))]  # one paragraph
    assert extracted.title == "Landschapsplan Zuid"
    assert extracted.units[1].headings == ("Landschapsplan Zuid",)


def test_a_landscape_page_between_upright_ones_is_read_and_a_margin_note_is_not() -> None:
    note = b"BT /F1 8 Tf 0.7071 0.7071 -0.7071 0.7071 560 300 Tm (Concept, niet verspreiden) Tj ET\n"
    landscape = _text(_body("Petten")[::-1], matrix=(0, 1, -1, 0), start=(100, 72), step=(1, 0))
    extracted = _read(_pdf([_text(BODY) + note, landscape, _text(_body("Dodewaard"))]))
    assert [(u.page, u.text) for u in extracted.units] == [
        (1, " ".join(_sentences("Borssele"))), (2, " ".join(_sentences("Petten")[::-1])),
        (3, " ".join(_sentences("Dodewaard")))]
