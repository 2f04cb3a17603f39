"""A hostile client and a hostile upstream against the real service over real sockets (issue 57, defects 3, 4, 9):

* traces: with content capture off, no exported span carries the question (an upstream 500 whose body quotes the
  prompt) or a key put in the URL's query; the failure's exception type is recorded;
* text that is no Unicode text (a lone surrogate sent as the JSON escape `\\ud800`, a NUL) is a 400 before any
  work, through the official `openai` client and raw HTTP, streamed or not;
* a stream that fails after its first byte ends with an error event and `data: [DONE]`, whichever phase failed
  (failures injected through a real component: the answer cache holding a corrupt entry, as a shared Redis can);
* the HTTP server closes a client that does not send its whole request in time (silent, slow headers, slow body)
  but never cuts a long streamed answer, closes idle keep-alive connections by the idle timeout, and answers 503
  beyond MAX_CONNECTIONS; uvicorn started with the service's own `server_options`.
"""

from __future__ import annotations

import argparse
import http.client
import json
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from typing import Any

import httpx
import openai
import pytest
import uvicorn
from openai.types.chat import ChatCompletion, ChatCompletionChunk

from app.__main__ import server_options
from app.main import create_app
from app.settings import Settings
from graph.clients.cache import MemoryCache
from tests.conftest import QUESTION, SHARED, chunks, sse_events
from tests.fakes.fake_llm import FakeLLM, Reply
from tests.fakes.otlp import OtlpReceiver
from tests.fakes.servers import ServerThread
from tests.test_llm_mode import ANSWER, script

MODEL = "neo-nl-agent"
MARKER = "XK-4471"  # a word of the question that must never reach a trace
TRACED_QUESTION = f"Wanneer vervalt de vergunning van kerncentrale Borssele volgens dossier {MARKER}?"
SECRET = "SECRET-9c1f7e"
VALIDATOR = SHARED / "openai-schemas" / "validate.py"
DEADLINE_S = 1.0  # REQUEST_HEADER_TIMEOUT_S of the servers below
GRACE_S = 5.0  # a closed connection is seen within the deadline plus this (no timing is asserted)


# ------------------------------------------------------------------------------------------------ traces


def attribute(items: list[dict[str, Any]], key: str) -> Any:
    return next((next(iter(a["value"].values()), None) for a in items if a["key"] == key), None)


@pytest.fixture
def sink() -> Iterator[OtlpReceiver]:
    """A real OTLP/HTTP trace receiver keeping each span whole (attributes, status, events)."""
    receiver = OtlpReceiver(decode=False, whole=True)
    yield receiver
    receiver.stop()


def test_traces_carry_no_question_and_no_url_query_but_the_failures_type(docserver_url: str, fake_llm: FakeLLM,
                                                                         sink: OtlpReceiver) -> None:
    """Defect 3. The upstream fails every call with a 500 whose message quotes the prompt; a JSON answer has no
    honest fallback, so the `synthesize` node fails with the upstream's error. At HEAD its span said
    `LLMError: upstream HTTP 500: ...<the question>...` (status and `exception` event, OpenTelemetry's default)
    and the server span's `http.url` held `?api_key=SECRET`."""
    def quoting(body: dict[str, Any]) -> str:
        return "model overloaded while answering: " + " | ".join(m["content"] for m in body["messages"])

    fake_llm.default(Reply(status=500, text=quoting))
    app = create_app(Settings(_env_file=None, mcp_server_url=docserver_url, llm_base_url=fake_llm.base_url,
                              llm_model="big", llm_fast_model="small", llm_max_retries=0, response_cache=False,
                              otel_exporter_otlp_endpoint=sink.url))
    with ServerThread(app) as server:  # stopping it ends the lifespan: the provider exports what is left
        response = httpx.post(f"{server.base_url}/v1/chat/completions?api_key={SECRET}", timeout=60, json={
            "model": MODEL, "response_format": {"type": "json_object"},
            "messages": [{"role": "user", "content": TRACED_QUESTION}]})
        assert response.status_code == 502 and response.json()["error"]["code"] == "upstream_error"
        assert any(MARKER in json.dumps(r) for r in fake_llm.requests)  # the prompts did quote the question
    spans = sink.whole
    assert spans and "POST /v1/chat/completions" in {s["name"] for s in spans}
    exported = json.dumps([{k: s.get(k) for k in ("name", "attributes", "status", "events")} for s in spans])
    assert MARKER not in exported and "overloaded" not in exported
    assert SECRET not in exported and "api_key" not in exported
    server_span = next(s for s in spans if s["name"] == "POST /v1/chat/completions")
    assert attribute(server_span["attributes"], "http.url").endswith("/v1/chat/completions")
    node = next(s for s in spans if s["name"] == "node synthesize")
    assert node["status"] == {"code": "STATUS_CODE_ERROR", "message": "LLMError"}  # the type, recorded
    assert [(e["name"], attribute(e["attributes"], "exception.type")) for e in node["events"]] == \
        [("exception", "LLMError")]
    calls = [s for s in spans if s["name"].startswith("chat ")]
    assert calls and all(c["status"]["message"] == "LLMError" for c in calls)


