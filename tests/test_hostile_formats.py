"""Issue 57, defects 6 and 7, written as the attacks: real files on disk, read through `docserver.formats.load` and
`extract` (and once through the ingest CLI) as an ingest reads them.

6. A DOCX of a million ZIP members cost 50 s and 639 MB before it was refused: Python's `zipfile` turns the whole
   central directory into `ZipInfo` objects before anything counts them, and `--max-seconds` did not bound it. Now
   the count the end records declare (and the entry records the central directory holds) is checked first, and every
   reader checks its deadline while it inflates, parses and walks.
7. libxml2 stops nesting HTML at 256 levels and keeps what came before: a page nested deeper was stored cut off.
   Now such a page is refused by name.
"""

from __future__ import annotations

import io
import itertools
import json
import os
import struct
import subprocess
import sys
import time
import tracemalloc
import zipfile
import zlib
from pathlib import Path

import pytest

from docserver.formats import Deadline, Extracted, Limits, Refused, extract, load, pdf, sniff
from docserver.formats.zipguard import MAX_MEMBERS
from tests.fakes.pdf import build_pdf

ROOT = Path(__file__).resolve().parents[1]
PYTHON = Path(sys.executable)  # the project's interpreter (.venv/bin/python when run as the README says)
MEMBERS = 1_000_000
DOCUMENT = (
    b'<w:document xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main"><w:body>'
    b"<w:p><w:r><w:t>Een document met een miljoen leden.</w:t></w:r></w:p></w:body></w:document>"
)
W = "http://schemas.openxmlformats.org/wordprocessingml/2006/main"
ODT_MIME = b"application/vnd.oasis.opendocument.text"
TINY = Limits(max_seconds=1e-6)  # spent before a reader has done anything worth mentioning
SECONDS = 2.0  # the bound on refusing the million-member archive
PEAK_BYTES = 100 * 1024 * 1024  # and on the memory it may cost


# --- building the hostile files --------------------------------------------------------------------------------------


_LOCAL = struct.Struct("<4sHHHHHIIIHH")
_CENTRAL = struct.Struct("<4sHHHHHHIIIHHHHHII")
_END = struct.Struct("<4sHHHHIIH")
_END64 = struct.Struct("<4sQHHIIQQQQ")
_LOCATOR = struct.Struct("<4sIQI")
_NAME = 4  # bytes in the name of each empty member: 36**4 names to choose from


def _member_zip(members: int, *, zip64: bool = True, declared: int | None = None) -> bytes:
    """A ZIP archive as a writer would lay it out, built with struct because writing a million members through
    `zipfile` takes minutes: word/document.xml (stored, so a sniffer takes the file for a DOCX), then `members - 1`
    empty members with 4-character names, each with its local header and its central directory entry, and the end
    records: ZIP64 ones when `zip64` (a count past 65 535 needs them), else a plain end record that says `declared`
    members (a liar, when that is fewer than the central directory holds)."""
    crc = zlib.crc32(DOCUMENT)
    first = b"word/document.xml"
    local = [
        _LOCAL.pack(b"PK\x03\x04", 20, 0, 0, 0, 0x21, crc, len(DOCUMENT), len(DOCUMENT), len(first), 0)
        + first
        + DOCUMENT
    ]
    central = [
        _CENTRAL.pack(
            b"PK\x01\x02", 20, 20, 0, 0, 0, 0x21, crc, len(DOCUMENT), len(DOCUMENT), len(first), 0, 0, 0, 0, 0, 0
        )
        + first
    ]
    empty_local = _LOCAL.pack(b"PK\x03\x04", 20, 0, 0, 0, 0x21, 0, 0, 0, _NAME, 0)
    empty_central = _CENTRAL.pack(b"PK\x01\x02", 20, 20, 0, 0, 0, 0x21, 0, 0, 0, _NAME, 0, 0, 0, 0, 0, 0)[:-4]
    names = [
        bytes(name)
        for name in itertools.islice(
            itertools.product(b"0123456789abcdefghijklmnopqrstuvwxyz", repeat=_NAME), members - 1
        )
    ]
    local += [empty_local + name for name in names]
    offset, step = len(local[0]), len(empty_local) + _NAME
    central += [empty_central + struct.pack("<I", offset + step * n) + name for n, name in enumerate(names)]
    body, directory = b"".join(local), b"".join(central)
    if not zip64:
        count = members if declared is None else declared
        return body + directory + _END.pack(b"PK\x05\x06", 0, 0, count, count, len(directory), len(body), 0)
    record = len(body) + len(directory)
    return (
        body
        + directory
        + _END64.pack(b"PK\x06\x06", 44, 45, 45, 0, 0, members, members, len(directory), len(body))
        + _LOCATOR.pack(b"PK\x06\x07", 0, record, 1)
        + _END.pack(b"PK\x05\x06", 0, 0, 0xFFFF, 0xFFFF, 0xFFFFFFFF, 0xFFFFFFFF, 0)
    )


