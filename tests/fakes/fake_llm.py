"""Scripted fake upstream LLM server for tests and benchmarks.

``FakeLLM`` runs a tiny OpenAI-compatible server (``GET /v1/models``,
``POST /v1/chat/completions``, streaming and non-streaming) with uvicorn in a
background thread on 127.0.0.1, so the service under test talks to it over real
HTTP. Tests script answers with rules (``when`` / ``when_contains`` /
``default``), inject faults (hangs, garbage, truncated streams, connection
resets, error statuses) and inspect what the service sent and how it behaved
(``requests``, ``calls``, ``in_flight``, ``peak_in_flight``, ``disconnects``,
``timings``).

Conventions:

* Tokens are whitespace-preserving word pieces (``re.findall(r"\\S+\\s*|\\s+")``).
  Each streamed delta carries one token, ``completion_tokens`` = number of
  reasoning + content pieces, ``prompt_tokens`` = number of pieces in all
  message contents (text parts only).
* Timing: ``ttft_s`` delays the first token, ``token_delay_s`` separates the
  following ones. Streams send headers at once, then after ``ttft_s`` the role
  chunk together with the first token. Non-streamed bodies are sent after
  ``ttft_s + token_delay_s * (tokens - 1)``.
* Only well-formed requests (JSON object with a ``messages`` list) are counted
  in ``requests``/``calls``/``timings``; others get an immediate 400.
* A client disconnect is seen through ASGI ``http.disconnect``: while waiting
  before a response (ttft, hangs) we listen for it ourselves; during a stream
  starlette's ``StreamingResponse`` cancels the generator. Either way the
  request leaves ``in_flight`` and counts in ``disconnects``.
"""

from __future__ import annotations

import asyncio
import json
import re
import socket
import struct
import threading
import time
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import suppress
from dataclasses import dataclass, field
from typing import Any

import uvicorn
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

Predicate = Callable[[dict[str, Any]], bool]

FAULTS = (None, "hang", "hang_after_first_token", "garbage", "early_end", "reset")

_TOKEN_RE = re.compile(r"\S+\s*|\s+")
_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    429: "rate_limit_error",
}


@dataclass
class Reply:
    """One scripted answer. See the module docstring for timing/token rules.

    Faults (``stream`` = request had ``"stream": true``):

    * ``hang``: no response at all until the client disconnects.
    * ``hang_after_first_token``: stream: role chunk + first token, then silence;
      non-stream: same as ``hang`` but after ``ttft_s``.
    * ``garbage``: stream: role chunk, non-JSON ``data:`` lines, ``[DONE]``;
      non-stream: 200 with an invalid JSON body.
    * ``early_end``: stream: role chunk + half of the tokens (at least one), then the
      body ends cleanly (``Connection: close``) with no finish chunk and no ``[DONE]``;
      non-stream: half of a Content-Length body, then the connection is closed.
    * ``reset``: after ``ttft_s`` the TCP connection is reset (RST), no response.
    """

    text: str | Callable[[dict[str, Any]], str] = "OK"  # callable gets the parsed request JSON
    reasoning: str | None = None  # streamed first, as reasoning deltas
    reasoning_field: str = "reasoning_content"  # or "reasoning" (vLLM gpt-oss style)
    status: int = 200  # != 200: OpenAI error envelope; `text` is the message ("OK" -> generic)
    headers: dict[str, str] = field(default_factory=dict)  # added to every response of this reply
    fault: str | None = None  # one of FAULTS
    ttft_s: float | None = None  # overrides the server default
    token_delay_s: float | None = None  # overrides the server default
    usage: bool = True  # non-stream: in body; stream: only with stream_options.include_usage

    def __post_init__(self) -> None:
        if self.fault not in FAULTS:
            raise ValueError(f"unknown fault {self.fault!r}; expected one of {FAULTS}")


@dataclass
class _Rule:
    predicate: Predicate
    replies: list[Reply]
    times: int | None
    used: int = 0


@dataclass
class _Track:
    """Bookkeeping of one chat completion request."""

    timing: dict[str, float | None]
    completed: bool = False  # the last body message was sent
    disconnected: bool = False


def split_tokens(text: str) -> list[str]:
    """Split text into whitespace-preserving pieces; ``"".join(...) == text``."""
    return _TOKEN_RE.findall(text)


