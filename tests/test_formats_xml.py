"""The readers of Dutch government XML: laws in BWB `<toestand>` XML (docserver/formats/bwb.py) and official
publications in `<officiele-publicatie>` XML (docserver/formats/op.py).

Real files come from ../shared/formats (NEO_SHARED_DIR), never from the repository, and their tests skip when it is
absent. The law reader must write an article exactly as the wetten.overheid.nl Markdown law texts do, so the same
ingest code path (`parse_law`) chunks both alike: hand-written Markdown of a few articles is compared with the XML
reader's units. Hostile XML (entity bombs, external entities, cut-off or absurdly nested files) is refused.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from docserver.chunking import parse_law
from docserver.formats import Deadline, Extracted, Limits, Refused, bwb, extract, op, sniff

ROOT = Path(__file__).resolve().parents[1]
FORMATS = Path(os.environ.get("NEO_SHARED_DIR", ROOT.parent / "shared")) / "formats"
ZORGTOESLAG = "nl-bwb-BWBR0018451-wet-op-de-zorgtoeslag-2025-01-01.xml"
PARTICIPATIEWET = "nl-bwb-BWBR0015703-participatiewet-2026-01-01.xml"
MOTIE = "nl-op-kst-32545-143-motie.xml"
KAMERVRAGEN = "nl-op-ah-tk-20202021-3235-kamervragen.xml"


def shared(name: str) -> bytes:
    path = FORMATS / name
    if not path.is_file():
        pytest.skip(f"{path} not present (the shared test documents live outside the repository)")
    return path.read_bytes()


def read_law(data: bytes, seconds: float = 60.0) -> Extracted:
    return bwb.read(data, Limits(), Deadline(seconds))


def read_publication(data: bytes) -> Extracted:
    return op.read(data, Limits(), Deadline(60.0))


def articles(extracted: Extracted) -> dict[str, str]:
    return {unit.article: unit.text for unit in extracted.units if unit.article is not None}


# --- Wet op de zorgtoeslag -----------------------------------------------------------------------------------------


def test_zorgtoeslag_title_metadata_and_articles() -> None:
    law = read_law(shared(ZORGTOESLAG))
    assert law.format == "bwb" and law.language == "nl"
    assert law.title == "Wet op de zorgtoeslag"
    assert law.metadata["identifier"] == "BWBR0018451"
    assert law.metadata["bron"] == "https://wetten.overheid.nl/BWBR0018451"
    assert law.metadata["toestand"] == "2025-01-01"
    assert law.metadata["title"] == "Wet op de zorgtoeslag"
    assert law.metadata["intitule"].startswith("Wet van 16 juni 2005, houdende regels inzake de aanspraak")
    numbers = [unit.article for unit in law.units if unit.article is not None]
    assert numbers == ["1", "2", "3", "4", "4a", "5", "6", "7", "8"]
    by_number = {unit.article: unit for unit in law.units}
    assert by_number["4a"].headings == ("Artikel 4a",)  # the law has no chapters and no captions
    assert "2. De normpremie bedraagt een percentage van het drempelinkomen" in by_number["2"].text
    assert sum(len(re.findall(r"(?:\A|\n\n)\d+\. ", text)) for text in articles(law).values()) == 23  # the leden


def test_zorgtoeslag_list_items_and_preamble() -> None:
    law = read_law(shared(ZORGTOESLAG))
    article_1 = articles(law)["1"]
    assert article_1.startswith("1. In deze wet en de daarop berustende bepalingen wordt, tenzij anders is geregeld,")
    assert "\n\n- a. Onze Minister: Onze Minister van Volksgezondheid, Welzijn en Sport;\n\n- b. zorgverzekering:" in (
        article_1
    )
    assert "- h. de normpremie:" in article_1 and "<" not in article_1 and "jci1.3" not in article_1
    preamble = law.units[0]
    assert preamble.article is None and preamble.headings == ("Aanhef",)
    assert "Allen, die deze zullen zien of horen lezen, saluut! doen te weten:" in preamble.text
    closing = law.units[-1]
    assert closing.headings == ("Slotformulering",) and closing.text.startswith("Lasten en bevelen")


# The first articles of the law as wetten.overheid.nl's Markdown writes them (copied from the XML's wording by hand,
# references as links, the way the files in ../shared/corpus/wetten_overheid/ have them).
ZORGTOESLAG_MARKDOWN = """---
title: "Wet op de zorgtoeslag"
identifier: "BWBR0018451"
toestand: 2025-01-01
bron: "https://wetten.overheid.nl/BWBR0018451"
---