def test_with_content_capture_a_failures_message_is_recorded(docserver_url: str, fake_llm: FakeLLM,
                                                             sink: OtlpReceiver) -> None:
    """The operator's opt-in (OTEL_CAPTURE_CONTENT=true) still records a model call's failure with its message:
    prompts leave the service then anyway. (At HEAD only the type was recorded, as status, and the message as an
    event.) A node's span records the type only: the pipeline's context does not carry the opt-in."""
    fake_llm.default(Reply(status=500, text=f"overloaded: {MARKER}"))
    app = create_app(Settings(_env_file=None, mcp_server_url=docserver_url, llm_base_url=fake_llm.base_url,
                              llm_model="big", llm_fast_model="small", llm_max_retries=0, response_cache=False,
                              otel_exporter_otlp_endpoint=sink.url, otel_capture_content=True))
    with ServerThread(app) as server:
        httpx.post(f"{server.base_url}/v1/chat/completions", timeout=60, json={
            "model": MODEL, "response_format": {"type": "json_object"},
            "messages": [{"role": "user", "content": TRACED_QUESTION}]})
    calls = [s for s in sink.whole if s["name"].startswith("chat ")]
    assert calls and all(c["status"]["message"].startswith("LLMError: upstream HTTP 500") for c in calls)
    assert any(MARKER in c["status"]["message"] for c in calls)
    assert all(attribute(c["events"][0]["attributes"], "exception.message") for c in calls)
    node = next(s for s in sink.whole if s["name"] == "node synthesize")
    assert node["status"]["message"] == "LLMError"


# ------------------------------------------------------------------------------------------------ invalid text

LONE = b"Borssele \\ud800 vergunning?"  # the JSON escape of a lone surrogate, as bytes on the wire


def raw_chat(content: bytes, *, stream: bool) -> bytes:
    return b'{"model":"%s","stream":%s,"messages":[{"role":"user","content":%s}]}' % (
        MODEL.encode(), b"true" if stream else b"false", content)


def assert_invalid_text(response: httpx.Response, param: str) -> None:
    assert response.status_code == 400, response.text
    assert response.headers["content-type"].startswith("application/json")
    error = response.json()["error"]
    assert error["type"] == "invalid_request_error" and error["code"] == "invalid_text" and error["param"] == param
    assert error["message"].startswith(f"{param}: ")


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize(("content", "param"), [
    (b'"' + LONE + b'"', "messages.0.content"),
    (b'"Borssele \\udfff"', "messages.0.content"),  # a low surrogate alone
    (b'[{"type":"text","text":"Borssele"},{"type":"text","text":"\\ud800 vergunning?"}]', "messages.0.content.1.text"),
    (b'"Borssele \\u0000 vergunning?"', "messages.0.content"),
])
def test_text_that_is_no_unicode_is_a_400_before_any_work(offline: str, content: bytes, param: str,
                                                          stream: bool) -> None:
    """Defect 4. At HEAD a lone surrogate got a 500 (`cache_key()` encodes the question) and, streamed, a
    connection that died mid-body without error event or [DONE]; a NUL went into the pipeline."""
    response = httpx.post(offline + "/v1/chat/completions", content=raw_chat(content, stream=stream), timeout=30,
                          headers={"Content-Type": "application/json"})
    assert_invalid_text(response, param)


