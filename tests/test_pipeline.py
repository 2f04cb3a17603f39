"""The multi-agent pipeline: routing table, paths, parallel sub-agents, corrective loop, budgets.

Graph-level tests run the real compiled LangGraph against the reference document server over HTTP and,
in LLM mode, the scripted fake upstream; no mocks.
"""

from __future__ import annotations

import asyncio
import json
import re

import pytest

from app.settings import ROOT
from graph.answer.events import AnswerDelta, Step, SubAgentStatus, Unsupported, UsageEvent
from graph.answer.prompts import Prompts
from graph.build import build_graph
from graph.clients.llm import LLMClient, LLMError
from graph.clients.mcp_client import DocumentClient
from graph.collections import Catalog, Collection, load_catalog
from graph.config import PipelineConfig
from graph.context import Context
from graph.loop import (
    Decision,
    Limits,
    Loop,
    coverage_verdict,
    decide,
    follows_links,
    lookup_tasks,
    refine,
    refines,
    unexplored,
)
from graph.models import Fact, ResearchTask, Turn, Verdict
from graph.nodes.synthesize import not_found, says_anything
from graph.runner import run_pipeline, start
from graph.text.claims import withdraw
from graph.text.routing import focus_terms, heuristic_route, is_follow_up, standalone
from tests.conftest import TORN
from tests.fakes.fake_llm import FakeLLM, Reply

COLLECTIONS = load_catalog(ROOT / "graph" / "collections.json").collections
ALL = [c.name for c in COLLECTIONS]
SEED_COMPARATIVE = "Hoe verschillen IAEA en ANVS eisen voor veiligheidscultuur?"

# (question, query type, named collections or None) — Dutch and English, the seed examples included.
# Research searches every collection, named ones first; a comparison searches the sources it names.
ROUTING_CASES = [
    (SEED_COMPARATIVE, "comparative", ["anvs", "iaea"]),
    ("Wat is IAEA GSR Part 2?", "factual", ["iaea"]),
    ("Geef een gedetailleerde uitleg van de Kernenergiewet", "deep_dive", ["wetten_overheid"]),
    ("Welke documenten gaan over veiligheidscultuur?", "exploratory", None),
    ("Wanneer vervalt de vergunning van kerncentrale Borssele?", "factual", None),
    ("Wat is de dosislimiet voor blootgestelde werknemers volgens het Bbs?", "factual", ["wetten_overheid"]),
    ("Vergelijk de CPPNM met INFCIRC/225/Rev.5", "comparative", ["security"]),
    ("Wat zijn de verschillen tussen de IAEA-normen en de Nederlandse wet voor stralingsbescherming?", "comparative",
     ["iaea", "wetten_overheid"]),
    ("Leg uit hoe de ANVS toezicht houdt op kerninstallaties", "deep_dive", ["anvs"]),
    ("Welke publicaties van de IAEA gaan over noodplanning?", "exploratory", ["iaea"]),
    ("Hoeveel eisen bevat GSR Part 2?", "factual", ["iaea"]),
    ("Wie is verantwoordelijk voor de veiligheid van een kerncentrale?", "factual", None),
    ("Wat regelt artikel 15a van de Kernenergiewet?", "factual", ["wetten_overheid"]),
    ("Hoe verhoudt het Bkse zich tot de Kernenergiewet?", "comparative", ["wetten_overheid"]),
    ("Geef een overzicht van de documenten over radioactief afval", "exploratory", None),
    ("Uitgebreide toelichting op de ANVS-verordening graag", "deep_dive", ["anvs"]),
    ("Wat zegt de IAEA over diepteverdediging?", "factual", ["iaea"]),
    ("Welke eisen stelt de wet aan ontmanteling?", "factual", ["wetten_overheid"]),
    ("Wat is het verschil tussen safety en security?", "comparative", ["security"]),
    ("Hoe verschillen de beveiligingseisen van de CPPNM en de Kernenergiewet?", "comparative",
     ["wetten_overheid", "security"]),
    ("Welke documenten beschrijven de fysieke beveiliging van kernmateriaal?", "exploratory", ["security"]),
    ("Wat is de rol van de ANVS bij een kernongeval?", "factual", ["anvs"]),
    ("Mag een vergunning voor Borssele na 2033 nog worden aangevraagd?", "factual", None),
    ("Wat houdt de periodieke veiligheidsevaluatie in?", "factual", None),
    ("Leg de tien veiligheidsprincipes van SF-1 uit", "deep_dive", ["iaea"]),
    ("What is IAEA GSR Part 3 about?", "factual", ["iaea"]),
    ("Compare the CPPNM with the Dutch Kernenergiewet", "comparative", ["wetten_overheid", "security"]),
    ("Which documents cover nuclear security culture?", "exploratory", ["security"]),
    ("Explain the IAEA safety principles in detail", "deep_dive", ["iaea"]),
    ("When does the Borssele licence expire?", "factual", None),
    ("How do ANVS and IAEA requirements on safety culture differ?", "comparative", ["anvs", "iaea"]),
    ("What does INFCIRC/225/Rev.5 say about sabotage?", "factual", ["security"]),
    ("Give an overview of the ANVS guidance documents", "exploratory", ["anvs"]),
    ("What is the dose limit for members of the public under Dutch law?", "factual", ["wetten_overheid"]),
    ("How many requirements does GSR Part 7 contain?", "factual", ["iaea"]),
    ("Who supervises nuclear installations in the Netherlands?", "factual", None),
    ("What is the difference between the CPPNM and its 2005 amendment?", "comparative", ["security"]),
    ("Provide a detailed explanation of the Bkse licensing rules", "deep_dive", ["wetten_overheid"]),
    ("List of publications on radioactive waste", "exploratory", None),
    ("IAEA versus ANVS on periodic safety review", "comparative", ["anvs", "iaea"]),
    ("Which publications describe the design basis threat?", "exploratory", None),
    ("What must a licence application under the Bkse contain?", "factual", ["wetten_overheid"]),
]


def test_routing_table_has_enough_labelled_questions() -> None:
    assert len(ROUTING_CASES) >= 40
    assert sum(1 for q, *_ in ROUTING_CASES if re.search(r"\b(wat|hoe|welke|leg|geef|wanneer|wie|mag)\b", q.lower())) >= 20


