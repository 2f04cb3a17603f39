"""LLM mode against the scripted fake upstream: streaming, citations, usage, faults and disconnects."""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections.abc import Iterator

import httpx
import pytest

from tests.conftest import QUESTION, chunks, content_of, sse_events
from tests.fakes.fake_llm import FakeLLM, Reply

SUMMARIZE = "Antwoord uitsluitend met JSON"  # marker phrase of prompts/nl/summarize.md
SYNTHESIZE = "Je bent NEO NL"  # marker phrase of prompts/nl/synthesize_system.md
FACTS = json.dumps({"facts": [{"fact": "De vergunning van Borssele vervalt op 31 december 2033.", "sources": [1, 2]},
                              {"fact": "Een latere aanvraag wordt niet behandeld.", "sources": [99]}]})
ANSWER = "Volgens artikel 15a Kernenergiewet vervalt de vergunning op 31 december 2033 [1]. Zie ook [7] en [2]."


def body(question: str = QUESTION, **extra) -> dict:
    return {"model": "neo-nl-agent", "stream": True, "messages": [{"role": "user", "content": question}], **extra}


def script(fake: FakeLLM, answer: Reply | None = None, facts: Reply | None = None) -> None:
    fake.when_contains(SUMMARIZE, facts or Reply(text=FACTS))
    fake.when_contains(SYNTHESIZE, answer or Reply(text=ANSWER))


def test_selected_passages_over_the_evidence_budget_are_condensed_first(llm_service, fake_llm: FakeLLM) -> None:
    script(fake_llm)
    base = llm_service(evidence_tokens=200)
    response = httpx.post(base + "/v1/chat/completions", json=body(stream=False), timeout=30)
    usage = response.json()["usage"]
    assert [r["model"] for r in fake_llm.requests] == ["small", "big"]  # the fast model condenses, then the answer
    assert set(usage["steps"]) == {"summarize", "synthesize"}
    assert sum(part["prompt_tokens"] for part in usage["steps"].values()) == usage["prompt_tokens"]
    think = response.json()["choices"][0]["message"]["reasoning_content"]
    assert "bewijsbudget (200)" in think  # the think block says why the extra call runs
    metrics = httpx.get(base + "/metrics").text
    assert 'neo_llm_tokens_total{kind="prompt",step="summarize"}' in metrics
    assert 'neo_llm_tokens_total{kind="prompt",step="synthesize"}' in metrics


def streamed_contents(base: str, payload: dict) -> Iterator[tuple[str, float]]:
    """(content delta, perf_counter() when it arrived) of each chunk of a streamed completion."""
    with httpx.stream("POST", base + "/v1/chat/completions", json=payload, timeout=30) as response:
        for line in response.iter_lines():
            if not line.startswith("data: {"):
                continue
            chunk = json.loads(line[6:])
            content = chunk["choices"][0]["delta"].get("content") if chunk["choices"] else None
            if content:
                yield content, time.perf_counter()


def answer_of(response: httpx.Response) -> tuple[str, str]:
    text = content_of(chunks(sse_events(response)))
    think, _, answer = text.partition("</think>")
    return think, answer


def test_factual_question_in_one_call_with_repaired_citations(llm_service, fake_llm: FakeLLM) -> None:
    script(fake_llm)
    base = llm_service()
    response = httpx.post(base + "/v1/chat/completions", json=body(stream_options={"include_usage": True}), timeout=30)
    payloads = chunks(sse_events(response))
    think, answer = answer_of(response)
    assert "31 december 2033 [1]" in answer
    assert "[7]" not in answer  # no ledger entry 7: the marker is removed
    text, sources = answer.split("**Bronnen**")
    # every marker left points at a source listed (one entry per document: the facts' passages 1 and 2 may
    # be one document's, and then one source)
    assert set(re.findall(r"\[(\d+)\]", text)) <= set(re.findall(r"^(\d+)\. ", sources, re.M))
    assert "\n1. " in sources
    usage = payloads[-1]["usage"]
    # the passages extractive selection picked fit the evidence budget: no summary call, the answer reads them
    assert fake_llm.calls == 1 and usage["upstream_calls"] == 1
    assert usage["prompt_tokens"] > 0 and usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"]
    assert set(usage["steps"]) == {"synthesize"} and usage["steps"]["synthesize"]["calls"] == 1
    assert usage["steps"]["synthesize"]["prompt_tokens"] == usage["prompt_tokens"]
    assert [r["model"] for r in fake_llm.requests] == ["big"]  # the answer on the main model
    assert "geen taalmodel" not in answer.lower()
    # the prompt numbers evidence, the user never sees it
    assert "Passages:" not in think and "{" not in think


