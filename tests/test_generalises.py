"""The cases that showed research did not generalise, each on a corpus of its own (or the bundled one), offline.

Each corpus is written here as Markdown, served by the reference document server over streamable HTTP, and
searched by the real graph: collections chosen by evidence, readable queries, across languages, second hops,
official texts first, sources one per document.
"""

from __future__ import annotations

import json
import random
import re
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from app.settings import ROOT
from docserver.embedded import serve_in_background
from graph.answer.events import AnswerDelta, Step
from graph.answer.prompts import Prompts
from graph.build import build_graph
from graph.clients.mcp_client import DocumentClient, DocumentRef
from graph.collections import Catalog, Collection, load_catalog
from graph.context import Context
from graph.models import Evidence, Turn
from graph.nodes.judge import title_lookups
from graph.nodes.plan import Translation, accept_translation
from graph.runner import run_pipeline, start
from graph.text import pairs, relevance, selection
from graph.text.hops import bridge_queries, link_candidates, link_queries, names, title_like, titled, unfound_things
from graph.text.language import detect_language
from graph.text.routing import focus_terms
from graph.text.selection import select_facts
from graph.tuning import tuned, tuning

CATALOG = load_catalog(ROOT / "graph" / "collections.json")  # the bundled catalog: languages and glossary


def _doc(doc_id: str, title: str, body: str, *, language: str, kind: str = "summary") -> str:
    return (f"---\ndoc_id: {doc_id}\ntitle: \"{title}\"\nurl: https://example.org/{doc_id}\nlanguage: {language}\n"
            f"kind: {kind}\n---\n\n# {title}\n\n{body.strip()}\n")


NUCLEAR = {
    "anvs/anvs-toezicht.md": _doc("anvs-toezicht", "ANVS: toezicht en vergunningen", """
## Taken van de ANVS

De ANVS houdt toezicht op kerninstallaties en treedt op bij overtredingen van de Kernenergiewet. Zij beoordeelt
vergunningaanvragen en inspecteert de bedrijfsvoering ter plaatse.
""", language="nl"),
    "anvs/anvs-veiligheidscultuur.md": _doc("anvs-veiligheidscultuur", "ANVS: verwachtingen over veiligheidscultuur", """
## Verwachtingen

De ANVS verwacht dat vergunninghouders een sterke veiligheidscultuur bevorderen en die periodiek laten
evalueren door een onafhankelijke partij.
""", language="nl"),
    "security/security-incidenten.md": _doc("security-incidenten", "Melden van beveiligingsincidenten", """
## Melding

Een vergunninghouder meldt een beveiligingsincident binnen 24 uur aan de ANVS. Binnen dertig dagen volgt een
schriftelijk rapport met de oorzaak en de genomen maatregelen.
""", language="nl"),
    "iaea/iaea-gsr-part-2.md": _doc("iaea-gsr-part-2", "GSR Part 2: Leadership and Management for Safety", """
## Requirement 12: Fostering a culture for safety

Individuals in the organization, from senior managers downwards, shall foster a strong safety culture. The
management system shall include the means of assessing the safety culture at regular intervals.
""", language="en", kind="official"),
    "wetten_overheid/kernenergiewet-borssele.md": _doc("kernenergiewet-borssele", "Kernenergiewet: kerncentrale Borssele", """
## Artikel 15a: einddatum

Volgens artikel 15a Kernenergiewet vervalt de vergunning van de kerncentrale Borssele met ingang van
31 december 2033. Artikel 15aa regelt wat de exploitant daarna nog moet doen.
""", language="nl"),
    "wetten_overheid/kernenergiewet.md": _doc("kernenergiewet", "Kernenergiewet", """
## Artikel 15a

De vergunning voor het in werking houden van de kerncentrale Borssele vervalt met ingang van 31 december 2033.

## Artikel 15aa

De exploitant van de kerncentrale Borssele levert jaarlijks een verslag aan over de voorbereiding van de
buitengebruikstelling en de ontmanteling van de centrale.
""", language="nl", kind="official"),
}

BRIDGE = {  # HotpotQA's bridge example, as a corpus of two collections with a distractor each
    "wiki_a/university-of-kansas.md": _doc("university-of-kansas", "University of Kansas", """
## Overview

The University of Kansas is a public research university whose main campus is in Lawrence, Kansas. Its
athletic teams are the Kansas Jayhawks.
""", language="en"),
    "wiki_a/kansas-state.md": _doc("kansas-state", "Kansas State University", """
## Overview

Kansas State University is a public university in Manhattan, Kansas, founded in 1863.
""", language="en"),
    "wiki_b/kansas-jayhawks.md": _doc("kansas-jayhawks", "Kansas Jayhawks", """
## Traditions

The Kansas Jayhawks compete in the Big 12 Conference. The fight song of the Jayhawks is "I'm a Jayhawk",
written in 1912.
""", language="en"),
    "wiki_b/lawrence.md": _doc("lawrence", "Lawrence, Kansas", """
## Overview

Lawrence is a city in Douglas County, Kansas, on the Kansas River.
""", language="en"),
}
BRIDGE_CATALOG = Catalog([Collection(name="wiki_a", display_name="Wiki A"),
                          Collection(name="wiki_b", display_name="Wiki B")])


def _write(root: Path, files: dict[str, str], catalog: Catalog) -> Path:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text, "utf-8")
    manifest = [{"name": c.name, "display_name": c.display_name} for c in catalog.collections]
    (root / "collections.json").write_text(json.dumps(manifest), "utf-8")
    return root


async def _served(root: Path, catalog: Catalog) -> AsyncIterator[Context]:
    index = Path(tempfile.mkdtemp(prefix="neo-nl-generalises-")) / "index.sqlite3"  # never inside the corpus
    server = await serve_in_background(corpus_dir=root, index_path=index)
    docs = DocumentClient(server.url, timeout_s=30, display_names=catalog.display_names(), auth_token=server.token)
    try:
        yield Context(llm=None, docs=docs, catalog=catalog, prompts=Prompts(ROOT / "prompts"))
    finally:
        await docs.aclose()
        await server.stop()


@pytest.fixture
async def nuclear(tmp_path: Path) -> AsyncIterator[Context]:
    async for ctx in _served(_write(tmp_path, NUCLEAR, CATALOG), CATALOG):
        yield ctx


@pytest.fixture
async def bridge(tmp_path: Path) -> AsyncIterator[Context]:
    async for ctx in _served(_write(tmp_path, BRIDGE, BRIDGE_CATALOG), BRIDGE_CATALOG):
        yield ctx


@pytest.fixture
async def bundled() -> AsyncIterator[Context]:
    async for ctx in _served(ROOT / "docserver" / "corpus", CATALOG):
        yield ctx


async def ask(ctx: Context, question: str) -> tuple[list[str], str, str]:
    """(think lines, answer body, sources list) of one offline run."""
    state, request = start([Turn(role="user", content=question)], ctx)
    events = [e async for e in run_pipeline(build_graph(), state, request)]
    answer = "".join(e.text for e in events if isinstance(e, AnswerDelta))
    heading = re.search(r"\*\*(?:Bronnen|Sources)\*\*", answer)
    body, sources = (answer[: heading.start()], answer[heading.end():].strip()) if heading else (answer, "")
    return [e.text for e in events if isinstance(e, Step)], body, sources


def cited_titles(sources: str) -> list[str]:
    return re.findall(r"^\d+\. (.+?)(?:,| \()", sources, re.M)