@pytest.mark.parametrize(("question", "kind", "collections"), ROUTING_CASES)
def test_heuristic_routing(question: str, kind: str, collections: list[str] | None) -> None:
    route = heuristic_route(question, COLLECTIONS)
    assert route.query_type == kind, route
    assert route.preferred == (collections or [])
    if kind == "comparative" and len(collections or []) >= 2:  # sources compared: only the named ones
        assert route.collections == collections
    else:
        assert route.collections == (collections or []) + [c for c in ALL if c not in (collections or [])]


@pytest.mark.parametrize(
    ("question", "scope"),
    [
        ("Wat zegt de ANVS over veiligheidscultuur?", ALL),  # named: first, not alone
        ("Wat zegt de ANVS over veiligheidscultuur? Zoek alleen in de ANVS-documenten.", ["anvs"]),
        ("What does the IAEA say about safety culture, only in the IAEA documents?", ["iaea"]),
        ("Alleen de IAEA: wat is veiligheidscultuur?", ["iaea"]),
        ("Hoe worden beveiligingsincidenten gerapporteerd aan de ANVS?", ["anvs", "iaea", "wetten_overheid", "security"]),
    ],
)
def test_a_named_collection_goes_first_and_only_an_explicit_restriction_narrows(question: str, scope) -> None:
    assert heuristic_route(question, COLLECTIONS).collections[: len(scope)] == scope
    assert len(heuristic_route(question, COLLECTIONS).collections) == (len(scope) if len(scope) == 1 else len(ALL))


def _task(name: str, condense: bool = True) -> ResearchTask:
    return ResearchTask(id=name, collection=name, query="q", label=name.upper(), condense=condense)


@pytest.mark.parametrize(
    ("kind", "tasks", "covered", "facts", "status"),
    [
        ("comparative", [_task("iaea"), _task("anvs")], {"iaea", "anvs"}, 2, "sufficient"),
        ("comparative", [_task("iaea"), _task("anvs")], {"iaea"}, 1, None),
        ("comparative", [_task("iaea"), _task("anvs")], set(), 0, "insufficient"),
        ("factual", [_task("iaea", False)], set(), 1, "sufficient"),
        ("factual", [_task("iaea", False)], set(), 0, "insufficient"),
    ],
)
def test_coverage_verdicts(kind, tasks, covered, facts, status) -> None:
    verdict = coverage_verdict(kind, tasks, covered, [Fact(text="f", evidence_ids=["x"])] * facts)
    assert (verdict.status if verdict else None) == status


IAEA, ANVS = _task("iaea"), _task("anvs")
LATER = ANVS.model_copy(update={"after": "iaea"})  # needs the IAEA findings first
PARTIAL = Verdict(status="partial", missing=["ANVS"])
ROOM = Limits(max_rounds=3, tokens_left=10_000, seconds_left=10)


def _next(stop: str | None, *ids: str) -> tuple[str | None, list[str]]:
    return stop, list(ids)


# (loop, verdict, query type, new evidence, failed collections, limits) -> (stop reason, next round's task ids)
LOOP_TABLE = [
    # enough evidence
    (Loop(tasks=[IAEA, ANVS]), Verdict(status="sufficient"), "comparative", 5, set(), ROOM, _next("sufficient")),
    # what is missing is researched again, deeper, with the judge's query
    (Loop(tasks=[IAEA, ANVS]), PARTIAL, "comparative", 5, set(), ROOM, _next(None, "anvs@2")),
    (Loop(round=2, tasks=[IAEA, ANVS]), PARTIAL, "comparative", 3, set(), ROOM, _next(None, "anvs@3")),
    # the round bound
    (Loop(round=3, tasks=[IAEA, ANVS]), PARTIAL, "comparative", 3, set(), ROOM, _next("max_rounds")),
    (Loop(tasks=[ANVS]), PARTIAL, "factual", 3, set(), Limits(1, 10_000, 10), _next("max_rounds")),
    # a later round that found nothing new
    (Loop(round=2, tasks=[ANVS]), PARTIAL, "comparative", 0, set(), ROOM, _next("no_new_evidence")),
    # the first round may find nothing and still refine
    (Loop(tasks=[ANVS]), Verdict(status="insufficient", missing=["ANVS"]), "factual", 0, set(), ROOM,
     _next(None, "anvs@2")),
    # nothing to refine: nothing named as missing, or only a collection whose search failed
    (Loop(tasks=[IAEA, ANVS]), Verdict(status="insufficient"), "comparative", 0, set(), ROOM, _next("nothing_left")),
    (Loop(tasks=[IAEA, ANVS]), PARTIAL, "comparative", 2, {"anvs"}, ROOM, _next("nothing_left")),
    # token or time budget spent
    (Loop(tasks=[IAEA, ANVS]), PARTIAL, "comparative", 5, set(), Limits(3, 0, 10), _next("budget")),
    (Loop(tasks=[IAEA, ANVS]), PARTIAL, "comparative", 5, set(), Limits(3, 10_000, -1), _next("budget")),
    # sub-questions waiting on a dependency run before sufficiency or a lack of refinements stops research ...
    (Loop(tasks=[IAEA], pending=[LATER]), Verdict(status="sufficient"), "comparative", 2, set(), ROOM,
     _next(None, "anvs")),
    (Loop(tasks=[IAEA], pending=[LATER]), Verdict(status="insufficient"), "comparative", 0, set(), ROOM,
     _next(None, "anvs")),
    (Loop(tasks=[IAEA], pending=[LATER]), Verdict(status="partial", missing=["IAEA"]), "comparative", 2, set(), ROOM,
     _next(None, "anvs", "iaea@2")),
    (Loop(tasks=[IAEA], pending=[LATER]), Verdict(status="sufficient"), "comparative", 2, set(), Limits(1, 0, 0),
     _next(None, "anvs")),
    # ... but not past a bound when research is still short
    (Loop(tasks=[IAEA], pending=[LATER]), Verdict(status="partial", missing=["IAEA"]), "comparative", 2, set(),
     Limits(1, 10_000, 10), _next("max_rounds")),
    (Loop(tasks=[IAEA], pending=[LATER]), Verdict(status="partial", missing=["IAEA"]), "comparative", 2, set(),
     Limits(3, 0, 10), _next("budget")),
    # a deep dive reads one document: no further rounds, whatever the verdict
    (Loop(), Verdict(status="sufficient"), "deep_dive", 9, set(), ROOM, _next("sufficient")),
    (Loop(), Verdict(status="insufficient", missing=["x"]), "deep_dive", 0, set(), ROOM, _next("deep_dive")),
]


