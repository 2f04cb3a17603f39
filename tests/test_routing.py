"""Query types from scored signals, the loop's memory of what was searched, the glossary, and answer instructions
that must not change what an answer cites."""

from __future__ import annotations

import pytest

from app.settings import ROOT
from graph.collections import load_catalog
from graph.loop import searches, untried
from graph.models import ResearchTask, Route
from graph.text.routing import score_types
from tests.test_generalises import ask, bundled  # noqa: F401  (fixture)
from textkit import analyze

CATALOG = load_catalog(ROOT / "graph" / "collections.json")


@pytest.mark.parametrize(
    ("question", "mentioned", "kind", "sure"),
    [
        # overviews asked in many ways
        ("What do we know about ageing management of research reactors?", 0, "exploratory", True),
        ("Is there anything on emergency preparedness for hospitals?", 0, "exploratory", True),
        ("I am looking for all documents on decommissioning", 0, "exploratory", True),
        ("Welke normen zijn van toepassing op het vervoer van splijtstof?", 0, "exploratory", True),
        ("heb je iets over transport van radioactief afval", 0, "exploratory", True),
        ("Where can I find the inspection reports on research reactors?", 0, "exploratory", True),
        ("wat is er zoal bekend over kernenergie en klimaat", 0, "exploratory", True),
        ("Welke inspectierapporten over Dodewaard zijn openbaar?", 0, "exploratory", True),
        # deep dives
        ("Walk me through the licensing of a new reactor", 0, "deep_dive", True),
        ("Hoe werkt de periodieke veiligheidsevaluatie precies, stap voor stap?", 0, "deep_dive", True),
        ("I want to know everything about the HFR: purpose, licence, future", 0, "deep_dive", True),
        ("Analyseer het Bkse grondig", 0, "deep_dive", True),
        ("Neem me mee door een vergunningaanvraag, van aanvraag tot besluit", 0, "deep_dive", True),
        ("Licht de opbouw van de DSR toe", 0, "deep_dive", True),
        ("Wat is het doel van het Bkse, hoe is het opgebouwd en wat is de achtergrond?", 0, "deep_dive", True),
        # comparisons
        ("IAEA vs. ANVS: safety culture", 2, "comparative", True),
        ("Is de Nederlandse dosislimiet strenger dan die van Euratom?", 0, "comparative", True),
        ("To what extent does the Kernenergiewet deviate from GSR Part 1?", 1, "comparative", True),
        ("Which requirements does the IAEA set that the ANVS does not?", 2, "comparative", True),
        ("Welke regels zijn strenger, de Belgische of de Nederlandse?", 0, "comparative", True),
        ("How do the Dutch clearance levels stack up against the EU ones?", 0, "comparative", True),
        ("What changed between INSAG-10 and INSAG-12?", 0, "comparative", True),
        ("Is a dose higher than 1 mSv allowed for the public?", 0, "factual", True),  # a threshold, not a comparison
        # right for the right reason: a term or a title holding a signal word is not a signal
        ("Wat betekent defence-in-depth?", 0, "factual", True),
        ("How many levels of defence in depth does INSAG-10 distinguish?", 0, "factual", True),
        ("Which publication explains the graded approach?", 0, "factual", True),
        ("Who wrote 'Prescriptive versus performance-based regulation'?", 0, "factual", True),
        # an opening interrogative alone is weak: factual, but not sure (a model may decide)
        ("What is GSR Part 3 about?", 0, "factual", False),
        ("Wat zegt de IAEA over veiligheidscultuur?", 1, "factual", False),
    ],
)
def test_query_types_are_scored(question: str, mentioned: int, kind: str, sure: bool) -> None:
    typed = score_types(question, mentioned)
    assert (typed.kind, typed.sure) == (kind, sure), typed


def scored_route(question: str, mentioned: int) -> Route:
    """The heuristics' route of a question as the route node sees it (type, sureness, the types with a signal)."""
    typed = score_types(question, mentioned)
    return Route(query_type=typed.kind, collections=[], reason=typed.signal, confidence=typed.confidence,
                 evidence=list(typed.evidence))


@pytest.mark.parametrize(("question", "mentioned", "model", "stands"), [
    ("Welke inspectierapporten van de toezichthouder zijn openbaar?", 0, "comparative", False),  # nothing compared
    ("herzieningstermijn referentiedreiging", 0, "comparative", False),
    ("Is the HFR older than the HOR?", 0, "comparative", True),  # "older than" is a comparison signal
    ("Wat zeggen de IAEA en de ANVS over veiligheidscultuur?", 2, "comparative", True),  # two named sources
    ("Welke inspectierapporten van de toezichthouder zijn openbaar?", 0, "exploratory", True),  # other types stand
    ("herzieningstermijn referentiedreiging", 0, "deep_dive", True),
])
def test_a_model_s_comparison_needs_something_compared(question: str, mentioned: int, model: str, stands: bool
                                                       ) -> None:
    from graph.text.routing import model_type_plausible

    assert model_type_plausible(model, scored_route(question, mentioned)) is stands


@pytest.mark.parametrize(("question", "mentioned", "asks"), [
    ("Kernmateriaal tegen diefstal beschermen", 0, False),  # no signal at all: the catch-all stands, no call
    ("What is GSR Part 3 about?", 0, False),  # only the opening interrogative
    ("Kernmateriaal tegen diefstal beschermen: wat geldt er allemaal", 0, True),  # an overview signal, weak: torn
    ("Wat is er bekend over beveiliging en wat moet de exploitant doen", 0, True),  # overview against fact
    ("Walk me through the licensing of a new reactor", 0, False),  # sure: no call
])
def test_the_model_is_asked_only_when_the_heuristics_are_torn_between_types(question: str, mentioned: int,
                                                                            asks: bool) -> None:
    from graph.text.routing import asks_model

    route = scored_route(question, mentioned)
    assert asks_model(route) is asks, route


