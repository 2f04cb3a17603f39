"""Fault suite: upstream and document-server failures in every pipeline phase end in a valid stream with an
honest message, within REQUEST_TIMEOUT_S, without leaked asyncio tasks; disconnects cancel what is in flight."""

from __future__ import annotations

import asyncio
import json
import re
import time

import httpx
import pytest

from docserver.server import create_app as create_docserver
from tests.conftest import QUESTION, TORN, chunks, content_of, sse_events
from tests.fakes.fake_llm import FakeLLM, Reply
from tests.fakes.servers import ServerThread
from tests.fakes.slow_docs import SlowCollections, SlowToolServer

COMPARATIVE = "Hoe verschillen IAEA en ANVS eisen voor veiligheidscultuur?"
REQUEST_TIMEOUT_S = 20

MARKERS = {
    "route": "Classificeer de vraag",
    "decompose": "Splits de vraag op in deelvragen",
    "condense": "Je bent een onderzoeksagent",
    "judge": "Beoordeel of de kernfeiten",
    "translate": "Vertaal elke zoekvraag hieronder",
    "summarize": "Antwoord uitsluitend met JSON",
    "synthesize": "Je bent NEO NL",
    "synthesize_side": "Bronnen van IAEA:",  # a comparison's second side, generated while the first streams
}
QUESTIONS = {"route": TORN, "decompose": COMPARATIVE, "condense": COMPARATIVE, "judge": COMPARATIVE,
             "translate": COMPARATIVE, "summarize": QUESTION, "synthesize": QUESTION,
             "synthesize_side": COMPARATIVE}
FAULTS = {
    "500": Reply(status=500),
    "429": Reply(status=429, headers={"Retry-After": "0"}),
    "timeout": Reply(fault="hang"),
    "invalid_sse": Reply(fault="garbage"),
    "early_end": Reply(fault="early_end", text="Een begin van een antwoord dat abrupt stopt"),
    "bad_json": Reply(text="Natuurlijk! Hier is het antwoord zonder JSON."),
}


def good_script(fake: FakeLLM, skip: str | None = None, anvs_facts: bool = True) -> None:
    """Healthy replies for every phase except `skip` (registered by the caller first)."""
    replies = {
        "route": Reply(text='{"query_type": "factual", "collections": ["security"]}'),
        "decompose": Reply(text=json.dumps({"sub_questions": [
            {"collection": "anvs", "query": "ANVS veiligheidscultuur"},
            {"collection": "iaea", "query": "IAEA veiligheidscultuur"}]})),
        "judge": Reply(text='{"status": "sufficient", "missing": []}'),
        "summarize": Reply(text=json.dumps({"facts": [{"fact": "Feit uit de bron.", "sources": [1]}]})),
        "synthesize": Reply(text="Het antwoord staat in de bronnen [1]."),
    }
    if skip == "translate":  # the IAEA side finds nothing and the judge asks for it: a round on an English collection
        fake.when_contains("Bron: IAEA\n", Reply(text='{"facts": []}'))
        fake.when_contains(MARKERS["judge"], Reply(text=json.dumps({"status": "partial", "missing": [
            {"source": "IAEA", "query": "IAEA veiligheidscultuur leiderschap"}]})), times=1)
    if skip != "condense":
        if not anvs_facts:  # an ANVS sub-agent without facts makes the judge necessary
            fake.when_contains("Bron: ANVS\n", Reply(text='{"facts": []}'))
        fake.when_contains(MARKERS["condense"], Reply(text=json.dumps({"facts": [{"fact": "Feit.", "sources": [1]}]})))
    for phase in ("route", "decompose", "judge", "summarize", "synthesize"):
        if phase != skip:
            fake.when_contains(MARKERS[phase], replies[phase])


def tasks_alive(base: str) -> float:
    return float(re.search(r"^neo_asyncio_tasks (\S+)$", httpx.get(base + "/metrics").text, re.M).group(1))


def settle(base: str, baseline: float, seconds: float = 3.0) -> float:
    deadline = time.monotonic() + seconds
    while (alive := tasks_alive(base)) > baseline and time.monotonic() < deadline:
        time.sleep(0.05)
    return alive


@pytest.fixture
def faulty(service, fake_llm: FakeLLM):
    # the optional model steps on (and a small evidence budget, so the summary runs), so that a fault can hit each
    base = service(llm_base_url=fake_llm.base_url, llm_timeout_s=1.0, llm_max_retries=1,
                   request_timeout_s=REQUEST_TIMEOUT_S, model_route=True, model_decompose=True, model_condense=True, evidence_tokens=200)
    good_script(fake_llm)
    httpx.post(base + "/v1/chat/completions", timeout=30,
               json={"model": "neo-nl-agent", "stream": True, "messages": [{"role": "user", "content": QUESTION}]})
    baseline = tasks_alive(base)
    fake_llm.reset()
    return base, baseline