@pytest.mark.parametrize(("loop", "verdict", "kind", "new", "failed", "limits", "expected"), LOOP_TABLE)
def test_loop_decisions(loop, verdict, kind, new, failed, limits, expected) -> None:
    decision = decide(loop, verdict, kind=kind, new_evidence=new, failed=failed, limits=limits)
    assert (decision.stop, [t.id for t in decision.tasks]) == expected
    assert decision.stop is None or not decision.tasks  # stopping never carries tasks, going on always does
    assert decision.stop is not None or decision.tasks


NOT_FOUND_TABLE = [
    # (things no passage names, verdict's missing sources, how research stopped) -> the one not-found line's items
    ([], [], "sufficient", []),
    (["Miskatonic University"], [], "sufficient", ["Miskatonic University"]),
    ([], ["ANVS"], "max_rounds", ["ANVS"]),
    ([], ["ANVS"], "sufficient", []),  # a source the judge missed earlier, found in the end
    (["Miskatonic University"], ["ANVS"], "nothing_left", ["Miskatonic University", "ANVS"]),
    (["ANVS"], ["ANVS"], "budget", ["ANVS"]),
]


@pytest.mark.parametrize(("unfound", "missing", "stop", "expected"), NOT_FOUND_TABLE)
def test_one_not_found_line(unfound, missing, stop, expected) -> None:
    loop = Loop(verdict=Verdict(status="partial", missing=missing), stop=stop)
    assert not_found(unfound, loop) == expected


def test_loop_after_a_decision() -> None:
    loop = Loop(tasks=[IAEA, ANVS], evidence_seen=0)
    verdict = Verdict(status="partial", missing=["ANVS"])
    nxt = loop.after(verdict, Decision(None, [ANVS]), evidence_seen=7)
    assert (nxt.round, nxt.tasks, nxt.pending, nxt.evidence_seen, nxt.verdict, nxt.stop) == (2, [ANVS], [], 7, verdict, None)
    done = nxt.after(verdict, Decision("max_rounds"), evidence_seen=9)
    assert (done.round, done.stop, done.verdict) == (2, "max_rounds", verdict)


def test_refine_researches_only_what_is_missing() -> None:
    tasks = [_task("iaea"), _task("anvs")]
    nxt = refine(tasks, Verdict(status="partial", missing=["ANVS"], queries={"anvs": "ANVS leidraad cultuur"}), 1)
    assert [(t.id, t.query, t.depth) for t in nxt] == [("anvs@2", "ANVS leidraad cultuur", 2)]


REFINES_TABLE = [  # (verdict, task researched again): the judge builds other wordings only when one is
    (Verdict(status="sufficient"), False),
    (Verdict(status="partial", missing=["IAEA"]), False),
    (Verdict(status="partial", missing=["ANVS"]), True),
    (Verdict(status="partial", queries={"anvs": "ANVS leidraad cultuur"}), True),
    (Verdict(status="insufficient", missing=["ANVS"], queries={"iaea": "IAEA"}), True),
]


@pytest.mark.parametrize(("verdict", "expected"), REFINES_TABLE)
def test_refines_is_what_refine_takes(verdict, expected) -> None:
    task = _task("anvs")
    assert refines(task, verdict) is expected
    assert bool(refine([task], verdict, 1)) is expected


def test_follow_up_rewrite_and_focus_terms() -> None:
    assert is_follow_up("En wat zegt de wet daarover?", True)
    assert not is_follow_up("En wat zegt de wet daarover?", False)
    assert not is_follow_up("Wat is de dosislimiet voor werknemers volgens het Bbs?", True)
    rewritten = standalone("En wat zegt de wet daarover?", SEED_COMPARATIVE, COLLECTIONS)
    assert "veiligheidscultuur" in rewritten and "wet" in rewritten
    assert heuristic_route(rewritten, COLLECTIONS).preferred == ["wetten_overheid"]
    assert focus_terms("Welke documenten gaan over veiligheidscultuur?", COLLECTIONS) == "veiligheidscultuur"


# ------------------------------------------------------------------ graph runs over real HTTP

def _context(docs: DocumentClient, llm: LLMClient | None = None, collections: list[Collection] | None = None,
             **config) -> Context:
    return Context(llm=llm, docs=docs, catalog=Catalog(collections or COLLECTIONS), prompts=Prompts(ROOT / "prompts"),
                   config=PipelineConfig(**config))


async def _run(question: str, ctx: Context, history: list[Turn] | None = None, concurrency: int = 8):
    turns = (history or []) + [Turn(role="user", content=question)]
    state, request = start(turns, ctx)
    events = [e async for e in run_pipeline(build_graph(), state, request, max_concurrency=concurrency)]
    steps = [e.text for e in events if isinstance(e, Step)]
    answer = "".join(e.text for e in events if isinstance(e, AnswerDelta))
    calls = sum(e.calls for e in events if isinstance(e, UsageEvent))
    return events, steps, answer, calls


@pytest.fixture
async def docs(docserver_url: str):
    client = DocumentClient(docserver_url, timeout_s=10, display_names={c.name: c.display_name for c in COLLECTIONS})
    yield client
    await client.aclose()


def _started(events) -> list[str]:
    return [e.agent for e in events if isinstance(e, SubAgentStatus) and e.status == "started"]


@pytest.mark.asyncio
@pytest.mark.parametrize(
    ("question", "agents"),
    [
        (SEED_COMPARATIVE, 2),
        # every collection is searched, the named one first; then the names its best passages give are looked up
        ("Wat is IAEA GSR Part 2?", 8),
        ("Wanneer vervalt de vergunning van kerncentrale Borssele?", 4),
        ("Compare the CPPNM with the Dutch Kernenergiewet", 2),
        ("Geef een gedetailleerde uitleg van de Kernenergiewet", 0),  # deep dive reads a document instead
    ],
)
async def test_fan_out_per_question_offline(docs: DocumentClient, question: str, agents: int) -> None:
    events, steps, answer, calls = await _run(question, _context(docs))
    assert len(_started(events)) == agents
    assert calls == 0 and "[1]" in answer