@pytest.mark.asyncio
async def test_a_named_regulator_does_not_hide_the_collection_that_answers(nuclear: Context) -> None:
    """Naming the ANVS once searched only its collection; the answer was in another one."""
    steps, body, sources = await ask(nuclear, "Hoe worden beveiligingsincidenten gerapporteerd aan de ANVS?")
    assert any(s.startswith("Collecties: ANVS,") for s in steps), steps  # named first, not alone
    assert "24 uur" in body and "Melden van beveiligingsincidenten" in sources
    searches = [s for s in steps if "zoeken naar" in s]
    assert len(searches) == len(set(searches))  # no query twice on a collection


@pytest.mark.asyncio
async def test_a_dutch_comparison_finds_the_english_side(nuclear: Context) -> None:
    """Sub-questions keep the names they are about, and the English IAEA text is found from Dutch words."""
    steps, body, sources = await ask(nuclear, "Hoe verschillen IAEA en ANVS eisen voor veiligheidscultuur?")
    sub = next(s for s in steps if s.startswith("Deelvragen:"))
    assert "IAEA:" in sub and "ANVS:" in sub and "veiligheidscultuur" in sub and "safety culture" in sub
    assert re.search(r"IAEA: [1-9]\d* passages, [1-9]\d* feiten", "\n".join(steps)), steps
    assert "safety culture" in body and "veiligheidscultuur" in body
    assert "GSR Part 2" in sources and "ANVS: verwachtingen" in sources


@pytest.mark.asyncio
async def test_an_english_question_about_a_dutch_article(nuclear: Context) -> None:
    steps, body, sources = await ask(nuclear, "When does the licence of the Borssele nuclear power plant expire?")
    assert "2033" in body and "Kernenergiewet" in sources


@pytest.mark.asyncio
async def test_the_official_article_is_cited_ahead_of_a_summary(nuclear: Context) -> None:
    """"Wat regelt artikel 15aa?" was answered from a summary of article 15a; official text and the summaries
    wording only where the metadata says so."""
    steps, body, sources = await ask(nuclear, "Wat regelt artikel 15aa van de Kernenergiewet?")
    assert "jaarlijks een verslag" in body.split("[1]")[0]  # the first cited sentence is article 15aa's
    first = sources.splitlines()[0]
    assert first.startswith("1. Kernenergiewet, Artikel 15aa") and "samenvatting" not in first, sources


KANSAS = Evidence(id="wiki_a/university-of-kansas#0", collection="wiki_a", doc_id="university-of-kansas",
                  title="University of Kansas", text=BRIDGE["wiki_a/university-of-kansas.md"].split("## Overview")[1])
BRIDGE_QUESTION = "What is the fight song of the university whose main campus is in Lawrence, Kansas?"


def test_first_hop_evidence_names_the_second_hop() -> None:
    """The passage that matches the question names the bridge ("Kansas Jayhawks"); the next query is that name
    with the question's words the passage does not hold."""
    queries = bridge_queries(BRIDGE_QUESTION, focus_terms(BRIDGE_QUESTION, BRIDGE_CATALOG.collections), [KANSAS], set())
    assert "Kansas Jayhawks fight song" in queries


@pytest.mark.asyncio
async def test_a_bridge_question_cites_both_articles(bridge: Context) -> None:
    """The university is named by where its campus is; the fight song is in the article about its teams."""
    steps, body, sources = await ask(bridge, BRIDGE_QUESTION)
    assert "I'm a Jayhawk" in body
    assert {"University of Kansas", "Kansas Jayhawks"} <= set(cited_titles(sources))


@pytest.mark.asyncio
async def test_names_are_looked_up_as_titles_on_the_document_server(bridge: Context) -> None:
    """Over MCP: a name is found where a document is titled by it, or by it and a qualifier after a comma
    ("Lawrence, Kansas"), not where a longer title merely holds it ("Kansas"); a name no title holds finds
    nothing."""
    found = await title_lookups(bridge, ["Kansas", "Lawrence", "Kansas Jayhawks", "Big 12 Conference"])
    assert found == [("Lawrence", "wiki_b", "lawrence"), ("Kansas Jayhawks", "wiki_b", "kansas-jayhawks")]


@pytest.mark.asyncio
async def test_an_overview_lists_documents_across_collections_once_each(bundled: Context) -> None:
    steps, body, sources = await ask(bundled, "Welke documenten gaan over veiligheidscultuur?")
    listed = re.findall(r"^- (ANVS|IAEA|Wetten|Security): (.+)$", body.split("Relevante passages")[0], re.M)
    assert len({title for _, title in listed}) >= 3 and len({coll for coll, _ in listed}) >= 2, body
    entries = re.findall(r"^\d+\. (.+?) —", sources, re.M)
    documents = [e.split(",")[0] for e in entries]
    assert len(documents) == len(set(documents))  # one entry per document



@pytest.mark.parametrize(("text", "expected"), [
    # a name ends where its sentence ends ...
    ("A 1935 film starring Ginger Rogers. It made a profit.", ["Ginger Rogers"]),
    ("De vergunning van kerncentrale Borssele. De ANVS ziet erop toe.", ["Borssele", "ANVS"]),
    # ... not at an abbreviation's dot
    ("Manchester United F.C. in Europe. St. Louis and Mrs. Smith met.", ["Manchester United F.C. in Europe",
                                                                          "St. Louis", "Mrs. Smith"]),
])
def test_names_do_not_run_on_past_a_sentence(text: str, expected: list[str]) -> None:
    assert names(text) == expected

@pytest.mark.parametrize(("question", "unfound"), [
    # two things listed, one named in full by a passage, the other by none: answered in part
    ("Which is older, the University of Kansas or Miskatonic University?", ["Miskatonic University"]),
    ("Are the University of Kansas and Miskatonic University both public?", ["Miskatonic University"]),
    ("Was University of Kansas, Miskatonic University or Arkham College founded first?",
     ["Miskatonic University", "Arkham College"]),
    # a word of the name in some passage is not the name: "Kansas State" is named by no passage in full
    ("Is Kansas State older than the University of Kansas?", []),  # not listed side by side ("than")
    ("Which is older, Kansas State or the University of Kansas?", ["Kansas State"]),
    # both found, or neither: nothing to answer in part
    ("Which is older, the University of Kansas or Lawrence?", []),
    ("Which is older, Miskatonic University or Arkham College?", []),
    # one thing only, or names not listed side by side: the ordinary decline rule decides
    ("When was Miskatonic University founded?", []),
    ("How many TWh did the University of Kansas use in Miskatonic?", []),
])
def test_the_listed_things_no_passage_names(question: str, unfound: list[str]) -> None:
    assert unfound_things(question, [KANSAS, KANSAS.model_copy(update={"id": "x", "doc_id": "lawrence",
                                                                       "title": "Lawrence", "text": "A city."})]) \
        == unfound


def _passage(doc_id: str, title: str, text: str) -> Evidence:
    return Evidence(id=f"c/{doc_id}#0", collection="c", doc_id=doc_id, title=title, text=text)


BORSSELE = _passage("borssele", "Kerncentrale Borssele", (
    "De centrale blijft tot uiterlijk eind 2033 in bedrijf, onder voorwaarden. "
    "Borssele moet behoren tot de 25 procent veiligste vergelijkbare kernreactoren in de westerse wereld. "
    "De kerncentrale Borssele is de enige kerncentrale voor elektriciteitsproductie in Nederland. "
    "Verbruikte splijtstof van Borssele wordt opgewerkt in Frankrijk; het afval gaat terug naar COVRA."))
TREATY = _passage("cppnm", "Convention on the Physical Protection of Nuclear Material", (
    "Each State Party shall apply the levels of physical protection of Annex I to material transported through "
    "international waters or airspace. Storage takes place within an area under constant surveillance by guards. "
    "Nothing in this article shall affect the jurisdiction of a State over its territorial sea. "
    "Each State Party shall designate a central authority and a point of contact."))