def test_answer_tokens_stream_while_upstream_is_still_generating(llm_service, fake_llm: FakeLLM) -> None:
    script(fake_llm, answer=Reply(text=" ".join(["woord"] * 40) + " [1].", ttft_s=0.3, token_delay_s=0.03))
    base = llm_service()
    seen: dict[str, float] = {}
    for content, arrived in streamed_contents(base, body()):
        if "Vraagtype" in content:
            seen.setdefault("think", arrived)
        if "woord" in content:
            seen.setdefault("answer", arrived)
    assert fake_llm.wait_idle_sync()  # the upstream records a request's end after its last byte
    synth = fake_llm.timings[-1]
    # ordering, not speed: the think line came before the upstream's first token, and the first answer
    # token reached the client before the upstream finished its stream
    assert seen["think"] < synth["first_token"]
    assert seen["answer"] < synth["end"]


def test_upstream_reasoning_never_leaks(llm_service, fake_llm: FakeLLM) -> None:
    script(fake_llm, answer=Reply(text="Het antwoord is 2033 [1].", reasoning="GEHEIM-REDENEREN", reasoning_field="reasoning"))
    base = llm_service()
    _, answer = answer_of(httpx.post(base + "/v1/chat/completions", json=body(), timeout=30))
    assert "GEHEIM" not in answer and "2033 [1]" in answer
    fake_llm.reset()
    script(fake_llm, answer=Reply(text="<think>intern GEHEIM</think>Het antwoord is 2033 [1]. Letterlijk: </think> <reasoning>"))
    think, answer = answer_of(httpx.post(base + "/v1/chat/completions", json=body(), timeout=30))
    assert "GEHEIM" not in answer + think
    assert "</think>" not in answer and "<reasoning>" not in answer and "2033 [1]" in answer


@pytest.mark.parametrize(
    "fault",
    [Reply(status=500), Reply(fault="garbage"), Reply(fault="hang"), Reply(fault="reset"), Reply(status=400)],
    ids=["500", "garbage", "timeout", "reset", "400"],
)
def test_upstream_failure_before_first_token_degrades_to_extractive(llm_service, fake_llm: FakeLLM, fault) -> None:
    fake_llm.default(fault)
    base = llm_service(llm_timeout_s=1.0, llm_max_retries=1)
    response = httpx.post(base + "/v1/chat/completions", json=body(), timeout=60)
    payloads = sse_events(response)
    assert payloads[-1] == "[DONE]"
    think, answer = answer_of(response)
    assert "Taalmodel niet beschikbaar" in think
    assert "taalmodel was niet beschikbaar" in answer.lower() and "31 december 2033" in answer and "[1]" in answer
    assert not fake_llm.wait_idle_sync(0) or fake_llm.in_flight == 0


def test_retry_after_429_then_success(llm_service, fake_llm: FakeLLM) -> None:
    fake_llm.when_contains(SUMMARIZE, Reply(text=FACTS))
    fake_llm.when_contains(SYNTHESIZE, [Reply(status=429, headers={"Retry-After": "0"}), Reply(text=ANSWER)])
    base = llm_service()
    _, answer = answer_of(httpx.post(base + "/v1/chat/completions", json=body(), timeout=30))
    assert "31 december 2033 [1]" in answer and fake_llm.calls == 2  # the answer, retried once


def test_stream_cut_after_first_token_is_reported_honestly(llm_service, fake_llm: FakeLLM) -> None:
    script(fake_llm, answer=Reply(text="Volgens de wet vervalt de vergunning in 2033 [1] en verder nog veel meer tekst.", fault="early_end"))
    base = llm_service()
    response = httpx.post(base + "/v1/chat/completions", json=body(), timeout=30)
    _, answer = answer_of(response)
    assert "Volgens de wet" in answer and "afgebroken" in answer and "**Bronnen**" in answer
    assert sse_events(response)[-1] == "[DONE]"
    assert fake_llm.calls == 1  # never retried after the first streamed token