@pytest.mark.asyncio
async def test_comparative_offline_interleaves_sub_agents_and_cites_both(docs: DocumentClient) -> None:
    events, steps, answer, _ = await _run(SEED_COMPARATIVE, _context(docs))
    order = [(e.agent, e.status) for e in events if isinstance(e, SubAgentStatus)]
    assert order.index(("IAEA", "started")) < order.index(("ANVS", "done"))
    assert order.index(("ANVS", "started")) < order.index(("IAEA", "done"))
    assert "**IAEA**" in answer and "**ANVS**" in answer
    sources = answer.split("**Bronnen**")[1]
    assert "(IAEA" in sources and "(ANVS" in sources
    assert any(s.startswith("Deelvragen:") for s in steps)


@pytest.mark.asyncio
async def test_no_graph_step_leaves_the_event_loop(docs: DocumentClient, monkeypatch: pytest.MonkeyPatch) -> None:
    """LangGraph runs a sync node or path function in the thread pool: a thread hop per superstep that, under load,
    waits for the interpreter lock. Every question type's path is run here with the loop's executor recorded."""
    loop = asyncio.get_running_loop()
    submitted: list[object] = []
    real = loop.run_in_executor

    def recording(executor, func, *args):
        submitted.append(func)
        return real(executor, func, *args)

    monkeypatch.setattr(loop, "run_in_executor", recording)
    for question in (SEED_COMPARATIVE, "Wanneer vervalt de vergunning van kerncentrale Borssele?",
                     "Welke documenten gaan over veiligheidscultuur?", "Geef een gedetailleerde uitleg van de Kernenergiewet"):
        _, _, answer, _ = await _run(question, _context(docs))
        assert "[1]" in answer
    assert submitted == []


@pytest.mark.asyncio
async def test_deep_dive_and_exploratory_paths_offline(docs: DocumentClient) -> None:
    _, steps, answer, _ = await _run("Geef een gedetailleerde uitleg van de Kernenergiewet", _context(docs))
    assert any(s.startswith("Document lezen: Kernenergiewet") for s in steps)
    assert "Kernenergiewet" in answer
    _, steps, answer, _ = await _run("Welke documenten gaan over veiligheidscultuur?", _context(docs))
    assert any("documenten" in s for s in steps)
    assert "Relevante documenten:" in answer and "INSAG-4" in answer


@pytest.mark.asyncio
async def test_failing_sub_agent_becomes_a_gap(docs: DocumentClient) -> None:
    collections = COLLECTIONS + [Collection(name="verdwenen", display_name="Verdwenen", keywords=["verdwenen"])]
    question = "Hoe verschillen IAEA en Verdwenen eisen voor veiligheidscultuur?"
    events, steps, answer, _ = await _run(question, _context(docs, collections=collections))
    failed = [e for e in events if isinstance(e, SubAgentStatus) and e.status == "failed"]
    assert [e.agent for e in failed] == ["Verdwenen"]
    assert "**IAEA**" in answer or "(IAEA" in answer  # the other sub-agent's facts are still used
    assert "Verdwenen kon niet worden doorzocht" in answer


@pytest.mark.asyncio
async def test_follow_up_is_rewritten_offline(docs: DocumentClient) -> None:
    history = [Turn(role="user", content=SEED_COMPARATIVE), Turn(role="assistant", content="...")]
    _, steps, answer, _ = await _run("En wat zegt de wet daarover?", _context(docs), history)
    assert any(s.startswith("Vervolgvraag gelezen als:") and "veiligheidscultuur" in s for s in steps)
    assert any(s.startswith("Collecties: Wetten,") for s in steps)  # searched first, not alone


# ------------------------------------------------------------------ LLM mode budgets and loop

def _collections_in(prompt_text: str) -> list[str]:
    return re.findall(r"^- (\w+):", prompt_text, re.M)


def _decomposition(body: dict) -> str:
    prompt = body["messages"][-1]["content"]
    return json.dumps({"sub_questions": [{"collection": c, "query": f"{c} veiligheidscultuur eisen"}
                                         for c in _collections_in(prompt.split("Vraag:")[0])]})


def _script(fake: FakeLLM, *, condense: Reply | None = None, judge: Reply | None = None) -> None:
    fake.when_contains("Splits de vraag op in deelvragen", Reply(text=_decomposition))
    fake.when_contains("Je bent een onderzoeksagent", condense or Reply(
        text=json.dumps({"facts": [{"fact": "Veiligheidscultuur staat voorop.", "sources": [1]}]}), ttft_s=0.2))
    fake.when_contains("Beoordeel of de kernfeiten", judge or Reply(text='{"status": "sufficient", "missing": []}'))
    fake.when_contains("Antwoord uitsluitend met JSON", Reply(
        text=json.dumps({"facts": [{"fact": "Feit.", "sources": [1]}]})))
    fake.when_contains("Je bent NEO NL", Reply(text="IAEA zegt dit [1] en ANVS dat [2]. Onbekend [42]."))


@pytest.fixture
async def llm(fake_llm: FakeLLM):
    client = LLMClient(fake_llm.base_url, model="big", fast_model="small", timeout_s=5, max_retries=0)
    yield client
    await client.aclose()


@pytest.mark.asyncio
async def test_seed_comparative_in_llm_mode_runs_sub_agents_in_parallel(docs, llm, fake_llm: FakeLLM) -> None:
    _script(fake_llm)
    events, steps, answer, calls = await _run(SEED_COMPARATIVE, _context(docs, llm, model_decompose=True, model_condense=True))
    assert calls == fake_llm.calls <= 6  # decompose, 2 condense, then each side and the contrast
    sides = [r["messages"][-1]["content"] for r in fake_llm.requests if "Bronnen van " in r["messages"][-1]["content"]]
    assert len(sides) == 2 and all("Kernfeiten:\n- " in p and "Veiligheidscultuur staat voorop." in p for p in sides)
    assert fake_llm.peak_in_flight >= 2  # both condense calls were in flight at the same time
    assert "[1]" in answer and "[2]" in answer and "[42]" not in answer
    assert "Beoordeling: voldoende" in steps  # decided by coverage: no judging call
    assert not any("Beoordeel" in r["messages"][-1]["content"] for r in fake_llm.requests)