def test_a_search_query_must_be_text_and_a_surrogate_pair_is(offline: str) -> None:
    """The escape of a character beyond the BMP is two surrogates that make one character: text, searched."""
    for query, problem in [(b'"Borssele \\ud800"', "surrogate"), (b'"Borssele\\u0000"', "NUL")]:
        response = httpx.post(offline + "/v1/search", content=b'{"query":%s}' % query, timeout=30,
                              headers={"Content-Type": "application/json"})
        assert_invalid_text(response, "query")
        assert problem in response.json()["error"]["message"]
    response = httpx.post(offline + "/v1/search", content=b'{"query":"vergunning Borssele \\ud83d\\ude00"}',
                          timeout=30, headers={"Content-Type": "application/json"})
    assert response.status_code == 200 and response.json()["data"]


@pytest.mark.parametrize("stream", [False, True])
def test_the_openai_client_gets_the_400(offline: str, stream: bool) -> None:
    """The official client: its own `create()` cannot even encode a lone surrogate (UTF-8), so the body goes out
    as another client writes it (`json.dumps`, ASCII escapes), through the client's raw `post`."""
    client = openai.OpenAI(base_url=offline + "/v1", api_key="none", max_retries=0)
    body = raw_chat(b'"' + LONE + b'"', stream=stream)
    with pytest.raises(openai.BadRequestError) as caught:
        if stream:
            for _ in client.post("/chat/completions", body=body, cast_to=ChatCompletionChunk, stream=True,
                                 stream_cls=openai.Stream[ChatCompletionChunk],
                                 options={"headers": {"Content-Type": "application/json"}}):
                pass
        else:
            client.post("/chat/completions", body=body, cast_to=ChatCompletion,
                        options={"headers": {"Content-Type": "application/json"}})
    error = caught.value
    assert error.status_code == 400 and error.code == "invalid_text" and error.param == "messages.0.content"
    assert error.type == "invalid_request_error"


# ------------------------------------------------------------------------------------------------ failing streams


class CorruptCache(MemoryCache):
    """The response cache as a shared Redis can be: the entry under the request's key was written by something
    else (an older version, another program). The real `MemoryCache` reads it, JSON and all."""

    def __init__(self, entry: str) -> None:
        super().__init__()
        self.entry = entry

    async def get(self, key: str) -> Any | None:
        self._data[key] = self.entry
        return await super().get(key)


@contextmanager
def cached_service(docserver_url: str, entry: str) -> Iterator[str]:
    app = create_app(Settings(_env_file=None, mcp_server_url=docserver_url, llm_base_url="", response_cache=True,
                              sse_ping_s=1.0))
    with ServerThread(app) as server:
        app.state.services.cache = CorruptCache(entry)  # the answer cache the chat requests read
        yield server.base_url


def streamed(base: str) -> str:
    """The raw SSE text of a streamed answer, as far as it came: at HEAD the connection died mid-body."""
    received: list[str] = []
    try:
        with httpx.stream("POST", base + "/v1/chat/completions", timeout=30, json={
                "model": MODEL, "stream": True, "messages": [{"role": "user", "content": QUESTION}]}) as response:
            assert response.status_code == 200
            for text in response.iter_text():
                received.append(text)
    except httpx.HTTPError:
        pass  # asserted below: the stream must have ended properly
    return "".join(received)


