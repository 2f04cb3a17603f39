"""Structured replies: `response_format` learnt per upstream model, tolerant reading, honest fallbacks."""

from __future__ import annotations

import json
import re

import httpx
import pytest
from pydantic import BaseModel

from graph.answer.ledger import FactsReply
from graph.nodes.judge import JudgeReply
from graph.nodes.plan import Decomposition
from graph.nodes.route import RouteReply
from graph.structured import read_json, strict_schema
from tests.conftest import QUESTION, chunks, content_of, sse_events
from tests.fakes.fake_llm import FakeLLM, Reply

SUMMARIZE = "Antwoord uitsluitend met JSON"
SYNTHESIZE = "Je bent NEO NL"
DECOMPOSE = "Splits de vraag op in deelvragen"
CONDENSE = "Je bent een onderzoeksagent"
COMPARATIVE = "Hoe verschillen IAEA en ANVS eisen voor veiligheidscultuur?"
FACTS = json.dumps({"facts": [{"fact": "De vergunning van Borssele vervalt op 31 december 2033.", "sources": [1]}]})
PROSE = "Natuurlijk! Dit zijn de belangrijkste feiten uit de passages."


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('{"status": "sufficient", "missing": []}', "sufficient"),
        ('```json\n{"status": "partial", "missing": ["ANVS"]}\n```', "partial"),
        ('Reasoning: the set {a, b} is small.\n{"status": "insufficient"} trailing {"x": 1}', "insufficient"),
        ('{"note": "not the reply"} then {"status": "partial", "missing": []}', "partial"),
        ('Sure. {"status": "sufficient", "missing": [{"source": "IAEA", "query": "q"}]} Hope this helps!', "sufficient"),
    ],
)
def test_read_json_takes_the_first_object_that_fits(text: str, expected: str) -> None:
    assert read_json(text, JudgeReply).status == expected


@pytest.mark.parametrize("text", ["", "no json here", '{"status": "maybe"}', '{"status": "partial"', "[1, 2]"])
def test_read_json_rejects_what_does_not_fit(text: str) -> None:
    with pytest.raises(ValueError):
        read_json(text, JudgeReply)


class _Titled(BaseModel):
    title: str
    default: int = 3


@pytest.mark.parametrize("model", [RouteReply, Decomposition, FactsReply, JudgeReply, _Titled])
def test_strict_schema_requires_every_property_and_nothing_else(model: type[BaseModel]) -> None:
    schema = strict_schema(model)

    def objects(node):
        if isinstance(node, dict):
            if node.get("type") == "object":
                yield node
            for key, value in node.items():
                yield from (objects(value) if key not in ("properties", "$defs") else
                            (o for sub in value.values() for o in objects(sub)))
        elif isinstance(node, list):
            for value in node:
                yield from objects(value)

    found = list(objects(schema))
    assert found
    for node in found:
        assert node["additionalProperties"] is False
        assert node["required"] == list(node["properties"])
    assert '"default":' not in json.dumps({k: v for k, v in schema.items() if k != "properties"})
    if model is _Titled:  # fields that happen to be named like schema keywords survive
        assert list(schema["properties"]) == ["title", "default"]


def _format(request: dict) -> str:
    return (request.get("response_format") or {}).get("type", "prompt")


@pytest.fixture
def llm_service(service, fake_llm: FakeLLM):
    def start(**overrides) -> str:
        # a small evidence budget: the selected passages do not fit, so the summary step (a structured call) runs
        return service(llm_base_url=fake_llm.base_url, llm_model="big", llm_fast_model="small", llm_timeout_s=5.0,
                       **{"evidence_tokens": 200, **overrides})
    return start


def _ask(base: str, question: str = QUESTION) -> tuple[str, str]:
    response = httpx.post(base + "/v1/chat/completions", timeout=30, json={
        "model": "neo-nl-agent", "stream": True, "messages": [{"role": "user", "content": question}]})
    payloads = sse_events(response)
    assert payloads[-1] == "[DONE]"
    think, _, answer = content_of(chunks(payloads)).partition("</think>")
    return think, answer


def _fallbacks(base: str) -> dict[tuple[str, str], float]:
    text = httpx.get(base + "/metrics").text
    return {(step, reason): float(value) for reason, step, value in
            re.findall(r'^neo_llm_fallbacks_total\{reason="(\w+)",step="(\w+)"\} (\S+)$', text, re.M)}


def test_json_schema_is_sent_with_the_reply_models_schema(llm_service, fake_llm: FakeLLM) -> None:
    fake_llm.when_contains(SUMMARIZE, Reply(text=FACTS))
    fake_llm.when_contains(SYNTHESIZE, Reply(text="De vergunning vervalt op 31 december 2033 [1]."))
    base = llm_service()
    _ask(base)
    summary, answer = fake_llm.requests
    assert summary["response_format"] == {"type": "json_schema", "json_schema": {
        "name": "FactsReply", "schema": strict_schema(FactsReply), "strict": True}}
    assert "response_format" not in answer  # the answer is prose
    ready = httpx.get(base + "/health/ready").json()
    assert ready["llm"]["structured_output"] == {"small": "json_schema"}