@pytest.mark.asyncio
async def test_comparative_over_four_collections_stays_within_six_calls(docs, llm, fake_llm: FakeLLM) -> None:
    _script(fake_llm)
    question = "Hoe verschillen ANVS, IAEA, de wet en security eisen voor beveiliging?"
    events, steps, answer, calls = await _run(question, _context(docs, llm), concurrency=4)
    assert len(_started(events)) == 4  # four sub-agents search in parallel
    assert fake_llm.calls == calls == 5  # one short call per side, then the contrast
    assert all(f"**{name}**" in answer for name in ("ANVS", "IAEA", "Wetten", "Security"))


@pytest.mark.asyncio
async def test_comparison_sides_see_only_their_own_passages(docs, llm, fake_llm: FakeLLM) -> None:
    _script(fake_llm)
    events, steps, answer, calls = await _run(SEED_COMPARATIVE, _context(docs, llm))
    prompts = [r["messages"][-1]["content"] for r in fake_llm.requests]
    assert calls == 3 and not any("Splits de vraag" in p or "onderzoeksagent" in p for p in prompts)
    side = {name: next(p for p in prompts if f"Bronnen van {name}:" in p) for name in ("ANVS", "IAEA")}
    assert "] ANVS |" in side["ANVS"] and "] IAEA |" not in side["ANVS"]
    assert "] IAEA |" in side["IAEA"] and "] ANVS |" not in side["IAEA"]
    contrast = prompts[-1]
    assert contrast.startswith("Vraag:") and "Wat elke organisatie zegt:" in contrast
    assert "ANVS: IAEA zegt dit" in contrast  # each side's text once, without the heading the service wrote
    assert answer.index("**ANVS**") < answer.index("**IAEA**") < answer.index("**Verschillen en overeenkomsten**")


@pytest.mark.asyncio
async def test_loop_stops_after_max_iterations_when_never_sufficient(docs, llm, fake_llm: FakeLLM) -> None:
    nothing = Reply(text='{"facts": []}')
    _script(fake_llm, condense=nothing, judge=Reply(text='{"status": "insufficient", "missing": []}'))
    fake_llm.reset()
    fake_llm.when_contains("Splits de vraag op in deelvragen", Reply(text=_decomposition))
    fake_llm.when_contains("Bron: ANVS\n", nothing)
    fake_llm.when_contains("Je bent een onderzoeksagent", Reply(
        text=json.dumps({"facts": [{"fact": "IAEA-feit.", "sources": [1]}]})))
    queries = iter(["ANVS veiligheidscultuur", "ANVS cultuur leiderschap", "ANVS cultuur toezicht"])
    fake_llm.when_contains("Beoordeel of de kernfeiten", Reply(text=lambda _: json.dumps(
        {"status": "partial", "missing": [{"source": "ANVS", "aspect": "x", "query": next(queries)}]})))
    fake_llm.when_contains("Je bent NEO NL", Reply(text="Alleen IAEA [1]."))
    events, steps, answer, calls = await _run(SEED_COMPARATIVE, _context(docs, llm, max_iterations=3, model_decompose=True, model_condense=True))
    rounds = [s for s in steps if s.startswith("Aanvullend onderzoek")]
    assert len(rounds) == 2  # rounds 2 and 3, then the bound
    assert "Onderzoek gestopt: maximum aantal rondes bereikt" in steps
    assert "Niet (volledig) gevonden in de bronnen: ANVS" in answer
    # budget: 6 for the first round (decompose, 2 condense, judge, synth) + at most 2 per extra round
    assert calls <= 5 + 2 * 2


def _anvs_side_finds_nothing(fake: FakeLLM, status: str, query: str) -> None:
    """A comparison whose ANVS sub-agent condenses nothing, and a judge that asks for `query` on the ANVS side."""
    fake.when_contains("Splits de vraag op in deelvragen", Reply(text=_decomposition))
    fake.when_contains("Bron: ANVS\n", Reply(text='{"facts": []}'))
    fake.when_contains("Je bent een onderzoeksagent", Reply(
        text=json.dumps({"facts": [{"fact": "IAEA-feit.", "sources": [1]}]})))
    fake.when_contains("Beoordeel of de kernfeiten", Reply(text=json.dumps(
        {"status": status, "missing": [{"source": "ANVS", "aspect": "x", "query": query}]})))
    fake.when_contains("Je bent NEO NL", Reply(text="Alleen IAEA [1]."))


@pytest.mark.asyncio
async def test_loop_stops_when_a_retry_brings_no_new_evidence(docs, llm, fake_llm: FakeLLM) -> None:
    _anvs_side_finds_nothing(fake_llm, "insufficient", "eisen anvs veiligheidscultuur")
    # the same words reordered, top_k=10: the first round already took every hit, so the retry finds nothing new
    events, steps, answer, calls = await _run(SEED_COMPARATIVE, _context(docs, llm, top_k=10, max_iterations=3, model_decompose=True, model_condense=True))
    assert "Onderzoek gestopt: geen nieuwe passages gevonden" in steps
    assert len([s for s in steps if s.startswith("Aanvullend onderzoek")]) == 1


@pytest.mark.asyncio
async def test_a_correction_round_never_repeats_a_query_on_a_collection(docs, llm, fake_llm: FakeLLM) -> None:
    """A judge that keeps proposing the same refined query gets it searched once: the next round would repeat
    it, so research stops with nothing new left to try instead."""
    _anvs_side_finds_nothing(fake_llm, "partial", "ANVS veiligheidscultuur")
    _, steps, _, _ = await _run(SEED_COMPARATIVE, _context(docs, llm, max_iterations=3, model_decompose=True,
                                                            model_condense=True))
    searches = [s for s in steps if "zoeken naar" in s]
    assert len(searches) == len(set(searches)) == 3  # two sides, then the refined query once
    assert "Onderzoek gestopt: niets meer om aanvullend te onderzoeken" in steps


