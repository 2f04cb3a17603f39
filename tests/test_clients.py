"""The OpenAI surface the client libraries call, over real HTTP with the real client packages: models,
retries, where the progress goes, sources as data and the request fields the service cannot honour."""

from __future__ import annotations

import json
import re
from dataclasses import replace

import httpx
import openai
import pytest
from pydantic import BaseModel

from app.chat_request import answer_options, progress_mode
from app.protocol import ChatCompletionRequest
from graph.context import AnswerOptions, Context
from graph.loop import model_judges, research_rounds
from tests.conftest import QUESTION, chunks, content_of, sse_events
from tests.fakes.fake_llm import FakeLLM, Reply
from tests.test_api import post
from tests.test_llm_mode import SYNTHESIZE, script


def chat(question: str = QUESTION, *, stream: bool = False, **extra) -> dict:
    return {"model": "neo-nl-agent", "stream": stream, "messages": [{"role": "user", "content": question}], **extra}


def test_a_listed_model_can_be_retrieved(offline: str) -> None:
    client = openai.OpenAI(base_url=offline + "/v1", api_key="none", max_retries=0)
    for listed in client.models.list().data:
        assert client.models.retrieve(listed.id) == listed
    with pytest.raises(openai.NotFoundError) as raised:
        client.models.retrieve("gpt-99")
    assert raised.value.code == "model_not_found"


def test_a_request_out_of_time_is_not_retried_by_the_sdk(llm_service, fake_llm: FakeLLM) -> None:
    """openai-python retries a 5xx twice unless told not to: the pipeline would run three times, and time out
    three times."""
    script(fake_llm, answer=Reply(fault="hang"))
    base = llm_service(request_timeout_s=1.0, llm_timeout_s=30)
    sent: list[httpx.Request] = []
    http = httpx.Client(event_hooks={"request": [sent.append]}, timeout=30)
    client = openai.OpenAI(base_url=base + "/v1", api_key="none", http_client=http)  # the SDK's default retries
    with pytest.raises(openai.APIStatusError) as raised:
        client.chat.completions.create(model="neo-nl-agent", messages=[{"role": "user", "content": QUESTION}])
    assert raised.value.status_code == 504 and raised.value.code == "timeout"
    assert raised.value.response.headers["x-should-retry"] == "false"
    assert len(sent) == 1  # one run of the pipeline


@pytest.mark.parametrize(("status", "code", "retry"), [
    (400, "invalid_request", False), (401, "invalid_api_key", False), (404, "model_not_found", False),
    (413, "request_too_large", False), (408, None, None), (409, None, None), (429, "rate_limit_exceeded", None),
    (500, "internal_error", None), (503, "unavailable", None), (504, "timeout", False),
])
def test_errors_say_whether_a_retry_can_help(status: int, code: str | None, retry: bool | None) -> None:
    from app.errors import retry_headers

    assert retry_headers(status, code) == ({} if retry is None else {"x-should-retry": "false"})


def test_refused_requests_tell_the_sdk_not_to_retry_and_a_rate_limit_says_when(service) -> None:
    base = service(rate_limit="2/minute")  # the refused request counts too
    refused = post(base, {"model": "neo-nl-agent", "messages": []})
    assert refused.status_code == 400 and refused.headers["x-should-retry"] == "false"
    assert post(base, chat()).status_code == 200
    limited = post(base, chat())
    assert limited.status_code == 429 and "x-should-retry" not in limited.headers
    assert int(limited.headers["retry-after"]) >= 1


