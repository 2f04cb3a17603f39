"""The echo guard knows the prompt's instructions (issue 58): an answer that is only an instruction of its prompt
followed by the question, and then its sources copied, never reaches the user.

With the local model (Qwen2.5-Coder-1.5B) "Begin met het directe antwoord in één of twee zinnen: Hoe meld ik een
…?" and then the evidence reached the user: the guard knew the user prompt's lines, not the system prompt's style
line ("Vorm: begin met het directe antwoord in één of twee zinnen, geef daarna de relevante details.") nor any
clause of a line; the service's scripted fake upstream replays it, over HTTP, streamed and not."""

from __future__ import annotations

import re

import httpx
import pytest

from app.settings import ROOT
from graph.answer import messages
from graph.answer.answer_stream import EchoGate, no_answer_reason
from graph.answer.prompts import Prompts, clauses
from tests.conftest import chunks, content_of, sse_events
from tests.fakes.fake_llm import FakeLLM, Reply

PROMPTS = Prompts(ROOT / "prompts")
# (language, question, the clause of the factual style line the model opened with)
CASES = [
    ("nl", "Hoe meld ik een stralingsincident bij de ANVS?", "Begin met het directe antwoord in één of twee zinnen"),
    ("en", "How do I report a security incident to the ANVS?", "Start with the direct answer in one or two sentences"),
]


def echo(instruction: str, question: str) -> Reply:
    """The reply: the instruction, the question, then the prompt's sources block copied (its label and rule
    included), as the 1.5B model wrote it."""
    def text(request: dict) -> str:
        prompt = request["messages"][-1]["content"]
        return f"{instruction}: {question}\n\n{prompt.split(chr(10) * 2, 1)[1][:800]}"
    return Reply(text=text)


@pytest.mark.parametrize(("language", "question", "instruction"), CASES)
@pytest.mark.parametrize("stream", [True, False])
def test_an_instruction_and_the_question_are_no_answer(llm_service, fake_llm: FakeLLM, language: str, question: str,
                                                       instruction: str, stream: bool) -> None:
    assert instruction.lower() in PROMPTS.render("style_factual", language).lower()  # the prompt's own words
    fake_llm.when_contains("NEO NL", echo(instruction, question))
    base = llm_service()
    body = {"model": "neo-nl-agent", "stream": stream, "messages": [{"role": "user", "content": question}]}
    response = httpx.post(f"{base}/v1/chat/completions", json=body, timeout=60)
    if stream:
        think, _, answer = content_of(chunks(sse_events(response))).partition("</think>")
    else:
        message = response.json()["choices"][0]["message"]
        think, answer = message["reasoning_content"], message["content"]
    assert any(instruction.lower() in r["messages"][0]["content"].lower() for r in fake_llm.requests)  # its prompt's
    assert instruction.lower() not in answer.lower() and question not in answer
    assert messages.line("llm_no_answer_echo", language) in think  # the guard's fallback, named for what it was
    assert messages.line("no_answer_banner", language).strip("*").split(":")[0] in answer  # the key facts instead
    assert re.search(r"\[1\]", answer)


SYSTEM = PROMPTS.render("synthesize_system", "nl", style=PROMPTS.render("style_factual", "nl"), summaries="")
QUESTION = "Hoe meld ik een stralingsincident bij de ANVS?"


def gate_for(question: str) -> EchoGate:
    blocks = ("evidence", "documents", "gaps", "facts")
    gate = EchoGate()
    gate.expect([*PROMPTS.fixed_lines("synthesize", "nl", blocks, question=question, instructions=""),
                 *PROMPTS.fixed_clauses("synthesize", "nl", blocks, question=question, instructions=""),
                 question, *SYSTEM.splitlines(), *clauses(SYSTEM)])
    return gate


# (the model's text, what passes the guard, whether it repeated the question or an instruction)
@pytest.mark.parametrize(("text", "expected", "repeated"), [
    # the reply: an instruction's clause, the question, the prompt's label: nothing is left
    (f"Begin met het directe antwoord in één of twee zinnen: {QUESTION}\n\nBronnen:\n", "", True),
    (f"Vorm: begin met het directe antwoord in één of twee zinnen: {QUESTION}\n", "", True),
    ("Schrijf geen bronnenlijst en geen tags.\n", "", True),
    ("Verzin niets.\n", "Verzin niets.\n", False),  # a short phrase of the rules: an answer may say it too
    # an answer after the copied parts stays, and the line's own words
    (f"Begin met het directe antwoord in één of twee zinnen: {QUESTION} Meld het direct [1].",
     "Meld het direct [1].", True),
    ("Begin met het melden bij de ANVS [1].", "Begin met het melden bij de ANVS [1].", False),
    ("Zakelijk gezegd: meld het [1].", "Zakelijk gezegd: meld het [1].", False),
    # the prompt's labels only
    ("Bronnen:\n", "", False),
])
@pytest.mark.parametrize("size", [1, 5, 1000])
def test_the_guard_drops_clauses_of_the_prompt_and_what_they_leave(text: str, expected: str, repeated: bool,
                                                                   size: int) -> None:
    gate = gate_for(QUESTION)
    out = "".join(gate.feed(text[i:i + size]) for i in range(0, len(text), size)) + gate.flush()
    assert (out, gate.repeated) == (expected, repeated)


def test_a_value_is_never_cut_into_clauses() -> None:
    """An organisation's name in a prompt line is part of its clause: "ANVS:" opening an answer is no copy."""
    found = PROMPTS.fixed_clauses("synthesize_contrast", "nl", ("sides",), question="Q?", names="ANVS, IAEA",
                                  instructions="")
    assert "ANVS," not in found and "IAEA," not in found and "Wat elke organisatie zegt:" in found
    assert any("tussen ANVS, IAEA," in c for c in found)


# (the guard repeated the question or an instruction, a sources list was cut, it dropped anything) -> the reason
@pytest.mark.parametrize(("repeated", "listed", "echoed", "reason"), [
    (True, True, True, "echo"),  # the reply: instruction and question, then its evidence copied
    (True, False, True, "echo"),
    (False, True, True, "list"),  # "Bronnen:" (a label) and a list of its own
    (False, True, False, "list"),
    (False, False, True, "echo"),  # a label alone
    (False, False, False, "empty"),
])
def test_no_answer_reason_table(repeated: bool, listed: bool, echoed: bool, reason: str) -> None:
    assert no_answer_reason(repeated, listed, echoed) == reason


def test_clauses_are_labels_and_instructions_not_the_headings_a_style_asks_for() -> None:
    assert clauses("Vorm: begin met het antwoord, geef daarna de details.\nZoals [1] of [2][3].") == [
        "Vorm:", "begin met het antwoord,", "geef daarna de details.", "Zoals [1] of [2][3]."]
    for language, heading in (("nl", "kernbepalingen"), ("nl", "bevoegdheden"), ("en", "obligations and powers")):
        style = PROMPTS.render("style_deep_dive", language)
        assert heading in style and not any(c.rstrip(",.").lower() == heading for c in clauses(style))
