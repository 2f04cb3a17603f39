"""Summarize: evidence to key facts that keep their evidence ids (fast model, or extractive)."""

from __future__ import annotations

import json
import re

from langgraph.runtime import Runtime
from pydantic import BaseModel, ValidationError

from graph import messages
from graph.citations import order_evidence, render_ledger
from graph.events import Step, UsageEvent, emit
from graph.extractive import select_facts
from graph.llm import LLMError
from graph.state import Context, Evidence, Fact, State, Usage


class _LLMFact(BaseModel):
    fact: str
    sources: list[int]


class _LLMFacts(BaseModel):
    facts: list[_LLMFact]


def parse_facts(text: str, ledger: list[Evidence]) -> list[Fact]:
    """Validate the model's JSON; keep only facts that cite existing ledger numbers."""
    match = re.search(r"\{.*\}", text, re.DOTALL)
    if not match:
        raise ValueError("no JSON object in the model output")
    parsed = _LLMFacts.model_validate(json.loads(match.group(0)))
    facts = []
    for item in parsed.facts:
        ids = [ledger[n - 1].id for n in dict.fromkeys(item.sources) if 1 <= n <= len(ledger)]
        if ids and item.fact.strip():
            facts.append(Fact(text=item.fact.strip(), evidence_ids=ids))
    return facts


async def summarize(state: State, runtime: Runtime[Context]) -> dict:
    ctx, language, question = runtime.context, state["language"], state["question"]
    ledger = order_evidence(state.get("evidence", []), state["route"].collections)
    if not ledger:
        return {"facts": []}
    usage = Usage()
    facts: list[Fact] | None = None
    if ctx.llm is not None:
        prompt = ctx.prompts.render(
            "summarize", language, question=question, evidence=render_ledger(ledger), max_facts=ctx.max_facts
        )
        try:
            result = await ctx.llm.complete([{"role": "user", "content": prompt}], fast=True, max_tokens=800)
            usage = result.usage
            emit(UsageEvent(usage.prompt_tokens, usage.completion_tokens, usage.calls))
            facts = parse_facts(result.text, ledger)[: ctx.max_facts] or None
        except (LLMError, ValueError, ValidationError) as exc:
            emit(Step(messages.line("llm_fallback", language, error=type(exc).__name__)))
    if facts is None:
        facts = select_facts(state["route"].search_query or question, ledger, ctx.max_facts, language=language)
    emit(Step(messages.line("facts", language, n=len(facts), m=len(ledger))))
    return {"facts": facts, "usage": usage}
