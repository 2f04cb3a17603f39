"""The DOCX, ODT and HTML readers on real government documents (../shared/formats, skipped when absent) and on
hostile files built here: zip bombs, entity expansion, external entities, truncated and incomplete archives."""

from __future__ import annotations

import io
import os
import struct
import zipfile
from pathlib import Path
from types import ModuleType

import pytest

from docserver.formats import Deadline, Extracted, Limits, Refused, docx, extract, html, odt

ROOT = Path(__file__).resolve().parents[1]
FORMATS = Path(os.environ.get("NEO_SHARED_DIR", ROOT.parent / "shared")) / "formats"
W = "http://schemas.openxmlformats.org/wordprocessingml/2006/main"
ODT_MIME = b"application/vnd.oasis.opendocument.text"
MOTIE = "Nr. 143 MOTIE VAN DE LEDEN INGE VAN DIJK EN GRINWIS"
MOTIE_TITLE = (
    "Wet- en regelgeving financiële markten; Motie; Motie van de leden Inge van Dijk en Grinwis over het definiëren"
    " van een grensspaarsaldo voor negatieve spaarrente"
)
HWHO = "Handleiding Herziene Who nav de Wet implementatie open data richtlijn 1.1.0"
KOOLMEES = "Antwoord van Minister Koolmees (Sociale Zaken en Werkgelegenheid) (ontvangen 21 juni 2021)."
BILLION_LAUGHS = (
    '<!DOCTYPE lolz [<!ENTITY lol "lol">'
    + "".join(f'<!ENTITY lol{n} "{f"&lol{n - 1};" * 10 if n > 1 else "&lol;" * 10}">' for n in range(1, 10))
    + "]>"
)
PASSWD = '<!DOCTYPE doc [<!ENTITY xxe SYSTEM "file:///etc/passwd">]>'


def _read(module: ModuleType, data: bytes, limits: Limits | None = None) -> Extracted:
    limits = limits or Limits()
    return module.read(data, limits, Deadline(limits.max_seconds))


def _real(name: str) -> bytes:
    path = FORMATS / name
    if not path.is_file():
        pytest.skip(f"{path} is not present (the shared real-document set lives outside the repository)")
    return path.read_bytes()


def _zip(members: dict[str, bytes], compression: int = zipfile.ZIP_DEFLATED) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression) as archive:
        for name, content in members.items():
            archive.writestr(name, content)
    return buffer.getvalue()


def _docx(body: str, *, doctype: str = "", styles: str | None = None) -> bytes:
    document = f'<?xml version="1.0"?>{doctype}<w:document xmlns:w="{W}"><w:body>{body}</w:body></w:document>'
    members = {"[Content_Types].xml": b"<Types/>", "word/document.xml": document.encode()}
    if styles is not None:
        members["word/styles.xml"] = f'<w:styles xmlns:w="{W}">{styles}</w:styles>'.encode()
    return _zip(members)


def _odt(text: str, *, doctype: str = "") -> bytes:
    content = (
        f'<?xml version="1.0"?>{doctype}<office:document-content'
        ' xmlns:office="urn:oasis:names:tc:opendocument:xmlns:office:1.0"'
        ' xmlns:text="urn:oasis:names:tc:opendocument:xmlns:text:1.0"'
        ' xmlns:table="urn:oasis:names:tc:opendocument:xmlns:table:1.0">'
        f"<office:body><office:text>{text}</office:text></office:body></office:document-content>"
    )
    return _zip({"mimetype": ODT_MIME, "content.xml": content.encode()}, zipfile.ZIP_STORED)


def _p(text: str, style: str = "") -> str:
    properties = f'<w:pPr><w:pStyle w:val="{style}"/></w:pPr>' if style else ""
    return f"<w:p>{properties}<w:r><w:t>{text}</w:t></w:r></w:p>"


def _row(*cells: str, header: bool = False) -> str:
    properties = "<w:trPr><w:tblHeader/></w:trPr>" if header else ""
    return f"<w:tr>{properties}" + "".join(f"<w:tc>{_p(cell)}</w:tc>" for cell in cells) + "</w:tr>"


