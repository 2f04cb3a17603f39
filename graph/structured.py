"""The one path for fast-model calls whose reply the pipeline reads (route, rewrite, decompose, condense,
summarize, judge): the call, its usage, reading the reply and the fallback report all happen here.

A step passes its prompt and the pydantic model of the reply it expects, plus `accept`, which turns a
reply that fits the model into the step's result and raises `ValueError` when its meaning does not hold (an
unknown collection, a citation outside the evidence). Whatever goes wrong comes back as `None`, reported
as a fallback, and the step's deterministic strategy takes over.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import TypeVar

from pydantic import BaseModel, ValidationError

from graph import messages
from graph.context import Context
from graph.events import UsageEvent, degrade, emit
from graph.llm import LLMError
from graph.models import Usage

M = TypeVar("M", bound=BaseModel)
T = TypeVar("T")


def read_json(text: str, reply: type[M]) -> M:
    """The first JSON object in a model's reply, validated as `reply`.

    Small models wrap JSON in prose or code fences, and some append an explanation: decoding starts at the
    first `{` and stops where that object ends (a greedy `{.*}` would swallow a second object or a brace in
    the trailing text). Reasoning blocks are already gone (`LLMClient.complete`)."""
    start = text.find("{")
    if start < 0:
        raise ValueError("no JSON object in the reply")
    value, _ = json.JSONDecoder().raw_decode(text, start)
    return reply.model_validate(value)


async def _complete(ctx: Context, prompt: str, max_tokens: int) -> tuple[str | None, Usage]:
    assert ctx.llm is not None
    try:
        result = await ctx.llm.complete([{"role": "user", "content": prompt}], fast=True, max_tokens=max_tokens)
    except LLMError as exc:
        _fallback(ctx, exc)
        return None, Usage()
    emit(UsageEvent(result.usage.prompt_tokens, result.usage.completion_tokens, result.usage.calls))
    return result.text, result.usage


def _fallback(ctx: Context, error: Exception) -> None:
    degrade("llm", messages.line("llm_fallback", ctx.language, error=type(error).__name__))


async def ask_json(ctx: Context, prompt: str, reply: type[M], accept: Callable[[M], T], *, max_tokens: int
                   ) -> tuple[T | None, Usage]:
    """(the accepted reply, usage), or (None, usage) when the call fails or the reply is unusable."""
    text, usage = await _complete(ctx, prompt, max_tokens)
    if text is None:
        return None, usage
    try:
        return accept(read_json(text, reply)), usage
    except (ValueError, ValidationError) as exc:
        _fallback(ctx, exc)
        return None, usage


async def ask_text(ctx: Context, prompt: str, accept: Callable[[str], T], *, max_tokens: int
                   ) -> tuple[T | None, Usage]:
    """Like `ask_json` for a plain-text reply (a rewritten question)."""
    text, usage = await _complete(ctx, prompt, max_tokens)
    if text is None:
        return None, usage
    try:
        return accept(text), usage
    except ValueError as exc:
        _fallback(ctx, exc)
        return None, usage
