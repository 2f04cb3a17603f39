"""Upstream LLM client: any OpenAI-compatible endpoint (vLLM, Ollama, OpenAI).

A thin async httpx client, not a langchain-core chat model, because this service needs exact control that
the chat-model abstraction hides: retries only until the first streamed token, `reasoning_content` /
`reasoning` deltas (vLLM with gpt-oss) and inline `<think>` blocks kept out of the answer, usage read
from the upstream's own usage chunk, one process-wide pool and concurrency cap. Tokens reach the client
through LangGraph's `custom` stream mode (nodes emit `AnswerDelta` as tokens arrive), so nothing is lost
by not using the `messages` stream mode.
"""

from __future__ import annotations

import asyncio
import json
import logging
import random
from collections.abc import AsyncIterator, Callable
from contextlib import aclosing
from dataclasses import dataclass
from typing import Any, Literal

import httpx
from httpx_aiohttp import AiohttpTransport
from httpx_sse import EventSource, SSEError
from opentelemetry.trace import Tracer

from graph.answer.sanitize import InlineReasoningSplitter
from graph.clients.tracing import NOOP, end_model_span, model_span, with_trace_context
from graph.clients.transport import IDLE_EXPIRY_S, failure_name
from graph.models import Usage

log = logging.getLogger(__name__)

STOP_CHECK_EVERY = 16  # deltas between two `stop` checks of a streamed answer
RETRY_STATUS = {408, 409, 425, 429, 500, 502, 503, 504}


class LLMError(Exception):
    """An upstream call failed for good (after retries, or after the first streamed token)."""

    def __init__(self, message: str, *, retryable: bool = False, retry_after: float | None = None,
                 status: int | None = None) -> None:
        super().__init__(message)
        self.retryable = retryable
        self.retry_after = retry_after
        self.status = status

    @property
    def rejects_format(self) -> bool:
        """The upstream refused the request's `response_format` (a 400/422, or an error that names it)."""
        text = str(self).lower()
        return self.status in (400, 422) or (self.status is not None and "response_format" in text)


# How a structured reply is asked for, strongest first. Learnt per model at first use (`complete_json`):
# a JSON schema the server enforces (vLLM, SGLang, Ollama, llama.cpp, OpenAI), plain JSON mode, or only the
# prompt's own description of the reply.
StructuredMode = Literal["json_schema", "json_object", "prompt"]
STRUCTURED_MODES: tuple[StructuredMode, ...] = ("json_schema", "json_object", "prompt")


def response_format(mode: StructuredMode, name: str, schema: dict[str, Any], strict: bool = True
                    ) -> dict[str, Any] | None:
    if mode == "json_schema":
        return {"type": "json_schema", "json_schema": {"name": name, "schema": schema, "strict": strict}}
    if mode == "json_object":
        # llama-cpp-python reads an optional `schema` here and turns it into a grammar; others ignore it
        return {"type": "json_object", "schema": schema}
    return None


@dataclass(slots=True)
class Completion:
    text: str
    usage: Usage
    finish_reason: str = ""  # the upstream's ("stop", "length", ...)


@dataclass(frozen=True, slots=True)
class StreamEnd:
    """The last item of a streamed call: its usage and why it ended ("stop"; "length": it reached `max_tokens`;
    "cut": the caller's `stop` ended it)."""

    usage: Usage
    finish_reason: str = "stop"