LICENCE = _passage("licence", "Vergunningverlening kerninstallaties", (
    "De vergunninghouder vraagt een vergunning aan bij de ANVS. "
    "De ANVS is het bevoegd gezag voor deze Kernenergiewetvergunningen. Een vergunning is persoonlijk; "
    "overdracht aan een ander kan alleen met toestemming van de ANVS."))


@pytest.mark.parametrize(("question", "answered"), [
    # every topic word occurs in the passage, but the name meets none of the others in a sentence or the next
    ("Hoeveel kernreactoren heeft Frankrijk in bedrijf?", False),
    ("Hoeveel kernreactoren heeft Borssele in bedrijf?", True),
    ("Wat gebeurt er in Frankrijk met verbruikte splijtstof?", True),
    # a question naming nothing: half its words (at most three) in one sentence
    ("What is the boiling point of water at sea level?", False),
    ("What levels of physical protection apply to transport?", True),
    # the name in one sentence, what is said of it in the next
    ("Mag een vergunninghouder zijn Kernenergiewetvergunning aan een ander overdragen?", True),
    ("Welke ANVS eisen gelden voor windturbines?", False),
])
def test_topic_words_must_meet_in_the_text(question: str, answered: bool) -> None:
    """The decline rule of the offline selection: a passage that holds the question's words scattered over
    unrelated sentences does not answer it (unanswerable questions of the gold set, with the laws ingested)."""
    facts = select_facts(question, [BORSSELE, TREATY, LICENCE], 4, language=detect_language(question),
                         spread=False)
    assert bool(facts) == answered, facts


@pytest.mark.asyncio
async def test_a_question_about_two_things_is_answered_for_the_one_found(bridge: Context) -> None:
    """One of the two things compared is in no document: the answer gives what is known about the other and
    says which was not found, instead of declining the whole question."""
    steps, body, sources = await ask(bridge, "Which public university is in Lawrence, Kansas: the University of "
                                             "Kansas or Miskatonic University?")
    assert "Not (fully) found in the sources: Miskatonic University." in body and "Lawrence" in body.split("Not")[0]
    assert "University of Kansas" in cited_titles(sources)
    assert any("Miskatonic University" in s and s.startswith("Not (fully) found") for s in steps)


PEOPLE = {  # a HotpotQA comparison: each passage is about one of the two people compared
    "wiki_a/ferdi-taygan.md": _doc("ferdi-taygan", "Ferdi Taygan", """
## Life

Ferdi Taygan (born December 5, 1956) is a former professional tennis player from the United States.
""", language="en"),
    "wiki_b/tennis-in-india.md": _doc("tennis-in-india", "Tennis in India", """
## Players

Mahesh Bhupathi (born 7 June 1974) is a retired professional tennis player from India.
""", language="en"),
    "wiki_b/davis-cup.md": _doc("davis-cup", "Davis Cup", """
## Overview

The Davis Cup is the premier international team event in men's tennis, first held in 1900.
""", language="en"),
}


@pytest.mark.asyncio
async def test_a_question_listing_things_no_one_passage_covers_is_answered_for_each(tmp_path: Path) -> None:
    """"Who is older, A or B?": no passage holds more than half the question's words, and the passages are not
    a pair the question names by title, so it was declined; each listed thing on its own is covered, so the
    answer gives what is found for each."""
    async for ctx in _served(_write(tmp_path, PEOPLE, BRIDGE_CATALOG), BRIDGE_CATALOG):
        steps, body, sources = await ask(ctx, "Who is older, Ferdi Taygan or Mahesh Bhupathi?")
        assert "1956" in body and "1974" in body, body
        assert set(cited_titles(sources)) == {"Ferdi Taygan", "Tennis in India"}
        assert not any(s.startswith("Not (fully) found") for s in steps)
        _, body, _ = await ask(ctx, "Who is older, Ferdi Taygan or Mahesh Bhupathi, in Davis Cup finals won?")
        assert "found no passages" in body  # each thing on its own is still held to the decline rules


# (query, the model's translation, accepted): a translation keeps the query's names, numbers and field terms
TRANSLATIONS = [
    ("IAEA veiligheidscultuur leiderschap", "IAEA safety culture leadership", True),
    ("vervalt vergunning kerncentrale Borssele", "expiry of the licence of nuclear power plant Borssele", True),
    ("vervalt vergunning kerncentrale Borssele", "What is the name of the central bank that issued a licence?", False),
    ("eisen veiligheidscultuur leiderschap", "security culture leadership requirements", False),  # another concept
    ("ontwerpbasisdreiging DBT kerncentrale", "design basis threat nuclear power plant", False),  # DBT dropped
    ("melding binnen 24 uur", "reporting within 24 hours", True),
    ("melding binnen 24 uur", "reporting within one day", False),  # the number changed
    ("eisen veiligheidscultuur", "eisen veiligheidscultuur", False),  # not translated
]


@pytest.mark.parametrize(("query", "wording", "accepted"), TRANSLATIONS)
def test_a_model_translation_keeps_names_numbers_and_field_terms(query: str, wording: str, accepted: bool) -> None:
    out = accept_translation(Translation(queries=[wording]), [query], CATALOG.glossary)
    assert out == [wording if accepted else None]


def test_a_translation_with_another_number_of_queries_is_invalid() -> None:
    with pytest.raises(ValueError):
        accept_translation(Translation(queries=["a query", "another"]), ["één zoekvraag"], CATALOG.glossary)


SPIZER = Evidence(id="w1/bruce-spizer#0", collection="w1", doc_id="bruce-spizer", title="Bruce Spizer",
                  text="David \"Bruce\" Spizer (born July 2, 1955) is a tax attorney in New Orleans who is also "
                       "recognized as an expert on The Beatles. He has published eight books.")
BEATLES = Evidence(id="w2/the-beatles#0", collection="w2", doc_id="the-beatles", title="The Beatles",
                   text="The Beatles were an English rock band, formed in Liverpool in 1960. They became widely "
                        "regarded as the foremost and most influential act of the rock era.")
ERA = Evidence(id="w2/azra#0", collection="w2", doc_id="azra", title="Azra",
               text="Azra was a rock band popular across Yugoslavia in the 1980s, one of the most influential "
                    "bands of the new wave rock era there.")


@pytest.mark.parametrize("question", [
    "Who is Bruce Spizer an expert on, known as the most influential act of the rock era?",
    # research hands on a keyword query: its first word is the name itself
    "Bruce Spizer expert known most influential act rock era",
])
def test_a_bridge_through_two_linked_passages_is_answered_from_both(question: str) -> None:
    """Neither passage holds the question's words alone; together, linked by the name one gives the other's
    title, they do."""
    facts = select_facts(question, [ERA, SPIZER, BEATLES], 4, language="en", spread=False)
    cited = {i for f in facts for i in f.evidence_ids}
    assert {SPIZER.id, BEATLES.id} <= cited, facts


def _linkable(doc: str, title: str, text: str, collection: str = "w1") -> Evidence:
    return Evidence(id=f"{collection}/{doc}#0", collection=collection, doc_id=doc, title=title, text=text)


DODD = _linkable("dodd", "Bobby Dodd Stadium", "Bobby Dodd Stadium at Historic Grant Field is the football stadium "
                "located at the corner of North Avenue at Techwood Drive in Atlanta.")
TECH = _linkable("tech", "1964 Georgia Tech Yellow Jackets football team", "The 1964 Georgia Tech Yellow Jackets "
                "were led by coach Bobby Dodd and played their home games at Bobby Dodd Stadium in Atlanta, Georgia.")
OLD_TRAFFORD = _linkable("ot", "Old Trafford, Greater Manchester", "Old Trafford is the home of Manchester United "
                        "in European football, between Brook Bar and Trafford Bar.")