@pytest.mark.asyncio
async def test_a_correction_round_on_an_english_collection_searches_the_models_english_query(
        docs, llm, fake_llm: FakeLLM) -> None:
    """Issue 16: with a model, the query of a correction round on a collection in another language than the
    question is written by the fast model in that language (one call, only for a round that runs); the query it
    replaces is still searched after it. The judge and decomposition prompts name each source's language."""
    fake_llm.when_contains("Vertaal elke zoekvraag hieronder", Reply(text='{"queries": ["IAEA safety culture leadership"]}'))
    fake_llm.when_contains("Splits de vraag op in deelvragen", Reply(text=_decomposition))
    fake_llm.when_contains("Bron: IAEA\n", Reply(text='{"facts": []}'))
    fake_llm.when_contains("Je bent een onderzoeksagent", Reply(
        text=json.dumps({"facts": [{"fact": "ANVS-feit.", "sources": [1]}]})))
    fake_llm.when_contains("Beoordeel of de kernfeiten", Reply(text=json.dumps(
        {"status": "partial", "missing": [{"source": "IAEA (Engels)", "aspect": "x",
                                           "query": "IAEA veiligheidscultuur leiderschap"}]})), times=1)
    fake_llm.when_contains("Beoordeel of de kernfeiten", Reply(text='{"status": "sufficient", "missing": []}'))
    fake_llm.when_contains("Je bent NEO NL", Reply(text="Alleen ANVS [1]."))
    _, steps, _, _ = await _run(SEED_COMPARATIVE, _context(docs, llm, max_iterations=2, model_decompose=True,
                                                            model_condense=True))
    prompts = [r["messages"][-1]["content"] for r in fake_llm.requests]
    assert "- iaea: IAEA (Engels) —" in next(p for p in prompts if "Splits de vraag" in p)
    assert "IAEA (Engels)" in next(p for p in prompts if "Beoordeel of de kernfeiten" in p)
    translate = [p for p in prompts if "Vertaal elke zoekvraag hieronder" in p]
    assert len(translate) == 1 and "het Engels" in translate[0] and "- IAEA veiligheidscultuur leiderschap" in translate[0]
    assert "IAEA: zoekvraag in het Engels geschreven door het taalmodel: “IAEA safety culture leadership”" in steps
    searches = [s for s in steps if s.startswith("IAEA: zoeken naar")]
    assert len(searches) == 2  # the model's query first, the judge's after it, in the same round
    assert searches[1].startswith("IAEA: zoeken naar “IAEA safety culture leadership · IAEA veiligheidscultuur leiderschap")


@pytest.mark.asyncio
async def test_no_translation_without_a_round_or_for_a_collection_in_the_questions_language(
        docs, llm, fake_llm: FakeLLM) -> None:
    _anvs_side_finds_nothing(fake_llm, "partial", "ANVS veiligheidscultuur leiderschap")  # ANVS is Dutch
    await _run(SEED_COMPARATIVE, _context(docs, llm, max_iterations=2, model_decompose=True, model_condense=True))
    assert not any("Vertaal elke zoekvraag" in r["messages"][-1]["content"] for r in fake_llm.requests)


def script_route(fake_llm: FakeLLM, route: Reply) -> None:
    """The router model's reply, one fact and a one-line answer."""
    fake_llm.when_contains("Classificeer de vraag", route)
    fake_llm.when_contains("Antwoord uitsluitend met JSON", Reply(text=json.dumps({"facts": [{"fact": "F.", "sources": [1]}]})))
    fake_llm.when_contains("Je bent NEO NL", Reply(text="Antwoord [1]."))


@pytest.mark.asyncio
async def test_bad_router_json_falls_back_to_all_collections(docs, llm, fake_llm: FakeLLM) -> None:
    script_route(fake_llm, Reply(text="zeker, iaea!"))
    _, steps, answer, calls = await _run("Kernenergie en veiligheid in Nederland", _context(docs, llm, model_route=True))
    assert "Collecties: ANVS, IAEA, Wetten, Security" in steps
    assert calls <= 4  # route, summarize, synthesize; a second summary only if a second hop finds something


@pytest.mark.asyncio
async def test_router_model_is_used_when_ambiguous(docs, llm, fake_llm: FakeLLM) -> None:
    script_route(fake_llm, Reply(text='{"query_type": "factual", "collections": ["security"]}'))
    _, steps, _, _ = await _run(TORN, _context(docs, llm, model_route=True))
    assert "Vraagtype: feitelijke vraag (bepaald door het taalmodel)" in steps
    assert "Collecties: Security, ANVS, IAEA, Wetten" in steps  # the model's collection first, not alone


@pytest.mark.asyncio
async def test_the_router_model_is_not_asked_by_default(docs, llm, fake_llm: FakeLLM) -> None:
    """MODEL_ROUTE off (the default): a question the heuristics are torn about keeps their best guess, no call."""
    script_route(fake_llm, Reply(text='{"query_type": "factual", "collections": ["security"]}'))
    _, steps, _, _ = await _run(TORN, _context(docs, llm))
    assert "Vraagtype: verkennende vraag (geen duidelijk signaal)" in steps
    assert not any("Classificeer de vraag" in r["messages"][-1]["content"] for r in fake_llm.requests)


@pytest.mark.asyncio
async def test_no_model_call_for_a_question_without_a_signal_of_another_type(docs, llm, fake_llm: FakeLLM) -> None:
    script_route(fake_llm, Reply(text='{"query_type": "deep_dive", "collections": []}'))
    _, steps, _, _ = await _run("Kernmateriaal tegen diefstal beschermen", _context(docs, llm, model_route=True))
    assert "Vraagtype: feitelijke vraag (geen duidelijk signaal)" in steps  # the catch-all, not sure
    assert not any("Classificeer de vraag" in r["messages"][-1]["content"] for r in fake_llm.requests)


@pytest.mark.asyncio
async def test_a_model_s_comparison_of_nothing_is_not_taken(docs, llm, fake_llm: FakeLLM) -> None:
    script_route(fake_llm, Reply(text='{"query_type": "comparative", "collections": []}'))
    _, steps, _, _ = await _run(TORN, _context(docs, llm, model_route=True))
    assert "Het taalmodel koos: vergelijkende vraag, maar de vraag vergelijkt niets; de heuristiek beslist" in steps
    assert "Vraagtype: verkennende vraag (geen duidelijk signaal)" in steps  # the heuristics' best guess
    assert not any("Deelvragen" in s or "Vergelijking" in s for s in steps)