def estimate_tokens(text: str) -> int:
    return max(1, len(text) // 4) if text else 0


def _retry_after(response: httpx.Response) -> float | None:
    try:
        return float(response.headers.get("retry-after", ""))
    except ValueError:
        return None


async def _raise_for_status(response: httpx.Response) -> None:
    if response.status_code < 400:
        return
    body = (await response.aread()).decode("utf-8", "replace")[:300]
    raise LLMError(
        f"upstream HTTP {response.status_code}: {body}",
        # llama-cpp-python answers an unknown response_format with a 500 naming it: retrying will not help
        retryable=response.status_code in RETRY_STATUS and "response_format" not in body,
        retry_after=_retry_after(response),
        status=response.status_code,
    )


def _usage(payload: dict[str, Any] | None, prompt_chars: str, completion: str) -> Usage:
    if payload:
        return Usage(
            prompt_tokens=int(payload.get("prompt_tokens") or 0),
            completion_tokens=int(payload.get("completion_tokens") or 0),
            calls=1,
        )
    return Usage(prompt_tokens=estimate_tokens(prompt_chars), completion_tokens=estimate_tokens(completion), calls=1)


def _chunk(data: str, retryable: bool) -> dict[str, Any]:
    """One event of a streamed reply, read as JSON; an error the upstream sends in band raises."""
    try:
        chunk = json.loads(data)
    except ValueError as exc:
        raise LLMError("invalid SSE data from upstream", retryable=retryable) from exc
    if chunk.get("error"):
        raise LLMError(f"upstream error: {chunk['error']}", retryable=retryable)
    return chunk


class LLMClient:
    def __init__(
        self,
        base_url: str,
        *,
        api_key: str = "",
        model: str,
        fast_model: str | None = None,
        timeout_s: float = 60.0,
        max_concurrency: int = 8,
        max_retries: int = 2,
        backoff_s: float = 0.5,
        tracer: Tracer = NOOP,
        capture_content: bool = False,
    ) -> None:
        self.tracer, self.capture_content = tracer, capture_content  # a span per call (`graph/clients/tracing.py`)
        self.model = model
        self.fast_model = fast_model or model
        self.timeout_s = timeout_s
        self.max_retries = max_retries
        self.backoff_s = backoff_s
        self.max_concurrency = max_concurrency  # requests in flight at once (a comparison's sides run together when > 1)
        self._gate = asyncio.Semaphore(max_concurrency)
        self.structured: dict[str, StructuredMode] = {}  # model -> the structured mode it was seen to accept
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        # httpx's API (and its exception types) over aiohttp's connection pool and C HTTP parser: in a
        # microbenchmark against the fake upstream, about 40% less client CPU per streamed answer than httpcore on
        # anyio, and about 0.7 ms less per plain call. The transport maps aiohttp's errors onto httpx's.
        limits = httpx.Limits(
            max_connections=max(max_concurrency * 2, 10),
            max_keepalive_connections=max_concurrency,
            keepalive_expiry=IDLE_EXPIRY_S,
        )
        self._http = httpx.AsyncClient(
            base_url=base_url.rstrip("/") + "/",
            headers=headers,
            timeout=httpx.Timeout(timeout_s, connect=min(10.0, timeout_s)),
            transport=AiohttpTransport(limits=limits),
        )

    async def aclose(self) -> None:
        await self._http.aclose()

    async def ping(self) -> bool:
        try:
            response = await self._http.get("models", timeout=5.0)
            return response.status_code < 500
        except httpx.HTTPError:
            return False

    def _body(self, messages: list[dict[str, str]], fast: bool, max_tokens: int | None, stream: bool,
              reply_format: dict[str, Any] | None = None, sampling: dict[str, Any] | None = None) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": self.fast_model if fast else self.model,
            "messages": messages,
            "temperature": 0.1 if fast else 0.3,
            "stream": stream,
            **(sampling or {}),  # the caller's own temperature, top_p, seed, stop (the answer call only)
        }
        if max_tokens:
            body["max_tokens"] = max_tokens
        if reply_format:
            body["response_format"] = reply_format
        if stream:
            body["stream_options"] = {"include_usage": True}
        return body

    async def _pause(self, attempt: int, error: LLMError) -> None:
        # Hand-written backoff: the retry boundary ("never after the first streamed token") sits inside a
        # generator, which retry decorators do not model. Honours Retry-After, capped.
        delay = error.retry_after if error.retry_after is not None else self.backoff_s * 2**attempt
        await asyncio.sleep(min(delay, 10.0) * (0.8 + 0.4 * random.random()))

    async def complete_json(
        self, messages: list[dict[str, str]], *, name: str, schema: dict[str, Any], fast: bool = True,
        max_tokens: int | None = None, strict: bool = True, sampling: dict[str, Any] | None = None, step: str = "",
    ) -> Completion:
        """A call whose reply must be JSON of `schema`, in the strongest mode the upstream accepts.

        A model starts at `json_schema`; when the upstream refuses a mode, the next weaker one is tried at
        once, and the mode that worked is kept for the process (shown in /health/ready). Only a success is
        remembered, so a 400 for another reason (a prompt too long) does not downgrade the model."""
        model = self.fast_model if fast else self.model
        modes = STRUCTURED_MODES[STRUCTURED_MODES.index(self.structured.get(model, "json_schema")):]
        for mode in modes:
            try:
                result = await self.complete(messages, fast=fast, max_tokens=max_tokens, sampling=sampling,
                                             reply_format=response_format(mode, name, schema, strict), step=step)
            except LLMError as exc:
                if mode == "prompt" or not exc.rejects_format:
                    raise
                log.warning("upstream refused response_format %s for %s (%s); trying the next mode", mode, model, exc)
                continue
            if self.structured.get(model) != mode:
                log.info("structured replies from %s: %s", model, mode)
                self.structured[model] = mode
            return result
        raise AssertionError("unreachable")

    async def complete(
        self, messages: list[dict[str, str]], *, fast: bool = False, max_tokens: int | None = None,
        reply_format: dict[str, Any] | None = None, sampling: dict[str, Any] | None = None, step: str = "",
    ) -> Completion:
        """Non-streaming call with bounded retries; returns the answer text (reasoning removed) and usage."""
        span = model_span(self.tracer, self.fast_model if fast else self.model, step, max_tokens, False)
        try:
            result = await self._complete(messages, fast, max_tokens, reply_format, sampling,
                                          with_trace_context({}, span))
        except BaseException as exc:
            end_model_span(span, input_tokens=0, output_tokens=0, finish="", capture=self.capture_content,
                           messages=messages, error=exc)
            raise
        end_model_span(span, input_tokens=result.usage.prompt_tokens, output_tokens=result.usage.completion_tokens,
                       finish=result.finish_reason, capture=self.capture_content, messages=messages, reply=result.text)
        return result

    async def _complete(self, messages: list[dict[str, str]], fast: bool, max_tokens: int | None,
                        reply_format: dict[str, Any] | None, sampling: dict[str, Any] | None, headers: dict[str, str]
                        ) -> Completion:
        body = self._body(messages, fast, max_tokens, stream=False, reply_format=reply_format, sampling=sampling)
        prompt_chars = "".join(m["content"] for m in messages)
        async with self._gate:
            for attempt in range(self.max_retries + 1):
                try:
                    async with asyncio.timeout(self.timeout_s):
                        response = await self._http.post("chat/completions", json=body, headers=headers)
                        await _raise_for_status(response)
                        try:
                            payload = response.json()
                            content = payload["choices"][0]["message"].get("content") or ""
                            finish = payload["choices"][0].get("finish_reason") or ""
                        except (ValueError, KeyError, IndexError, TypeError) as exc:
                            raise LLMError(f"unparseable upstream response: {exc}", retryable=True) from exc
                except (httpx.TransportError, TimeoutError) as exc:
                    error = LLMError(f"upstream unreachable: {failure_name(exc)}", retryable=True)
                except LLMError as exc:
                    error = exc
                else:
                    splitter = InlineReasoningSplitter()
                    answer = splitter.feed(content)[1] + splitter.flush()[1]
                    return Completion(answer.strip(), _usage(payload.get("usage"), prompt_chars, content), finish)
                if not error.retryable or attempt == self.max_retries:
                    raise error
                log.warning("upstream call failed (%s), retrying", error)
                await self._pause(attempt, error)
        raise AssertionError("unreachable")

    async def stream(
        self, messages: list[dict[str, str]], *, fast: bool = False, max_tokens: int | None = None,
        stop: Callable[[str], bool] | None = None, sampling: dict[str, Any] | None = None, step: str = "",
    ) -> AsyncIterator[str | StreamEnd]:
        """Stream answer text deltas as the upstream produces them; the last item is a `StreamEnd` (the call's
        `Usage` and why it ended: "length" when it reached `max_tokens`).

        Retries (429/5xx/connection errors) happen only before the first answer token; a failure after it
        raises `LLMError` so the caller can end the answer honestly. `stop(text so far)`, asked every few
        deltas, ends the call early (a small model caught in a loop): the connection is closed, which makes
        the upstream stop generating, and the usage is estimated.
        """
        body = self._body(messages, fast, max_tokens, stream=True, sampling=sampling)
        prompt_chars = "".join(m["content"] for m in messages)
        # the call's span ends with it, however it ends (the reader may stop early: `aclose`)
        span = model_span(self.tracer, body["model"], step, max_tokens, True)
        headers = with_trace_context({}, span)
        produced: list[str] = []
        end: StreamEnd | None = None
        failure: BaseException | None = None
        try:
            async with self._gate:
                for attempt in range(self.max_retries + 1):
                    try:
                        # closed with this generator: a reader that stops early closes the connection at once
                        async with aclosing(self._stream_once(body, headers, prompt_chars, stop, produced)) as items:
                            async for item in items:
                                if isinstance(item, StreamEnd):
                                    end = item
                                yield item
                        return
                    except (httpx.TransportError, SSEError) as exc:
                        error = LLMError(f"upstream connection failed: {failure_name(exc)}", retryable=not produced)
                    except LLMError as exc:
                        error = exc
                    if not error.retryable or attempt == self.max_retries:
                        raise error
                    log.warning("upstream stream failed before the first token (%s), retrying", error)
                    await self._pause(attempt, error)
        except BaseException as exc:
            failure = exc
            raise
        finally:
            end_model_span(span, input_tokens=end.usage.prompt_tokens if end else 0,
                           output_tokens=end.usage.completion_tokens if end else 0,
                           finish=end.finish_reason if end else "", capture=self.capture_content, messages=messages,
                           reply="".join(produced) if self.capture_content else "",
                           error=failure if not isinstance(failure, GeneratorExit) else None)

    async def _stream_once(self, body: dict[str, Any], headers: dict[str, str], prompt_chars: str,
                           stop: Callable[[str], bool] | None, produced: list[str]) -> AsyncIterator[str | StreamEnd]:
        """One attempt of `stream`: the answer's text deltas as the upstream sends them (also kept in `produced`,
        emptied first), then the `StreamEnd`. A failure is retryable while nothing was produced."""
        splitter = InlineReasoningSplitter()
        produced.clear()
        usage_payload: dict[str, Any] | None = None
        finished = ""
        async with self._http.stream("POST", "chat/completions", json=body, headers=headers) as response:
            await _raise_for_status(response)
            async for event in EventSource(response).aiter_sse():
                if event.data.strip() == "[DONE]":
                    break
                chunk = _chunk(event.data, retryable=not produced)
                usage_payload = chunk.get("usage") or usage_payload
                for choice in chunk.get("choices") or []:
                    finished = finished or choice.get("finish_reason") or ""
                    # `reasoning_content` / `reasoning` deltas are deliberately ignored.
                    text = (choice.get("delta") or {}).get("content") or ""
                    answer = splitter.feed(text)[1] if text else ""
                    if answer:
                        produced.append(answer)
                        yield answer
                if stop and len(produced) % STOP_CHECK_EVERY == 0 and produced and stop("".join(produced)):
                    log.warning("the model repeats itself: its answer is cut after %d deltas", len(produced))
                    usage_payload = None  # the server's usage never comes: estimated below
                    finished = "cut"
                    break
            else:
                if not finished:  # some servers omit [DONE], none omit finish_reason
                    raise LLMError("upstream stream ended early", retryable=not produced)
        tail = splitter.flush()[1]
        if tail:
            produced.append(tail)
            yield tail
        yield StreamEnd(_usage(usage_payload, prompt_chars, "".join(produced)), finished or "stop")
