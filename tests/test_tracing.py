"""OpenTelemetry: a real OTLP/HTTP receiver in the test process (the export decoded with `opentelemetry-proto`), the
service exporting to it with the official SDK. One trace per request with a span per node, sub-agent, tool call and
model call; no content unless asked for; nothing at all when tracing is off."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import httpx
import pytest
from opentelemetry.sdk.trace import TracerProvider

from app.main import create_app
from app.observability import _TraceIdFilter
from app.settings import Settings
from graph.clients.tracing import NOOP
from tests.fakes.fake_llm import FakeLLM
from tests.fakes.otlp import OtlpReceiver
from tests.fakes.servers import ServerThread
from tests.test_llm_mode import script

COMPARISON = "Hoe verschillen IAEA en ANVS eisen voor veiligheidscultuur?"


@pytest.fixture
def receiver() -> Iterator[OtlpReceiver]:
    server = OtlpReceiver()
    yield server
    server.stop()


@contextmanager
def serving(**settings: object) -> Iterator[tuple[str, Any]]:
    app = create_app(Settings(_env_file=None, response_cache=False, **settings))
    with ServerThread(app) as server:  # stopping it ends the lifespan: the provider exports what is left
        yield server.base_url, app


def test_tracing_is_off_without_a_collector(docserver_url: str) -> None:
    with serving(mcp_server_url=docserver_url, llm_base_url="") as (base, app):
        response = httpx.post(base + "/v1/chat/completions", timeout=30, json={
            "model": "neo-nl-agent", "messages": [{"role": "user", "content": COMPARISON}]})
        assert response.status_code == 200 and "x-trace-id" not in response.headers
        tracing = app.state.tracing
        assert not tracing.on and tracing.provider is None and tracing.tracer is NOOP
        assert app.state.services.context.tracer is NOOP


def _one_trace(receiver: OtlpReceiver, trace_id: str) -> list[dict[str, Any]]:
    spans = receiver.spans
    assert spans and {s["trace"] for s in spans} == {trace_id}
    ids = {s["id"] for s in spans}
    roots = [s for s in spans if s["parent"] not in ids]
    assert len(roots) == 1 and roots[0]["name"] == "POST /v1/chat/completions"  # one tree, the request at its root
    assert {s["service"] for s in spans} == {"neo-nl-agent"}
    return spans


def test_a_comparison_is_one_trace_with_a_span_per_step_and_no_content(docserver_url: str, fake_llm: FakeLLM,
                                                                       receiver: OtlpReceiver) -> None:
    script(fake_llm)
    with serving(mcp_server_url=docserver_url, llm_base_url=fake_llm.base_url, llm_model="big",
                 llm_fast_model="small", otel_exporter_otlp_endpoint=receiver.url) as (base, _):
        response = httpx.post(base + "/v1/chat/completions", timeout=30, json={
            "model": "neo-nl-agent", "stream": True, "messages": [{"role": "user", "content": COMPARISON}]})
        assert response.status_code == 200 and "data: [DONE]" in response.text
        trace_id = response.headers["x-trace-id"]
    spans = _one_trace(receiver, trace_id)
    by_id = {s["id"]: s for s in spans}
    nodes = [s for s in spans if s["name"].startswith("node ")]
    assert {"node route", "node plan", "node research", "node summarize", "node judge", "node synthesize"} <= \
        {s["name"] for s in nodes}
    agents = [s for s in nodes if s["name"] == "node research"]
    assert {s["attributes"]["neo.collection"] for s in agents} == {"iaea", "anvs"}  # a span per sub-agent
    searches = [s for s in spans if s["name"] == "tools/call search_collection"]
    assert searches and all(by_id[s["parent"]]["name"] == "node research" for s in searches)
    for search in searches:
        attributes = search["attributes"]
        assert attributes["gen_ai.tool.name"] == "search_collection" and attributes["mcp.method.name"] == "tools/call"
        assert attributes["neo.collection"] == by_id[search["parent"]]["attributes"]["neo.collection"]
        assert isinstance(attributes["neo.results"], int)
    calls = [s for s in spans if s["name"].startswith("chat ")]
    assert len(calls) == fake_llm.calls >= 3  # the two sides and the contrast
    assert {s["attributes"]["neo.step"] for s in calls} == {"synthesize_side", "synthesize_contrast"}
    for call in calls:
        attributes = call["attributes"]
        assert attributes["gen_ai.operation.name"] == "chat" and attributes["gen_ai.request.model"] in ("big", "small")
        assert attributes["gen_ai.usage.input_tokens"] > 0 and attributes["gen_ai.usage.output_tokens"] > 0
        assert by_id[call["parent"]]["name"].startswith("node ")  # the node that made it
    # the model server continues the same trace, each call under its own span
    assert len(fake_llm.traceparents) == len(calls)
    assert {p.split("-")[1] for p in fake_llm.traceparents} == {trace_id}
    assert {p.split("-")[2] for p in fake_llm.traceparents} == {c["id"] for c in calls}
    # no content: neither the question nor a passage nor the answer in any attribute
    said = json.dumps([s["attributes"] for s in spans], ensure_ascii=False).lower()
    assert "veiligheidscultuur" not in said and "artikel 15a" not in said and "gen_ai.input.messages" not in said


def test_prompts_are_in_the_trace_only_when_asked_for(docserver_url: str, fake_llm: FakeLLM, receiver: OtlpReceiver) -> None:
    script(fake_llm)
    with serving(mcp_server_url=docserver_url, llm_base_url=fake_llm.base_url, llm_model="big",
                 llm_fast_model="small", otel_exporter_otlp_endpoint=receiver.url, otel_capture_content=True) as (base, _):
        response = httpx.post(base + "/v1/chat/completions", timeout=30, json={
            "model": "neo-nl-agent", "messages": [{"role": "user", "content": COMPARISON}]})
        trace_id = response.headers["x-trace-id"]
    spans = _one_trace(receiver, trace_id)
    calls = [s for s in spans if s["name"].startswith("chat ")]
    prompts = [json.loads(c["attributes"]["gen_ai.input.messages"]) for c in calls]
    assert all(p and p[-1]["role"] == "user" for p in prompts)
    assert any(COMPARISON in p[-1]["content"] for p in prompts)
    assert any("Volgens artikel 15a" in c["attributes"]["gen_ai.output.messages"] for c in calls)


def test_a_log_line_names_its_trace() -> None:
    provider = TracerProvider()
    record = logging.LogRecord("x", logging.INFO, __file__, 1, "m", None, None)
    _TraceIdFilter().filter(record)
    assert record.trace_id == "-"
    with provider.get_tracer("t").start_as_current_span("s") as span:
        _TraceIdFilter().filter(record)
    assert record.trace_id == format(span.get_span_context().trace_id, "032x")


@pytest.mark.asyncio
async def test_a_direct_tool_call_carries_its_spans_traceparent() -> None:
    """The document server continues the trace: the tool call's span (current while it runs) goes in the
    `traceparent` header of the direct call; without a recording span none is sent."""
    import aiohttp

    from graph.clients.mcp_direct import DirectCalls
    from tests.test_mcp_client import DONE, TOOL, _scripted_mcp

    seen: list[tuple[dict[str, str], dict]] = []
    tracer = TracerProvider().get_tracer("t")
    with ServerThread(_scripted_mcp(seen, [DONE])) as server:
        async with aiohttp.ClientSession() as http:
            calls = DirectCalls(server.base_url + "/mcp", "2026-07-28", [TOOL], {"name": "t", "version": "1"}, http)
            await calls.call("search_collection", {"query": "x", "collection": "iaea"})
            with tracer.start_as_current_span("tools/call search_collection") as span:
                await calls.call("search_collection", {"query": "x", "collection": "iaea"})
    context = span.get_span_context()
    assert "traceparent" not in seen[0][0]
    assert seen[1][0]["traceparent"].startswith(f"00-{context.trace_id:032x}-{context.span_id:016x}-")