def _unit(extracted: Extracted, fragment: str):
    found = [unit for unit in extracted.units if fragment in unit.text]
    assert found, f"{fragment!r} not in any unit"
    return found[0]


# --- real documents -----------------------------------------------------------------------------------------------

REAL = [
    # module, file, title, unit count range, a sentence, the heading path it stands under
    (
        docx,
        "nl-aiia-2.0-invultemplate.docx",
        "AIIA 2.0 voor [NAAM SYSTEEM] ingevuld op [DATUM]",
        (90, 140),
        "5.1.2 | Hoe wordt de kwaliteit van de data gewaarborgd?",
        ("5. Data governance", "5.1 Kwaliteit en integriteit van data"),
    ),
    (
        docx,
        "en-aiia-2.0-invultemplate.docx",
        "AIIA 2.0 for [NAAM SYSTEM] completed on [DATE]",
        (90, 140),
        "5.1.2 | How will the data quality be safeguarded?",
        ("5. Data governance", "5.1 Data quality and integrity"),
    ),
    (
        odt,
        "nl-kst-32545-143-motie.odt",
        MOTIE_TITLE,
        (10, 20),
        "verzoekt de regering, om een grensspaarsaldo te definiëren waaronder een negatieve spaarrente onwenselijk is",
        (MOTIE,),
    ),
    (
        html,
        "nl-kst-32545-143-motie.html",
        MOTIE_TITLE,
        (8, 16),
        "verzoekt de regering, om een grensspaarsaldo te definiëren waaronder een negatieve spaarrente onwenselijk is",
        (MOTIE,),
    ),
    (
        html,
        "nl-ah-tk-20202021-3235-kamervragen.html",
        "Antwoord op vragen van de leden Van Weyenberg, Romke de Jong en Kat over de Tozo",
        (15, 25),
        "Een marktconforme rente van 8% acht ik niet disproportioneel.",
        (KOOLMEES, "Antwoord 5"),
    ),
    (
        html,
        "nl-handleiding-herziene-who-1.1.0.html",
        HWHO,
        (350, 550),
        "mag niet hoger zijn dan vijf procentpunt boven op de vaste rente van de Europese Centrale Bank",
        (
            HWHO,
            "8. Kosten en tarieven",
            "8.3 Aanvullende informatie over kosten en tarieven",
            "8.3.1 Wat wordt er bedoeld met een redelijk rendement?",
        ),
    ),
]


@pytest.mark.parametrize(("module", "name", "title", "count", "sentence", "headings"), REAL, ids=[r[1] for r in REAL])
def test_real_document(
    module: ModuleType, name: str, title: str, count: tuple[int, int], sentence: str, headings: tuple[str, ...]
) -> None:
    extracted = _read(module, _real(name))
    assert extracted.format == module.__name__.rsplit(".", 1)[-1]
    assert extracted.title == title
    assert count[0] <= len(extracted.units) <= count[1], len(extracted.units)
    assert _unit(extracted, sentence).headings == headings
    assert all(unit.text.strip() and unit.text == unit.text.strip() for unit in extracted.units)
    assert all(any(char.isalnum() for char in unit.text) for unit in extracted.units)  # no "…" placeholders


def test_docx_tables_come_out_as_rows_and_template_blanks_do_not() -> None:
    extracted = _read(docx, _real("nl-aiia-2.0-invultemplate.docx"))
    rows = [unit for unit in extracted.units if " | " in unit.text]
    assert len(rows) >= 100  # 110 tables of a question row and an (empty) answer row
    assert "…" not in {unit.text for unit in extracted.units}
    assert extracted.metadata["author"].startswith("Procee")
    assert extracted.metadata["created"] == "2024-10-18T09:41:00Z"
    assert extracted.language is None  # core.xml states none


def test_odt_and_html_of_the_same_motie_agree() -> None:
    from_odt = _read(odt, _real("nl-kst-32545-143-motie.odt"))
    from_html = _read(html, _real("nl-kst-32545-143-motie.html"))
    assert {unit.text for unit in from_html.units} <= {unit.text for unit in from_odt.units}
    for extracted in (from_odt, from_html):
        assert extracted.language == "nl"
        assert extracted.metadata["identifier"] == "kst-32545-143"
        assert extracted.metadata["author"] == "Tweede Kamer der Staten-Generaal"