@pytest.mark.parametrize(("extra", "default", "mode"), [
    ({}, "tags", "tags"),
    ({}, "reasoning_content", "reasoning_content"),
    ({"reasoning": {"exclude": True}}, "tags", "off"),  # OpenRouter's convention: no progress at all
    ({"include_reasoning": False}, "tags", "off"),
    ({"reasoning": {"enabled": False}}, "reasoning_content", "off"),
    ({"reasoning": {}}, "tags", "reasoning_content"),  # a client that asks for reasoning reads it as a field
    ({"reasoning": {"effort": "low"}}, "off", "reasoning_content"),
    ({"include_reasoning": True}, "tags", "reasoning_content"),
    ({"response_format": {"type": "json_object"}}, "tags", "reasoning_content"),  # the content is JSON only
    ({"response_format": {"type": "json_object"}}, "off", "off"),
    ({"response_format": {"type": "text"}}, "tags", "tags"),
])
def test_the_caller_chooses_where_the_progress_goes(extra: dict, default: str, mode: str) -> None:
    assert progress_mode(ChatCompletionRequest.model_validate(chat(**extra)), default) == mode


def test_progress_excluded_or_as_a_field_per_request(offline: str) -> None:
    excluded = post(offline, chat(reasoning={"exclude": True})).json()["choices"][0]["message"]
    assert excluded.get("reasoning_content") is None and "31 december 2033" in excluded["content"]
    streamed = chunks(sse_events(post(offline, chat(stream=True, reasoning={"exclude": True}))))
    assert not any(c["choices"][0]["delta"].get("reasoning_content") for c in streamed if c["choices"])
    assert "<think>" not in content_of(streamed) and "31 december 2033" in content_of(streamed)
    asked = chunks(sse_events(post(offline, chat(stream=True, reasoning={"enabled": True}))))
    reasoning = "".join(c["choices"][0]["delta"].get("reasoning_content") or "" for c in asked if c["choices"])
    assert "Vraagtype" in reasoning and "<think>" not in content_of(asked)


def test_sources_come_as_data_too(offline: str) -> None:
    """Perplexity's `citations` (URLs, `[1]` first) and `search_results`, beside the sources list in the text."""
    client = openai.OpenAI(base_url=offline + "/v1", api_key="none", max_retries=0)
    response = client.chat.completions.create(model="neo-nl-agent", messages=[{"role": "user", "content": QUESTION}])
    extra = response.model_extra or {}
    citations, results = extra["citations"], extra["search_results"]
    listed = response.choices[0].message.content.split("**Bronnen**")[1].strip().splitlines()
    assert len(citations) == len(results) == len(listed) >= 1
    assert citations == [r["url"] for r in results] and all(u.startswith("http") for u in citations)
    for n, (result, line) in enumerate(zip(results, listed, strict=True), 1):
        assert line.startswith(f"{n}. ") and result["title"].split(":")[0] in line and result["snippet"]
        assert result["date"] is None or result["date"].isdigit()
    stream = client.chat.completions.create(model="neo-nl-agent", messages=[{"role": "user", "content": QUESTION}],
                                            stream=True, stream_options={"include_usage": True})
    received = list(stream)
    final = next(c for c in received if c.choices and c.choices[0].finish_reason)
    assert (final.model_extra or {})["citations"] == citations
    assert (received[-1].model_extra or {})["search_results"] == results  # the usage chunk too
    assert all("citations" not in (c.model_extra or {}) for c in received if c is not final and c.choices)