# Wet op de zorgtoeslag

Allen, die deze zullen zien of horen lezen, saluut! doen te weten:

Alzo Wij in overweging genomen hebben, dat het wenselijk is dat personen voor wie de premie voor een zorgverzekering \
in verhouding tot hun inkomen een te zware last vormt, een financiële tegemoetkoming kunnen krijgen;

#### Artikel 1

1. In deze wet en de daarop berustende bepalingen wordt, tenzij anders is geregeld, verstaan onder:

- a. Onze Minister: Onze Minister van Volksgezondheid, Welzijn en Sport;

- b. zorgverzekering: de schadeverzekering, bedoeld in [artikel 1, onder d, van de Zorgverzekeringswet]\
(https://wetten.overheid.nl/jci1.3:c:BWBR0018450&artikel=1);

- c. verzekerde: de persoon, bedoeld in [artikel 1, onder f, van de Zorgverzekeringswet]\
(https://wetten.overheid.nl/jci1.3:c:BWBR0018450&artikel=1), de persoon die een bijdrage als bedoeld in \
[artikel 68b, vijfde lid, van de Zorgverzekeringswet](https://wetten.overheid.nl/jci1.3:c:BWBR0018450&artikel=68b) \
verschuldigd is, of de persoon, bedoeld in [artikel 69 van de Zorgverzekeringswet]\
(https://wetten.overheid.nl/jci1.3:c:BWBR0018450&artikel=69), steeds vanaf de eerste dag van de kalendermaand \
volgende op de maand waarin hij achttien jaar wordt, met uitzondering van de verzekerde, bedoeld in \
[artikel 24, eerste of derde lid,van die wet](https://wetten.overheid.nl/jci1.3:c:BWBR0018450&artikel=24);

- d. premie: een premie als bedoeld in [afdeling 3.3.1 van de Zorgverzekeringswet]\
(https://wetten.overheid.nl/jci1.3:c:BWBR0018450&afdeling=3.3.1);

- e. zorgtoeslag: een tegemoetkoming in een premie dan wel in een bestuursrechtelijke premie als bedoeld in \
[artikel 18d](https://wetten.overheid.nl/jci1.3:c:BWBR0018450&artikel=18d) of \
[18e van de Zorgverzekeringswet](https://wetten.overheid.nl/jci1.3:c:BWBR0018450&artikel=18e) en in het verplicht \
eigen risico, bedoeld in [artikel 19 van de Zorgverzekeringswet](https://wetten.overheid.nl/jci1.3:c:BWBR0018450&artikel=19);

- f. drempelinkomen: 108% van het twaalfvoud van het voor de maand januari van het berekeningsjaar geldende in \
[artikel 8, eerste lid, onderdeel b, van de Wet minimumloon en minimumvakantiebijslag]\
(https://wetten.overheid.nl/jci1.3:c:BWBR0002638&artikel=8) bedoelde bedrag per maand;

- g. de standaardpremie: het op grond van \
[artikel 4](https://wetten.overheid.nl/jci1.3:c:BWBR0018451&artikel=4&z=2025-01-01&g=2025-01-01) vastgestelde bedrag;

- h. de normpremie: de aan de hand van het drempelinkomen en het toetsingsinkomen van de verzekerde berekende premie \
voor een zorgverzekering in het berekeningsjaar.

2. De hoogte van de zorgtoeslag is afhankelijk van de draagkracht op basis van het inkomen en het vermogen.

#### Artikel 4

Onze Minister stelt uiterlijk 22 dagen voorafgaande aan het berekeningsjaar bij regeling de standaardpremie voor het \
berekeningsjaar vast die wordt gevormd door de geraamde gemiddelde premie voor een verzekerde voor een zorgverzekering \
in het berekeningsjaar te vermeerderen met het geraamde gemiddelde bedrag dat een verzekerde naar verwachting in dat \
jaar betaalt ingevolge [artikel 19 van de Zorgverzekeringswet](https://wetten.overheid.nl/jci1.3:c:BWBR0018450&artikel=19).

#### Artikel 4a

1. De standaardpremie voor een persoon als bedoeld in [artikel 69 van de Zorgverzekeringswet]\
(https://wetten.overheid.nl/jci1.3:c:BWBR0018450&artikel=69) is, in afwijking van \
[artikel 4](https://wetten.overheid.nl/jci1.3:c:BWBR0018451&artikel=4&z=2025-01-01&g=2025-01-01), gelijk aan het met \
toepassing van dat artikel bepaalde bedrag, vermenigvuldigd met het getal dat wordt berekend uit de verhouding tussen \
de gemiddelde uitgaven voor zorg voor een persoon ten laste van de sociale zorgverzekeringen in het woonland van deze \
persoon, en de gemiddelde uitgaven voor zorg voor een persoon ten laste van de sociale zorgverzekeringen in Nederland.

2. Bij ministeriële regeling wordt jaarlijks uiterlijk in november per land het in het eerste lid bedoelde \
verhoudingsgetal vastgesteld.

3. De aanspraak op een zorgtoeslag van een verzekerde met een partner die een persoon is als bedoeld in \
[artikel 69 van de Zorgverzekeringswet](https://wetten.overheid.nl/jci1.3:c:BWBR0018450&artikel=69), wordt berekend \
met toepassing van [artikel 2, eerste lid, tweede zin]\
(https://wetten.overheid.nl/jci1.3:c:BWBR0018451&artikel=2&z=2025-01-01&g=2025-01-01), waarbij de standaardpremie, \
bedoeld in het eerste lid, in acht wordt genomen.

4. De standaardpremie voor een partner van een persoon als bedoeld in [artikel 69 van de Zorgverzekeringswet]\
(https://wetten.overheid.nl/jci1.3:c:BWBR0018450&artikel=69) wordt overeenkomstig het eerste lid vastgesteld, tenzij \
deze partner een persoon is als bedoeld in [artikel 1, onderdeel f, van de Zorgverzekeringswet]\
(https://wetten.overheid.nl/jci1.3:c:BWBR0018450&artikel=1).
"""


def test_markdown_and_xml_give_the_same_article_texts() -> None:
    law = read_law(shared(ZORGTOESLAG))
    by_number = {unit.article: unit for unit in law.units if unit.article is not None}
    document = parse_law(ZORGTOESLAG_MARKDOWN, collection="test", default_id="zorgtoeslag")
    chunks = {chunk.title: chunk for chunk in document.chunks}
    for number in ("1", "4", "4a"):
        chunk = chunks[f"Wet op de zorgtoeslag, artikel {number}"]
        assert chunk.text == by_number[number].text
        assert chunk.section == by_number[number].headings[-1] == f"Artikel {number}"


# --- Participatiewet -----------------------------------------------------------------------------------------------


def test_participatiewet_chapters_and_articles() -> None:
    data = shared(PARTICIPATIEWET)
    started = time.perf_counter()
    law = read_law(data)
    assert time.perf_counter() - started < 5.0  # about 0.2 s on one core
    assert law.title == "Participatiewet" and law.metadata["toestand"] == "2026-01-01"
    law_articles = [unit for unit in law.units if unit.article is not None]
    # all 174 <artikel> elements: 150 in force, 20 repealed (their text is "Vervallen"), 4 not yet in force
    assert len(law_articles) == 174 and len({unit.article for unit in law_articles}) == 174
    chapters = list(dict.fromkeys(unit.headings[0] for unit in law_articles))
    assert len(chapters) == 11 and all(len(unit.headings) == 2 for unit in law_articles)
    assert chapters[0] == "Hoofdstuk 1. Algemeen" and chapters[-1] == "Hoofdstuk 8. Slotbepalingen"
    assert "Hoofdstuk 7a. Overgangsrecht" in chapters
    by_number = {unit.article: unit for unit in law_articles}
    assert by_number["1"].headings == ("Hoofdstuk 1. Algemeen", "Artikel 1. Begrippen")  # inside § 1.1
    assert by_number["78cc"].headings[-1] == "Artikel 78cc"  # no caption
    assert "- f. inrichting:\n\n   - 1°. een instelling die zich blijkens haar doelstelling" in by_number["1"].text
    assert by_number["10f"].text == "Vervallen"
    assert by_number["24a"].text.startswith("[Treedt in werking per 01-01-2027]\n\nDe norm wordt opgehoogd")
    assert "4,8 procent [Red: per 1 januari 2009: 5 procent] van die bijstand" in by_number["19"].text
    leden = sum(len(re.findall(r"(?:\A|\n\n)\d+\*?\. ", unit.text)) for unit in law_articles)
    assert leden == 538  # one of them is numbered "8*"


def test_the_formats_package_sniffs_and_extracts_bwb() -> None:
    data = shared(ZORGTOESLAG)
    assert sniff(data, ".xml") == "bwb"
    assert extract("bwb", data, Limits()).title == "Wet op de zorgtoeslag"


# --- a hand-written BWB excerpt: chapters, sections, annexes, tables, emphasis ---------------------------------------

STRUCTURED_LAW = """<?xml version="1.0" encoding="UTF-8"?>
<toestand bwb-id="BWBR0099999" inwerkingtreding="2024-07-01">
  <redactionele-correcties/>
  <wetgeving soort="wet">
    <intitule>Wet van 1 januari 2024, houdende proefregels (Proefwet)<meta-data><x>noise</x></meta-data></intitule>
    <citeertitel status="officieel">Proefwet</citeertitel>
    <wet-besluit>
      <wettekst>
        <hoofdstuk>
          <kop><label>Hoofdstuk</label><nr>1</nr><titel>Algemene bepalingen</titel></kop>
          <paragraaf>
            <kop><label>§</label><nr>1.1</nr><titel>Begrippen</titel></kop>
            <artikel>
              <kop><label>Artikel</label><nr>1.1</nr><titel>Begripsbepalingen</titel></kop>
              <lid>
                <lidnr>1</lidnr>
                <al>In deze wet wordt verstaan onder:</al>
                <lijst>
                  <li><li.nr>a.</li.nr><al><nadruk type="cur">installatie:</nadruk> een inrichting als bedoeld in
                    <extref doc="jci1.3:c:BWBR0002402&amp;artikel=15">artikel 15 van de Kernenergiewet</extref>;</al></li>
                  <li><li.nr>b.</li.nr><al>stoffen:</al>
                    <lijst>
                      <li><li.nr>1°.</li.nr><al>splijtstoffen;</al></li>
                      <li><li.nr>2°.</li.nr><al>ertsen.</al></li>
                    </lijst>
                  </li>
                </lijst>
                <meta-data><jcis><jci verwijzing="jci1.3:c:BWBR0099999"/></jcis></meta-data>
              </lid>
              <lid>
                <lidnr>2</lidnr>
                <al>De waarden zijn:</al>
                <table><tgroup cols="2">
                  <thead><row><entry>Stof</entry><entry>Grens</entry></row></thead>
                  <tbody><row><entry>uranium</entry><entry><al>1 Bq</al></entry></row></tbody>
                </tgroup></table>
              </lid>
            </artikel>
          </paragraaf>
        </hoofdstuk>
        <hoofdstuk>
          <kop><label>Hoofdstuk</label><nr>2</nr></kop>
          <al>Vervallen</al>
        </hoofdstuk>
        <artikel status="vervallen" inwerking="2020-01-01">
          <kop><label>Artikel</label><nr>3</nr></kop>
        </artikel>
        <artikel status="nogniet">
          <kop><label>Artikel</label><nr>4</nr></kop>
          <al>Deze wet wordt aangehaald als: <nadruk type="vet">Proefwet</nadruk>.</al>
        </artikel>
      </wettekst>
    </wet-besluit>
    <bijlage>
      <kop><label>Bijlage</label><nr>1</nr><titel>behorende bij artikel 1.1</titel></kop>
      <lijst><li><li.nr>1.</li.nr><al>Onbestraald plutonium</al></li></lijst>
    </bijlage>
  </wetgeving>
</toestand>
"""

STRUCTURED_MARKDOWN = """---
title: "Proefwet"
identifier: "BWBR0099999"
---

# Proefwet

### Hoofdstuk 1. Algemene bepalingen

#### § 1.1. Begrippen

##### Artikel 1.1. Begripsbepalingen

1. In deze wet wordt verstaan onder:

- a. *installatie:* een inrichting als bedoeld in \
[artikel 15 van de Kernenergiewet](https://wetten.overheid.nl/jci1.3:c:BWBR0002402&artikel=15);

- b. stoffen:

   - 1°. splijtstoffen;

   - 2°. ertsen.

2. De waarden zijn:

| Stof | Grens |
| --- | --- |
| uranium | 1 Bq |
"""


def test_structure_headings_and_markdown_style() -> None:
    law = read_law(STRUCTURED_LAW.encode())
    assert (
        law.title == "Proefwet"
        and law.metadata["intitule"] == "Wet van 1 januari 2024, houdende proefregels (Proefwet)"
    )
    units = {unit.article or unit.headings[-1]: unit for unit in law.units}
    first = units["1.1"]
    assert first.headings == ("Hoofdstuk 1. Algemene bepalingen", "Artikel 1.1. Begripsbepalingen")
    chunk = parse_law(STRUCTURED_MARKDOWN, collection="test", default_id="proefwet").chunks[0]
    assert chunk.text == first.text
    assert chunk.section == f"{first.headings[1]} — {first.headings[0]}"  # how parse_law names an article's place
    assert units["Hoofdstuk 2"].text == "Vervallen" and units["Hoofdstuk 2"].article is None
    assert units["3"].text == "[Vervallen per 01-01-2020]" and units["3"].headings == ("Artikel 3",)
    assert units["4"].text == (
        "[Treedt in werking op een nader te bepalen tijdstip]\n\nDeze wet wordt aangehaald als: **Proefwet**."
    )
    annex = units["Bijlage 1. behorende bij artikel 1.1"]
    assert annex.article is None and annex.text == "- 1. Onbestraald plutonium"
    assert all("noise" not in unit.text and "jci" not in unit.text for unit in law.units)


# --- official publications ----------------------------------------------------------------------------------------


def test_motie_title_metadata_and_paragraphs() -> None:
    motie = read_publication(shared(MOTIE))
    assert motie.format == "op" and motie.title == "MOTIE VAN DE LEDEN INGE VAN DIJK EN GRINWIS"
    meta = motie.metadata
    assert (meta["dossier"], meta["stuknr"], meta["vergaderjaar"], meta["date"]) == (
        "32545",
        "143",
        "2020-2021",
        "2021-07-06",
    )
    assert meta["documenttype"] == "Kamerstukken" and meta["identifier"] == "kst-32545-143"
    assert meta["metadata_record"] == "https://zoek.officielebekendmakingen.nl/kst-32545-143/metadata.xml"
    assert "32 545 Wet- en regelgeving financiële markten" in motie.units[0].text
    requests = [unit for unit in motie.units if unit.text.startswith("verzoekt de regering, om een grensspaarsaldo")]
    assert len(requests) == 1 and requests[0].headings == ("MOTIE VAN DE LEDEN INGE VAN DIJK EN GRINWIS",)
    assert motie.units[-1].text == "Inge van Dijk\nGrinwis"
    assert all("<" not in unit.text for unit in motie.units)


def test_kamervragen_questions_and_answers() -> None:
    questions = read_publication(shared(KAMERVRAGEN))
    assert questions.title is not None and questions.title.startswith(
        "Vragen van de leden Van Weyenberg, Romke de Jong"
    )
    assert "over de TOZO" in questions.title
    meta = questions.metadata
    assert (meta["nummer"], meta["date"], meta["date_answer"]) == ("3235", "2021-06-03", "2021-06-21")
    assert meta["documenttype"] == "Aanhangsel van de Handelingen"
    headings = [unit.headings for unit in questions.units[1:]]
    assert headings[:4] == [("Vraag 1",), ("Antwoord 1",), ("Vraag 2",), ("Antwoord 2",)]
    assert headings.count(("Antwoord 9",)) == 2  # the last answer has two paragraphs
    answer_2 = next(unit.text for unit in questions.units if unit.headings == ("Antwoord 2",))
    assert "bepaald op 2% (Staatsblad 2020, 118)." in answer_2
    assert "Antwoord van Minister Koolmees (Sociale Zaken en Werkgelegenheid)" in questions.units[0].text


def test_the_formats_package_sniffs_and_extracts_op() -> None:
    data = shared(MOTIE)
    assert sniff(data, ".xml") == "op" and extract("op", data, Limits()).metadata["stuknr"] == "143"


# --- hostile and broken files --------------------------------------------------------------------------------------

BILLION_LAUGHS = b"""<?xml version="1.0"?>
<!DOCTYPE toestand [
  <!ENTITY lol "lol">
  <!ENTITY lol2 "&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;">
  <!ENTITY lol3 "&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;">
  <!ENTITY lol4 "&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;">
  <!ENTITY lol5 "&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;">
  <!ENTITY lol6 "&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;">
  <!ENTITY lol7 "&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;">
  <!ENTITY lol8 "&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;">
  <!ENTITY lol9 "&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;">
]>
<toestand bwb-id="BWBR0000001"><wetgeving><wet-besluit><wettekst><artikel><kop><nr>1</nr></kop>
<al>&lol9;</al></artikel></wettekst></wet-besluit></wetgeving></toestand>
"""

PASSWD_ENTITY = b"""<?xml version="1.0"?>
<!DOCTYPE toestand [<!ENTITY xxe SYSTEM "file:///etc/passwd">]>
<toestand bwb-id="BWBR0000001"><wetgeving><wet-besluit><wettekst><artikel><kop><nr>1</nr></kop>
<al>&xxe;</al></artikel></wettekst></wet-besluit></wetgeving></toestand>
"""

PASSWD_PARAMETER_ENTITY = b"""<?xml version="1.0"?>
<!DOCTYPE officiele-publicatie [<!ENTITY % xxe SYSTEM "file:///etc/passwd"> %xxe;]>
<officiele-publicatie><kamerstuk><stuk><titel>T</titel><al>tekst</al></stuk></kamerstuk></officiele-publicatie>
"""

PASSWD_EXTERNAL_DTD = b"""<?xml version="1.0"?>
<!DOCTYPE toestand SYSTEM "file:///etc/passwd">
<toestand bwb-id="BWBR0000001"><wetgeving><wet-besluit><wettekst><artikel><kop><nr>1</nr></kop>
<al>Een tekst.</al></artikel></wettekst></wet-besluit></wetgeving></toestand>
"""


@pytest.mark.parametrize("reader", [bwb.read, op.read])
def test_entity_bombs_and_external_entities_are_refused(reader: Callable[[bytes, Limits, Deadline], Extracted]) -> None:
    for hostile in (BILLION_LAUGHS, PASSWD_ENTITY, PASSWD_PARAMETER_ENTITY):
        started = time.perf_counter()
        with pytest.raises(Refused, match="entities") as refused:
            reader(hostile, Limits(), Deadline(10.0))
        assert "root:" not in str(refused.value) and time.perf_counter() - started < 1.0


def test_an_external_dtd_is_never_loaded() -> None:
    law = read_law(PASSWD_EXTERNAL_DTD)
    assert [unit.text for unit in law.units] == ["Een tekst."]


def test_truncated_and_malformed_xml_is_refused() -> None:
    with pytest.raises(Refused, match="malformed or cut off"):
        read_law(STRUCTURED_LAW.encode()[: len(STRUCTURED_LAW) // 2])
    with pytest.raises(Refused, match="malformed or cut off"):
        read_publication(b"<officiele-publicatie><kamerstuk><al>a</kamerstuk>")


def test_truncated_real_law_is_refused() -> None:
    data = shared(ZORGTOESLAG)
    with pytest.raises(Refused, match="malformed or cut off"):
        read_law(data[: len(data) - 200])


def test_a_law_without_articles_or_text_is_refused() -> None:
    empty = b"""<toestand bwb-id="BWBR0000001" inwerkingtreding="2024-01-01"><wetgeving>
      <citeertitel>Lege wet<meta-data><x>metadata only</x></meta-data></citeertitel>
      <wet-besluit><wettekst><artikel><kop><label>Artikel</label><nr>1</nr></kop></artikel></wettekst></wet-besluit>
    </wetgeving></toestand>"""
    with pytest.raises(Refused, match="no articles and no text"):
        read_law(empty)


def test_wrong_root_deep_nesting_and_the_deadline_are_refused() -> None:
    with pytest.raises(Refused, match="not a BWB law text"):
        read_law(b"<officiele-publicatie/>")
    with pytest.raises(Refused, match="not an official publication"):
        read_publication(b"<toestand/>")
    with pytest.raises(Refused, match="nests elements"):
        read_law(b"<toestand>" + b"<a>" * 5000 + b"x" + b"</a>" * 5000 + b"</toestand>")
    with pytest.raises(Refused, match="took longer"):
        read_law(STRUCTURED_LAW.encode(), seconds=-1.0)