@pytest.mark.asyncio
async def test_disconnect_cancels_upstream_calls(llm_service, fake_llm: FakeLLM) -> None:
    script(fake_llm, answer=Reply(text="x", fault="hang"))
    base = llm_service(llm_timeout_s=30.0)
    async with httpx.AsyncClient(timeout=30) as client:
        async with client.stream("POST", base + "/v1/chat/completions", json=body()) as response:
            lines = response.aiter_lines()  # keep a reference: a collected iterator closes the connection
            async for line in lines:
                if "Antwoord opstellen" in line:
                    break
            deadline = time.monotonic() + 5
            while fake_llm.in_flight == 0 and time.monotonic() < deadline:
                await asyncio.sleep(0.02)
            assert fake_llm.in_flight == 1, (fake_llm.calls, fake_llm.disconnects, fake_llm.timings)
    assert await fake_llm.wait_idle(3.0)
    assert fake_llm.disconnects >= 1


def test_document_server_down_gives_an_honest_answer(service, fake_llm: FakeLLM) -> None:
    script(fake_llm)
    base = service(mcp_server_url="http://127.0.0.1:9/mcp", mcp_timeout_s=2.0, llm_base_url=fake_llm.base_url)
    response = httpx.post(base + "/v1/chat/completions", json=body(), timeout=30)
    think, answer = answer_of(response)
    assert sse_events(response)[-1] == "[DONE]"
    assert "niet doorzocht" in think
    assert "geen passages gevonden" in answer and "kon niet worden doorzocht" in answer
    assert fake_llm.calls == 0  # nothing to summarize: no upstream call is wasted
    ready = httpx.get(base + "/health/ready")
    assert ready.status_code == 503 and ready.json()["mcp"]["reachable"] is False


def test_task_request_uses_one_cheap_call(llm_service, fake_llm: FakeLLM) -> None:
    fake_llm.default(Reply(text='{"title": "Borssele einddatum"}'))
    base = llm_service()
    prompt = f"### Task:\nGenerate a title.\n<chat_history>\nUSER: {QUESTION}\n</chat_history>"
    response = httpx.post(base + "/v1/chat/completions", timeout=30,
                          json={"model": "neo-nl-agent", "messages": [{"role": "user", "content": prompt}]})
    assert response.json()["choices"][0]["message"]["content"] == '{"title": "Borssele einddatum"}'
    assert fake_llm.calls == 1 and fake_llm.requests[0]["model"] == "small"
    assert fake_llm.requests[0]["messages"][-1]["content"] == prompt


def test_readiness_reports_llm_mode(llm_service) -> None:
    ready = httpx.get(llm_service() + "/health/ready").json()
    assert ready["mode"] == "llm" and ready["llm"]["reachable"] is True


@pytest.mark.asyncio
async def test_disconnect_cancels_a_non_streaming_request(llm_service, fake_llm: FakeLLM) -> None:
    script(fake_llm, answer=Reply(text="x", fault="hang"))
    base = llm_service(llm_timeout_s=30.0)
    async with httpx.AsyncClient(timeout=30) as client:
        request = asyncio.ensure_future(client.post(base + "/v1/chat/completions", json=body(stream=False)))
        deadline = time.monotonic() + 5
        while fake_llm.calls < 2 and time.monotonic() < deadline:
            await asyncio.sleep(0.02)
        assert fake_llm.in_flight == 1
        request.cancel()
    assert await fake_llm.wait_idle(3.0)


def _answer_chunks(response: httpx.Response) -> list[str]:
    """Content pieces after </think>, one per SSE chunk."""
    pieces, after = [], False
    for chunk in chunks(sse_events(response)):
        content = chunk["choices"][0]["delta"].get("content") if chunk["choices"] else None
        if not content:
            continue
        if after:
            pieces.append(content)
        after = after or "</think>" in content
    return pieces


@pytest.mark.parametrize("interval_ms", [0, 20, 1000])
def test_answer_deltas_are_grouped_by_stream_interval(llm_service, fake_llm: FakeLLM, interval_ms: int) -> None:
    words = " ".join(f"woord{i}" for i in range(60)) + " [1]."
    script(fake_llm, answer=Reply(text=words, token_delay_s=0.001))
    base = llm_service(stream_interval_ms=interval_ms)
    response = httpx.post(base + "/v1/chat/completions", json=body(), timeout=30)
    pieces = _answer_chunks(response)
    # the same answer whatever the grouping: every word, in order, and the sources after it
    assert "".join(pieces).startswith(words)
    streamed = [p for p in pieces if "woord" in p]
    if interval_ms == 0:
        assert len(streamed) >= 60  # one chunk per upstream token
    else:
        # the upstream sends 61 tokens 1 ms apart: grouped into far fewer chunks, the first word on its own
        assert streamed[0] == "woord0 "
        assert len(streamed) < 30
    if interval_ms == 1000:
        # a held piece goes out when the answer ends, not a second later: nothing is lost or reordered
        assert len(streamed) <= 3