def assert_ends_with_an_error_event(raw: str) -> tuple[str, dict[str, Any]]:
    """The stream's content before its error, and the error; the stream ends `error, [DONE]` and passes the
    official schema validator (an in-band error event ends a stream without a finish_reason)."""
    payloads = sse_events(httpx.Response(200, text=raw))
    assert payloads[-1] == "[DONE]", raw[-300:]
    error = json.loads(payloads[-2])
    assert set(error) == {"error"} and error["error"]["type"] == "server_error"
    assert error["error"]["code"] == "internal_error" and error["error"]["message"].startswith("internal error")
    before = chunks(payloads[:-2])
    assert before[0]["choices"][0]["delta"]["role"] == "assistant"
    assert all(c["choices"][0]["finish_reason"] is None for c in before)
    if VALIDATOR.exists():
        result = subprocess.run([sys.executable, str(VALIDATOR), "--sse", "chunk", "-"], input=raw,
                                capture_output=True, text=True, timeout=60)
        assert result.returncode == 0, result.stdout + result.stderr
    return "".join(c["choices"][0]["delta"].get("content") or "" for c in before), error


def test_a_stream_failing_before_any_event_ends_with_error_and_done(docserver_url: str) -> None:
    """The cache lookup fails (not JSON): the events iterator raises before its first event."""
    with cached_service(docserver_url, "{not json") as base:
        content, _ = assert_ends_with_an_error_event(streamed(base))
    assert content == ""


def test_a_stream_failing_in_the_think_block_closes_it_then_errors(docserver_url: str) -> None:
    """The replay has sent think lines when a record it cannot read comes: the think block is closed first."""
    entry = json.dumps({"events": [{"type": "Step", "text": "Zoeken in de ANVS-bronnen"}, {"type": "NoSuchEvent"}]})
    with cached_service(docserver_url, entry) as base:
        content, _ = assert_ends_with_an_error_event(streamed(base))
    assert content.startswith("<think>") and "Zoeken in de ANVS-bronnen" in content
    assert content.endswith("</think>\n\n")


def test_a_stream_failing_during_the_answer_ends_with_error_and_done(docserver_url: str) -> None:
    entry = json.dumps({"events": [{"type": "Step", "text": "Zoeken"},
                                   {"type": "AnswerDelta", "text": "De vergunning vervalt "},
                                   {"type": "AnswerDelta"}]})  # no text: the record cannot be read
    with cached_service(docserver_url, entry) as base:
        content, _ = assert_ends_with_an_error_event(streamed(base))
    assert content.endswith("</think>\n\nDe vergunning vervalt ")


def test_a_stream_failing_in_its_finish_ends_with_error_and_done(docserver_url: str) -> None:
    """Every event renders; the finish chunk (citations, search results) cannot be built from a source whose
    page is no number."""
    source = {"type": "SourceFound", "number": 1, "title": "Kernenergiewet", "collection": "wetten",
              "url": "https://wetten.overheid.nl/BWBR0002402", "evidence_id": "wetten/kew#1", "page": "vijf"}
    entry = json.dumps({"events": [source, {"type": "AnswerDelta", "text": "De vergunning vervalt in 2033 [1]."}]})
    with cached_service(docserver_url, entry) as base:
        content, _ = assert_ends_with_an_error_event(streamed(base))
    assert content.endswith("De vergunning vervalt in 2033 [1].")


def test_a_lone_surrogate_from_a_source_goes_out_as_a_replacement_character(docserver_url: str) -> None:
    """Text the service did not get from the client (an upstream's or a cached reply: JSON can carry `\\ud800`)
    cannot be refused with a 400; it goes out as U+FFFD. At HEAD sse-starlette failed to encode it and the
    connection died mid-stream."""
    entry = '{"events": [{"type": "AnswerDelta", "text": "De vergunning \\ud800 vervalt in 2033."}]}'
    with cached_service(docserver_url, entry) as base:
        raw = streamed(base)
    payloads = sse_events(httpx.Response(200, text=raw))
    assert payloads[-1] == "[DONE]" and chunks(payloads)[-1]["choices"][0]["finish_reason"] == "stop"
    content = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks(payloads) if c["choices"])
    assert content.endswith("De vergunning \ufffd vervalt in 2033.")


# ------------------------------------------------------------------------------------------------ connections


