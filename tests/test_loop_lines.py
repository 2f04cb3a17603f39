"""The think block says what the research loop decides (issue 58): the assessment line is read from the decision
that routes (`graph.loop.assessment`), so "Beoordeling: voldoende" is never followed by another search round.

Before, the judge wrote its line from the verdict before the loop's rule ran: evidence judged sufficient whose
passages named things still to look up (or whose dependent sub-questions still waited) read "voldoende", then
"Aanvullend onderzoek (ronde 2)" and its searches."""

from __future__ import annotations

import httpx
import pytest

from graph.answer import messages
from graph.loop import Decision, Limits, Loop, assessment, decide
from graph.models import ResearchTask, Verdict
from graph.nodes.judge import decision_lines
from tests.conftest import chunks, content_of, sse_events
from tests.fakes.fake_llm import FakeLLM
from tests.test_pipeline import LOOP_TABLE, SEED_COMPARATIVE, script_dependent

IAEA = ResearchTask(id="iaea", collection="iaea", query="q", label="IAEA")
ANVS = ResearchTask(id="anvs", collection="anvs", query="q", label="ANVS")


# (verdict status, the decision's stop reason) -> the assessment the think line shows
@pytest.mark.parametrize(("status", "stop", "shown"), [
    ("sufficient", "sufficient", "sufficient"),  # research stops for enough evidence
    ("sufficient", None, "partial"),  # research goes on (sub-questions wait for its findings): not "sufficient"
    ("partial", None, "partial"),
    ("insufficient", None, "insufficient"),
    ("partial", "max_rounds", "partial"),
    ("insufficient", "nothing_left", "insufficient"),
    ("partial", "no_new_evidence", "partial"),
    ("partial", "budget", "partial"),
    ("insufficient", "deep_dive", "insufficient"),
])
def test_assessment_table(status: str, stop: str | None, shown: str) -> None:
    assert assessment(Verdict(status=status), Decision(stop)) == shown  # type: ignore[arg-type]


@pytest.mark.parametrize(("loop", "verdict", "kind", "new", "failed", "limits", "expected"), LOOP_TABLE)
def test_sufficient_is_shown_exactly_when_research_stops_for_it(loop, verdict, kind, new, failed, limits,
                                                                 expected) -> None:
    decision = decide(loop, verdict, kind=kind, new_evidence=new, failed=failed, limits=limits)
    assert (assessment(verdict, decision) == "sufficient") is (decision.stop == "sufficient")


@pytest.mark.parametrize("language", ["nl", "en"])
def test_decision_lines_follow_the_decision(language: str) -> None:
    later = ANVS.model_copy(update={"after": "iaea"})
    decision = decide(Loop(tasks=[IAEA], pending=[later]), Verdict(status="sufficient"), kind="comparative",
                      new_evidence=2, failed=set(), limits=Limits(3, 10_000, 10))
    assert decision.stop is None  # the waiting sub-question runs
    lines = decision_lines(Verdict(status="sufficient"), decision, [], language)
    assert lines == [messages.line("verdict", language, status=messages.status_label("partial", language))]
    stopped = decision_lines(Verdict(status="partial", missing=["IAEA"]), Decision("max_rounds"), ["x"], language)
    assert stopped == [
        messages.line("verdict_missing", language, status=messages.status_label("partial", language), missing="IAEA"),
        messages.line("stop", language, reason=messages.reason_label("max_rounds", language))]


def searches_after_sufficient(think: str, language: str) -> list[str]:
    """The search lines of the think block that follow an assessment line saying the evidence is sufficient."""
    sufficient = messages.line("verdict", language, status=messages.status_label("sufficient", language))
    searching = messages.line("searching", language, coll="\0", query="\0").split("\0")[1]  # ": zoeken naar “"
    lines = think.splitlines()
    first = next((i for i, line in enumerate(lines) if line.strip().startswith(sufficient)), len(lines))
    return [line for line in lines[first:] if searching in line]


def think_of(base: str, question: str) -> str:
    body = {"model": "neo-nl-agent", "stream": True, "messages": [{"role": "user", "content": question}]}
    response = httpx.post(f"{base}/v1/chat/completions", json=body, timeout=60)
    return content_of(chunks(sse_events(response))).split("</think>", 1)[0]


@pytest.mark.parametrize(("question", "language"), [
    # the first round's passages name things no gathered document is about: a second round looks them up
    ("Wat is IAEA GSR Part 2?", "nl"),
    ("What is IAEA GSR Part 3 about?", "en"),
    ("Wanneer vervalt de vergunning van kerncentrale Borssele?", "nl"),
    ("Hoe verschillen IAEA en ANVS eisen voor veiligheidscultuur?", "nl"),
    ("Wat is de actuele spotprijs van uranium per pond?", "nl"),
])
def test_no_search_round_follows_a_sufficient_assessment_offline(offline: str, question: str, language: str) -> None:
    think = think_of(offline, question)
    assert messages.line("verdict", language, status="").strip() in think  # the assessment was said
    assert searches_after_sufficient(think, language) == [], think


def test_no_search_round_follows_a_sufficient_assessment_with_a_waiting_sub_question(
        llm_service, fake_llm: FakeLLM) -> None:
    """A comparison's dependent sub-question runs after coverage found the first side sufficient."""
    script_dependent(fake_llm)
    base = llm_service(model_decompose=True, model_condense=True)
    think = think_of(base, SEED_COMPARATIVE)
    assert "Vervolgdeelvragen" in think  # the waiting sub-question ran as a round of its own
    assert searches_after_sufficient(think, "nl") == [], think