def message_text(message: dict[str, Any]) -> str:
    """Text of one chat message: a string content or the ``text`` of its parts."""
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(
            p["text"] for p in content if isinstance(p, dict) and isinstance(p.get("text"), str)
        )
    return ""


def error_body(status: int, message: str) -> dict[str, Any]:
    """OpenAI error envelope."""
    err_type = _ERROR_TYPES.get(status, "server_error" if status >= 500 else "invalid_request_error")
    code = "rate_limit_exceeded" if status == 429 else None
    return {"error": {"message": message, "type": err_type, "param": None, "code": code}}


def _sse(obj: dict[str, Any] | str) -> str:
    data = obj if isinstance(obj, str) else json.dumps(obj, ensure_ascii=False, separators=(",", ":"))
    return f"data: {data}\n\n"


class FakeLLM:
    """OpenAI-compatible scripted upstream; use as a context manager or start()/stop()."""

    def __init__(
        self, *, ttft_s: float = 0.0, token_delay_s: float = 0.0, model: str = "fake-model", fast: bool = False
    ) -> None:
        """``fast``: serve with httptools on uvloop, which costs less CPU per streamed token (benchmarks share
        the machine with the service); the ``early_end``/``reset`` faults need the default h11 server."""
        self.fast = fast
        self.ttft_s = ttft_s
        self.token_delay_s = token_delay_s
        self.model = model
        self.port: int | None = None
        self._lock = threading.RLock()
        self._rules: list[_Rule] = []
        self._default = Reply()
        self._requests: list[dict[str, Any]] = []
        self._traceparents: list[str] = []  # the W3C `traceparent` header of each request ("" without one)
        self._timings: list[dict[str, float | None]] = []
        self._in_flight = 0
        self._peak = 0
        self._disconnects = 0
        self._server: uvicorn.Server | None = None
        self._loop: asyncio.AbstractEventLoop | None = None  # the server's loop, set by the first request
        self._live: set[asyncio.BaseTransport] = set()  # connections of in-flight chat requests (loop thread only)
        self._thread: threading.Thread | None = None

    # ------------------------------------------------------------------ lifecycle
    def start(self, port: int = 0, wrap: Callable[[ASGIApp], ASGIApp] | None = None) -> FakeLLM:
        """Serve on 127.0.0.1 (``port`` 0: any free port) in a thread; ``wrap`` puts middleware around the app
        (the benchmark's process of its own adds an endpoint that hands over the timings)."""
        if self._thread is not None:
            raise RuntimeError("FakeLLM already started")
        # proto=IPPROTO_TCP matters: asyncio only sets TCP_NODELAY on accepted sockets whose proto is
        # IPPROTO_TCP; without it Nagle + delayed ACK add ~40 ms to every non-streamed response.
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", port))
        self.port = sock.getsockname()[1]
        config = uvicorn.Config(
            wrap(self._asgi) if wrap else self._asgi,
            interface="asgi3",
            http="httptools" if self.fast else "h11",  # _drop_connection relies on h11's cycle.transport
            loop="uvloop" if self.fast else "asyncio",
            ws="none",
            lifespan="off",
            log_config=None,  # don't reconfigure the test process' logging
            log_level="warning",
            access_log=False,
            timeout_graceful_shutdown=1,  # then hanging handlers are cancelled
        )
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(
            target=self._server.run, kwargs={"sockets": [sock]}, name=f"fake-llm-{self.port}", daemon=True
        )
        self._thread.start()
        deadline = time.monotonic() + 10
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("FakeLLM server failed to start")
            time.sleep(0.005)
        return self

    def stop(self) -> None:
        """Stop the server; connections of requests still in flight are dropped first."""
        if self._server is None or self._thread is None:
            return
        if self._loop is not None:
            with suppress(RuntimeError):  # loop already closed
                self._loop.call_soon_threadsafe(lambda: [t.abort() for t in list(self._live)])
        self._server.should_exit = True
        self._thread.join(timeout=5)
        if self._thread.is_alive():
            self._server.force_exit = True
            self._thread.join(timeout=5)
        self._server = self._thread = None
        self._loop = None

    def __enter__(self) -> FakeLLM:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def base_url(self) -> str:
        if self.port is None:
            raise RuntimeError("FakeLLM not started")
        return f"http://127.0.0.1:{self.port}/v1"

    # ------------------------------------------------------------------ scripting
    def when(self, predicate: Predicate, reply: Reply | list[Reply], *, times: int | None = None) -> None:
        """Answer matching requests with ``reply`` (a list is consumed one per call, the last repeats).

        Rules are tried in registration order; ``times=N`` drops the rule after N uses.
        """
        replies = [reply] if isinstance(reply, Reply) else list(reply)
        if not replies:
            raise ValueError("empty reply list")
        if times is not None and times < 1:
            raise ValueError("times must be >= 1 or None")
        with self._lock:
            self._rules.append(_Rule(predicate, replies, times))

    def when_contains(self, needle: str, reply: Reply | list[Reply], *, times: int | None = None) -> None:
        """Rule matching when any message content contains ``needle`` (case-insensitive)."""
        low = needle.lower()

        def predicate(body: dict[str, Any]) -> bool:
            return any(low in message_text(m).lower() for m in body.get("messages", []) if isinstance(m, dict))

        self.when(predicate, reply, times=times)

    def default(self, reply: Reply) -> None:
        with self._lock:
            self._default = reply

    def reset(self) -> None:
        """Clear rules (default back to "OK"), the request log and counters.

        Requests still in flight stay counted in ``in_flight`` (and ``peak_in_flight``).
        """
        with self._lock:
            self._rules.clear()
            self._default = Reply()
            self._requests.clear()
            self._traceparents.clear()
            self._timings.clear()
            self._disconnects = 0
            self._peak = self._in_flight

    def _match(self, body: dict[str, Any]) -> Reply:
        with self._lock:
            for rule in self._rules:
                if rule.predicate(body):
                    reply = rule.replies[min(rule.used, len(rule.replies) - 1)]
                    rule.used += 1
                    if rule.times is not None and rule.used >= rule.times:
                        self._rules.remove(rule)
                    return reply
            return self._default

    # ------------------------------------------------------------------ counters
    @property
    def requests(self) -> list[dict[str, Any]]:
        with self._lock:
            return list(self._requests)

    @property
    def traceparents(self) -> list[str]:
        with self._lock:
            return list(self._traceparents)

    @property
    def calls(self) -> int:
        with self._lock:
            return len(self._requests)

    @property
    def in_flight(self) -> int:
        return self._in_flight

    @property
    def peak_in_flight(self) -> int:
        return self._peak

    @property
    def disconnects(self) -> int:
        return self._disconnects

    @property
    def timings(self) -> list[dict[str, float | None]]:
        """Per request ``{"start", "first_token", "end"}`` (time.perf_counter(); None until known)."""
        with self._lock:
            return [dict(t) for t in self._timings]

    async def wait_idle(self, timeout: float = 2.0) -> bool:
        deadline = time.monotonic() + timeout
        while self._in_flight:
            if time.monotonic() > deadline:
                return False
            await asyncio.sleep(0.01)
        return True

    def wait_idle_sync(self, timeout: float = 2.0) -> bool:
        deadline = time.monotonic() + timeout
        while self._in_flight:
            if time.monotonic() > deadline:
                return False
            time.sleep(0.01)
        return True

    def _begin(self, body: dict[str, Any], arrived: float, traceparent: str = "") -> _Track:
        track = _Track(timing={"start": arrived, "first_token": None, "end": None})
        with self._lock:
            self._requests.append(body)
            self._traceparents.append(traceparent)
            self._timings.append(track.timing)
            self._in_flight += 1
            self._peak = max(self._peak, self._in_flight)
        return track

    def _finish(self, track: _Track) -> None:
        with self._lock:
            track.timing["end"] = time.perf_counter()
            self._in_flight -= 1
            if track.disconnected:
                self._disconnects += 1

    # ------------------------------------------------------------------ ASGI app
    async def _asgi(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        path, method = scope["path"].rstrip("/"), scope["method"]
        if path == "/v1/models" and method == "GET":
            model = {"id": self.model, "object": "model", "created": 0, "owned_by": "fake"}
            models = {"object": "list", "data": [model]}
            await JSONResponse(models)(scope, receive, send)
        elif path == "/v1/chat/completions" and method == "POST":
            await self._chat(scope, receive, send)
        else:
            await JSONResponse(error_body(404, f"no route {method} {path}"), 404)(scope, receive, send)

    async def _chat(self, scope: Scope, receive: Receive, send: Send) -> None:
        # the upstream's part of a call starts when the request reaches it: reading and parsing the body
        # (a prompt of several kB) is the upstream's time, not its client's
        arrived = time.perf_counter()
        raw = await Request(scope, receive).body()
        try:
            body = json.loads(raw)
        except ValueError:
            body = None
        if not isinstance(body, dict) or not isinstance(body.get("messages"), list):
            problem = "invalid JSON body" if body is None else "'messages' is required and must be a list"
            await JSONResponse(error_body(400, problem), 400)(scope, receive, send)
            return
        reply = self._match(body)
        track = self._begin(body, arrived, dict(scope["headers"]).get(b"traceparent", b"").decode("latin-1"))
        self._loop = asyncio.get_running_loop()
        transport = _transport(send)
        if transport is not None:
            self._live.add(transport)

        async def tracked_send(message: Message) -> None:
            if message["type"] == "http.response.body" and not message.get("more_body", False):
                track.completed = True
            await send(message)

        try:
            await self._respond(body, reply, track, scope, receive, send, tracked_send)
        finally:
            if transport is not None:
                self._live.discard(transport)
            self._finish(track)

    async def _respond(
        self,
        body: dict[str, Any],
        reply: Reply,
        track: _Track,
        scope: Scope,
        receive: Receive,
        raw_send: Send,
        send: Send,
    ) -> None:
        ttft = self.ttft_s if reply.ttft_s is None else reply.ttft_s
        delay = self.token_delay_s if reply.token_delay_s is None else reply.token_delay_s
        stream = body.get("stream") is True
        headers = dict(reply.headers)

        if reply.fault == "hang":
            track.disconnected = await _pause(None, receive)
            return
        if not stream or reply.status != 200 or reply.fault == "reset":
            if await _pause(ttft, receive):
                track.disconnected = True
                return
            text = _resolve(reply, body)
            if reply.fault == "reset":
                await _drop_connection(raw_send, receive, reset=True)
                return
            if reply.status != 200:
                message = text if text != "OK" else f"fake upstream error (HTTP {reply.status})"
                await JSONResponse(error_body(reply.status, message), reply.status, headers)(scope, receive, send)
                return
            track.timing["first_token"] = time.perf_counter()
            if reply.fault == "hang_after_first_token":
                track.disconnected = await _pause(None, receive)
            elif reply.fault == "garbage":
                await Response(b'{"id": "chatcmpl-garbage", "choices": [{', 200, headers, "application/json")(
                    scope, receive, send
                )
            elif reply.fault == "early_end":  # announce the whole body, send half, drop the connection
                payload = json.dumps(self._completion(body, reply, text)).encode()
                head = Response(payload, 200, headers, "application/json").raw_headers  # with content-length
                await send({"type": "http.response.start", "status": 200, "headers": head})
                await send({"type": "http.response.body", "body": payload[: len(payload) // 2], "more_body": True})
                await _drop_connection(raw_send, receive, reset=False)
            else:
                n_tokens = len(split_tokens(reply.reasoning or "")) + len(split_tokens(text))
                if await _pause(delay * max(0, n_tokens - 1), receive):
                    track.disconnected = True
                    return
                await JSONResponse(self._completion(body, reply, text), 200, headers)(scope, receive, send)
            return

        headers.setdefault("cache-control", "no-cache")
        if reply.fault == "early_end":
            headers["connection"] = "close"
        gen = self._stream(body, reply, _resolve(reply, body), ttft, delay, track)
        response = StreamingResponse(gen, 200, headers, media_type="text/event-stream")
        try:
            await response(scope, receive, send)
        finally:
            await gen.aclose()
        # starlette returns normally (stream cancelled) when the client goes away mid-stream
        track.disconnected = not track.completed

    # ------------------------------------------------------------------ payloads
    def _usage(self, body: dict[str, Any], reply: Reply, text: str) -> dict[str, Any]:
        prompt = sum(len(split_tokens(message_text(m))) for m in body["messages"] if isinstance(m, dict))
        reasoning = len(split_tokens(reply.reasoning or ""))
        completion = reasoning + len(split_tokens(text))
        usage: dict[str, Any] = {
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "total_tokens": prompt + completion,
        }
        if reply.reasoning:
            usage["completion_tokens_details"] = {"reasoning_tokens": reasoning}
        return usage

    def _model(self, body: dict[str, Any]) -> str:
        model = body.get("model")
        return model if isinstance(model, str) and model else self.model

    def _completion(self, body: dict[str, Any], reply: Reply, text: str) -> dict[str, Any]:
        text, finish = _bounded(text, body)
        message: dict[str, Any] = {"role": "assistant", "content": text, "refusal": None}
        if reply.reasoning is not None:
            message[reply.reasoning_field] = reply.reasoning
        completion: dict[str, Any] = {
            "id": f"chatcmpl-{uuid.uuid4().hex[:24]}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": self._model(body),
            "choices": [{"index": 0, "message": message, "finish_reason": finish, "logprobs": None}],
        }
        if reply.usage:
            completion["usage"] = self._usage(body, reply, text)
        return completion

    async def _stream(
        self, body: dict[str, Any], reply: Reply, text: str, ttft: float, delay: float, track: _Track
    ) -> AsyncIterator[str]:
        opts = body.get("stream_options")
        include_usage = reply.usage and isinstance(opts, dict) and opts.get("include_usage") is True
        base: dict[str, Any] = {
            "id": f"chatcmpl-{uuid.uuid4().hex[:24]}",
            "object": "chat.completion.chunk",
            "created": int(time.time()),
            "model": self._model(body),
        }
        if include_usage:
            base["usage"] = None

        def chunk(delta: dict[str, Any], finish_reason: str | None = None) -> str:
            choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}
            return _sse({**base, "choices": [choice]})

        text, finish = _bounded(text, body)
        deltas = [{reply.reasoning_field: t} for t in split_tokens(reply.reasoning or "")]
        deltas += [{"content": t} for t in split_tokens(text)]
        await asyncio.sleep(ttft)
        track.timing["first_token"] = time.perf_counter()
        yield chunk({"role": "assistant", "content": ""})
        if reply.fault == "garbage":
            yield "data: this is not json\n\n"
            yield 'data: {"choices": [{"delta": \n\n'
            yield _sse("[DONE]")
            return
        if reply.fault == "early_end":
            deltas = deltas[: max(1, len(deltas) // 2)]
        for i, delta in enumerate(deltas):
            if i:
                await asyncio.sleep(delay)
            yield chunk(delta)
            if reply.fault == "hang_after_first_token":
                await asyncio.Event().wait()  # until starlette cancels us on disconnect
        if reply.fault == "early_end":
            return
        yield chunk({}, finish)
        if include_usage:
            yield _sse({**base, "choices": [], "usage": self._usage(body, reply, text)})
        yield _sse("[DONE]")


def _resolve(reply: Reply, body: dict[str, Any]) -> str:
    return reply.text(body) if callable(reply.text) else reply.text


def _bounded(text: str, body: dict[str, Any]) -> tuple[str, str]:
    """(text, finish_reason) as a real server writes them: cut after `max_tokens` tokens, "length"."""
    limit = body.get("max_completion_tokens") or body.get("max_tokens")
    tokens = split_tokens(text)
    if isinstance(limit, int) and 0 < limit < len(tokens):
        return "".join(tokens[:limit]), "length"
    return text, "stop"


async def _pause(seconds: float | None, receive: Receive) -> bool:
    """Sleep ``seconds`` (None: forever); return True if the client disconnected meanwhile.

    Only valid once the request body has been read: then uvicorn's ``receive()``
    blocks until the connection is lost.
    """
    if seconds is not None and seconds <= 0:
        return False

    async def disconnected() -> None:
        while (await receive())["type"] != "http.disconnect":
            pass

    watcher = asyncio.ensure_future(disconnected())
    try:
        done, _ = await asyncio.wait({watcher}, timeout=seconds)
        return watcher in done
    finally:
        watcher.cancel()
        with suppress(asyncio.CancelledError):
            await watcher


def _transport(send: Send) -> asyncio.Transport | None:
    """uvicorn's transport behind an unwrapped ASGI ``send`` (h11 ``RequestResponseCycle.send``)."""
    transport = getattr(getattr(send, "__self__", None), "transport", None)
    return transport if isinstance(transport, asyncio.Transport) else None


async def _drop_connection(send: Send, receive: Receive, *, reset: bool) -> None:
    """Close the TCP connection now: an RST (SO_LINGER=0) if ``reset``, else a plain close.

    ASGI has no message for this, so we reach uvicorn's transport via ``_transport``.
    """
    transport = _transport(send)
    if transport is None:
        raise RuntimeError("cannot reach the uvicorn transport to drop the connection")
    if reset:
        sock = transport.get_extra_info("socket")
        if sock is not None:
            with suppress(OSError):
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        transport.abort()
    else:
        transport.close()
    # Let uvicorn notice the lost connection, so it neither sends a 500 nor logs an error.
    await receive()