def test_held_answer_text_is_sent_when_the_upstream_pauses(llm_service, fake_llm: FakeLLM) -> None:
    # tokens 0.3 s apart, interval 1 s: "alfa" goes out at once, "beta gamma delta" are held and sent by the
    # timer about a second later, while the upstream is still generating "epsilon"
    script(fake_llm, answer=Reply(text="alfa beta gamma delta epsilon [1].", token_delay_s=0.3))
    base = llm_service(stream_interval_ms=1000)
    arrivals: list[tuple[str, float]] = []
    after = False
    for content, arrived in streamed_contents(base, body()):
        if after:
            arrivals.append((content, arrived))
        after = after or "</think>" in content
    assert fake_llm.wait_idle_sync()
    upstream_end = fake_llm.timings[-1]["end"]
    assert arrivals[0][0] == "alfa "
    assert "".join(text for text, _ in arrivals).startswith("alfa beta gamma delta epsilon [1].")
    held = next(t for text, t in arrivals if "beta" in text)
    assert held < upstream_end  # sent by the timer, not only when the stream ended


def test_a_model_that_repeats_itself_is_cut_off(llm_service, fake_llm: FakeLLM) -> None:
    loop = "noodbeheersysteem, rollen en verantwoordelijkheden, infrastructuur, "
    script(fake_llm, answer=Reply(text="De vergunning vervalt in 2033 [1]. " + loop * 200, token_delay_s=0.001))
    base = llm_service()
    response = httpx.post(base + "/v1/chat/completions", json=body(stream_options={"include_usage": True}), timeout=30)
    _, answer = answer_of(response)
    assert "vervalt in 2033 [1]" in answer and "**Bronnen**" in answer
    assert answer.count(loop.strip()) < 20  # cut soon after the loop shows, not at the upstream's end
    assert fake_llm.wait_idle_sync() and fake_llm.disconnects >= 1  # the upstream call was closed
    usage = chunks(sse_events(response))[-1]["usage"]
    assert usage["upstream_calls"] == 1 and usage["steps"]["synthesize"]["calls"] == 1  # the cut call still counts


def test_a_sources_list_the_model_writes_itself_is_dropped_and_the_call_stopped(llm_service, fake_llm: FakeLLM) -> None:
    copied = "[1] ANVS | Kernenergiewet — artikel 15a\nDe vergunning vervalt op 31 december 2033 [1].\n\n"
    script(fake_llm, answer=Reply(text="De vergunning vervalt in 2033 [1].\n\nBronnen van ANVS:\n" + copied * 60,
                                  token_delay_s=0.001))
    base = llm_service()
    response = httpx.post(base + "/v1/chat/completions", json=body(), timeout=30)
    _, answer = answer_of(response)
    written, _, listed = answer.partition("**Bronnen**")
    assert "vervalt in 2033 [1]" in written and listed  # the service's own list follows the model's text
    assert "Bronnen van ANVS" not in answer and "| Kernenergiewet" not in answer
    assert fake_llm.wait_idle_sync() and fake_llm.disconnects >= 1  # the upstream stopped writing the copy


@pytest.mark.parametrize("reply", [
    f"Vraag: {QUESTION}\n\n",  # what the local model wrote for two gold questions (EVAL-LLM.md)
    f"### {QUESTION}\n\n#### Beantwoord nu de vraag met alleen deze bronnen. Zet achter elke zin het nummer van de "
    "bron waarop ze steunt,\nzoals [1] of [2][3].",
])
def test_a_model_that_only_repeats_its_prompt_gets_the_extractive_answer(llm_service, fake_llm: FakeLLM,
                                                                         reply: str) -> None:
    script(fake_llm, answer=Reply(text=reply))
    base = llm_service()
    response = httpx.post(base + "/v1/chat/completions", json=body(), timeout=30)
    think, answer = answer_of(response)
    assert "herhaalde alleen de vraag" in think  # the think block says why
    assert "Vraag:" not in answer and "Beantwoord nu" not in answer and QUESTION not in answer
    assert "taalmodel gaf geen antwoord" in answer and re.search(r"31 december 2033\W+\[1\]", answer)  # key facts
    assert "**Bronnen**" in answer
    metrics = httpx.get(base + "/metrics").text  # the guard's verdicts, per step
    assert re.search(r'neo_echo_guard_lines_total\{step="synthesize",verdict="copy"\} [1-9]', metrics)
    assert 'neo_llm_fallbacks_total{reason="invalid",step="synthesize"} 1.0' in metrics