MANCHESTER = _linkable("mu", "Manchester United F.C. in European football", "Manchester United has taken part in "
                      "European competitions since 1956.")
FALL_RIVER = _linkable("fr", "Fall River Heritage State Park", "Fall River Heritage State Park holds the battleship "
                      "Big Mamie near the Fall River waterfront.")
FALL_RIVER_IDAHO = _linkable("fri", "Fall River (Wyoming, Idaho)", "The Fall River is a tributary in Idaho.")
# the same rules over Dutch text: a permit passage naming the law, and the law's own document
PERMIT = _linkable("borssele", "Kerncentrale Borssele", "De vergunning van kerncentrale Borssele vervalt volgens "
                    "de Kernenergiewet op 31 december 2033.", "anvs")
NUCLEAR_ACT = _linkable("kew", "Kernenergiewet", "De Kernenergiewet regelt de vergunningen voor kerninstallaties "
                          "in Nederland.", "wetten")
NUCLEAR_ACT_SUMMARY = _linkable("kew-s", "Kernenergiewet (samenvatting)", "Een samenvatting van de Kernenergiewet.", "anvs")
# a person named by surname only, in English and in Dutch
TRIBOMETER = _linkable("tri", "Tribometer", "A tribometer measures friction. It was invented by the 18th century Dutch "
                       "scientist Musschenbroek.")
MUSSCHENBROEK = _linkable("pvm", "Pieter van Musschenbroek", "Pieter van Musschenbroek was a Dutch scientist.")
LETTER = _linkable("brief", "Brief over de vergunning", "De brief over de vergunning kwam van minister Kamp.", "anvs")
KAMP = _linkable("kamp", "Henk Kamp", "Henk Kamp was minister van Economische Zaken.", "anvs")


@pytest.mark.parametrize(("title", "question", "named"), [
    ("Ernest Foot", "Ernest Foot was the best friend of the fighter pilot who had how many victories?", True),
    ("Pilot (Will & Grace)", "Ernest Foot was the best friend of the fighter pilot who had how many victories?",
     False),  # a common noun, where the question writes its names with capitals
    ("Music Maker (label)", "What is the latest album of Tim Hecker, the Canadian electronic music maker?", False),
    ("Art (magazine)", "Which artist painted Guernica?", False),  # a word, not a part of one
    ("Bobby Dodd Stadium", "where is bobby dodd stadium?", True),  # a question in lower case names in any case
    ("Kerncentrale Borssele", "Wanneer vervalt de vergunning van kerncentrale Borssele?", True),  # opens in lower case
    ("Kernenergiewet", "Wat regelt de Kernenergiewet?", True),
    ("Kernenergiewet", "wat regelt de kernenergiewet over vergunningen?", True),
    ("Veiligheid (tijdschrift)", "Wat zegt de ANVS over veiligheid?", False),
])
def test_a_question_names_a_title_as_a_name(title: str, question: str, named: bool) -> None:
    assert relevance.names_title(title, question) is named


@pytest.mark.parametrize(("a", "b", "question", "expected"), [
    (TECH, DODD, "Where is the stadium of the 1964 Georgia Tech Yellow Jackets football team?", 1.0),  # named in full
    (DODD, TECH, "Where is the stadium of the 1964 Georgia Tech Yellow Jackets football team?", 1.0),  # either way
    (OLD_TRAFFORD, MANCHESTER, "What club plays between Brook Bar and Trafford Bar?", 4 / 6),  # most title words
    (FALL_RIVER, FALL_RIVER_IDAHO, "Which battleship is at the Fall River Heritage State Park?", 0.0),  # one name
    (DODD, DODD, "Where is Bobby Dodd Stadium?", 0.0),  # one document
    # both titles named in the question: a comparison of two named things
    (DODD, FALL_RIVER, "Is Bobby Dodd Stadium older than Fall River Heritage State Park?", 1.0),
    (TECH, DODD, "Where is Bobby Dodd Stadium?", 0.0),  # the question names the bridge: no bridge
    (PERMIT, NUCLEAR_ACT, "Wanneer vervalt de vergunning van kerncentrale Borssele?", 1.0),  # Dutch bridge
    (NUCLEAR_ACT, NUCLEAR_ACT_SUMMARY, "Wat regelt de Kernenergiewet?", 0.0),  # a law and its summary: one name
    (DODD, FALL_RIVER, "Is the Bobby Dodd Stadium older than the fall river heritage state park?", 0.0),  # no name
    (PERMIT, NUCLEAR_ACT, "Is de Kerncentrale Borssele ouder dan de Kernenergiewet?", 1.0),  # two named things
    (TRIBOMETER, MUSSCHENBROEK, "Who invented the tribometer?", 0.5),  # half a title: a surname names a person
    # a title inside a longer word is not named ("changed" is not "Change", "kernenergiewetgeving" not the act)
    (_linkable("xv", "Xavin", "Xavin changed into a woman."), _linkable("ch", "Change (album)", "An album."),
     "Where did Xavin first appear?", 0.0),
    (_linkable("wg", "Wetgeving", "De kernenergiewetgeving is streng.", "anvs"), NUCLEAR_ACT, "Wat zegt de wetgeving?",
     0.0),
    (LETTER, KAMP, "Wie schreef de brief over de vergunning?", 0.5),
    (TRIBOMETER, _linkable("jvm", "Jan Willem van Musschenbroek", "Jan Willem van Musschenbroek made instruments."),
     "Who invented the tribometer?", 0.0),  # a third of a title: no link
])
def test_two_passages_are_linked_by_a_title_one_names(a: Evidence, b: Evidence, question: str,
                                                      expected: float) -> None:
    assert pairs._link(a, b, question) == pytest.approx(expected, abs=0.01)


@pytest.mark.parametrize(("question", "ledger", "pair"), [
    ("Where is the stadium located at which the 1964 Georgia Tech Yellow Jackets football team played?",
     [FALL_RIVER, TECH, OLD_TRAFFORD, DODD], {TECH.id, DODD.id}),
    ("Wanneer vervalt de vergunning van kerncentrale Borssele volgens de wet op kerninstallaties?",
     [NUCLEAR_ACT_SUMMARY, PERMIT, NUCLEAR_ACT], {PERMIT.id, NUCLEAR_ACT.id}),
])
def test_the_best_pair_is_the_linked_one_covering_the_question(question: str, ledger: list[Evidence],
                                                               pair: set[str]) -> None:
    query = relevance.query_terms(question)
    found = pairs.best_pair(query, [relevance.stems_of(e.text) for e in ledger], ledger, question)
    assert found is not None and {ledger[i].id for i in found[1]} == pair



# a bridge from the document the question names, against a linked pair that holds more of the question's rarer words
CHACONNE_LEDGER = [
    _linkable("ch", "Chaconne in F minor (Pachelbel)", "Chaconne in F minor is a piece for organ by Johann Pachelbel."),
    _linkable("jp", "Johann Pachelbel", "Johann Pachelbel was a German composer and organist of the Baroque era."),
    _linkable("s2", "Symphony No. 2 (Strauss)", "The Symphony No. 2 in F minor is by a composer of German nationality, "
              "Richard Strauss."),
    _linkable("rs", "Richard Strauss", "Richard Strauss was a German composer."),
    _linkable("cd", "Chaconne", "A chaconne is a dance."),
]
PERMIT_LEDGER = [
    _linkable("kb", "Kerncentrale Borssele", "De vergunning van kerncentrale Borssele werd in 2013 verleend door "
              "minister Kamp.", "anvs"),
    _linkable("hk", "Henk Kamp", "Henk Kamp was minister van Economische Zaken voor de VVD.", "anvs"),
    _linkable("wm", "Wet milieubeheer", "Elke partij kan bezwaar maken tegen een vergunning die de minister verleent.",
              "wetten"),
    _linkable("ke", "Kernenergiewet", "De minister verleent de vergunning voor een kerncentrale; de Wet milieubeheer "
              "geldt.", "wetten"),
    _linkable("zl", "Zeeland", "In Zeeland ligt Borssele.", "anvs"),
]


