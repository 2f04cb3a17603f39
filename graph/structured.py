"""The one path for fast-model calls whose reply the pipeline reads (route, rewrite, decompose, condense,
summarize, judge, translate): the call, its usage, reading the reply and the fallback report all happen here.

A step passes its name, its prompt and the pydantic model of the reply it expects, plus `accept`, which
turns a reply that fits the model into the step's result and raises `ValueError` when its meaning does not
hold (an unknown collection, a citation outside the evidence). The reply's JSON schema goes to the upstream
as `response_format` (`LLMClient.complete_json` learns which form the upstream accepts). Whatever goes wrong
comes back as `None`, reported as a fallback of that one step (`unavailable`: the call failed; `invalid`:
the reply was unusable), and the step's deterministic strategy takes over; the next step asks the model
again.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from functools import cache
from typing import Any, Literal, TypeVar

from pydantic import BaseModel, ValidationError

from graph.answer import messages
from graph.answer.events import Degraded, LLMFallback, Step, UsageEvent, emit
from graph.clients.llm import Completion, LLMError
from graph.context import Context
from graph.models import Usage

M = TypeVar("M", bound=BaseModel)
T = TypeVar("T")
log = logging.getLogger(__name__)


def read_json(text: str, reply: type[M]) -> M:
    """The first JSON object in a model's reply that validates as `reply`.

    Small models wrap JSON in prose or code fences, put a reasoning preamble before it (which may hold a
    brace of its own) and append an explanation: every `{` is tried in order, and decoding stops where that
    object ends (a greedy `{.*}` would swallow a second object or a brace in the trailing text).
    `<think>` blocks are already gone (`LLMClient.complete`)."""
    return first_json(text, reply.model_validate)


def first_json(text: str, accept: Callable[[Any], T], opens: str = "{") -> T:
    """`accept` of the first JSON value in `text` that it takes (it raises ValueError for the others): each
    position of a character of `opens` is tried in order (`read_json`)."""
    decoder, error = json.JSONDecoder(), None
    for start in (i for i, c in enumerate(text) if c in opens):
        try:
            value, _ = decoder.raw_decode(text, start)
            return accept(value)
        except (ValueError, ValidationError) as exc:  # ValidationError is a ValueError; named for the reader
            error = error or exc
    raise error or ValueError("no JSON document in the reply")


def _strict(node: Any) -> Any:
    if isinstance(node, dict):
        node = {k: ({name: _strict(sub) for name, sub in v.items()} if k in ("properties", "$defs") else _strict(v))
                for k, v in node.items() if k not in ("default", "title")}
        if node.get("type") == "object" and "properties" in node:
            node["additionalProperties"] = False
            node["required"] = list(node["properties"])
        return node
    if isinstance(node, list):
        return [_strict(v) for v in node]
    return node


@cache
def strict_schema(model: type[BaseModel]) -> dict[str, Any]:
    """The reply model's JSON schema in the form OpenAI's `strict` mode demands (every property required, no
    other properties, no defaults); vLLM, SGLang, Ollama and llama.cpp accept it too. Hand-written: pydantic
    emits the schema, and the only library that makes it strict is a private module of the openai package."""
    return _strict(model.model_json_schema())


def fallback(ctx: Context, step: str, reason: Literal["unavailable", "invalid"], error: Exception,
             line: str = "") -> None:
    """Report that one model step fell back to its deterministic strategy: a think line (`line`, or one that
    names the step and the reason), a log line with the detail, an `LLMFallback` (counted in
    `neo_llm_fallbacks_total`) and the `Degraded` marker."""
    log.warning("model step %s fell back (%s): %s", step, reason, error)
    emit(Step(line or messages.line(f"llm_{reason}", ctx.language, step=messages.step_label(step, ctx.language),
                                    error=type(error).__name__)))
    emit(LLMFallback(step, reason))
    emit(Degraded("llm"))


async def _complete(ctx: Context, step: str, prompt: str, max_tokens: int, reply: type[BaseModel] | None
                    ) -> Completion | None:
    assert ctx.llm is not None
    chat = [{"role": "user", "content": prompt}]
    started = time.perf_counter()
    try:
        if reply is None:
            result = await ctx.llm.complete(chat, fast=True, max_tokens=max_tokens, step=step)
        else:
            result = await ctx.llm.complete_json(chat, name=reply.__name__, schema=strict_schema(reply), fast=True,
                                                 max_tokens=max_tokens, step=step)
    except LLMError as exc:
        fallback(ctx, step, "unavailable", exc)
        return None
    emit(UsageEvent(result.usage.prompt_tokens, result.usage.completion_tokens, result.usage.calls, step,
                    time.perf_counter() - started))
    return result


async def ask_json(ctx: Context, step: str, prompt: str, reply: type[M], accept: Callable[[M], T], *,
                   max_tokens: int) -> tuple[T | None, Usage]:
    """(the accepted reply, usage), or (None, usage) when the call fails or the reply is unusable."""
    result = await _complete(ctx, step, prompt, max_tokens, reply)
    if result is None:
        return None, Usage()
    try:
        return accept(read_json(result.text, reply)), result.usage
    except ValueError as exc:  # pydantic's ValidationError included
        fallback(ctx, step, "invalid", exc)
        return None, result.usage


async def ask_text(ctx: Context, step: str, prompt: str, accept: Callable[[str], T], *, max_tokens: int
                   ) -> tuple[T | None, Usage]:
    """Like `ask_json` for a plain-text reply (a rewritten question)."""
    result = await _complete(ctx, step, prompt, max_tokens, None)
    if result is None:
        return None, Usage()
    try:
        return accept(result.text), result.usage
    except ValueError as exc:
        fallback(ctx, step, "invalid", exc)
        return None, result.usage
