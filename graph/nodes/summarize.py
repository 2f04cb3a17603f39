"""Summarize: new evidence to key facts that keep their evidence ids (fast model, or extractive).

Only evidence that no sub-agent condensed is summarised, and only what the current round added. Deep-dive
reading is summarised in bounded windows (at most `WINDOWS` calls of `WINDOW` passages, in parallel).
"""

from __future__ import annotations

import asyncio

from langgraph.runtime import Runtime
from langgraph.types import Overwrite

from graph import messages
from graph.context import Context
from graph.events import Step, emit
from graph.extractive import select_facts
from graph.ledger import FactsReply, Ledger, order_evidence
from graph.models import Evidence, Fact, Route, Usage
from graph.state import State
from graph.structured import ask_json

WINDOW, WINDOWS = 6, 3


async def facts_for(ctx: Context, question: str, query: str, window: list[Evidence], limit: int, min_coverage: float,
                    route: Route, fresh: set[str] | None = None) -> tuple[list[Fact] | None, Usage]:
    """Facts from one window of evidence: one fast-model call, extractive selection as the fallback.

    An empty list from the model is its judgement that nothing is relevant: the question gets declined. The
    model is asked only when the evidence covers the question: the decline rule of extractive selection (no
    passage holds enough of the question's topic words, or a name from the question is nowhere) costs
    microseconds and decides first, as it does offline; a small model given near misses answers from them.
    The model reads the passages extractive selection chose first, then the best-ranked others. In a later
    round (`fresh`: the ids that round added) the model is asked again only when extractive selection takes
    something new; otherwise None: the previous facts stand."""
    extractive = select_facts(query, window, limit, language=ctx.language, min_coverage=min_coverage,
                              prior=set(route.preferred), spread=route.query_type != "factual",
                              glossary=ctx.catalog.glossary)
    if not extractive:
        return [], Usage()
    if ctx.llm is not None:
        if fresh is not None and not any(i in fresh for f in extractive for i in f.evidence_ids):
            return None, Usage()
        # the best passages only, in ledger order: on a small local model every prompt token is latency
        chosen = [i for f in extractive for i in f.evidence_ids]
        ranked = sorted(window, key=lambda e: (e.id not in chosen, chosen.index(e.id) if e.id in chosen else 0,
                                               -e.relevance))
        best = {e.id for e in ranked[: ctx.config.prompt_passages]}
        ledger = Ledger([e for e in window if e.id in best])
        prompt = ctx.prompts.render("summarize", ctx.language, question=question, max_facts=limit,
                                    evidence=ledger.render(max_chars=ctx.config.passage_chars, display=ctx.display))
        facts, usage = await ask_json(ctx, "summarize", prompt, FactsReply, lambda reply: reply.to_facts(ledger, limit),
                                      max_tokens=800)
        if facts is not None:
            return facts, usage
    return extractive, Usage()


async def summarize(state: State, runtime: Runtime[Context]) -> dict:
    ctx, route, loop = runtime.context, state["route"], state["loop"]
    if loop.tasks and all(t.condense for t in loop.tasks):
        return {}
    new = order_evidence(state["evidence"][loop.evidence_seen:], route.collections)
    if not new:
        return {}
    query = route.search_query or state["question"]
    max_facts = ctx.config.max_facts
    fresh: set[str] | None = None
    if route.query_type == "deep_dive":
        windows = [new[i : i + WINDOW] for i in range(0, min(len(new), WINDOW * WINDOWS), WINDOW)]
        limit = max(3, max_facts // len(windows))
    else:  # a later round's evidence may complete an earlier one's (a second hop): all of it is selected from
        fresh = {e.id for e in new} if loop.round > 1 else None
        new = order_evidence(state["evidence"], route.collections)
        windows, limit = [new], max_facts
    # explanations and overviews are broad by nature: a looser relevance floor than for a factual question
    min_coverage = ctx.config.min_coverage * (1.0 if route.query_type == "factual" else 0.6)
    results = await asyncio.gather(
        *(facts_for(ctx, state["question"], query, w, limit, min_coverage, route, fresh) for w in windows)
    )
    if any(window_facts is None for window_facts, _ in results):  # nothing new worth a model call
        return {}
    facts = [f for window_facts, _ in results for f in window_facts or []]
    usage = sum((u for _, u in results), Usage())
    emit(Step(messages.line("facts", ctx.language, n=len(facts), m=len(new))))
    # the selection over all evidence replaces the previous round's (a deep dive adds per window)
    return {"facts": facts if route.query_type == "deep_dive" else Overwrite(facts), "usage": usage}