def test_a_refused_format_is_retried_weaker_once_and_remembered(llm_service, fake_llm: FakeLLM) -> None:
    refuse = Reply(status=400, text="response_format 'json_schema' is not supported by this server")
    fake_llm.when(lambda r: _format(r) == "json_schema", refuse)
    fake_llm.when_contains(SUMMARIZE, Reply(text=FACTS))
    fake_llm.when_contains(SYNTHESIZE, Reply(text="De vergunning vervalt op 31 december 2033 [1]."))
    base = llm_service()
    think, answer = _ask(base)
    assert [_format(r) for r in fake_llm.requests] == ["json_schema", "json_object", "prompt"]  # the last: synthesis
    assert "Onbruikbaar" not in think and "niet bereikbaar" not in think and "31 december 2033 [1]" in answer
    assert httpx.get(base + "/health/ready").json()["llm"]["structured_output"] == {"small": "json_object"}
    fake_llm.reset()
    fake_llm.when(lambda r: _format(r) == "json_schema", refuse)
    fake_llm.when_contains(SUMMARIZE, Reply(text=FACTS))
    fake_llm.when_contains(SYNTHESIZE, Reply(text="Anders gezegd: 31 december 2033 [1]."))
    _ask(base, QUESTION + " Graag kort.")
    assert [_format(r) for r in fake_llm.requests] == ["json_object", "prompt"]  # learnt: no second refusal
    assert _fallbacks(base) == {}


def test_an_upstream_without_response_format_gets_prompt_only_json(llm_service, fake_llm: FakeLLM) -> None:
    fake_llm.when(lambda r: "response_format" in r,
                  Reply(status=422, text="Unrecognized request argument supplied: response_format"))
    fake_llm.when_contains(SUMMARIZE, Reply(text="Hier zijn de feiten:\n```json\n" + FACTS + "\n```"))
    fake_llm.when_contains(SYNTHESIZE, Reply(text="De vergunning vervalt op 31 december 2033 [1]."))
    base = llm_service()
    think, answer = _ask(base)
    assert [_format(r) for r in fake_llm.requests] == ["json_schema", "json_object", "prompt", "prompt"]
    assert "31 december 2033 [1]" in answer and "Onbruikbaar" not in think
    assert httpx.get(base + "/health/ready").json()["llm"]["structured_output"] == {"small": "prompt"}


def test_other_client_errors_do_not_downgrade_the_format(llm_service, fake_llm: FakeLLM) -> None:
    fake_llm.when_contains(SUMMARIZE, Reply(status=401, text="invalid api key"))
    fake_llm.when_contains(SYNTHESIZE, Reply(text="Antwoord [1]."))
    base = llm_service()
    think, _ = _ask(base)
    assert [_format(r) for r in fake_llm.requests] == ["json_schema", "prompt"]
    assert "Taalmodel niet bereikbaar bij het samenvatten" in think
    assert httpx.get(base + "/health/ready").json()["llm"]["structured_output"] == {}
    assert _fallbacks(base) == {("summarize", "unavailable"): 1.0}


def _obeying(reply: str) -> Reply:
    """An upstream that ignores JSON asked for in the prompt but obeys `response_format`."""
    return Reply(text=lambda r: reply if "response_format" in r else PROSE)


def test_a_comparison_against_a_schema_obeying_upstream_takes_four_calls(llm_service, fake_llm: FakeLLM) -> None:
    fake_llm.when_contains(DECOMPOSE, _obeying(json.dumps({"sub_questions": [
        {"collection": "iaea", "query": "IAEA eisen veiligheidscultuur"},
        {"collection": "anvs", "query": "ANVS eisen veiligheidscultuur"}]})))
    fake_llm.when_contains(CONDENSE, _obeying(json.dumps({"facts": [
        {"fact": "Veiligheidscultuur is een verantwoordelijkheid van de leiding.", "sources": [1]},
        {"fact": "Toezicht beoordeelt veiligheidscultuur periodiek.", "sources": [2]}]})))
    fake_llm.when_contains(SYNTHESIZE, Reply(text="De IAEA legt de verantwoordelijkheid bij de leiding [1]; de ANVS "
                                                  "beoordeelt periodiek [3]."))
    base = llm_service()
    think, answer = _ask(base, COMPARATIVE)
    assert fake_llm.calls <= 4, [r["messages"][-1]["content"][:60] for r in fake_llm.requests]
    assert "Onbruikbaar" not in think and "niet bereikbaar" not in think and "extractief" not in answer
    # the scripted answer is in no passage: the support check withdraws all of it and the key facts follow (the
    # answer step's own fallback); every structured step used the model's reply
    assert _fallbacks(base) == {("synthesize", "invalid"): 1.0}


def test_an_unusable_reply_is_reported_as_such_and_only_that_step_falls_back(llm_service, fake_llm: FakeLLM) -> None:
    fake_llm.when_contains(SUMMARIZE, Reply(text=PROSE))
    fake_llm.when_contains(SYNTHESIZE, Reply(text="Het model schreef dit antwoord [1]."))
    base = llm_service()
    think, answer = _ask(base)
    assert "Onbruikbaar antwoord van het taalmodel bij het samenvatten" in think
    assert "Het model schreef dit antwoord [1]." in answer and "extractief" not in answer
    # (the scripted answer is in no passage: withdrawn in full, the key facts follow: the answer step's fallback)
    assert _fallbacks(base) == {("summarize", "invalid"): 1.0, ("synthesize", "invalid"): 1.0}


def test_facts_that_cite_nothing_given_are_an_invalid_reply(llm_service, fake_llm: FakeLLM) -> None:
    fake_llm.when_contains(SUMMARIZE, Reply(text=json.dumps({"facts": [{"fact": "Verzonnen.", "sources": [42]}]})))
    fake_llm.when_contains(SYNTHESIZE, Reply(text="Antwoord [1]."))
    base = llm_service()
    think, answer = _ask(base)
    assert "Onbruikbaar antwoord" in think
    assert "Antwoord [1]." in answer  # extractive facts took over; the question was not declined