@pytest.mark.asyncio
async def test_claim_check_flags_unsupported_legal_claims(docs, llm, fake_llm: FakeLLM) -> None:
    fake_llm.when_contains("Antwoord uitsluitend met JSON", Reply(text=json.dumps({"facts": [{"fact": "F.", "sources": [1]}]})))
    fake_llm.when_contains("Je bent NEO NL", Reply(
        text="De vergunning van Borssele vervalt op 31 december 2033 [1]. De exploitant betaalt dan een boete van 99 miljoen euro [1]."))
    events, steps, answer, _ = await _run("Wanneer vervalt de vergunning van kerncentrale Borssele?", _context(docs, llm))
    assert "Claimcontrole: 1 bewering(en) zonder steun in de bronnen" in steps
    withdrawn = next(e for e in events if isinstance(e, Unsupported))
    assert withdrawn.sentences == ("De exploitant betaalt dan een boete van 99 miljoen euro [1].",)
    # the stream has sent the sentence already: the correction that withdraws it comes as its own event, after the
    # answer text (the HTTP edge streams it, or leaves sentence and correction out of a whole answer)
    assert "Ingetrokken:** ~~De exploitant betaalt dan een boete van 99 miljoen euro [1].~~" in withdrawn.correction
    assert answer.index("99 miljoen") < answer.index("**Bronnen**") and "Ingetrokken" not in answer
    assert withdraw(answer, withdrawn.sentences, withdrawn.correction).startswith(
        "De vergunning van Borssele vervalt op 31 december 2033 [1].\n\n")


@pytest.mark.asyncio
async def test_an_answer_withdrawn_in_full_is_followed_by_the_key_facts(docs, llm, fake_llm: FakeLLM) -> None:
    # what the local 1.5B model answered over the Dutch law texts (the passage says 31 december 2033)
    fake_llm.when_contains("Je bent NEO NL", Reply(text="De vergunning van kerncentrale Borssele vervalt in 2034. [1]"))
    events, steps, answer, _ = await _run("Wanneer vervalt de vergunning van kerncentrale Borssele?", _context(docs, llm))
    withdrawn = next(e for e in events if isinstance(e, Unsupported))
    assert withdrawn.sentences == ("De vergunning van kerncentrale Borssele vervalt in 2034. [1]",)
    assert "Niets van wat het taalmodel schreef steunt op de bronnen" in " ".join(steps)
    whole = withdraw(answer, withdrawn.sentences, withdrawn.correction)  # what a non-streamed answer carries
    assert whole.startswith("*Wat het taalmodel schreef, staat niet in de bronnen")
    assert re.search(r"31 december 2033\W*\[\d\]", whole) and "2034" not in whole
    assert whole.index("2033") < whole.index("**Bronnen**")


@pytest.mark.parametrize("text, says", [
    ("", False),
    ("\n\n", False),
    ("**ANVS**\n\n**IAEA**\n\n", False),  # a comparison's headings, every side withdrawn
    ("### **Verschil**:\n[1] [2]", False),
    ("De vergunning vervalt in 2033 [1].", True),
    ("**De vergunning vervalt in 2033.**", True),  # a sentence in bold is no heading
    ("De **vergunning** vervalt [1].", True),
    ("The licence expires in 2033 [1].", True),
])
def test_says_anything(text: str, says: bool) -> None:
    assert says_anything(text) is says


def script_dependent(fake_llm: FakeLLM) -> None:
    """The seed comparison planned as two sub-questions, the ANVS one waiting for what the IAEA one finds."""
    plan = {"sub_questions": [{"collection": "iaea", "query": "INSAG-4 veiligheidscultuur definitie"},
                              {"collection": "anvs", "query": "ANVS verwachtingen veiligheidscultuur", "after": 1}]}
    fake_llm.when_contains("Splits de vraag op in deelvragen", Reply(text=json.dumps(plan)))
    fake_llm.when_contains("Je bent een onderzoeksagent", Reply(
        text=json.dumps({"facts": [{"fact": "INSAG-4 definieert veiligheidscultuur in 1991.", "sources": [1]}]})))
    fake_llm.when_contains("Je bent NEO NL", Reply(text="Vergelijking [1] [2]."))


@pytest.mark.asyncio
async def test_dependent_sub_question_runs_after_its_prerequisite(docs, llm, fake_llm: FakeLLM) -> None:
    script_dependent(fake_llm)
    events, steps, answer, calls = await _run(SEED_COMPARATIVE, _context(docs, llm, model_decompose=True, model_condense=True))
    order = [(e.agent, e.status) for e in events if isinstance(e, SubAgentStatus)]
    assert order.index(("IAEA", "done")) < order.index(("ANVS", "started"))  # sequential, not parallel
    dependent = next(s for s in steps if s.startswith("Vervolgdeelvragen"))
    assert "ANVS verwachtingen veiligheidscultuur" in dependent
    condense_prompts = [r["messages"][-1]["content"] for r in fake_llm.requests if "onderzoeksagent" in r["messages"][-1]["content"]]
    # the ANVS agent's sub-question carries what the IAEA agent found
    assert any("Bron: ANVS\n" in p and "INSAG-4" in p.split("Bron: ANVS")[1].split("Oorspronkelijke vraag")[0]
               for p in condense_prompts)
    assert calls == fake_llm.calls <= 6  # decompose, two sub-agents, synthesis (no judging call needed)


@pytest.mark.parametrize(("question", "kind", "collections"), ROUTING_CASES)
def test_the_router_is_sure_only_with_a_signal_beyond_an_opening_interrogative(question: str, kind: str,
                                                                                collections) -> None:
    """In LLM mode the fast model classifies what the heuristics are not sure of. A question whose only signal
    is its opening interrogative ("What is X about?") is not sure; every other labelled question is, and is
    routed without a model call."""
    from graph.text.routing import is_ambiguous

    route = heuristic_route(question, COLLECTIONS)
    assert is_ambiguous(route) == (route.reason in ("vraagwoord", "")), route


@pytest.mark.asyncio
@pytest.mark.parametrize("stream", [False, True], ids=["complete", "stream"])
async def test_upstream_failure_names_its_real_cause(fake_llm: FakeLLM, stream: bool) -> None:
    """The aiohttp transport re-raises a refused connection as httpx's `ConnectTimeout`: the error (which the
    log and the degraded answer carry) must name what happened instead."""
    fake_llm.stop()  # nothing listens on its port any more
    client = LLMClient(fake_llm.base_url, model="big", timeout_s=5, max_retries=0)
    messages = [{"role": "user", "content": "hoi"}]
    try:
        with pytest.raises(LLMError) as failed:
            if stream:
                async for _ in client.stream(messages):
                    pass
            else:
                await client.complete(messages)
    finally:
        await client.aclose()
    assert "ClientConnectorError" in str(failed.value) and "Timeout" not in str(failed.value)
    assert failed.value.retryable


