"""One fast-model call whose answer is parsed and validated, shared by every structured pipeline step."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from pydantic import ValidationError

from graph import messages
from graph.events import UsageEvent, degrade, emit
from graph.llm import LLMError
from graph.state import Context, Language, Usage

T = TypeVar("T")


async def ask_fast(
    ctx: Context, prompt: str, language: Language, parse: Callable[[str], T], *, max_tokens: int
) -> tuple[T | None, Usage]:
    """(parsed answer, usage); on an upstream failure or an answer that does not validate: (None, usage),
    reported as a fallback so that the caller's deterministic strategy takes over and the answer says so."""
    assert ctx.llm is not None
    try:
        result = await ctx.llm.complete([{"role": "user", "content": prompt}], fast=True, max_tokens=max_tokens)
    except LLMError as exc:
        degrade("llm", messages.line("llm_fallback", language, error=type(exc).__name__))
        return None, Usage()
    emit(UsageEvent(result.usage.prompt_tokens, result.usage.completion_tokens, result.usage.calls))
    try:
        return parse(result.text), result.usage
    except (ValueError, ValidationError) as exc:
        degrade("llm", messages.line("llm_fallback", language, error=type(exc).__name__))
        return None, result.usage