def test_respec_page_without_scripts_styles_or_table_of_contents() -> None:
    extracted = _read(html, _real("nl-handleiding-herziene-who-1.1.0.html"))
    text = "\n".join(unit.text for unit in extracted.units)
    for leftover in ("respecConfig", "document.title", "dfn-panel", "function(", "{", "Back to Top"):
        assert leftover not in text
    assert not any("Inhoudsopgave" in unit.headings for unit in extracted.units)
    headings = {heading for unit in extracted.units for heading in unit.headings}
    assert "1.1 Waarover gaat deze handleiding?" in headings
    assert "1.1 Waarover gaat deze handleiding?" not in text  # the TOC's entries are not units
    assert extracted.language == "nl" and extracted.metadata["description"].startswith("Op 19 juni 2024")


def test_extract_reads_through_the_registry() -> None:
    extracted = extract("docx", _docx(_p("Artikel 1", "Heading1") + _p("De vergunning vervalt.")), Limits())
    assert extracted.title == "Artikel 1" and extracted.units[0].headings == ("Artikel 1",)


# --- structure on built files --------------------------------------------------------------------------------------

STYLES = (
    '<w:style w:type="paragraph" w:styleId="Kop1"><w:name w:val="heading 1"/></w:style>'
    '<w:style w:type="paragraph" w:styleId="Kop2"><w:name w:val="heading 2"/></w:style>'
    '<w:style w:type="paragraph" w:styleId="Eigen"><w:name w:val="Eigen kop"/><w:basedOn w:val="Kop2"/></w:style>'
    '<w:style w:type="paragraph" w:styleId="Inhopg1"><w:name w:val="toc 1"/></w:style>'
)


def test_docx_headings_tables_placeholders_and_nesting() -> None:
    nested = f"<w:tc>{_p('buiten')}<w:tbl>{_row('binnen a', 'binnen b')}</w:tbl></w:tc>"
    placeholder = (
        "<w:sdt><w:sdtPr><w:showingPlcHdr/></w:sdtPr><w:sdtContent>"
        + _p("Klik of tik om tekst in te voeren.")
        + "</w:sdtContent></w:sdt>"
    )
    long_rows = "".join(_row(f"r{n}", "x" * 100) for n in range(40))
    body = (
        _p("Hoofdstuk 1", "Kop1")
        + _p("1 Inhoud", "Inhopg1")
        + _p("1.1 Reikwijdte", "Eigen")
        + _p("Tekst onder de paragraaf.")
        + _p("…")
        + placeholder
        + f"<w:tbl>{_row('Naam', 'Rol', header=True)}{_row('Jan', '')}<w:tr>{nested}</w:tr></w:tbl>"
        + _p("Hoofdstuk 2", "Kop1")
        + f"<w:tbl>{_row('Kolom', 'Waarde', header=True)}{long_rows}</w:tbl>"
    )
    extracted = _read(docx, _docx(body, styles=STYLES))
    texts = [unit.text for unit in extracted.units]
    assert texts[:2] == ["Tekst onder de paragraaf.", "Naam | Rol\nJan\nbuiten\nbinnen a | binnen b"]
    assert extracted.units[0].headings == ("Hoofdstuk 1", "1.1 Reikwijdte")
    assert not any("Klik of tik" in text or "Inhoud" in text for text in texts)
    groups = extracted.units[2:]
    assert len(groups) > 1 and all(unit.headings == ("Hoofdstuk 2",) for unit in groups)
    assert all(unit.text.startswith("Kolom | Waarde\n") for unit in groups)  # the header row atop every group
    assert sum(unit.text.count("| xxx") for unit in groups) == 40