@pytest.mark.parametrize(
    ("reply", "missing", "queries"),
    [
        ('{"status": "partial", "missing": [{"source": "ANVS", "aspect": "x", "query": "ANVS cultuur"}]}',
         ["ANVS"], {"anvs": "ANVS cultuur"}),
        ('Hier is mijn oordeel: {"status": "partial", "missing": ["anvs", "Wetten"]} klaar.', ["ANVS"], {}),
        ('```json\n{"status": "sufficient", "missing": []}\n```', [], {}),
    ],
)
def test_judge_reply_names_only_research_tasks(reply: str, missing: list[str], queries: dict[str, str]) -> None:
    from graph.nodes.judge import JudgeReply, accept_verdict
    from graph.structured import read_json

    verdict = accept_verdict(read_json(reply, JudgeReply), [IAEA, ANVS])
    assert (verdict.missing, verdict.queries, verdict.judged_by) == (missing, queries, "llm")


@pytest.mark.parametrize("reply", ["zeker, iaea!", '{"status": "maybe"}', '{"status": "partial", "missing": [{"query": 1}]}',
                                   '{"status": "partial"'])
def test_unusable_replies_are_rejected(reply: str) -> None:
    from graph.nodes.judge import JudgeReply
    from graph.structured import read_json

    with pytest.raises(ValueError):
        read_json(reply, JudgeReply)


@pytest.mark.asyncio
async def test_llm_mode_declines_without_a_summary_call_when_no_passage_covers_the_question(
        docs, llm, fake_llm: FakeLLM) -> None:
    """The decline rule decides before the model is asked: a small model given near misses answers from them."""
    fake_llm.when_contains("Classificeer de vraag", Reply(text='{"query_type": "factual", "collections": ["anvs"]}'))
    fake_llm.when_contains("Antwoord uitsluitend met JSON", Reply(text=json.dumps({"facts": [{"fact": "F.", "sources": [1]}]})))
    fake_llm.when_contains("Je bent NEO NL", Reply(text="Een verzonnen prijs [1]."))
    _, steps, answer, _ = await _run("Wat is de actuele spotprijs van uranium per pond?", _context(docs, llm))
    prompts = [r["messages"][-1]["content"] for r in fake_llm.requests]
    prompts = [p for p in prompts if "Classificeer de vraag" not in p]  # the router's call (no clear signal)
    assert not any("Antwoord uitsluitend met JSON" in p or "Je bent NEO NL" in p for p in prompts)
    assert "verzonnen" not in answer and "geen passages gevonden" in answer


@pytest.mark.parametrize(("kind", "side_by_side", "round_no", "expected"), [
    ("factual", False, 1, True),  # "Where is the stadium the 1964 Georgia Tech team played at?" / "Wat is GSR Part 2?"
    ("comparative", False, 1, True),  # two named things ("Wie is ouder, A of B?")
    ("comparative", True, 1, False),  # sources side by side: each sub-agent reads its own collection
    ("exploratory", False, 1, False),
    ("deep_dive", False, 1, False),
    ("factual", False, 2, False),  # once: the lookups are the second round
])
def test_links_are_followed_once_for_questions_about_things(kind: str, side_by_side: bool, round_no: int,
                                                             expected: bool) -> None:
    assert follows_links(kind, side_by_side, round_no) is expected


@pytest.mark.parametrize(("found", "failed", "expected"), [
    ([("Harrison Ford", "w3", "hf")], set(), [("w3", ["Harrison Ford"], ["hf"])]),  # on its own collection only
    ([("Kernenergiewet", "wetten", "kew"), ("Wet milieubeheer", "wetten", "wm")], set(),
     [("wetten", ["Kernenergiewet", "Wet milieubeheer"], ["kew", "wm"])]),  # one task per collection
    ([("Kernenergiewet", "wetten", "kew")], {"wetten"}, []),  # not on a collection whose search failed
    ([("Styx", "elsewhere", "styx")], set(), []),  # nor on one this round did not search
    ([], set(), []),
])
def test_a_title_found_is_searched_on_its_collection_with_its_document_first(
        found: list[tuple[str, str, str]], failed: set[str], expected: list[tuple[str, list[str], list[str]]]) -> None:
    tasks = [_task(name, condense=False) for name in ("w1", "w3", "wetten")] + [_task("side")]
    out = lookup_tasks(tasks, found, 1, failed)
    assert [(t.collection, t.queries, t.doc_ids) for t in out] == expected
    assert all(not t.condense and t.id.endswith("@2=") for t in out)


@pytest.mark.parametrize(("status", "expected"), [
    ("sufficient", "partial"), ("partial", "partial"), ("insufficient", "insufficient")])
def test_unexplored_links_keep_a_sufficient_verdict_from_stopping(status: str, expected: str) -> None:
    assert unexplored(Verdict(status=status, judged_by="coverage")).status == expected


def test_a_key_fact_s_address_is_allowed_where_the_prompt_cut_its_passage() -> None:
    from graph.answer.evidence_policy import allowed_addresses
    from graph.answer.ledger import Ledger
    from graph.models import Evidence, Fact

    url = "https://wetten.overheid.nl/jci1.3:c:BWBR0002402&artikel=15"
    law = Evidence(id="w/kew#3", collection="wetten", doc_id="kew", title="Kernenergiewet",
                   text="Met ingang van 31 december 2033 vervalt de vergunning " + "x " * 500 + f"([artikel 15]({url})).")
    other = Evidence(id="w/other#0", collection="wetten", doc_id="other", title="Besluit", text="Zie https://example.org/plan.")
    fact = Fact(text=f"Met ingang van 31 december 2033 vervalt de vergunning ([artikel 15]({url})).", evidence_ids=[law.id])
    ledger = Ledger([law]).fit(100, 200)
    assert url not in ledger.entries[0].text  # the prompt read the passage cut to the budget
    allowed = allowed_addresses(ledger, [law, other], [fact])
    assert allowed.url(url) and not allowed.url("https://example.org/plan")  # no fact of the other passage