@pytest.mark.parametrize(("extra", "param"), [
    ({"n": 2}, "n"),
    ({"logprobs": True}, "logprobs"),
    ({"top_logprobs": 3}, "top_logprobs"),
    ({"modalities": ["text", "audio"]}, "modalities"),
    ({"audio": {"voice": "alloy", "format": "mp3"}}, "audio"),
    ({"tool_choice": "required", "tools": [{"type": "function", "function": {"name": "f"}}]}, "tool_choice"),
    ({"response_format": {"type": "xml"}}, "response_format.type"),
    ({"response_format": {"type": "json_schema", "json_schema": {"name": "x"}}}, "response_format.json_schema"),
    ({"response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "objekt"}}}},
     "response_format.json_schema.schema"),
    ({"response_format": {"type": "json_object"}}, "response_format"),  # offline: no model to write JSON
])
def test_fields_that_cannot_be_honoured_are_refused_by_name(offline: str, extra: dict, param: str) -> None:
    client = openai.OpenAI(base_url=offline + "/v1", api_key="none")  # default retries: none happen on a 400
    with pytest.raises(openai.BadRequestError) as raised:
        client.chat.completions.create(**chat(**extra))
    assert raised.value.param == param and raised.value.code == "unsupported_value"
    assert raised.value.response.headers["x-should-retry"] == "false"


# ---------------------------------------------------------------- request fields in LLM mode

JUDGE = "Beoordeel of de kernfeiten"  # marker phrase of prompts/nl/judge.md


def calls_with(fake: FakeLLM, marker: str) -> list[dict]:
    return [r for r in fake.requests if any(marker in (m.get("content") or "") for m in r["messages"])]


def test_sampling_fields_reach_the_answer_call_only(llm_service, fake_llm: FakeLLM) -> None:
    script(fake_llm)
    base = llm_service(evidence_tokens=200)  # a condensing call runs before the answer
    client = openai.OpenAI(base_url=base + "/v1", api_key="none", max_retries=0)
    client.chat.completions.create(model="neo-nl-agent", messages=[{"role": "user", "content": QUESTION}],
                                   temperature=0.9, top_p=0.5, seed=7, stop=["###"], max_completion_tokens=400)
    (answer,) = calls_with(fake_llm, SYNTHESIZE)
    assert (answer["temperature"], answer["top_p"], answer["seed"], answer["stop"]) == (0.9, 0.5, 7, ["###"])
    assert answer["max_tokens"] == 400
    others = [r for r in fake_llm.requests if r is not answer]
    assert others and all("seed" not in r and "stop" not in r and r["temperature"] != 0.9 for r in others)


def test_a_seed_gives_the_same_prompt(llm_service, fake_llm: FakeLLM) -> None:
    """The passages' fence code is random per prompt, unless the caller sets a seed (asks for the same answer
    to the same request): then it derives from the seed and the deployment's key, so the prompt repeats."""
    script(fake_llm)
    base = llm_service(fence_key="deployment secret")
    fences = []
    for token, seed in [("a", 7), ("b", 7), ("c", 8)]:  # a key each: no answer replayed from the cache
        client = openai.OpenAI(base_url=base + "/v1", api_key=token, max_retries=0)
        client.chat.completions.create(model="neo-nl-agent", messages=[{"role": "user", "content": QUESTION}],
                                       seed=seed)
        prompt = calls_with(fake_llm, SYNTHESIZE)[-1]["messages"][-1]["content"]
        fences.append(re.search(r"«([0-9a-f]{4})»", prompt).group(1))
    assert fences[0] == fences[1] != fences[2]


@pytest.mark.parametrize(("key", "seed", "same"), [
    (b"k", None, None),  # no seed: None, a random code per prompt (`Ledger.render`)
    (b"k", 7, True),  # the same as the reference: key k, seed 7
    (b"other key", 7, False),
    (b"k", 8, False),
])
def test_the_fence_of_a_seeded_request(key: bytes, seed: int | None, same: bool | None) -> None:
    bare = Context(llm=None, docs=None, catalog=None, prompts=None, fence_key=key)  # type: ignore[arg-type]
    ctx = bare.for_request(language="nl", answer=AnswerOptions(seed=seed))
    reference = replace(ctx, fence_key=b"k", answer=AnswerOptions(seed=7)).fence()
    fence = ctx.fence()
    if same is None:
        assert fence is None
    else:
        assert re.fullmatch(r"[0-9a-f]{4}", fence) and (fence == reference) is same


@pytest.mark.parametrize("stream", [False, True])
def test_max_tokens_bounds_the_answer_and_says_length(llm_service, fake_llm: FakeLLM, stream: bool) -> None:
    script(fake_llm)
    base = llm_service()
    client = openai.OpenAI(base_url=base + "/v1", api_key="none", max_retries=0)
    request = {"model": "neo-nl-agent", "messages": [{"role": "user", "content": QUESTION}], "max_tokens": 6}
    if stream:
        received = list(client.chat.completions.create(**request, stream=True))
        text = "".join(c.choices[0].delta.content or "" for c in received if c.choices)
        finish = [c.choices[0].finish_reason for c in received if c.choices and c.choices[0].finish_reason]
    else:
        response = client.chat.completions.create(**request)
        text, finish = response.choices[0].message.content, [response.choices[0].finish_reason]
    assert finish == ["length"]
    assert "Volgens artikel 15a" in text and "december 2033" not in text.split("**Bronnen**")[0]
    assert calls_with(fake_llm, SYNTHESIZE)[0]["max_tokens"] == 6
    # without a cap the same answer ends with "stop"
    full = client.chat.completions.create(model="neo-nl-agent", messages=[{"role": "user", "content": QUESTION}])
    assert full.choices[0].finish_reason == "stop"



class Deadline(BaseModel):
    answer: str
    date: str


DEADLINE_JSON = json.dumps({"answer": "De vergunning vervalt op 31 december 2033 [1].", "date": "2033-12-31"})


def test_a_json_schema_answer_is_the_document_alone(llm_service, fake_llm: FakeLLM) -> None:
    """`parse` with a pydantic model: the content is one JSON document of its schema, the progress comes as
    reasoning_content and the cited documents as data."""
    script(fake_llm, answer=Reply(text="Hier is het antwoord:\n```json\n" + DEADLINE_JSON + "\n```"))
    base = llm_service()
    client = openai.OpenAI(base_url=base + "/v1", api_key="none", max_retries=0)
    response = client.chat.completions.parse(model="neo-nl-agent", response_format=Deadline,
                                             messages=[{"role": "user", "content": QUESTION}])
    message = response.choices[0].message
    assert message.parsed == Deadline.model_validate_json(DEADLINE_JSON)
    assert json.loads(message.content) == json.loads(DEADLINE_JSON)  # nothing before or after it
    assert "JSON" in (message.model_extra or {})["reasoning_content"]
    assert (response.model_extra or {})["citations"]
    (answer,) = calls_with(fake_llm, SYNTHESIZE)
    sent = answer["response_format"]
    assert sent["type"] == "json_schema" and sent["json_schema"]["schema"]["required"] == ["answer", "date"]


def test_a_streamed_json_answer_carries_no_think_tags(llm_service, fake_llm: FakeLLM) -> None:
    script(fake_llm, answer=Reply(text=DEADLINE_JSON))
    base = llm_service()
    payloads = chunks(sse_events(post(base, chat(stream=True, response_format={"type": "json_object"}))))
    assert json.loads(content_of(payloads)) == json.loads(DEADLINE_JSON)
    assert any(c["choices"][0]["delta"].get("reasoning_content") for c in payloads if c["choices"])


def test_a_reply_that_misses_the_schema_gets_one_correction(llm_service, fake_llm: FakeLLM) -> None:
    script(fake_llm, answer=[Reply(text='{"answer": "31 december 2033"}'), Reply(text=DEADLINE_JSON)])
    base = llm_service()
    response = post(base, chat(response_format={"type": "json_schema", "json_schema": {
        "name": "deadline", "schema": Deadline.model_json_schema()}}))
    message = response.json()["choices"][0]["message"]
    assert json.loads(message["content"]) == json.loads(DEADLINE_JSON)
    assert "nog één poging" in message["reasoning_content"] and "date" in message["reasoning_content"]
    retry = calls_with(fake_llm, SYNTHESIZE)[-1]["messages"]
    assert retry[-2]["role"] == "assistant" and "'date' is a required property" in retry[-1]["content"]


def test_a_model_that_cannot_write_the_json_is_an_upstream_error(llm_service, fake_llm: FakeLLM) -> None:
    script(fake_llm, answer=Reply(text="De vergunning vervalt op 31 december 2033."))
    base = llm_service()
    client = openai.OpenAI(base_url=base + "/v1", api_key="none", max_retries=0)
    with pytest.raises(openai.APIStatusError) as raised:
        client.chat.completions.parse(model="neo-nl-agent", response_format=Deadline,
                                      messages=[{"role": "user", "content": QUESTION}])
    assert raised.value.status_code == 502 and raised.value.code == "upstream_error"
    assert len(calls_with(fake_llm, SYNTHESIZE)) == 2  # the answer and one correction, no more
    streamed = sse_events(post(base, chat(stream=True, response_format={"type": "json_object"})))
    error = json.loads(next(p for p in streamed if p.startswith('{"error"')))["error"]
    assert error["code"] == "upstream_error" and streamed[-1] == "[DONE]"


@pytest.mark.parametrize(("effort", "line", "judged"), [
    ("low", "Onderzoeksdiepte: laag", False),
    (None, None, False),  # adaptive: coverage decides this question, no judging call
    ("medium", "Onderzoeksdiepte: adaptief", False),  # the same, said because the caller chose it
    ("high", "Onderzoeksdiepte: hoog", True),  # the model judges even what coverage decided
])
def test_reasoning_effort_sets_the_research_depth(llm_service, fake_llm: FakeLLM, effort: str | None,
                                                  line: str | None, judged: bool) -> None:
    script(fake_llm)
    fake_llm.when_contains(JUDGE, Reply(text=json.dumps({"status": "sufficient", "missing": []})))
    base = llm_service()
    extra = {"reasoning_effort": effort} if effort else {}
    think = post(base, chat(**extra)).json()["choices"][0]["message"]["reasoning_content"]
    assert (line in think) if line else "Onderzoeksdiepte" not in think
    assert bool(calls_with(fake_llm, JUDGE)) is judged


def test_an_unknown_reasoning_effort_is_refused(offline: str) -> None:
    response = post(offline, chat(reasoning_effort="extreme"))
    assert response.status_code == 400 and response.json()["error"]["param"] == "reasoning_effort"


# ---------------------------------------------------------------- LangChain and LiteLLM

def langchain_chat(base: str, **kwargs):
    from langchain_openai import ChatOpenAI

    return ChatOpenAI(**{"base_url": base + "/v1", "api_key": "none", "model": "neo-nl-agent", "max_retries": 0,
                         **kwargs})


def test_langchain_invoke_stream_and_batch(offline: str) -> None:
    """`.stream()` carries the `<think>` block in the content (LangChain reads no reasoning field); a caller
    that wants the answer alone asks for the progress to be left out, per request."""
    chat_model = langchain_chat(offline)
    assert "31 december 2033" in chat_model.invoke(QUESTION).content
    assert "<think>" in "".join(c.content for c in chat_model.stream(QUESTION))
    clean = langchain_chat(offline, extra_body={"reasoning": {"exclude": True}})
    streamed = "".join(c.content for c in clean.stream(QUESTION))
    assert "<think>" not in streamed and "31 december 2033" in streamed
    first, second = clean.batch([QUESTION, "Wat is INSAG-4?"])
    assert "31 december 2033" in first.content and "INSAG-4" in second.content


def test_langchain_structured_output(llm_service, fake_llm: FakeLLM) -> None:
    script(fake_llm, answer=Reply(text=DEADLINE_JSON))
    chat_model = langchain_chat(llm_service())
    for method in ("json_schema", "json_mode"):
        structured = chat_model.with_structured_output(Deadline, method=method)
        assert structured.invoke(f"{QUESTION} Answer in JSON with the fields answer and date.") == \
            Deadline.model_validate_json(DEADLINE_JSON)


def test_langchain_errors_are_typed(offline: str) -> None:
    with pytest.raises(openai.NotFoundError):
        langchain_chat(offline, model="gpt-99").invoke(QUESTION)
    with pytest.raises(openai.BadRequestError):
        langchain_chat(offline, logprobs=True).invoke(QUESTION)


@pytest.fixture
def litellm():
    import os

    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # no download of the price list at import
    import litellm

    return litellm


def test_litellm_completion_stream_reasoning_and_citations(offline: str, litellm) -> None:
    target = {"model": "openai/neo-nl-agent", "api_base": offline + "/v1", "api_key": "none",
              "messages": [{"role": "user", "content": QUESTION}]}
    response = litellm.completion(**target)
    message = response.choices[0].message
    assert "31 december 2033" in message.content and "Vraagtype" in message.reasoning_content
    assert response.citations and response.search_results[0]["url"] == response.citations[0]
    parts = list(litellm.completion(**target, stream=True, extra_body={"reasoning": {"enabled": True}}))
    content = "".join(p.choices[0].delta.content or "" for p in parts if p.choices)
    reasoning = "".join(getattr(p.choices[0].delta, "reasoning_content", None) or "" for p in parts if p.choices)
    assert "<think>" not in content and "31 december 2033" in content and "Vraagtype" in reasoning
    with pytest.raises(litellm.NotFoundError):
        litellm.completion(**{**target, "model": "openai/gpt-99"})


def test_low_effort_makes_one_model_call_where_the_default_makes_two(llm_service, fake_llm: FakeLLM) -> None:
    """More evidence than the budget: the default condenses it with the fast model first; the cheapest path
    cuts it to the budget instead."""
    script(fake_llm)
    base = llm_service(evidence_tokens=200)
    post(base, chat())
    assert [r["model"] for r in fake_llm.requests] == ["small", "big"]
    fake_llm.reset()
    script(fake_llm)
    usage = post(base, chat(reasoning_effort="low")).json()["usage"]
    assert [r["model"] for r in fake_llm.requests] == ["big"] and set(usage["steps"]) == {"synthesize"}


@pytest.mark.parametrize(("extra", "expected"), [
    ({}, AnswerOptions()),
    ({"max_tokens": 50, "max_completion_tokens": 80}, AnswerOptions(max_tokens=80)),  # the newer field wins
    ({"stop": "###"}, AnswerOptions(stop=("###",))),
    ({"temperature": 0.5, "top_p": 0.9, "seed": 3}, AnswerOptions(temperature=0.5, top_p=0.9, seed=3)),
    ({"response_format": {"type": "text"}}, AnswerOptions()),
    ({"response_format": {"type": "json_object"}}, AnswerOptions(json_schema={"type": "object"})),
    ({"response_format": {"type": "json_schema", "json_schema": {"name": "d", "schema": {"type": "array"}}}},
     AnswerOptions(json_schema={"type": "array"})),
    ({"reasoning_effort": "minimal"}, AnswerOptions(depth="low")),
    ({"reasoning_effort": "medium"}, AnswerOptions(depth="medium")),
    ({"reasoning": {"effort": "high"}}, AnswerOptions(depth="high")),
])
def test_the_request_fields_that_change_the_answer(extra: dict, expected: AnswerOptions) -> None:
    assert answer_options(ChatCompletionRequest.model_validate(chat(**extra))) == expected


def test_a_json_answer_hears_what_the_caller_says_about_it() -> None:
    request = ChatCompletionRequest.model_validate({
        "model": "neo-nl-agent", "response_format": {"type": "json_object"},
        "messages": [{"role": "system", "content": "Return {\"answer\": str}."}, {"role": "user", "content": QUESTION}]})
    assert answer_options(request).json_hint == 'Return {"answer": str}.'
    plain = request.model_copy(update={"response_format": None})
    assert answer_options(plain).json_hint == ""  # a prose answer: system messages stay out, as always


@pytest.mark.parametrize(("depth", "coverage_decided", "model", "rounds", "judges"), [
    (None, False, True, 3, True),  # adaptive: the model judges what coverage cannot decide
    (None, True, True, 3, False),
    ("high", True, True, 3, True),  # the full loop: the model judges every round
    ("low", False, True, 1, False),  # the cheapest path: one round, no judging call
    (None, False, False, 3, False),  # offline: rules judge
    ("medium", True, True, 3, False),
])
def test_research_depth(depth: str | None, coverage_decided: bool, model: bool, rounds: int, judges: bool) -> None:
    assert research_rounds(3, depth) == rounds
    assert model_judges(depth, coverage_decided, model) is judges