def test_odt_headings_lists_tables_and_notes() -> None:
    text = (
        '<text:h text:outline-level="1">Hoofdstuk 1</text:h>'
        "<text:table-of-content><text:p>Hoofdstuk 1 ..... 1</text:p></text:table-of-content>"
        '<text:h text:outline-level="2">1.1 Begrippen</text:h>'
        "<text:p>Een<text:s text:c='2'/>zin<text:note><text:note-citation>1</text:note-citation>"
        "<text:note-body><text:p>Een voetnoot.</text:p></text:note-body></text:note> hier.</text:p>"
        "<text:list><text:list-item><text:p>eerste punt</text:p></text:list-item></text:list>"
        "<table:table><table:table-header-rows><table:table-row><table:table-cell><text:p>A</text:p></table:table-cell>"
        "<table:table-cell><text:p>B</text:p></table:table-cell></table:table-row></table:table-header-rows>"
        "<table:table-row><table:table-cell><text:p>1</text:p></table:table-cell><table:covered-table-cell/>"
        "<table:table-cell><text:p/></table:table-cell></table:table-row></table:table>"
    )
    extracted = _read(odt, _odt(text))
    assert [unit.text for unit in extracted.units] == ["Een zin hier.", "Een voetnoot.", "eerste punt", "A | B\n1"]
    assert {unit.headings for unit in extracted.units} == {("Hoofdstuk 1", "1.1 Begrippen")}
    assert extracted.title == "Hoofdstuk 1"


def test_html_tables_headings_and_dropped_chrome() -> None:
    page = b"""<!DOCTYPE html><html lang="nl-NL"><head><title>Home</title>
    <meta name="DC.identifier" content="https://example.org/wet/1"><script>var leak = 1;</script></head>
    <body><header><p>Menu van de site</p></header><nav><a href="/">Home</a></nav>
    <main><article><header><h1>Wet op de kernenergie</h1></header>
    <div id="toc"><ul><li>Artikel 1</li></ul></div>
    <h2>Artikel 1</h2><p>Een <b>vergunning</b> is<br>vereist.</p><ul><li>eerste lid</li><li>tweede lid</li></ul>
    <table><thead><tr><th>Stof</th><th>Grens</th></tr></thead>
    <tbody><tr><td>U-235</td><td>5 <i>%</i></td></tr><tr><td></td><td> </td></tr>
    <tr><td>Pu<table><tr><td>binnen</td><td>tabel</td></tr></table></td><td>0</td></tr></tbody></table>
    <style>p { color: red }</style></article></main><footer>Contact</footer></body></html>"""
    extracted = _read(html, page)
    texts = [unit.text for unit in extracted.units]
    assert texts == [
        "Een vergunning is vereist.",
        "eerste lid",
        "tweede lid",
        "Stof | Grens\nU-235 | 5 %\nPu | 0\nbinnen | tabel",
    ]
    assert all(unit.headings == ("Wet op de kernenergie", "Artikel 1") for unit in extracted.units)
    assert extracted.title == "Wet op de kernenergie"  # "Home" is not a title
    assert extracted.language == "nl-NL" and extracted.metadata["url"] == "https://example.org/wet/1"


# --- hostile and broken files ----------------------------------------------------------------------------------------


def test_zip_bomb_refused_on_total_size() -> None:
    bomb = _zip({"word/document.xml": b"<w:document/>", "word/media/zeros.bin": bytes(20_000_000)})
    with pytest.raises(Refused, match="decompress to more than"):
        _read(docx, bomb, Limits(max_unzipped_bytes=1_000_000))


def test_zip_bomb_that_lies_about_its_size_is_still_refused() -> None:
    bomb = bytearray(_zip({"word/document.xml": bytes(20_000_000)}))
    # the local header (offset 22) and the central directory (offset 24) both claim 1 000 bytes
    bomb[22:26] = struct.pack("<I", 1000)
    central = bomb.index(b"PK\x01\x02")
    bomb[central + 24 : central + 28] = struct.pack("<I", 1000)
    with pytest.raises(Refused, match="corrupt|decompress"):
        _read(docx, bytes(bomb), Limits(max_unzipped_bytes=1_000_000))