@pytest.mark.parametrize(("question", "ledger", "bridge", "other"), [
    ("What was the nationality of the composer of Chaconne in F minor?", CHACONNE_LEDGER, {"ch", "jp"}, {"s2", "rs"}),
    ("Van welke partij was de minister die de vergunning van kerncentrale Borssele verleende?", PERMIT_LEDGER,
     {"kb", "hk"}, {"wm", "ke"}),
])
def test_a_bridge_from_the_document_the_question_names_ranks_first(
        question: str, ledger: list[Evidence], bridge: set[str], other: set[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first hop is the document the question names; the pair it forms with the document its passage names
    ranks above a linked pair of passages that hold more of the question's rarer words (which is what ranks first
    without `tuning.from_named_weight`)."""
    query = relevance.query_terms(question)
    stems = [relevance.stems_of(e.text) for e in ledger]

    def best() -> set[str]:
        _, _, (i, j) = pairs.ranked_pairs(query, stems, ledger, question)[0]
        return {ledger[i].doc_id, ledger[j].doc_id}

    assert best() == bridge
    with tuned(from_named_weight=0.0):
        assert best() == other


def _every_pair(query, stems, ledger, question):
    """`ranked_pairs` as it read the ledger before `_partners`: `_linked` asked of every pair."""
    weight = relevance.idf_weights(query, stems)
    total = sum(weight) or 1.0
    hits = [frozenset(k for k, t in enumerate(query) if t & s) for s in stems]
    order = sorted(range(len(stems)), key=lambda i: -sum(weight[k] for k in hits[i]))
    sides = [pairs._side(e, question) for e in ledger]
    scored = []
    for i in order[:tuning().pair_first]:
        for j in order:
            if hits[i] and j != i and sides[i].doc != sides[j].doc and (link := pairs._linked(sides[i], sides[j])):
                union = hits[i] | hits[j]
                named = sides[i].named + sides[j].named
                score = pairs.pair_score(sum(weight[k] for k in union) / total, link, named)
                scored.append((score, len(union) / len(query), (i, j)))
    return sorted(scored, key=lambda t: -t[0])


@pytest.mark.parametrize("seed", range(12))
def test_ranked_pairs_reads_only_the_pairs_that_can_link(seed: int) -> None:
    """The same ranked pairs as asking `_linked` of every pair, on ledgers of passages that name other passages'
    titles in full, in part or not at all, with questions naming some titles (English and Dutch)."""
    rng = random.Random(seed)
    titles = ["Bobby Dodd Stadium", "Georgia Tech", "Fall River Heritage State Park", "Kerncentrale Borssele",
              "Kernenergiewet", "Old Trafford", "Manchester United F.C.", "Bruce Spizer", "The Beatles", "Azra"]
    words = "stadium team played river park vergunning wet kerncentrale club author band album year 1964 2033".split()
    ledger = []
    for k in range(rng.randint(2, 30)):
        title = rng.choice(titles)
        named = rng.sample(titles, rng.randint(0, 3))
        parts = [t if rng.random() < 0.6 else " ".join(t.split()[: max(1, len(t.split()) - 1)]) for t in named]
        text = " ".join(rng.sample(words, 5) + parts) + "."
        ledger.append(Evidence(id=f"c/{title}#{k}", collection=rng.choice("ab"), doc_id=title.lower().replace(" ", "-"),
                               title=title, text=text))
    asked = rng.sample(titles, rng.randint(0, 2))
    question = rng.choice(["Where is {} played near {}?", "Wanneer vervalt de {} en de {}?"]).format(
        *(asked + ["the stadium", "vergunning"])[:2])
    query = relevance.query_terms(question)
    stems = [relevance.stems_of(e.text) for e in ledger]
    assert pairs.ranked_pairs(query, stems, ledger, question) == _every_pair(query, stems, ledger, question)


def test_a_bridge_answer_opens_with_a_sentence_of_each_linked_passage() -> None:
    """The stadium's passage shares one word with the question, yet the answer (its address) is there."""
    question = "Where is the stadium located at which the 1964 Georgia Tech Yellow Jackets football team played?"
    facts = select_facts(question, [FALL_RIVER, TECH, OLD_TRAFFORD, DODD], 4, language="en", spread=False)
    assert [f.evidence_ids for f in facts[:2]] == [[TECH.id], [DODD.id]]
    assert "North Avenue" in facts[1].text


# a bridge whose answer passage shares no topic word with the question: the operator's document, which the plant's
# passage names; three passages on the plant fill the covering sentences first
OPERATED = [
    _linkable("bor", "Kerncentrale Borssele", "Kerncentrale Borssele in Zeeland wordt geëxploiteerd door Delta "
              "Energie, de exploitant van de centrale.", "anvs"),
    _linkable("delta", "Delta Energie", "Delta Energie is voor zeventig procent eigendom van PZEM en voor dertig "
              "procent van RWE.", "anvs"),
    _linkable("vgn", "Vergunning Borssele", "De vergunning van kerncentrale Borssele vervalt op 31 december 2033.",
              "anvs"),
    _linkable("zee", "Zeeland", "In Zeeland staat kerncentrale Borssele aan de Westerschelde.", "anvs"),
    _linkable("exp", "Exploitanten", "Een exploitant van een kerncentrale heeft een vergunning nodig van de ANVS.",
              "anvs"),
]
OPERATED_EN = [
    _linkable("bor", "Borssele Nuclear Power Station", "The Borssele Nuclear Power Station in Zeeland is run by "
              "Delta Energie, the operator of the plant."),
    _linkable("delta", "Delta Energie", "Delta Energie is seventy percent held by PZEM and thirty percent by RWE."),
    _linkable("vgn", "Borssele licence", "The licence of the Borssele Nuclear Power Station ends on 31 December 2033."),
    _linkable("zee", "Zeeland", "In Zeeland the Borssele Nuclear Power Station stands on the Western Scheldt."),
]


@pytest.mark.parametrize(("question", "ledger", "language"), [
    ("Wie zijn de eigenaren van de exploitant van kerncentrale Borssele?", OPERATED, "nl"),
    ("Who are the owners of the operator of the Borssele Nuclear Power Station?", OPERATED_EN, "en"),
])
def test_the_linked_pair_completes_a_bridge_answer(question: str, ledger: list[Evidence], language: str) -> None:
    """The covering sentences are about the plant; the passage its operator's name leads to closes the answer."""
    facts = select_facts(question, ledger, 3, language=language, spread=False)
    assert facts[0].evidence_ids == [ledger[0].id]
    assert facts[-1].evidence_ids == [ledger[1].id] and "PZEM" in facts[-1].text
    assert len(facts) == 4  # the three covering sentences stay


@pytest.mark.parametrize(("document", "documents", "limit", "admitted"), [
    ("kew", set(), 4, True),
    ("kew", {"kew", "borssele", "dodewaard", "petten"}, 4, True),  # a document the answer cites already
    ("covra", {"kew", "borssele", "dodewaard"}, 4, True),  # the fourth
    ("covra", {"kew", "borssele", "dodewaard", "petten"}, 4, False),  # a fifth
    ("Old Trafford", {"Gorse Hill"}, 1, False),
    (("anvs", "kew"), {("wetten", "kew")}, 1, False),  # one doc id in two collections: two documents
])
def test_an_answer_draws_on_a_few_documents(document: object, documents: set, limit: int, admitted: bool) -> None:
    assert selection.admits(document, documents, limit) is admitted


@pytest.mark.parametrize(("best", "named", "spread", "counted"), [
    (0.7, False, True, False),  # an overview: a collection counts from KEEP_RATIO of the best passage
    (0.7, False, False, True),  # a focused answer: from FOCUS_RATIO
    (0.5, False, False, False),
    (0.6, True, True, True),  # a collection the question names: from PRIOR_RATIO
])
def test_which_collections_count_for_an_answer(best: float, named: bool, spread: bool, counted: bool) -> None:
    assert selection.counts(best, 1.0, named, spread) is counted


@pytest.mark.parametrize(("counted", "share", "linked", "named", "expected"), [
    (True, 0.6, False, False, True),
    (True, 0.4, False, False, False),  # covers less than half what the best passage covers
    (False, 0.9, False, False, False),  # of a collection that does not count
    (False, 0.3, True, False, True),  # one of the linked pair
    (False, 0.3, False, True, True),  # of a document the question names
])
def test_which_passages_compete_for_an_answer(counted: bool, share: float, linked: bool, named: bool,
                                              expected: bool) -> None:
    assert selection.selectable(counted, share, linked, named) is expected


NAMED_WEAK = {
    "en": [_linkable("sils", "Clouds of Sils Maria", "Clouds of Sils Maria is a 2014 drama film starring Juliette "
                     "Binoche as an actress born in Paris. The film follows an established actress."),
           _linkable("kapoor", "Sanjana Kapoor", "Sanjana Kapoor (born 1967) is an Indian theatre person and former "
                     "film actress."),
           _linkable("person", "In Person (film)", "In Person is a 1935 comedy with Ginger Rogers. It made a profit "
                     "of $147,000.", "w2")],
    "nl": [_linkable("wet", "Kernenergiewet", "Een vergunning vervalt als de houder de kerncentrale niet binnen drie "
                     "jaar in bedrijf neemt. De vergunning vervalt ook bij intrekking.", "wetten"),
           _linkable("dodewaard", "Kerncentrale Dodewaard", "De vergunning van kerncentrale Dodewaard vervalt niet; de "
                     "centrale is buiten bedrijf.", "wetten"),
           _linkable("borssele", "Kerncentrale Borssele", "Borssele ligt in Zeeland aan de Westerschelde, sinds 1973 in "
                     "bedrijf tot eind 2033.", "anvs")],
}


@pytest.mark.parametrize(("question", "language"), [
    ("In Person is a 1935 film starring an actress born in what year?", "en"),
    ("Wanneer vervalt de vergunning van kerncentrale Borssele?", "nl"),
])
def test_the_document_a_question_names_speaks_in_its_answer(question: str, language: str) -> None:
    """The passage of the document the question names holds little of its words, in a collection whose best
    passage covers less than the others' best: its sentence still joins the answer."""
    ledger = NAMED_WEAK[language]
    facts = select_facts(question, ledger, 4, language=language, spread=False)
    assert ledger[2].id in {i for f in facts for i in f.evidence_ids}, facts


@pytest.mark.parametrize(("cited", "pair", "expected"), [
    (["bor"], ["bor", "delta"], ["delta"]),  # the bridge's second half
    (["delta", "vgn"], ["bor", "delta"], ["bor"]),
    (["bor", "delta"], ["bor", "delta"], []),  # both cited
    (["vgn", "zee"], ["bor", "delta"], []),  # a pair the answer does not rest on: another reading
    (["bor"], ["bor", "delta", "exp"], ["delta", "exp"]),  # with the partner
    (["bor"], [], []),
    (["tech"], ["tech", "dodd"], ["dodd"]),  # English: the team names the stadium
])
def test_the_documents_the_linked_pair_adds_to_an_answer(cited: list[str], pair: list[str],
                                                          expected: list[str]) -> None:
    from graph.models import Fact

    passages = {e.doc_id: e for e in [*OPERATED, TECH, DODD]}
    document = {e.id: e.doc_id for e in passages.values()}
    facts = [Fact(text=f"Een zin uit {doc}.", evidence_ids=[passages[doc].id]) for doc in cited]
    completed = selection.completing(facts, [passages[doc] for doc in pair], document)
    assert [e.doc_id for e in completed] == expected


@pytest.mark.parametrize(("ledger", "ranked", "cited", "expected"), [
    # the best pair of all (vgn, zee) is another reading; the best through a document the answer cites leads on
    (OPERATED, [(0.9, 1.0, (2, 3)), (0.8, 1.0, (0, 1))], {"bor"}, ["bor", "delta"]),
    (OPERATED, [(0.9, 1.0, (2, 3)), (0.8, 1.0, (0, 1))], {"vgn"}, ["vgn", "zee"]),
    (OPERATED, [(0.9, 1.0, (2, 3))], {"exp"}, []),  # no pair through what the answer cites
    (OPERATED_EN, [(0.9, 1.0, (2, 3)), (0.8, 1.0, (0, 1))], {"delta"}, ["bor", "delta"]),
])
def test_the_pair_through_what_an_answer_cites(ledger: list[Evidence], ranked: list, cited: set[str],
                                               expected: list[str]) -> None:
    document = {e.id: e.doc_id for e in ledger}
    assert [e.doc_id for e in pairs.anchored(ranked, ledger, cited, document)] == expected


@pytest.mark.parametrize(("question", "ledger", "cited", "expected"), [
    ("Wie zijn de eigenaren van de exploitant van kerncentrale Borssele?", OPERATED, set(), ["bor"]),
    ("Wie zijn de eigenaren van de exploitant van kerncentrale Borssele?", OPERATED, {"bor"}, []),  # cited already
    ("Is Delta Energie de exploitant van Kerncentrale Borssele?", OPERATED, {"vgn"}, ["bor", "delta"]),
    ("Who are the owners of the operator of the Borssele Nuclear Power Station?", OPERATED_EN, {"delta"}, ["bor"]),
    ("Who owns the plant's operator?", OPERATED_EN, set(), []),  # names no document
])
def test_the_documents_a_question_names_close_its_answer(question: str, ledger: list[Evidence], cited: set[str],
                                                         expected: list[str]) -> None:
    document = {e.id: e.doc_id for e in ledger}
    covered = [(relevance.coverage(relevance.query_terms(question), e.text), e) for e in ledger]
    named = selection.named_passages(covered, question, document, cited)
    assert [e.doc_id for e in named] == expected


@pytest.mark.parametrize(("name", "text", "expected"), [
    ("Chris Van Hollen", "A bill introduced by Chris Van Hollen in 2010.", True),
    ("Bratislava", "Satinský was born in Bratislava in 1941.", True),  # one word, mid-sentence
    ("Kernenergiewet", "De vergunning vervalt volgens de Kernenergiewet.", True),
    ("GSR Part 2", "Zie GSR Part 2 van de IAEA.", True),  # a numbered title: two plain words
    ("1998 Toyota Grand Prix", "He won the 1998 Toyota Grand Prix.", True),
    ("December 2033", "De vergunning vervalt op 31 December 2033.", False),  # a date
    ("Artikel 15a", "Dat regelt Artikel 15a.", False),  # a numbered reference
    ("Langer", "Langer dan tien jaar blijft de vergunning geldig.", False),  # only a sentence's first word
    ("However", "However, the band split up.", False),
])
def test_a_lookup_is_for_what_may_be_a_title(name: str, text: str, expected: bool) -> None:
    assert title_like(name, text) is expected


def test_lookups_are_the_names_the_best_passages_give_that_no_document_is_about() -> None:
    question = "Where is the stadium located at which the 1964 Georgia Tech Yellow Jackets football team played?"
    assert link_queries(question, question, [TECH], set()) == ["Bobby Dodd", "Bobby Dodd Stadium in Atlanta"]
    again = link_queries(question, question, [TECH, DODD], set())  # the stadium's document is gathered
    assert "Bobby Dodd" in again and not any(q.startswith("Bobby Dodd Stadium") for q in again)
    dutch = "Wanneer vervalt de vergunning van kerncentrale Borssele?"
    assert link_queries(dutch, dutch, [PERMIT], set()) == ["Kernenergiewet"]
    assert "Kernenergiewet" not in link_queries(dutch, dutch, [PERMIT, NUCLEAR_ACT], set())


DEAD_HEAT = _linkable("dh", "Dead Heat on a Merry-Go-Round", "Dead Heat on a Merry-Go-Round is a 1966 American heist "
                     "film directed by Bernard Girard and starring James Coburn, Camilla Sparv, Aldo Ray, Nina Wayne, "
                     "Robert Webber, Rose Marie, Todd Armstrong and Marian McCargo. It marked the film debut of "
                     "Harrison Ford, who played a bellhop.")
BELLHOPS = _linkable("bh", "Bellhop", "A bellhop carries the luggage of hotel guests; Star Wars Hotel staff wear them.")
LAWS_NAMED = _linkable("lic", "Vergunning kerncentrale Borssele", "De vergunning van de kerncentrale Borssele is "
                      "verleend door de ANVS op grond van de Kernenergiewet en het Bkse; daarnaast geldt de "
                      "Omgevingswet.", "anvs")


def test_link_candidates_read_the_documents_the_question_names_first() -> None:
    """The passage of the document a bridge question names holds the bridge, though other passages cover more of
    the question's words; the names it gives come first, the question's own and gathered titles never."""
    question = "Who did the actor who played a bellhop in Dead Heat on a Merry-Go-Round play in Star Wars?"
    found = link_candidates(question, question, [BELLHOPS, DEAD_HEAT], set())
    assert found[:3] == ["American", "Bernard Girard", "James Coburn"] and "Harrison Ford" in found
    assert "Star Wars" not in found and "Dead Heat on a Merry-Go-Round" not in found
    assert link_candidates(question, question, [BELLHOPS, DEAD_HEAT], set(), limit=3) == found[:3]
    dutch = "Op grond van welke wetten is de vergunning van kerncentrale Borssele verleend?"
    assert link_candidates(dutch, dutch, [LAWS_NAMED], {"anvs"}) == ["Kernenergiewet", "Bkse", "Omgevingswet"]


def _ref(title: str, collection: str = "w1") -> DocumentRef:
    return DocumentRef(collection=collection, doc_id=title.lower().replace(" ", "-"), title=title)


@pytest.mark.parametrize(("candidates", "refs", "expected"), [
    (["Bernard Girard", "James Coburn", "Harrison Ford"],
     [_ref("Harrison Ford filmography"), _ref("Harrison Ford", "w3"), _ref("James Coburn Jr.")],
     [("Harrison Ford", "w3")]),  # only a document titled by the name itself
    (["Styx", "Renegade"], [_ref("Renegade (Styx song)"), _ref("Styx (band)", "w2")],
     [("Styx", "w2"), ("Renegade", "w1")]),  # a title's qualifier is not part of the name
    (["Kernenergiewet", "Wet milieubeheer"], [_ref("Kernenergiewet", "wetten"), _ref("Wet milieubeheer", "wetten")],
     [("Kernenergiewet", "wetten"), ("Wet milieubeheer", "wetten")]),  # in candidate order
    (["kernenergiewet"], [_ref("Wijziging van de Kernenergiewet", "wetten")], []),
    # the part before a comma names a document too, after the full titles
    (["Smyrna", "Borssele"], [_ref("Smyrna, Georgia"), _ref("Borssele, kerncentrale", "anvs"), _ref("Borssele", "w2")],
     [("Smyrna", "w1"), ("Borssele", "w2")]),
    (["A", "B", "C", "D", "E"], [_ref(t) for t in "EDCBA"], [(t, "w1") for t in "ABCD"]),  # at most MAX_LINKS
])
def test_a_name_is_looked_up_where_a_document_is_titled_by_it(candidates: list[str], refs: list[DocumentRef],
                                                              expected: list[tuple[str, str]]) -> None:
    assert [(name, ref.collection) for name, ref in titled(candidates, refs)] == expected


@pytest.mark.parametrize(("a", "b", "expected"), [
    ("lousiana", "louisiana", True),  # a letter left out
    ("borsselle", "borssele", True),  # one too many
    ("luthuanian", "lithuanian", True),  # one replaced
    ("kernenergeiwet", "kernenergiewet", True),  # two neighbours swapped
    ("borssele", "borssele", False),  # the same word is no typo
    ("borsele", "borssele", True),
    ("doel", "dodewaard", False),
    ("hanover", "hannoverr", False),  # two letters apart
])
def test_one_typo(a: str, b: str, expected: bool) -> None:
    assert relevance.one_typo(a, b) is expected and relevance.one_typo(b, a) is expected


@pytest.mark.parametrize(("question", "answered"), [
    ("Wanneer vervalt de vergunning van kerncentrale Borssele?", True),
    ("Wanneer vervalt de vergunning van kerncentrale Borsele?", True),  # a name with a typo is still the name
    ("Wanneer vervalt de vergunning van kerncentrale Borsselle?", True),
    ("Vervalt de vergunning van kerncentrale Borssele in 2034?", False),  # a number must be as written
    ("Vervalt de vergunning van kerncentrale Borssele in 2033?", True),
    ("Wanneer vervalt de vergunning van kerncentrale Doel?", False),  # another plant, nowhere in the passages
    ("Wanneer vervalt de vergunning van kerncentrale Dodewaard?", False),
    ("When was the Lousiana flood of the Mississippi?", True),
    ("When was the Lousiana flood of the Missouri?", False),  # one name right, the other nowhere
])
def test_a_name_with_a_typo_is_still_the_name(question: str, answered: bool) -> None:
    flood = _linkable("flood", "Great Mississippi Flood of 1927", "The Great Mississippi Flood of 1927 flooded "
                      "Louisiana and Arkansas in April 1927.")
    facts = select_facts(question, [PERMIT, NUCLEAR_ACT, flood], 5, language="nl", min_coverage=0.6, spread=False)
    assert bool(facts) is answered


AMSTERDAM = _linkable("ams", "Amsterdam", "Amsterdam is the capital of the Netherlands, with 930,000 inhabitants.")
ATLANTA = _linkable("atl", "Atlanta", "Atlanta is the capital of the U.S. state of Georgia.")
TECHWOOD = _linkable("tw", "Techwood Drive", "Techwood Drive is a street in Midtown Atlanta, named after the Georgia "
                     "Tech campus.")
ACT_NAMING_A_DECREE = _linkable("kew", "Kernenergiewet", "De Kernenergiewet regelt de vergunningen voor "
                                "kerninstallaties; het Besluit stralingsbescherming werkt haar uit.", "wetten")
DECREE = _linkable("bs", "Besluit stralingsbescherming", "Het Besluit stralingsbescherming regelt de bescherming "
                   "tegen straling.", "wetten")


@pytest.mark.parametrize(("question", "evidence", "expected"), [
    # the bridge: the team's passage names the stadium's document, whose passage holds the answer
    ("Where is the stadium located at which the 1964 Georgia Tech Yellow Jackets football team played?",
     [AMSTERDAM, TECH, DODD], ["tech", "dodd"]),
    ("Welke wet bepaalt de einddatum van kerncentrale Borssele, en sinds wanneer geldt die wet?",
     [NUCLEAR_ACT, PERMIT], ["borssele", "kew"]),
    # the partner: the other document of the next pair that shares one of the best pair's (Atlanta, named by both)
    ("Where is the stadium located at which the 1964 Georgia Tech Yellow Jackets football team played?",
     [AMSTERDAM, TECH, DODD, ATLANTA], ["tech", "dodd", "atl"]),
    ("Welke wet bepaalt de einddatum van kerncentrale Borssele, en sinds wanneer geldt die wet?",
     [NUCLEAR_ACT, PERMIT, NUCLEAR_ACT_SUMMARY], ["borssele", "kew", "kew-s"]),
    # no partner when the next pair is far behind the best (`PARTNER_MARGIN`): a street the stadium's passage
    # names, a decree the act's passage names, neither holding more of the question
    ("Where is the stadium located at which the 1964 Georgia Tech Yellow Jackets football team played?",
     [AMSTERDAM, TECH, DODD, TECHWOOD], ["tech", "dodd"]),
    ("Wanneer vervalt de vergunning van kerncentrale Borssele volgens de Kernenergiewet?",
     [ACT_NAMING_A_DECREE, PERMIT, DECREE], ["borssele", "kew"]),
    ("Where is the stadium located at which the 1964 Georgia Tech Yellow Jackets football team played?",
     [AMSTERDAM, TECH], []),  # nothing linked: no pair
    ("What is the capital of the Netherlands?", [AMSTERDAM], []),
])
def test_linked_pair(question: str, evidence: list[Evidence], expected: list[str]) -> None:
    assert [e.doc_id for e in pairs.linked_pair(question, evidence)] == expected


def test_a_model_reads_the_linked_pair_even_when_no_key_fact_comes_from_it() -> None:
    from graph.answer.evidence_policy import answer_ledger, prompt_passages
    from graph.config import PipelineConfig
    from graph.models import Fact, Route

    question = "Where is the stadium located at which the 1964 Georgia Tech Yellow Jackets football team played?"
    facts = [Fact(text="The 1964 Georgia Tech Yellow Jackets were led by coach Bobby Dodd.", evidence_ids=[TECH.id])]
    route = Route(query_type="factual", collections=["w1"], reason="test")
    evidence = [AMSTERDAM, TECH, DODD]
    pair = pairs.linked_pair(question, evidence)
    read = prompt_passages(*answer_ledger(facts, evidence, route, PipelineConfig(), True, pair))
    assert [e.doc_id for e in read] == ["tech", "dodd"]  # the facts' document first, then the pair's other one
    offline = prompt_passages(*answer_ledger(facts, evidence, route, PipelineConfig(), False, pair))
    assert [e.doc_id for e in offline] == ["tech"]  # an extractive answer quotes its facts only
    no_facts = answer_ledger([], [TECH, DODD], route, PipelineConfig(), True, pairs.linked_pair(question, [TECH, DODD]))
    assert no_facts[0].entries == []  # no facts: decline


@pytest.mark.parametrize(("asked", "query", "evidence", "with_asked", "without"), [
    # the search query lost the small words of the titles the question names ("Queen Blood"): read as asked, the
    # two films are the two things named, and the answer opens with both
    ("The movies Queen of Blood and Battle Beyond the Sun both contained scenes from what 1959 Soviet feature?",
     "movies Queen Blood Battle Beyond Sun both contained scenes 1959 Soviet feature",
     [_linkable("x", "Soviet Union", "The Soviet Union was a federal socialist state in Eurasia from 1922 to 1991."),
      _linkable("q", "Queen of Blood", "Queen of Blood is a 1966 American science fiction horror film. It was made with "
           "footage from Mechte Navstrechu, a Soviet film."),
      _linkable("b", "Battle Beyond the Sun", "Battle Beyond the Sun is a 1962 American science fiction film. It is a "
           "re-edited version of Nebo Zovyot, a 1959 Soviet feature.")], {"b", "q"}, set()),
    ("Welke wet is ouder, de Wet op de Raad van State of de Kernenergiewet?",
     "wet ouder Wet Raad State Kernenergiewet",
     [_linkable("x", "Besluit stralingsbescherming", "Het besluit regelt de bescherming tegen straling bij kerninstallaties."),
      _linkable("r", "Wet op de Raad van State", "De Wet op de Raad van State regelt de adviestaak van de Raad sinds 1962."),
      _linkable("k", "Kernenergiewet", "De Kernenergiewet geldt sinds 1963 voor kerninstallaties in Nederland.")],
     {"r", "k"}, {"r", "k"}),  # read from the query, the document it names still competes (`selectable`)
])
def test_names_and_titles_are_read_in_the_question_as_asked(asked: str, query: str, evidence: list[Evidence],
                                                            with_asked: set[str], without: set[str]) -> None:
    def documents(facts: list) -> set[str]:
        return {i.split("/")[1].split("#")[0] for f in facts for i in f.evidence_ids}

    language = "nl" if "wet" in query else "en"
    assert documents(select_facts(query, evidence, 4, language=language, spread=False, asked=asked)) == with_asked
    assert documents(select_facts(query, evidence, 4, language=language, spread=False)) == without


@pytest.mark.parametrize(("question", "expected"), [
    ("Which city was the man who is known for a science humor story born in?", True),
    ("Where is the headquarters of the advertising agency which is recognized for a campaign?", True),
    ("In what year was the author of the book in which a dog speaks born?", True),
    ("Welke minister die de vergunning tekende is nu burgemeester?", True),
    ("In welk jaar is de wet waarin de einddatum staat ingevoerd?", True),
    ("Waarin verschillen de eisen van IAEA en ANVS?", False),  # the question's own opening word
    ("Which film was released first?", False),  # the question's own "which" describes nothing
    ("In which city was Pieter van Musschenbroek born?", False),
    ("Which sites has the Dutch cabinet selected for the two new nuclear power plants?", False),
    ("Hoeveel kost de bouw van de PALLAS-reactor?", False),
])
def test_a_question_reaching_its_subject_through_a_description(question: str, expected: bool) -> None:
    assert relevance.describes(question) is expected


FRAZEE = _linkable("jf", "John Frazee", "John Frazee was an American sculptor. He was born in Rahway, a city in "
                   "New Jersey.")
CAT_PARADOX = _linkable("bcp", "Buttered cat paradox", "The buttered cat paradox is a humor story that combines two "
                        "adages. The story was drawn by John Frazee.")
REACTORS = _linkable("hor", "Onderzoeksreactoren", "De nieuwe reactor in Petten valt onder de Kernenergiewet.", "anvs")
REACTOR_ACT = _linkable("wet", "Kernenergiewet", "De Kernenergiewet regelt de kosten van de bouw van een reactor.",
                        "anvs")


@pytest.mark.parametrize(("question", "language", "ledger", "answered"), [
    # no name, nor a passage holding most of the question: through a description, the linked pair answers
    ("Which city was the man who drew the humor story of two adages born in?", "en", [CAT_PARADOX, FRAZEE], True),
    ("Which city was the author of the humor story of two adages born in?", "en", [CAT_PARADOX, FRAZEE], False),
    ("Wat zijn de kosten van de bouw van de nieuwe reactor die in Petten bij zee staat?", "nl",
     [REACTORS, REACTOR_ACT], True),
    ("Wat zijn de kosten van de bouw van de nieuwe reactor in Petten bij zee?", "nl", [REACTORS, REACTOR_ACT], False),
])
def test_a_described_subject_is_answered_through_a_linked_pair(question: str, language: str,
                                                               ledger: list[Evidence], answered: bool) -> None:
    facts = select_facts(question, ledger, 4, language=language, spread=False)
    assert bool(facts) is answered