@contextmanager
def guarded_server(parser: str = "httptools", **overrides: Any) -> Iterator[int]:
    """The service under uvicorn with `python -m app serve`'s own options (`server_options`), on a free port of
    127.0.0.1; the HTTP parser as given (httptools is what `serve` uses)."""
    values: dict[str, Any] = {"llm_base_url": "", "response_cache": False, "request_header_timeout_s": DEADLINE_S,
                              "sse_ping_s": 0.5, **overrides}
    settings = Settings(_env_file=None, **values)
    options = server_options(settings, argparse.Namespace())
    if "http" in options:  # (HEAD had none: its tests then fail by what the server does, not by a KeyError)
        options["http"] = replace(options["http"], parser=parser)
    for key in ("host", "port", "workers"):  # the socket below is the address; one process
        options.pop(key)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    server = uvicorn.Server(uvicorn.Config(lambda: create_app(settings), log_config=None, access_log=False,
                                           timeout_graceful_shutdown=2, **options))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline, "the server did not start"
        time.sleep(0.02)
    try:
        yield sock.getsockname()[1]
    finally:
        server.should_exit = True
        thread.join(timeout=15)


def connect(port: int) -> socket.socket:
    return socket.create_connection(("127.0.0.1", port), timeout=5)


def closed_within(sock: socket.socket, seconds: float, trickle: Callable[[], bytes] | None = None) -> bool:
    """Whether the server closes `sock` within `seconds`; meanwhile `trickle()`'s bytes go out every 0.3 s (a
    slow client's: they must not buy it time)."""
    sock.settimeout(0.3)
    end = time.monotonic() + seconds
    try:
        while time.monotonic() < end:
            if trickle is not None:
                sock.sendall(trickle())
            try:
                if sock.recv(65536) == b"":
                    return True
            except TimeoutError:
                continue
    except OSError:  # reset: closed with our bytes unread, or written to after the close
        return True
    finally:
        sock.close()
    return False


def slow_head(sock: socket.socket) -> Callable[[], bytes]:
    sock.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: neo\r\n")
    return lambda: b"X-Slow: 1\r\n"


def slow_body(sock: socket.socket) -> Callable[[], bytes]:
    sock.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: neo\r\nContent-Type: application/json\r\n"
                 b"Content-Length: 100000\r\n\r\n{")
    return lambda: b" "


@pytest.mark.parametrize("parser", ["httptools", "h11"])
def test_a_client_that_does_not_send_its_request_in_time_is_closed(docserver_url: str, parser: str) -> None:
    """Defect 9. A silent connection, headers one line at a time and a body one byte at a time are all closed
    once the request deadline has passed. At HEAD uvicorn had no such deadline: each stayed open."""
    with guarded_server(parser, mcp_server_url=docserver_url) as port:
        silent, head, body = connect(port), connect(port), connect(port)
        trickles = {"head": slow_head(head), "body": slow_body(body)}
        results: dict[str, bool] = {}
        threads = [threading.Thread(target=lambda n=n, s=s: results.__setitem__(n, closed_within(
            s, DEADLINE_S + GRACE_S, trickles.get(n)))) for n, s in (("silent", silent), ("head", head), ("body", body))]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert results == {"silent": True, "head": True, "body": True}
        assert httpx.get(f"http://127.0.0.1:{port}/health", timeout=10).status_code == 200  # the server is fine