@pytest.fixture(scope="session")
def million_members(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The attack of defect 6: a DOCX of a million members (ZIP64 end records), some 80 MB, built once a session."""
    path = tmp_path_factory.mktemp("hostile") / "miljoen-leden.docx"
    path.write_bytes(_member_zip(MEMBERS))
    return path


@pytest.fixture(scope="session")
def lying_end_record(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The same million members behind a plain end record that says there are 3: zipfile parses the central
    directory by its size, not by that count, so the count alone is no defence."""
    path = tmp_path_factory.mktemp("hostile") / "liegt-over-leden.docx"
    path.write_bytes(_member_zip(MEMBERS, zip64=False, declared=3))
    return path


def _nested_page(depth: int) -> bytes:
    """A page with text before, inside the deepest of `depth` nested divs, and after them."""
    return (
        "<!DOCTYPE html><html lang='nl'><head><title>Diep genest</title></head><body>"
        "<h1>Diep genest</h1><p>Inleiding van de pagina.</p>"
        + "<div>" * depth
        + "<p>De diepste alinea.</p>"
        + "</div>" * depth
        + "<p>Slot van de pagina.</p></body></html>"
    ).encode()


def _read(path: Path, limits: Limits | None = None) -> Extracted:
    """A file read as the ingest reads it: `load` of the open file (size, ZIP end records, sniffing) then `extract`
    (the format's reader)."""
    with path.open("rb") as file:
        kind, data = load(file, path.suffix, limits or Limits())
    return extract(kind, data, limits or Limits())


def _measured_read(path: Path) -> dict[str, object]:
    """`load` and `extract` of `path` in a fresh interpreter: the refusal, the seconds and the growth of the peak
    resident memory (ru_maxrss) of that read alone, the readers imported and the file generated beforehand."""
    script = """
import json, resource, sys, time
import docserver.formats.docx, docserver.formats.odt
from docserver.formats import Limits, Refused, extract, load
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
start = time.perf_counter()
try:
    with open(sys.argv[1], "rb") as file:
        kind, data = load(file, ".docx", Limits())
    extract(kind, data, Limits())
    reason = None
except Refused as exc:
    reason = str(exc)
seconds = time.perf_counter() - start
grown = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) * 1024
print(json.dumps({"reason": reason, "seconds": seconds, "grown": grown}))
"""
    done = subprocess.run([str(PYTHON), "-c", script, str(path)], capture_output=True, text=True, cwd=ROOT, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    measured: dict[str, object] = json.loads(done.stdout.strip().splitlines()[-1])
    return measured


def _in_process(call) -> tuple[BaseException | None, float, int]:
    """What `call()` raised, the seconds it took and the peak of the memory it allocated (tracemalloc)."""
    tracemalloc.start()
    start = time.perf_counter()
    try:
        call()
        raised = None
    except Refused as exc:
        raised = exc
    seconds = time.perf_counter() - start
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return raised, seconds, peak


# --- defect 6: a million ZIP members ---------------------------------------------------------------------------------


def test_the_builder_writes_archives_zipfile_opens() -> None:
    """The hostile archives are real ones: built small, zipfile lists every member and reads the document."""
    for data in (_member_zip(5), _member_zip(5, zip64=False)):
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            assert len(archive.namelist()) == 5 and archive.read("word/document.xml") == DOCUMENT
            assert archive.testzip() is None
    assert sniff(_member_zip(5), ".docx") == "docx"


def test_a_million_member_docx_is_refused_on_its_count_fast_and_small(million_members: Path) -> None:
    measured = _measured_read(million_members)
    assert measured["reason"] == f"the ZIP archive has {MEMBERS} members, more than the {MAX_MEMBERS} allowed"
    assert measured["seconds"] < SECONDS, measured
    assert measured["grown"] < PEAK_BYTES, measured


def test_a_million_members_behind_a_lying_end_record_are_counted_before_zipfile_parses_them(
    lying_end_record: Path,
) -> None:
    measured = _measured_read(lying_end_record)
    assert measured["reason"] == (
        f"the ZIP archive has {MEMBERS} members in its central directory, more than the "
        f"{MAX_MEMBERS} allowed (its end record says fewer)"
    )
    assert measured["seconds"] < SECONDS, measured
    assert measured["grown"] < PEAK_BYTES, measured


@pytest.mark.parametrize("kind", ["docx", "odt"])
def test_every_zip_reader_refuses_the_million_members_it_is_handed_as_bytes(million_members: Path, kind: str) -> None:
    """A caller that already has the bytes (sniffing, or a reader called directly) is refused as fast: the check
    sits in zipguard, before zipfile, for every ZIP reader."""
    data = million_members.read_bytes()
    for call in (lambda: sniff(data, ".docx"), lambda: extract(kind, data, Limits())):
        raised, seconds, peak = _in_process(call)
        assert isinstance(raised, Refused) and f"has {MEMBERS} members" in str(raised)
        assert seconds < SECONDS and peak < PEAK_BYTES, (seconds, peak)


def test_a_central_directory_that_does_not_fit_in_the_file_is_refused(tmp_path: Path) -> None:
    """An end record whose central directory would start past where it can (offset + size beyond the end record):
    refused by name, never handed to zipfile to make sense of."""
    data = bytearray(_member_zip(3, zip64=False))
    end = data.rindex(b"PK\x05\x06")
    data[end + 16 : end + 20] = struct.pack("<I", end)  # the directory's offset: where the end record itself stands
    path = tmp_path / "verschoven.docx"
    path.write_bytes(bytes(data))
    with pytest.raises(Refused, match=r"central directory \(\d+ bytes at offset \d+\) does not fit in the file"):
        _read(path)


# --- defect 7: HTML nested deeper than libxml2 reads -----------------------------------------------------------------


def test_html_nested_300_deep_is_refused_by_name_and_200_deep_reads_whole(tmp_path: Path) -> None:
    deep, shallow = tmp_path / "300-diep.html", tmp_path / "200-diep.html"
    deep.write_bytes(_nested_page(300))
    shallow.write_bytes(_nested_page(200))
    with pytest.raises(Refused, match="nested deeper than 256 levels"):
        _read(deep)
    texts = [unit.text for unit in _read(shallow).units]
    assert texts == ["Inleiding van de pagina.", "De diepste alinea.", "Slot van de pagina."]


def test_html_nested_100000_deep_is_refused_as_nested_not_as_empty(tmp_path: Path) -> None:
    page = tmp_path / "100000-diep.html"
    page.write_bytes(_nested_page(100_000))
    with pytest.raises(Refused, match="nested deeper than 256 levels") as refused:
        _read(page)
    assert "no text" not in str(refused.value)


def test_html_libxml2_stops_reading_is_refused_not_stored_cut(tmp_path: Path) -> None:
    """Any point where libxml2 gives up (a fatal error) cuts the page: here bytes that are not Shift JIS in a page
    that says it is, after which libxml2 kept only "Begin"."""
    page = tmp_path / "kapotte-codering.html"
    page.write_bytes(
        b'<html><head><meta charset="shift_jis"></head><body><p>Begin \x81\xff van de tekst.</p>'
        b"<p>Een tweede alinea die nooit gelezen werd.</p></body></html>"
    )
    with pytest.raises(Refused, match="cannot be read to its end"):
        _read(page)


def test_the_ingest_cli_refuses_both_attacks_by_name(million_members: Path, tmp_path: Path) -> None:
    page = tmp_path / "300-diep.html"
    page.write_bytes(_nested_page(300))
    index = tmp_path / "index.sqlite3"
    done = subprocess.run(
        [
            str(PYTHON),
            "-m",
            "docserver",
            "ingest",
            str(million_members),
            str(page),
            "--collection",
            "x",
            "--max-seconds",
            "5",
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=600,
        env={**os.environ, "DOCSERVER_INDEX": str(index)},
    )
    assert done.returncode == 1, done.stdout + done.stderr
    assert (
        f"refused: {million_members}: the ZIP archive has {MEMBERS} members, more than the {MAX_MEMBERS} allowed"
        in done.stderr
    )
    assert f"refused: {page}: the HTML page is nested deeper than 256 levels" in done.stderr


# --- --max-seconds bounds every format -------------------------------------------------------------------------------


def _long_text(paragraphs: int) -> list[str]:
    return [
        f"Alinea {n}: de vergunninghouder meldt elk voorval binnen acht uur aan de toezichthouder."
        for n in range(paragraphs)
    ]


def _docx(paragraphs: list[str]) -> bytes:
    body = "".join(f"<w:p><w:r><w:t>{text}</w:t></w:r></w:p>" for text in paragraphs)
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("[Content_Types].xml", b"<Types/>")
        archive.writestr("word/document.xml", f'<w:document xmlns:w="{W}"><w:body>{body}</w:body></w:document>')
    return buffer.getvalue()


def _odt(paragraphs: list[str]) -> bytes:
    body = "".join(f"<text:p>{text}</text:p>" for text in paragraphs)
    content = (
        '<office:document-content xmlns:office="urn:oasis:names:tc:opendocument:xmlns:office:1.0" '
        'xmlns:text="urn:oasis:names:tc:opendocument:xmlns:text:1.0"><office:body><office:text>'
        f"{body}</office:text></office:body></office:document-content>"
    )
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr(zipfile.ZipInfo("mimetype"), ODT_MIME)
        archive.writestr("content.xml", content)
    return buffer.getvalue()


def _html(paragraphs: list[str]) -> bytes:
    body = "".join(f"<p>{text}</p>" for text in paragraphs)
    return f"<!DOCTYPE html><html lang='nl'><body><h1>Lang</h1>{body}</body></html>".encode()


def _bwb(paragraphs: list[str]) -> bytes:
    articles = "".join(
        f"<artikel><kop><label>Artikel</label><nr>{n + 1}</nr></kop><al>{text}</al></artikel>"
        for n, text in enumerate(paragraphs)
    )
    return (
        f"<?xml version='1.0'?><toestand bwb-id='BWBR0000001'><wetgeving><citeertitel>Lange wet</citeertitel>"
        f"<wet-besluit><wettekst>{articles}</wettekst></wet-besluit></wetgeving></toestand>"
    ).encode()


def _pdf(pages: int) -> bytes:
    """`pages` pages of 40 lines of text each, written without a PDF library."""
    font = b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>"
    kids = b" ".join(b"%d 0 R" % (4 + 2 * page) for page in range(pages))
    objects = [b"<< /Type /Catalog /Pages 2 0 R >>", b"<< /Type /Pages /Kids [%s] /Count %d >>" % (kids, pages), font]
    for page in range(pages):
        lines = b" ".join(
            b"(Pagina %d regel %d: de vergunninghouder meldt elk voorval.) Tj 0 -16 Td" % (page, line)
            for line in range(40)
        )
        content = b"BT /F1 11 Tf 72 780 Td " + lines + b" ET"
        objects.append(
            b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 595 842] /Resources << /Font << /F1 3 0 R >> "
            b">> /Contents %d 0 R >>" % (5 + 2 * page)
        )
        objects.append(b"<< /Length %d >>\nstream\n" % len(content) + content + b"\nendstream")
    return build_pdf(objects)


@pytest.mark.parametrize(
    ("name", "build", "where"),
    [
        ("lang.docx", lambda: _docx(_long_text(50_000)), "inflating word/document.xml"),
        ("lang.odt", lambda: _odt(_long_text(50_000)), "inflating content.xml"),
        ("lang.html", lambda: _html(_long_text(50_000)), "parsing the HTML page"),
        ("lang.xml", lambda: _bwb(_long_text(20_000)), "parsing the XML"),
        ("lang.pdf", lambda: _pdf(40), "page 1"),
    ],
    ids=["docx", "odt", "html", "bwb", "pdf"],
)
def test_a_tiny_max_seconds_refuses_a_large_legitimate_file_at_its_first_step(
    tmp_path: Path, name: str, build, where: str
) -> None:
    """The deadline is checked from the first step on (inflating a ZIP member, parsing markup, a PDF's first page),
    not only once the whole file is parsed; the same file reads whole with the default limits."""
    path = tmp_path / name
    path.write_bytes(build())
    with pytest.raises(Refused, match=rf"^took longer than 1e-06 s to read \({where}\)$"):
        _read(path, TINY)
    assert len(_read(path).units) > 20


class _Countdown(Deadline):
    """A deadline spent after `checks` checks: time measured in the reader's own steps, so a test can tell whether
    a reader looks at its deadline while it works through one page, not only between pages."""

    def __init__(self, checks: int) -> None:
        super().__init__(60.0)
        self.left = checks

    def check(self, where: str = "") -> None:
        self.left -= 1
        if self.left < 0:
            raise Refused(f"took longer than the test allows ({where})")


def test_a_pdf_page_of_many_characters_is_bounded_while_it_is_read() -> None:
    """One page of 30 000 characters: the deadline is consulted while its characters are read and its reading
    order is cut, not only before and after the page (a page can hold millions of characters)."""
    lines = b" ".join(b"(%s) Tj 0 -4 Td" % (b"regel %03d " % line + b"x" * 140) for line in range(200))
    content = b"BT /F1 3 Tf 10 830 Td " + lines + b" ET"
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [4 0 R] /Count 1 >>",
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 595 842] /Resources << /Font << /F1 3 0 R >> >> "
        b"/Contents 5 0 R >>",
        b"<< /Length %d >>\nstream\n" % len(content) + content + b"\nendstream",
    ]
    data = build_pdf(objects)
    assert pdf.read(data, Limits(), Deadline(60)).units  # a page that reads
    with pytest.raises(Refused, match=r"took longer than the test allows \(page 1\)"):
        pdf.read(data, Limits(), _Countdown(2))  # one check before the page's characters, one before its order