def test_a_reply_that_is_only_a_sources_list_is_named_for_what_it_was(llm_service, fake_llm: FakeLLM) -> None:
    script(fake_llm, answer=Reply(text="Bronnen:\n[1] ANVS | Kernenergiewet — artikel 15a\nDe vergunning vervalt."))
    base = llm_service()
    think, answer = answer_of(httpx.post(base + "/v1/chat/completions", json=body(), timeout=30))
    assert "schreef alleen een eigen bronnenlijst" in think and "herhaalde" not in think
    assert "taalmodel gaf geen antwoord" in answer and "**Bronnen**" in answer


def test_an_answer_after_a_copied_question_keeps_only_the_answer(llm_service, fake_llm: FakeLLM) -> None:
    script(fake_llm, answer=Reply(text=f"**Vraag:** {QUESTION}\n\n{ANSWER}"))
    base = llm_service()
    think, answer = answer_of(httpx.post(base + "/v1/chat/completions", json=body(), timeout=30))
    assert answer.lstrip().startswith("Volgens artikel 15a Kernenergiewet vervalt de vergunning op 31 december 2033 [1]")
    assert "herhaalde" not in think and "taalmodel gaf geen antwoord" not in answer


def test_a_request_out_of_time_has_one_error_code_streamed_or_not(llm_service, fake_llm: FakeLLM) -> None:
    script(fake_llm, answer=Reply(fault="hang"))
    base = llm_service(request_timeout_s=1.0, llm_timeout_s=30)
    plain = httpx.post(base + "/v1/chat/completions", json=body(stream=False), timeout=30)
    assert plain.status_code == 504
    payloads = sse_events(httpx.post(base + "/v1/chat/completions", json=body(), timeout=30))
    streamed = json.loads(next(p for p in payloads if p.startswith('{"error"')))
    assert payloads[-1] == "[DONE]"
    for error in (plain.json()["error"], streamed["error"]):
        assert (error["type"], error["code"]) == ("timeout", "timeout"), error


def test_citations_are_numbered_in_reading_order_and_sources_follow(llm_service, fake_llm: FakeLLM) -> None:
    """The model cites [2] before [1]: the reader sees [1] first, the sources list and Open WebUI's source
    events (each sent before the text that first cites it) are numbered the same way."""
    script(fake_llm, answer=Reply(text="Een latere aanvraag wordt niet behandeld [2]. De vergunning vervalt [1]. "
                                       "Zie ook [2]."))
    base = llm_service(auto_cite=False, claim_check="off")
    response = httpx.post(base + "/v1/chat/completions", json=body(), headers={"X-OpenWebUI-Chat-Id": "c1"},
                          timeout=30)
    payloads = chunks(sse_events(response))
    _, answer = answer_of(response)
    written, _, listed = answer.partition("**Bronnen**")
    assert re.findall(r"\[(\d)\]", written) == ["1", "2", "1"], written
    events = [p["event"]["data"] for p in payloads if "event" in p and p["event"]["type"] == "source"]
    names = [e["source"]["name"] for e in events]
    lines = [line for line in listed.splitlines() if line[:1].isdigit()]
    assert len(names) == len(lines) == 2
    for n, (name, line) in enumerate(zip(names, lines, strict=True), 1):
        assert line.startswith(f"{n}. {name}")  # the n-th source event is the list's n-th line
    text_so_far, seen = "", 0
    for p in payloads:  # each source event arrives before the first text that cites it
        if "event" in p and p["event"]["type"] == "source":
            seen += 1
        elif p.get("choices") and (piece := p["choices"][0]["delta"].get("content")):
            text_so_far += piece
            cited = {int(n) for n in re.findall(r"\[(\d)\]", text_so_far.partition("</think>")[2])}
            assert max(cited, default=0) <= seen