@pytest.mark.parametrize("parser", ["httptools", "h11"])
def test_a_long_streamed_answer_is_not_cut_while_a_slow_client_is(docserver_url: str, fake_llm: FakeLLM,
                                                                  parser: str) -> None:
    """The deadline is for receiving a request, not for answering it: an answer streaming for several deadlines
    completes, while a slow client on another connection is closed (at HEAD it was not)."""
    script(fake_llm, answer=Reply(text=ANSWER, token_delay_s=0.3))  # 17 tokens: 5 s and more
    with guarded_server(parser, mcp_server_url=docserver_url, llm_base_url=fake_llm.base_url, llm_model="big",
                        llm_fast_model="small") as port:
        slow = connect(port)
        trickle = slow_head(slow)
        verdict: list[bool] = []
        watcher = threading.Thread(target=lambda: verdict.append(closed_within(slow, DEADLINE_S + GRACE_S, trickle)))
        watcher.start()
        started = time.monotonic()
        response = httpx.post(f"http://127.0.0.1:{port}/v1/chat/completions", timeout=60, json={
            "model": MODEL, "stream": True, "messages": [{"role": "user", "content": QUESTION}]})
        took = time.monotonic() - started
        watcher.join()
    payloads = sse_events(response)
    assert took > 3 * DEADLINE_S  # the case at hand: an answer longer than the deadline
    assert payloads[-1] == "[DONE]" and chunks(payloads)[-1]["choices"][0]["finish_reason"] == "stop"
    assert "31 december 2033" in "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks(payloads))
    assert verdict == [True]


def get(connection: http.client.HTTPConnection, path: str = "/health") -> tuple[int, bytes]:
    connection.request("GET", path)
    response = connection.getresponse()
    return response.status, response.read()


def test_idle_connections_are_closed_new_ones_by_the_deadline_used_ones_by_the_idle_timeout(
        docserver_url: str) -> None:
    """A connection that never sends a byte is closed by the request deadline (at HEAD: never); one idle after
    a request is not (its request is in: no deadline runs), but by the idle timeout, HTTP_IDLE_TIMEOUT_S."""
    idle_s = 4 * DEADLINE_S
    with guarded_server(mcp_server_url=docserver_url, http_idle_timeout_s=idle_s) as port:
        assert closed_within(connect(port), DEADLINE_S + GRACE_S)
        used = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        assert get(used)[0] == 200
        time.sleep(2 * DEADLINE_S)  # past the request deadline, well within the idle timeout
        assert get(used)[0] == 200  # the same connection, still open
        assert used.sock is not None
        assert closed_within(used.sock, idle_s + GRACE_S)


def test_connections_beyond_max_connections_get_a_503(docserver_url: str) -> None:
    """MAX_CONNECTIONS=2: a third connection's request gets an OpenAI-shaped 503 and the connection is closed,
    while the two open ones keep being served; once one closes, a new connection is served. At HEAD: 200."""
    with guarded_server(mcp_server_url=docserver_url, max_connections=2, request_header_timeout_s=30) as port:
        first, second = (http.client.HTTPConnection("127.0.0.1", port, timeout=10) for _ in range(2))
        assert get(first)[0] == 200 and get(second)[0] == 200
        third = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        status, body = get(third)
        assert status == 503
        error = json.loads(body)["error"]
        assert error["type"] == "service_unavailable" and error["code"] == "unavailable"
        assert third.sock is None or closed_within(third.sock, GRACE_S)  # `Connection: close`
        assert get(first)[0] == 200  # the open ones are still served
        first.close()
        deadline = time.monotonic() + GRACE_S  # until the server has seen the close
        while True:
            status = get(http.client.HTTPConnection("127.0.0.1", port, timeout=10))[0]
            if status == 200 or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        assert status == 200
        second.close()


async def test_a_failed_document_call_is_traced_by_its_type_only(docserver_url: str) -> None:
    """An MCP tool call the server refuses: its span says that it failed and with which exception, not the
    server's error text (which can quote the query)."""
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from graph.clients.mcp_client import DocumentClient

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    client = DocumentClient(docserver_url, timeout_s=10, tracer=provider.get_tracer("t"))
    with pytest.raises(Exception) as raised:
        await client.search("geen-collectie-geheime-vraag", "geheime vraag over Borssele")
    await client.aclose()
    (span,) = [s for s in exporter.get_finished_spans() if s.name == "tools/call search_collection"]
    assert span.status.description == type(raised.value).__name__
    recorded = json.dumps([dict(e.attributes or {}) for e in span.events]) + str(span.status.description)
    assert "geheime vraag" not in recorded and "Unknown collection" not in recorded, recorded
    assert any((e.attributes or {}).get("exception.type") for e in span.events)
