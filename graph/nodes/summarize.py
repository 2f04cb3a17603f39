"""Summarize: new evidence to key facts that keep their evidence ids (extractive; the fast model only when the
selected passages would not fit the answer's evidence budget).

Only evidence that no sub-agent condensed is summarised, and only what the current round added. Deep-dive
reading is selected from in bounded windows (at most `WINDOWS` of `WINDOW` passages; model calls in parallel).
"""

from __future__ import annotations

import asyncio
import math

from langgraph.runtime import Runtime
from langgraph.types import Overwrite

from graph.answer import messages
from graph.answer.events import Step, emit
from graph.answer.ledger import FactsReply, Ledger, order_evidence
from graph.clients.llm import estimate_tokens
from graph.context import Context
from graph.models import Evidence, Fact, Route, Usage, spread
from graph.state import State
from graph.structured import ask_json
from graph.text.hops import listed_things, unfound_things, without
from graph.text.meaning import meaning_facts
from graph.text.selection import select_facts
from graph.tuning import tuning

WINDOW, WINDOWS = 6, 3


def passage_tokens(facts: list[Fact], window: list[Evidence], passage_chars: int) -> int:
    """What the passages `facts` cite would take in the answer's prompt (each at most `passage_chars`)."""
    cited = {i for f in facts for i in f.evidence_ids}
    return sum(estimate_tokens(e.text[:passage_chars]) for e in window if e.id in cited)


def needs_model_summary(selected_tokens: int, budget_tokens: int, has_model: bool) -> bool:
    """Whether the fast model condenses the selected passages into facts: only when they would not fit the
    answer's evidence budget (`EVIDENCE_TOKENS`). Otherwise the passages extractive selection picked go to the
    answer as they are: the answer model reads them once, instead of a summary call reading them first (on the
    local 1.5B model that call cost more prompt tokens than the answer itself, docs/EVAL-LLM.md)."""
    return has_model and selected_tokens > budget_tokens


def extractive_facts(ctx: Context, query: str, window: list[Evidence], limit: int, min_coverage: float,
                     route: Route, asked: str = "") -> list[Fact]:
    return select_facts(query, window, limit, language=ctx.language, min_coverage=min_coverage,
                        prior=set(route.preferred),
                        spread=spread(route),
                        glossary=ctx.catalog.glossary, asked=asked)


def each_thing(ctx: Context, query: str, things: list[str], evidence: list[Evidence], limit: int,
               min_coverage: float, route: Route) -> tuple[list[Fact], list[str]]:
    """For a question listing things side by side that no one passage covers ("Who is older, Ferdi Taygan or
    Mahesh Bhupathi?": each passage is about one of them), the facts selected for each thing on its own (the
    query without the others), and the things none were found for. Nothing when no thing gets facts, so the
    question is still declined; the decline rules hold for each thing's question."""
    if len(things) < 2:
        return [], []
    per_thing = max(2, math.ceil(limit / len(things)))
    facts: dict[str, Fact] = {}
    unfound = []
    for thing in things:
        found = extractive_facts(ctx, without(query, [t for t in things if t != thing]), evidence, per_thing,
                                 min_coverage, route)
        facts.update((f.text, f) for f in found if f.text not in facts)
        if not found:
            unfound.append(thing)
    return (list(facts.values()), unfound) if facts else ([], [])


async def model_facts(ctx: Context, question: str, window: list[Evidence], extractive: list[Fact], limit: int
                      ) -> tuple[list[Fact], Usage]:
    """Facts from one window of evidence by one fast-model call, extractive selection as the fallback. The model
    reads the passages extractive selection chose first, then the best-ranked others. An empty list from the
    model is its judgement that nothing is relevant: the question gets declined."""
    chosen = [i for f in extractive for i in f.evidence_ids]
    ranked = sorted(window, key=lambda e: (e.id not in chosen, chosen.index(e.id) if e.id in chosen else 0,
                                           -e.relevance))
    best = {e.id for e in ranked[: ctx.config.prompt_passages]}
    ledger = Ledger([e for e in window if e.id in best])
    prompt = ctx.prompts.render("summarize", ctx.language, question=question, max_facts=limit,
                                evidence=ledger.render(max_chars=ctx.config.passage_chars, display=ctx.display,
                                                       language=ctx.language, fence=ctx.fence()))
    facts, usage = await ask_json(ctx, "summarize", prompt, FactsReply, lambda reply: reply.to_facts(ledger, limit),
                                  max_tokens=800)
    return (extractive if facts is None else facts), usage


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
    min_coverage = ctx.config.min_coverage * (1.0 if route.query_type == "factual" else tuning().broad_coverage)
    # The decline rule of extractive selection (no passage holds enough of the question's topic words, or a name
    # from the question is nowhere) costs microseconds and decides first, with or without a model.
    selected = [extractive_facts(ctx, query, w, limit, min_coverage, route, state["question"]) for w in windows]
    unfound = [] if route.query_type == "deep_dive" or any(selected) else \
        unfound_things(state["question"], new, ctx.catalog.words())
    if unfound:  # of the things the question lists, some are nowhere in the evidence: answer for the others, say which
        selected = [extractive_facts(ctx, without(query, unfound), new, limit, min_coverage, route, state["question"])]
        if not selected[0]:
            unfound = []
    elif not any(selected) and route.query_type != "deep_dive":
        facts, unfound = each_thing(ctx, query, listed_things(state["question"], ctx.catalog.words()), new, limit,
                                    min_coverage, route)
        selected = [facts] if facts else selected
    if not any(selected):
        # words selected nothing: sentences a search found by meaning in another language than the question answer,
        # when the document server names them (it embeds sentences) and the question's names are in the evidence
        meant = meaning_facts(state["question"], new, ctx.language, limit, glossary=ctx.catalog.glossary)
        if meant:
            emit(Step(messages.line("by_meaning", ctx.language, n=len(meant))))
            selected, windows = [meant], [new]
    if unfound:
        emit(Step(messages.line("not_found", ctx.language, missing=", ".join(unfound))))
    tokens = sum(passage_tokens(facts, w, ctx.config.passage_chars) for facts, w in zip(selected, windows, strict=True))
    usage = Usage()
    # at depth "low" (the cheapest path) or with MODEL_SUMMARY off the answer's evidence budget cuts what does not fit
    may_condense = ctx.llm is not None and ctx.config.model_summary and ctx.answer.optional_steps
    if needs_model_summary(tokens, ctx.config.evidence_tokens, may_condense):
        if fresh is not None and not any(i in fresh for facts in selected for f in facts for i in f.evidence_ids):
            return {}  # a later round found nothing that selection takes: the model's earlier facts stand
        emit(Step(messages.line("condensing", ctx.language, tokens=tokens, budget=ctx.config.evidence_tokens)))
        results = await asyncio.gather(*(model_facts(ctx, state["question"], w, facts, limit)
                                         for facts, w in zip(selected, windows, strict=True) if facts))
        selected = [facts for facts, _ in results]
        usage = sum((u for _, u in results), Usage())
    facts = [f for window_facts in selected for f in window_facts]
    emit(Step(messages.line("facts", ctx.language, n=len(facts), m=len(new))))
    # the selection over all evidence replaces the previous round's (a deep dive adds per window)
    # `unfound` is this selection's: a later round that finds a listed thing takes it back
    return {"facts": facts if route.query_type == "deep_dive" else Overwrite(facts), "usage": usage,
            "unfound": unfound}
