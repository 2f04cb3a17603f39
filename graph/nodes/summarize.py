"""Summarize: new evidence to key facts that keep their evidence ids (fast model, or extractive).

Only evidence that no sub-agent condensed is summarised, and only what the current round added. Deep-dive
reading is summarised in bounded windows (at most `WINDOWS` calls of `WINDOW` passages, in parallel).
"""

from __future__ import annotations

import asyncio
import json
import re

from langgraph.runtime import Runtime
from pydantic import BaseModel

from graph import messages
from graph.citations import order_evidence, render_ledger
from graph.events import Step, emit
from graph.extractive import select_facts
from graph.state import Context, Evidence, Fact, Language, State, Usage
from graph.structured import ask_fast

WINDOW, WINDOWS = 6, 3


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


async def facts_for(
    ctx: Context, question: str, query: str, ledger: list[Evidence], language: Language, limit: int, min_coverage: float
) -> tuple[list[Fact], Usage]:
    """Facts from one window of evidence: one fast-model call, extractive selection as the fallback.

    An empty list from the model is its judgement that nothing is relevant: the question gets declined."""
    if ctx.llm is not None:
        prompt = ctx.prompts.render("summarize", language, question=question, evidence=render_ledger(ledger),
                                    max_facts=limit)
        facts, usage = await ask_fast(ctx, prompt, language, lambda text: parse_facts(text, ledger)[:limit],
                                      max_tokens=800)
        if facts is not None:
            return facts, usage
    return select_facts(query, ledger, limit, language=language, min_coverage=min_coverage), Usage()


async def summarize(state: State, runtime: Runtime[Context]) -> dict:
    ctx, language, route = runtime.context, state["language"], state["route"]
    tasks = state.get("tasks", [])
    if tasks and all(t.condense for t in tasks):
        return {}
    new = order_evidence(state.get("evidence", [])[state.get("evidence_seen", 0):], route.collections)
    if not new:
        return {}
    query = route.search_query or state["question"]
    if route.query_type == "deep_dive":
        windows = [new[i : i + WINDOW] for i in range(0, min(len(new), WINDOW * WINDOWS), WINDOW)]
        limit = max(3, ctx.max_facts // len(windows))
    else:
        windows, limit = [new], ctx.max_facts
    # explanations and overviews are broad by nature: a looser relevance floor than for a factual question
    min_coverage = ctx.min_coverage if route.query_type == "factual" else ctx.min_coverage * 0.6
    results = await asyncio.gather(
        *(facts_for(ctx, state["question"], query, w, language, limit, min_coverage) for w in windows)
    )
    facts = [f for window_facts, _ in results for f in window_facts]
    usage = sum((u for _, u in results), Usage())
    emit(Step(messages.line("facts", language, n=len(facts), m=len(new))))
    return {"facts": facts, "usage": usage}