def test_zip_member_ratio_refused() -> None:
    bomb = _docx(_p("x" * 5_000_000))
    with pytest.raises(Refused, match="times its size"):
        _read(docx, bomb, Limits(max_zip_ratio=50))
    assert _read(docx, bomb, Limits(max_zip_ratio=2000)).units  # deflate's ratio tops out near 1 000


@pytest.mark.parametrize(
    ("module", "build"),
    [
        (docx, lambda doctype: _docx(_p("&lol9;"), doctype=doctype)),
        (odt, lambda doctype: _odt("<text:p>&lol9;</text:p>", doctype=doctype)),
    ],
    ids=["docx", "odt"],
)
def test_billion_laughs_refused(module: ModuleType, build) -> None:
    with pytest.raises(Refused, match="DTD or entities"):
        _read(module, build(BILLION_LAUGHS))


@pytest.mark.parametrize(
    ("module", "data"),
    [(docx, _docx(_p("&xxe;"), doctype=PASSWD)), (odt, _odt("<text:p>&xxe;</text:p>", doctype=PASSWD))],
    ids=["docx", "odt"],
)
def test_external_entity_refused(module: ModuleType, data: bytes) -> None:
    with pytest.raises(Refused, match="DTD or entities") as refused:
        _read(module, data)
    assert "root:" not in str(refused.value)


def test_html_external_entity_is_not_read() -> None:
    page = (PASSWD + "<html><body><p>voor &xxe; na</p></body></html>").encode()
    text = " ".join(unit.text for unit in _read(html, page).units)
    assert "voor" in text and "root:" not in text


def test_truncated_docx_refused() -> None:
    data = _docx(_p("Een alinea die er nooit helemaal komt. " * 50))
    with pytest.raises(Refused, match="corrupt or truncated"):
        _read(docx, data[: len(data) // 2])


def test_docx_without_document_xml_refused() -> None:
    data = _zip({"[Content_Types].xml": b"<Types/>", "word/styles.xml": b"<w:styles/>"})
    with pytest.raises(Refused, match="word/document.xml"):
        _read(docx, data)


def test_odt_without_content_xml_refused() -> None:
    with pytest.raises(Refused, match="content.xml"):
        _read(odt, _zip({"mimetype": ODT_MIME, "meta.xml": b"<office:document-meta/>"}))


def test_garbage_zip_refused() -> None:
    with pytest.raises(Refused, match="corrupt or truncated"):
        _read(odt, b"PK\x03\x04" + bytes(range(200)))


def test_encrypted_docx_refused() -> None:
    data = bytearray(_docx(_p("geheim")))
    for header in (b"PK\x03\x04", b"PK\x01\x02"):  # the general-purpose flag: local offset 6, central offset 8
        for start in [i for i in range(len(data)) if data.startswith(header, i)]:
            offset = start + (6 if header == b"PK\x03\x04" else 8)
            data[offset] |= 0x1
    with pytest.raises(Refused, match="encrypted"):
        _read(docx, bytes(data))


@pytest.mark.parametrize(
    "page",
    [
        b"",
        b"<html><head><title>Leeg</title></head><body> <script>alert(1)</script> </body></html>",
        b"<p>\xe2\x80\xa6</p>",
    ],
    ids=["empty", "only-script", "placeholder"],
)
def test_html_without_text_refused(page: bytes) -> None:
    with pytest.raises(Refused, match="no text"):
        _read(html, page)


def test_malformed_xml_refused() -> None:
    with pytest.raises(Refused, match="not well-formed"):
        _read(docx, _zip({"word/document.xml": b"<w:document><w:body>"}))


@pytest.mark.parametrize(
    ("module", "data"),
    [
        (docx, _docx("<w:p>" + "<w:ins>" * 5000 + "<w:r><w:t>x</w:t></w:r>" + "</w:ins>" * 5000 + "</w:p>")),
        (odt, _odt("<text:p>" + "<text:span>" * 5000 + "x" + "</text:span>" * 5000 + "</text:p>")),
    ],
    ids=["docx", "odt"],
)
def test_absurdly_deep_nesting_refused(module: ModuleType, data: bytes) -> None:
    with pytest.raises(Refused, match="nested too deeply"):
        _read(module, data)