def test_a_detailed_answer_asked_for_apart_is_a_deep_dive_signal() -> None:
    assert score_types("Hoe verwerkt COVRA radioactief afval?", 0, detailed=True).kind == "deep_dive"


def _task(collection: str, query: str, *extra: str) -> ResearchTask:
    return ResearchTask(id=collection, collection=collection, query=query, label=collection, extra=list(extra))


@pytest.mark.parametrize(
    ("tasks", "tried", "left"),
    [
        ([_task("a", "q1")], {("a", "q1")}, []),  # the same query on the same collection: never again
        ([_task("a", "Q1 ")], {("a", "q1")}, []),  # case and spacing do not make a query new
        ([_task("b", "q1")], {("a", "q1")}, [("b", "q1", [])]),  # the same query elsewhere is new
        ([_task("a", "q1", "q2", "q3")], {("a", "q1")}, [("a", "q2", ["q3"])]),  # the first untried leads
        ([_task("a", "q2"), _task("a", "q2")], set(), [("a", "q2", [])]),  # once per round as well
    ],
)
def test_a_round_only_searches_what_was_not_searched(tasks, tried, left) -> None:
    assert [(t.collection, t.query, t.extra) for t in untried(tasks, frozenset(tried))] == left
    assert searches(tasks) >= {("a", "q1")} or tasks[0].collection != "a" or tasks[0].query != "q1"


@pytest.mark.parametrize(
    ("query", "language", "expanded"),
    [
        ("eisen veiligheidscultuur", "en", "eisen veiligheidscultuur requirements safety culture"),
        ("safety culture requirements", "nl", "safety culture requirements veiligheidscultuur eisen"),
        ("beveiligingsincidenten gerapporteerd", "en", "beveiligingsincidenten gerapporteerd security incident report"),
        ("veiligheidscultuur", "nl", "veiligheidscultuur"),  # already in that language
        ("Borssele", "en", "Borssele"),  # no glossary term: unchanged
    ],
)
def test_the_glossary_puts_a_query_in_a_collections_language(query: str, language: str, expanded: str) -> None:
    assert CATALOG.glossary.expand(query, language) == expanded


def test_glossary_concepts_match_across_languages() -> None:
    glossary = CATALOG.glossary
    assert glossary.concepts(analyze("a strong safety culture")) & glossary.concepts(analyze("veiligheidscultuur"))
    assert not glossary.concepts(analyze("culture of the organisation"))  # one word of a phrase is not the phrase


INSTRUCTED = [
    ("Wat zegt de IAEA over veiligheidscultuur?", "Geef een kort antwoord."),
    ("Wat zegt de IAEA over veiligheidscultuur?", "Antwoord in JSON."),
    ("Wat zegt de IAEA over veiligheidscultuur?", "In het Engels graag."),
    ("What does the IAEA say about safety culture?", "Please answer briefly."),
    ("What does the IAEA say about safety culture?", "Answer in JSON."),
    ("What does the IAEA say about safety culture?", "Use bullet points."),
    ("Wanneer vervalt de vergunning van kerncentrale Borssele?", "Antwoord in maximaal twee zinnen."),
    ("When does the Borssele licence expire?", "Answer in a table."),
]


@pytest.mark.asyncio
@pytest.mark.parametrize(("question", "instruction"), INSTRUCTED)
async def test_an_answer_instruction_does_not_change_what_is_found(bundled, question: str,  # noqa: F811
                                                                   instruction: str) -> None:
    """"X? Answer briefly." cites what "X?" cites (a brief answer may cite fewer of them), never declines."""
    _, plain_body, plain_sources = await ask(bundled, question)
    _, body, sources = await ask(bundled, f"{question} {instruction}")
    assert plain_sources and sources, body

    def titles(listed: str) -> set[str]:
        return {line.split(". ", 1)[1].split(" (")[0] for line in listed.splitlines() if line[:1].isdigit()}

    if "Engels" in instruction:  # another answer language prefers sentences in it: found, in English
        assert "Relevant passages" in body
    else:
        assert titles(sources) and titles(sources) <= titles(plain_sources)


@pytest.mark.parametrize(("question", "kind", "sides", "scope"), [
    # sources compared: one sub-agent per named collection, answered side by side
    ("Hoe verschillen IAEA en ANVS eisen voor veiligheidscultuur?", "comparative", True, ["iaea", "anvs"]),
    # things compared: one question about several names, over every collection
    ("How do Dandong and Hotan differ in size?", "comparative", False, None),
    ("Is de vergunning van Borssele strenger dan die van Dodewaard volgens de ANVS?", "comparative", False, None),
    # not a comparison
    ("Wat zegt de IAEA over veiligheidscultuur?", "factual", False, None),
])
def test_a_comparison_is_side_by_side_only_when_it_names_two_collections(question: str, kind: str, sides: bool,
                                                                         scope: list[str] | None) -> None:
    from graph.models import side_by_side
    from graph.text.routing import heuristic_route

    route = heuristic_route(question, CATALOG.collections)
    assert (route.query_type, side_by_side(route)) == (kind, sides)
    assert sorted(route.collections) == sorted(scope or CATALOG.names)  # the named sides, else every collection
