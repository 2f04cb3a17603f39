"""Ingesting documents as people have them: every real file in ../shared/formats is read or refused with its
reason, the same Kamerstuk reads the same from PDF, HTML, official XML and ODT, laws from BWB XML are chunked per
article like Markdown law texts, PDF chunks name their pages, and one bad file never costs the good ones."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from docserver.chunking import TEXT_CHARS
from docserver.formats import Limits, Refused, extract, sniff
from docserver.index import Index
from docserver.ingest import ingest, ingest_files, parse_file
from docserver.store import load_documents

ROOT = Path(__file__).resolve().parents[1]
FORMATS = Path(os.environ.get("NEO_SHARED_DIR", ROOT.parent / "shared")) / "formats"
needs_formats = pytest.mark.skipif(not FORMATS.is_dir(), reason="../shared/formats is absent")
SCANNED = "nl-blg-1007826-scan-beslisnota-nitraat.pdf"


@pytest.fixture
def index_file(tmp_path: Path) -> Path:
    return tmp_path / "index.sqlite3"


def _flat(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip()


@needs_formats
def test_every_shared_file_ingests_or_is_refused_with_its_reason(index_file: Path) -> None:
    files = sorted(p for p in FORMATS.iterdir() if p.suffix in (".pdf", ".docx", ".odt", ".html", ".xml"))
    assert len(files) == 21
    report = ingest_files([FORMATS], "formats", index_path=index_file)
    refused = {f.path.name: f.reason for f in report.failures}
    ingested = {d.metadata.get("format") or "bwb": d for d in report.documents}
    assert set(refused) <= {SCANNED}, refused
    if SCANNED in refused:  # without OCR: refused with that reason, never indexed empty
        assert "no text layer" in refused[SCANNED] and "OCR" in refused[SCANNED]
    else:  # with Tesseract: read by OCR, text on both pages, marked as machine-read
        scan = next(d for d in report.documents if d.doc_id == "nl-blg-1007826-scan-beslisnota-nitraat-pdf")
        assert {p for c in scan.chunks if c.text.strip() and c.page for p in range(c.page, (c.page_end or c.page) + 1)} == {1, 2}
        assert scan.metadata["ocr_pages"] == "1, 2" and scan.metadata["ocr"].startswith("tesseract ")
    assert {"pdf", "docx", "odt", "html", "op", "bwb"} <= set(ingested)
    for doc in report.documents:
        assert doc.chunks and all(c.text.strip() for c in doc.chunks), doc.doc_id
        assert doc.title and not doc.title.endswith((".pdf", ".docx")), doc.doc_id
        assert doc.language in ("nl", "en"), doc.doc_id
    by_id = {d.doc_id: d for d in report.documents}
    assert by_id["en-nureg0800-srp-5-2-3-rev3-pdf"].language == "en"
    assert by_id["nl-aiia-2-0-invultemplate-docx"].language == "nl"
    assert {d.doc_id for d in load_documents(index_file)} == set(by_id)


@needs_formats
def test_the_same_kamerstuk_reads_the_same_in_every_format() -> None:
    texts = {}
    for name in ("nl-kst-32545-143-motie.pdf", "nl-kst-32545-143-motie.html", "nl-op-kst-32545-143-motie.xml",
                 "nl-kst-32545-143-motie.odt"):
        doc = parse_file(FORMATS / name, "kst")
        whole = _flat(" ".join(c.text for c in doc.chunks))
        body = re.search(r"De Kamer, .*? gaat over tot de orde van de dag\.", whole)
        assert body, (name, whole[:400])
        texts[name] = body.group(0)
    assert len(set(texts.values())) == 1, texts
    assert "spaarsaldogrens" in next(iter(texts.values()))  # hyphenated across a line in the PDF


@needs_formats
def test_pdf_chunks_name_their_pages_and_drop_running_headers() -> None:
    doc = parse_file(FORMATS / "en-nureg0800-srp-5.2.3-rev3.pdf", "nrc")
    assert doc.metadata["format"] == "pdf" and int(doc.metadata["pages"]) >= 20
    pages = [re.search(r"\bpp?\. (\d+)(?:-(\d+))?$", c.section) for c in doc.chunks]
    assert all(pages), [c.section for c in doc.chunks if not re.search(r"pp?\. \d", c.section)]
    assert all(int(m.group(2)) == int(m.group(1)) + 1 for m in pages if m.group(2))  # a break, said as "pp. 6-7"
    assert max(int(m.group(1)) for m in pages) >= 20
    assert any(c.section.startswith("II. ACCEPTANCE CRITERIA, p. ") for c in doc.chunks)  # numbered capitals
    assert all(len(c.text) <= TEXT_CHARS for c in doc.chunks)
    firsts = [c.text.splitlines()[0] for c in doc.chunks]
    assert max(firsts.count(line) for line in firsts) <= 2  # no running header opening every page's chunk


@needs_formats
def test_laws_from_bwb_xml_are_chunked_per_article_with_juriconnect_links(index_file: Path) -> None:
    (law,) = ingest([FORMATS / "nl-bwb-BWBR0018451-wet-op-de-zorgtoeslag-2025-01-01.xml"], "wetten",
                    index_path=index_file)
    assert (law.doc_id, law.title, law.kind, law.language) == ("bwbr0018451", "Wet op de zorgtoeslag", "official",
                                                               "nl")
    articles = [c for c in law.chunks if ", artikel " in c.title]
    assert [c.title.split(", artikel ")[1] for c in articles] == ["1", "2", "3", "4", "4a", "5", "6", "7", "8"]
    for chunk in articles:
        number = chunk.title.split(", artikel ")[1].split(" (")[0]
        assert chunk.url == f"https://wetten.overheid.nl/jci1.3:c:BWBR0018451&artikel={number}"
        assert chunk.section.startswith(f"Artikel {number}")
    index = Index.load(ROOT / "docserver" / "corpus", index_path=index_file)
    hit = index.search("artikel 2 zorgtoeslag", "wetten")[0]
    assert hit.document.doc_id == "bwbr0018451"


def test_one_bad_file_never_costs_the_good_ones(tmp_path: Path, index_file: Path) -> None:
    folder = tmp_path / "map"
    folder.mkdir()
    (folder / "goed.txt").write_text("De vergunninghouder meldt elk voorval binnen acht uur.", encoding="utf-8")
    (folder / "kapot.pdf").write_bytes(b"%PDF-1.4\n1 0 obj << /Type /Catalog /Pages 2 0 R >> endobj\n")
    (folder / "leeg.docx").write_bytes(b"")
    (folder / "vreemd.xml").write_text("<?xml version='1.0'?><onbekend><a>tekst</a></onbekend>", encoding="utf-8")
    (folder / "binair.txt").write_bytes(bytes(range(256)) * 8)
    report = ingest_files([folder], "notities", index_path=index_file)
    assert [d.doc_id for d in report.documents] == ["goed"]
    reasons = {f.path.name: f.reason for f in report.failures}
    assert set(reasons) == {"kapot.pdf", "leeg.docx", "vreemd.xml", "binair.txt"}
    assert "empty" in reasons["leeg.docx"] and "unknown format" in reasons["vreemd.xml"]
    assert reasons["binair.txt"] == "binary data at byte 0"  # named as text: the first byte no text holds
    assert [d.doc_id for d in load_documents(index_file)] == ["goed"]
    with pytest.raises(ValueError, match="kapot.pdf"):  # the strict form names the refused files
        ingest([folder], "notities", index_path=index_file)


def test_cli_reports_each_refused_file_and_fails(tmp_path: Path, index_file: Path) -> None:
    good, bad = tmp_path / "goed.md", tmp_path / "kapot.docx"
    good.write_text("# Toezicht\n\nDe ANVS houdt toezicht op kerninstallaties.\n", encoding="utf-8")
    bad.write_bytes(b"PK\x03\x04 not really a zip")
    result = subprocess.run(
        [sys.executable, "-m", "docserver", "ingest", str(good), str(bad), "--collection", "c", "--index",
         str(index_file)], capture_output=True, text=True, cwd=ROOT, timeout=120,
    )
    assert result.returncode == 1
    assert f"refused: {bad}: " in result.stderr and "1 file(s) refused" in result.stderr
    assert "1 documents" in result.stdout and "goed" in result.stdout
    empty = tmp_path / "leeg"
    empty.mkdir()
    nothing = subprocess.run([sys.executable, "-m", "docserver", "ingest", str(empty), "--collection", "c",
                              "--index", str(index_file)], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert nothing.returncode == 1 and "no files to ingest" in nothing.stderr


@pytest.mark.parametrize(
    ("data", "suffix", "kind"),
    [
        (b"%PDF-1.7\n...", ".bin", "pdf"),
        (b"\xef\xbb\xbf<?xml version='1.0'?>\n<!-- c -->\n<toestand bwb-id='BWBR1'/>", ".txt", "bwb"),
        (b"<?xml version='1.0'?><officiele-publicatie/>", "", "op"),
        (b"<!DOCTYPE html><html><body><p>x</p></body></html>", ".txt", "html"),
        (b"<?xml version='1.0'?><html xmlns='http://www.w3.org/1999/xhtml'/>", ".xml", "html"),
        (b"# Kop\n\ntekst", ".md", "markdown"),
        (b"platte tekst", ".pdf", "text"),
        (b"<?xml version='1.0'?><rss/>", ".xml", None),
        (b"<h1>Kop</h1><p>Een fragment zonder html-element.</p>", ".html", "html"),
        (b"<h1>Kop</h1><p>Een fragment zonder html-element.</p>", ".xml", None),
        (b"\x00\x01\x02binary", ".txt", None),
        (b"PK\x03\x04garbage", ".docx", None),
    ],
)
def test_the_format_is_chosen_by_content(data: bytes, suffix: str, kind: str | None) -> None:
    assert sniff(data, suffix) == kind


def test_limits_refuse_oversized_files(tmp_path: Path) -> None:
    big = tmp_path / "groot.txt"
    big.write_text("woord " * 50_000, encoding="utf-8")
    with pytest.raises(Refused, match="MB"):
        parse_file(big, "c", Limits(max_bytes=100_000))


def test_an_index_from_before_pages_is_read_and_migrated(tmp_path: Path, index_file: Path) -> None:
    import sqlite3

    from docserver.documents import Chunk, Document
    from docserver.store import DocumentStore

    note = tmp_path / "notitie.txt"
    note.write_text("Een notitie over toezicht.", encoding="utf-8")
    ingest([note], "c", index_path=index_file)
    with sqlite3.connect(index_file) as db:  # as an index written before chunks had pages
        db.execute("ALTER TABLE chunks DROP COLUMN page")
        db.execute("ALTER TABLE chunks DROP COLUMN page_end")
    assert [(c.page, c.page_end) for d in load_documents(index_file) for c in d.chunks] == [(None, None)]
    paged = Document("rapport-pdf", "c", "Rapport", (Chunk("rapport-pdf", "c", 0, "Rapport", "pp. 6-7", "Tekst.",
                                                           None, 6, 7),))
    with DocumentStore(index_file) as store:
        store.save([(paged, None)])
    stored = {d.doc_id: d for d in load_documents(index_file)}
    assert (stored["rapport-pdf"].chunks[0].page, stored["rapport-pdf"].chunks[0].page_end) == (6, 7)
    assert stored["notitie"].chunks[0].page is None


@needs_formats
def test_pdf_chunks_carry_their_pages(index_file: Path) -> None:
    (doc,) = ingest([FORMATS / "en-nureg0800-srp-5.4.11.pdf"], "nrc", index_path=index_file)
    (stored,) = load_documents(index_file)
    assert [(c.page, c.page_end) for c in stored.chunks] == [(c.page, c.page_end) for c in doc.chunks]
    for chunk in stored.chunks:
        label = f"p. {chunk.page}" if chunk.page_end is None else f"pp. {chunk.page}-{chunk.page_end}"
        assert chunk.section.endswith(label)


def test_sniffing_an_odt_reads_only_the_start_of_its_mimetype_member() -> None:
    """The format is told before the bounded ZIP reader runs: a bomb in the `mimetype` member must not be inflated."""
    import io
    import tracemalloc
    import zipfile

    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("mimetype", b"application/vnd.oasis.opendocument.text" + b" " * 200_000_000)
        archive.writestr("content.xml", b"<office:document-content/>")
    data = buffer.getvalue()
    assert len(data) < 1_000_000
    tracemalloc.start()
    try:
        assert sniff(data, ".odt") == "odt"  # told from the member's first bytes, the rest not inflated
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 20_000_000, peak
    with pytest.raises(Refused):  # the bounded reader then refuses what the member would inflate to
        extract("odt", data, Limits())
