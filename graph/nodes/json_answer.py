"""The answer as a JSON document (the request's `response_format`): one call in the strongest structured mode
the upstream accepts, the reply checked against the caller's schema, and the document written whole.

The content is then the JSON document alone: no sources list, banner or correction is appended (the cited
documents go out as data, `SourceFound`), so nothing can break the caller's parser. A reply that does not fit
the schema gets one correction call; after that the request fails with an error rather than hand over a
document the caller's parser would reject.
"""

from __future__ import annotations

import json
import re
import time
from typing import Any

import jsonschema

from graph.answer import messages
from graph.answer.events import Step, UsageEvent, emit
from graph.answer.ledger import Ledger
from graph.clients.llm import LLMError
from graph.context import Context
from graph.models import Evidence, Usage
from graph.structured import first_json

JSON_ATTEMPTS = 2  # the answer call and one correction
_CITED = re.compile(r"\[(\d+)\]")


def cited_entries(document: str, ledger: Ledger) -> list[tuple[int, Evidence]]:
    """The ledger entries a JSON answer cites as `[n]` (in the numbering the model read), in order; every
    entry it read when it cites none."""
    numbers = [int(n) for n in dict.fromkeys(_CITED.findall(document)) if 1 <= int(n) <= len(ledger)]
    return [(n, ledger.entries[n - 1]) for n in numbers] or list(ledger.numbered())


def fitting(schema: dict[str, Any]) -> Any:
    """A function that returns a JSON value when it fits `schema` and raises ValueError with the first reason
    it does not (the validator of the schema's own draft)."""
    validator = jsonschema.validators.validator_for(schema)(schema)

    def check(value: Any) -> Any:
        error = jsonschema.exceptions.best_match(validator.iter_errors(value))
        if error is not None:
            where = "/".join(str(p) for p in error.absolute_path)
            raise ValueError(f"{where + ': ' if where else ''}{error.message}"[:300])
        return value
    return check


async def write_json(ctx: Context, ledger: Ledger, user: str, system: str) -> tuple[str, Usage]:
    """The JSON answer to `user` (the rendered `answer_json` prompt), serialised compactly, and the usage of its
    calls. Raises `LLMError` when the model fails or no reply fits the schema."""
    assert ctx.llm is not None and ctx.answer.json_schema is not None
    schema, language = ctx.answer.json_schema, ctx.language
    check = fitting(schema)
    emit(Step(messages.line("writing_json", language, n=len(ledger))))
    prompt = [{"role": "system", "content": system}, {"role": "user", "content": user}]
    usage = Usage()
    for attempt in range(JSON_ATTEMPTS):
        started = time.perf_counter()
        result = await ctx.llm.complete_json(prompt, name="answer", schema=schema, fast=False, strict=False,
                                             max_tokens=ctx.answer.max_tokens or ctx.config.answer_max_tokens,
                                             sampling=ctx.answer.sampling(), step="synthesize")
        usage += result.usage
        emit(UsageEvent(result.usage.prompt_tokens, result.usage.completion_tokens, result.usage.calls, "synthesize",
                        time.perf_counter() - started))
        try:
            value = first_json(result.text, check, opens="{[")
        except ValueError as exc:
            if attempt + 1 == JSON_ATTEMPTS:
                raise LLMError(f"the model's reply is no JSON document that fits the requested schema ({exc})") from exc
            emit(Step(messages.line("json_retry", language, error=str(exc)[:120])))
            prompt += [{"role": "assistant", "content": result.text},
                       {"role": "user", "content": messages.line("json_correct", language, error=exc)}]
            continue
        return json.dumps(value, ensure_ascii=False), usage
    raise AssertionError("unreachable")
