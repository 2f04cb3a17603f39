"""Tests of the scripted fake upstream LLM (tests/fakes/fake_llm.py), over real HTTP."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Any

import httpx
import openai
import pytest
from openai.types.chat import ChatCompletion, ChatCompletionChunk

from tests.fakes.fake_llm import FakeLLM, Reply

USER = [{"role": "user", "content": "What does the regulation say?"}]


@pytest.fixture(scope="module")
def server() -> Iterator[FakeLLM]:
    with FakeLLM() as fake:
        yield fake


@pytest.fixture
def fake(server: FakeLLM) -> Iterator[FakeLLM]:
    server.reset()
    yield server
    assert server.wait_idle_sync(), "a test left a request in flight"


@pytest.fixture
def client(fake: FakeLLM) -> Iterator[openai.OpenAI]:
    with openai.OpenAI(base_url=fake.base_url, api_key="x", max_retries=0) as c:
        yield c


def chat_url(fake: FakeLLM) -> str:
    return f"{fake.base_url}/chat/completions"


def sse_events(fake: FakeLLM, body: dict[str, Any]) -> list[str]:
    """POST with httpx and return the raw `data:` payloads of the SSE stream."""
    with httpx.stream("POST", chat_url(fake), json={"stream": True, **body}, timeout=5) as r:
        assert r.status_code == 200
        assert r.headers["content-type"].startswith("text/event-stream")
        return [line[len("data: ") :] for line in r.iter_lines() if line.startswith("data: ")]


# ---------------------------------------------------------------- happy paths
def test_models_and_non_stream_completion(fake: FakeLLM, client: openai.OpenAI) -> None:
    assert [m.id for m in client.models.list().data] == ["fake-model"]

    fake.default(Reply(text="Artikel 15 regelt dit."))
    completion = client.chat.completions.create(model="gpt-x", messages=USER, temperature=0)
    assert isinstance(completion, ChatCompletion)
    assert completion.object == "chat.completion"
    assert completion.model == "gpt-x"
    choice = completion.choices[0]
    assert choice.message.role == "assistant"
    assert choice.message.content == "Artikel 15 regelt dit."
    assert choice.message.refusal is None
    assert choice.finish_reason == "stop"
    assert completion.usage is not None
    assert (completion.usage.prompt_tokens, completion.usage.completion_tokens) == (5, 4)
    assert completion.usage.total_tokens == 9
    assert fake.calls == 1
    assert fake.requests[0]["messages"] == USER
    assert fake.requests[0]["temperature"] == 0


def test_stream_chunks_in_order_with_usage(fake: FakeLLM, client: openai.OpenAI) -> None:
    fake.default(Reply(text="Hello  brave new world\n"))
    stream = client.chat.completions.create(
        model="m", messages=USER, stream=True, stream_options={"include_usage": True}
    )
    chunks = list(stream)
    assert all(isinstance(c, ChatCompletionChunk) for c in chunks)
    assert len({c.id for c in chunks}) == 1 and len({c.created for c in chunks}) == 1
    assert chunks[0].choices[0].delta.role == "assistant"
    assert chunks[0].choices[0].delta.content == ""
    assert all(c.choices[0].delta.role is None for c in chunks[1:] if c.choices)
    content = [c.choices[0].delta.content for c in chunks[1:-2]]
    assert content == ["Hello  ", "brave ", "new ", "world\n"]
    assert chunks[-2].choices[0].finish_reason == "stop"
    assert chunks[-2].choices[0].delta.content is None
    assert chunks[-1].choices == []
    assert chunks[-1].usage is not None and chunks[-1].usage.completion_tokens == 4


def test_stream_raw_sse_without_usage(fake: FakeLLM) -> None:
    events = sse_events(fake, {"messages": USER})
    assert events[-1] == "[DONE]"
    parsed = [json.loads(e) for e in events[:-1]]
    assert [p["choices"][0]["delta"] for p in parsed] == [{"role": "assistant", "content": ""}, {"content": "OK"}, {}]
    assert all("usage" not in p for p in parsed)


@pytest.mark.parametrize("field", ["reasoning_content", "reasoning"])
def test_reasoning_deltas(fake: FakeLLM, field: str) -> None:
    fake.default(Reply(text="Answer here.", reasoning="Let me think.", reasoning_field=field))
    events = sse_events(fake, {"messages": USER})
    deltas = [json.loads(e)["choices"][0]["delta"] for e in events[1:-2]]
    assert deltas == [
        {field: "Let "},
        {field: "me "},
        {field: "think."},
        {"content": "Answer "},
        {"content": "here."},
    ]

    body = httpx.post(chat_url(fake), json={"messages": USER}).json()
    assert body["choices"][0]["message"][field] == "Let me think."
    assert body["choices"][0]["message"]["content"] == "Answer here."
    assert body["usage"]["completion_tokens_details"] == {"reasoning_tokens": 3}


# ---------------------------------------------------------------- rules
def test_rules_order_times_lists_and_default(fake: FakeLLM, client: openai.OpenAI) -> None:
    def ask(content: Any, model: str = "m") -> str | None:
        msgs: Any = [{"role": "user", "content": content}]
        return client.chat.completions.create(model=model, messages=msgs).choices[0].message.content

    fake.default(Reply(text="default"))
    fake.when(lambda req: req["model"] == "router", Reply(text="routed"))
    fake.when_contains("KERNENERGIEWET", Reply(text="once"), times=1)
    fake.when_contains("kernenergiewet", [Reply(text="first"), Reply(text="second")])
    fake.when(lambda req: req.get("user") == "echo", Reply(text=lambda req: f"echo:{len(req['messages'])}"))

    assert ask("x", model="router") == "routed"  # earlier rule wins
    assert ask("Wat zegt de Kernenergiewet?") == "once"  # case-insensitive, then removed
    parts = [{"type": "text", "text": "over de kernenergiewet"}]
    assert ask(parts) == "first"  # text parts are searched too
    assert ask("kernenergiewet") == "second"
    assert ask("kernenergiewet") == "second"  # the last reply repeats
    assert ask("something else") == "default"
    echoed = client.chat.completions.create(model="m", messages=USER, user="echo")
    assert echoed.choices[0].message.content == "echo:1"
    assert fake.calls == 7

    fake.reset()
    assert (fake.calls, fake.requests, fake.timings) == (0, [], [])
    assert ask("kernenergiewet", model="router") == "OK"


# ---------------------------------------------------------------- errors and faults
def test_error_statuses(fake: FakeLLM, client: openai.OpenAI) -> None:
    fake.when_contains("boom", Reply(status=500))
    fake.default(Reply(status=429, text="slow down", headers={"Retry-After": "1"}))

    with pytest.raises(openai.InternalServerError) as server_err:
        client.chat.completions.create(model="m", messages=[{"role": "user", "content": "boom"}])
    assert server_err.value.status_code == 500
    assert server_err.value.type == "server_error"

    with pytest.raises(openai.RateLimitError) as rate_err:
        client.chat.completions.create(model="m", messages=USER, stream=True)
    assert rate_err.value.response.headers["retry-after"] == "1"
    assert rate_err.value.body == {
        "message": "slow down",
        "type": "rate_limit_error",
        "param": None,
        "code": "rate_limit_exceeded",
    }


def test_invalid_requests_get_400(fake: FakeLLM) -> None:
    bad_json = httpx.post(chat_url(fake), content=b"{nope", headers={"content-type": "application/json"})
    no_messages = httpx.post(chat_url(fake), json={"model": "m"})
    for r in (bad_json, no_messages):
        assert r.status_code == 400
        assert set(r.json()["error"]) == {"message", "type", "param", "code"}
    assert fake.calls == 0


def test_garbage(fake: FakeLLM, client: openai.OpenAI) -> None:
    fake.default(Reply(fault="garbage"))
    events = sse_events(fake, {"messages": USER})
    assert events[-1] == "[DONE]"
    with pytest.raises(json.JSONDecodeError):
        [json.loads(e) for e in events[1:-1]]

    r = httpx.post(chat_url(fake), json={"messages": USER})
    assert r.status_code == 200
    with pytest.raises(json.JSONDecodeError):
        r.json()
    with pytest.raises(json.JSONDecodeError):  # the SDK does not wrap it
        client.chat.completions.create(model="m", messages=USER)


def test_early_end(fake: FakeLLM, client: openai.OpenAI) -> None:
    fake.default(Reply(text="one two three four", fault="early_end"))
    events = sse_events(fake, {"messages": USER})
    assert "[DONE]" not in events
    parsed = [json.loads(e) for e in events]
    assert [p["choices"][0]["delta"].get("content") for p in parsed] == ["", "one ", "two "]
    assert all(p["choices"][0]["finish_reason"] is None for p in parsed)

    # The SDK just stops iterating: no error, no finish_reason.
    chunks = list(client.chat.completions.create(model="m", messages=USER, stream=True))
    assert [c.choices[0].finish_reason for c in chunks] == [None, None, None]

    with pytest.raises(httpx.RemoteProtocolError):  # non-stream: truncated body
        httpx.post(chat_url(fake), json={"messages": USER})
    assert fake.disconnects == 0


def test_reset(fake: FakeLLM, client: openai.OpenAI) -> None:
    fake.default(Reply(fault="reset"))
    with pytest.raises(httpx.TransportError):
        httpx.post(chat_url(fake), json={"messages": USER, "stream": True})
    with pytest.raises(openai.APIConnectionError):
        client.chat.completions.create(model="m", messages=USER)
    assert fake.calls == 2
    assert fake.disconnects == 0
    assert [t["first_token"] for t in fake.timings] == [None, None]


# ---------------------------------------------------------------- disconnects and concurrency
@pytest.mark.asyncio
@pytest.mark.parametrize(
    ("reply", "stream"),
    [
        (Reply(fault="hang"), False),
        (Reply(fault="hang"), True),
        (Reply(fault="hang_after_first_token"), False),
        (Reply(ttft_s=30), False),
        (Reply(ttft_s=30), True),
    ],
    ids=["hang", "hang-stream", "hang-after-first-token", "slow", "slow-stream"],
)
async def test_client_timeout_releases_in_flight(fake: FakeLLM, reply: Reply, stream: bool) -> None:
    fake.default(reply)
    async with httpx.AsyncClient(timeout=0.2) as http:
        with pytest.raises(httpx.ReadTimeout):
            await http.post(chat_url(fake), json={"messages": USER, "stream": stream})
    assert await fake.wait_idle(timeout=2)
    assert fake.disconnects == 1


@pytest.mark.asyncio
@pytest.mark.parametrize("fault", ["hang_after_first_token", None])
async def test_stream_client_goes_away_mid_stream(fake: FakeLLM, fault: str | None) -> None:
    fake.default(Reply(text="word " * 50, fault=fault, token_delay_s=0.05))
    async with httpx.AsyncClient(timeout=5) as http:
        async with http.stream("POST", chat_url(fake), json={"messages": USER, "stream": True}) as r:
            lines = r.aiter_lines()
            seen = [line async for line in _take_data(lines, 2)]
            assert json.loads(seen[1])["choices"][0]["delta"] == {"content": "word "}
            assert fake.in_flight == 1
    assert await fake.wait_idle(timeout=2)
    assert fake.disconnects == 1
    assert fake.timings[0]["end"] is not None


async def _take_data(lines: Any, n: int) -> Any:
    async for line in lines:
        if line.startswith("data: "):
            yield line[len("data: ") :]
            n -= 1
            if n == 0:
                return


@pytest.mark.asyncio
async def test_peak_in_flight(fake: FakeLLM) -> None:
    fake.default(Reply(ttft_s=0.3))
    async with openai.AsyncOpenAI(base_url=fake.base_url, api_key="x", max_retries=0) as client:
        results = await asyncio.gather(
            *(client.chat.completions.create(model="m", messages=USER) for _ in range(5))
        )
    assert [r.choices[0].message.content for r in results] == ["OK"] * 5
    assert fake.peak_in_flight == 5
    assert await fake.wait_idle(2.0)  # the server's bookkeeping may finish just after the client has its reply
    assert fake.in_flight == 0
    assert fake.disconnects == 0


def test_server_defaults_and_timings() -> None:
    with FakeLLM(ttft_s=0.1, token_delay_s=0.02, model="tiny") as fake:
        with openai.OpenAI(base_url=fake.base_url, api_key="x", max_retries=0) as client:
            assert client.models.list().data[0].id == "tiny"
            fake.default(Reply(text="a b c d e f"))
            list(client.chat.completions.create(model="", messages=USER, stream=True))
            completion = client.chat.completions.create(model="", messages=USER)
            assert completion.model == "tiny"
        # the client has its last byte before the server records the request's end
        assert fake.wait_idle_sync()
        for t in fake.timings:  # recorded in order; the delays themselves are measured by `make bench`
            assert t["start"] <= t["first_token"] <= t["end"]
        assert fake.calls == 2


@pytest.mark.asyncio
async def test_stop_drops_requests_in_flight() -> None:
    fake = FakeLLM().start()
    fake.default(Reply(fault="hang"))
    async with httpx.AsyncClient(timeout=5) as http:
        pending = asyncio.ensure_future(http.post(chat_url(fake), json={"messages": USER}))
        for _ in range(200):
            if fake.in_flight:
                break
            await asyncio.sleep(0.01)
        assert fake.in_flight == 1
        await asyncio.to_thread(fake.stop)
        with pytest.raises(httpx.TransportError):
            await pending
    assert fake.in_flight == 0