@pytest.mark.parametrize("fault", list(FAULTS))
@pytest.mark.parametrize("phase", list(MARKERS))
def test_upstream_fault_in_every_phase(faulty, fake_llm: FakeLLM, phase: str, fault: str) -> None:
    if fault == "bad_json" and phase.startswith("synthesize"):
        pytest.skip("the answer is free text: there is no JSON to break")
    base, baseline = faulty
    fake_llm.when_contains(MARKERS[phase], FAULTS[fault])
    good_script(fake_llm, skip=phase, anvs_facts=phase not in ("judge", "translate"))
    response = httpx.post(base + "/v1/chat/completions", timeout=REQUEST_TIMEOUT_S + 5, json={
        "model": "neo-nl-agent", "stream": True, "messages": [{"role": "user", "content": QUESTIONS[phase]}]})
    payloads = sse_events(response)
    assert response.status_code == 200 and payloads[-1] == "[DONE]"
    assert not any('"error"' in p for p in payloads[:-1])  # degraded, not failed
    text = content_of(chunks(payloads))
    assert text.startswith("<think>") and text.count("</think>") == 1
    think, answer = text.split("</think>", 1)
    assert answer.strip()
    if fault == "bad_json":  # the model answered, unusably: said so, and only that step went without it
        honest = "Onbruikbaar antwoord van het taalmodel" in think and "niet bereikbaar" not in think
    elif phase.startswith("synthesize"):  # the second side: the first side's text, then the honest end
        honest = "afgebroken" in answer or "taalmodel was niet beschikbaar" in answer
    else:
        honest = "Taalmodel niet bereikbaar" in think and "Onbruikbaar" not in think
    assert honest, (phase, fault, think[-400:], answer[:300])
    if not phase.startswith("synthesize"):  # one step fell back; the answer is still the model's
        assert "extractief" not in answer
    assert fake_llm.wait_idle_sync(2.0)
    assert settle(base, baseline) <= baseline  # no leaked asyncio tasks


@pytest.fixture
def slow_docs():
    app = SlowCollections(create_docserver())
    with ServerThread(app) as server:
        yield app, server.base_url + "/mcp", server


def ask(base: str, question: str, timeout: float = 30) -> tuple[str, str, list[str]]:
    response = httpx.post(base + "/v1/chat/completions", timeout=timeout, json={
        "model": "neo-nl-agent", "stream": True, "messages": [{"role": "user", "content": question}]})
    payloads = sse_events(response)
    think, _, answer = content_of(chunks(payloads)).partition("</think>")
    return think, answer, payloads


def test_collection_slower_than_its_timeout(service, slow_docs) -> None:
    app, url, _ = slow_docs
    app.delays = {"anvs": 5.0}
    base = service(mcp_server_url=url, mcp_timeout_s=1.0)
    think, answer, payloads = ask(base, COMPARATIVE)
    assert payloads[-1] == "[DONE]"
    assert "ANVS: niet doorzocht" in think and "timed out" in think
    assert "(IAEA" in answer and "ANVS kon niet worden doorzocht" in answer


def test_document_server_killed_mid_request(service, slow_docs) -> None:
    app, url, server = slow_docs
    app.delays = {"iaea": 8.0}  # longer than uvicorn's graceful shutdown: the connection is cut
    base = service(mcp_server_url=url, mcp_timeout_s=10.0)
    result: dict[str, tuple] = {}

    async def run() -> None:
        request = asyncio.to_thread(ask, base, COMPARATIVE)
        killer = asyncio.sleep(1.0)
        outcome, _ = await asyncio.gather(request, killer)
        result["outcome"] = outcome

    async def kill_later() -> None:
        await asyncio.sleep(1.0)
        await asyncio.to_thread(server.stop)

    async def both() -> None:
        await asyncio.gather(run(), kill_later())

    asyncio.run(both())
    think, answer, payloads = result["outcome"]
    assert payloads[-1] == "[DONE]"
    assert "IAEA: niet doorzocht" in think
    assert "IAEA kon niet worden doorzocht" in answer or "geen passages gevonden" in answer


@pytest.mark.asyncio
@pytest.mark.parametrize("phase", ["route", "decompose", "condense", "synthesize", "synthesize_side"])
async def test_disconnect_in_any_phase_cancels_upstream_within_a_second(service, fake_llm: FakeLLM, phase) -> None:
    fake_llm.when_contains(MARKERS[phase], Reply(fault="hang"))
    good_script(fake_llm, skip=phase)
    base = service(llm_base_url=fake_llm.base_url, llm_timeout_s=30.0, model_route=True, model_decompose=True,
                   model_condense=True)
    async with httpx.AsyncClient(timeout=30) as client:
        async with client.stream("POST", base + "/v1/chat/completions", json={
                "model": "neo-nl-agent", "stream": True,
                "messages": [{"role": "user", "content": QUESTIONS[phase]}]}) as response:
            lines = response.aiter_lines()
            await lines.__anext__()
            deadline = time.monotonic() + 10
            while not any(MARKERS[phase] in m["content"] for r in fake_llm.requests for m in r["messages"]):
                assert time.monotonic() < deadline
                await asyncio.sleep(0.02)
            assert fake_llm.in_flight >= 1
    assert await fake_llm.wait_idle(1.0)  # every upstream call ended within a second of the disconnect


@pytest.mark.asyncio
async def test_disconnect_during_search_cancels_mcp_calls(service) -> None:
    slow = SlowToolServer(delay=10.0)
    with ServerThread(slow.app) as server:
        base = service(mcp_server_url=server.base_url + "/mcp")
        async with httpx.AsyncClient(timeout=30) as client:
            async with client.stream("POST", base + "/v1/chat/completions", json={
                    "model": "neo-nl-agent", "stream": True,
                    "messages": [{"role": "user", "content": COMPARATIVE}]}) as response:
                lines = response.aiter_lines()
                await lines.__anext__()
                deadline = time.monotonic() + 10
                while slow.in_flight < 2:
                    assert time.monotonic() < deadline
                    await asyncio.sleep(0.02)
        deadline = time.monotonic() + 1.0  # the MCP calls must end within a second of the disconnect
        while slow.in_flight and time.monotonic() < deadline:
            await asyncio.sleep(0.02)
        assert slow.in_flight == 0 and slow.cancelled == 2
