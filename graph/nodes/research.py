"""Research sub-agent: searches one collection and condenses what it found; one per task, run in parallel
by `Send` from the parent graph.

Its input and output types are the context firewall: the parent sends a `ResearchInput` and gets back only a
`ResearchOutput` (evidence, facts with evidence ids, the task's outcome and gaps), never the sub-agent's
prompts or scratch state. A failing search becomes a recorded gap; the other sub-agents go on.

It is one node of two steps rather than a two-node subgraph: a compiled subgraph runs a Pregel loop of its
own per invocation (channels, checkpoints, task preparation), which py-spy showed at 17% of the service's
CPU during the benchmark's concurrency sweep, for a sequence that has no branches.
"""

from __future__ import annotations

import asyncio
from typing import TypedDict

from langgraph.runtime import Runtime

from graph.answer import messages
from graph.answer.events import Step, SubAgentStatus, degrade, emit
from graph.answer.ledger import FactsReply, Ledger, pages_read
from graph.clients.mcp_client import DocumentError
from graph.context import Context
from graph.models import Evidence, Fact, Outcome, ResearchTask, Usage
from graph.structured import ask_json
from graph.text.injection import screen
from graph.text.selection import select_facts


class ResearchInput(TypedDict):
    task: ResearchTask
    question: str


class ResearchOutput(TypedDict, total=False):
    evidence: list[Evidence]
    facts: list[Fact]
    outcomes: list[Outcome]
    gaps: list[str]
    usage: Usage


def interleave(rankings: list[list[Evidence]]) -> list[Evidence]:
    """Several rankings as one: first hits of every query, then the second ones, ..., without repeats."""
    merged: dict[str, Evidence] = {}
    for rank in range(max(map(len, rankings), default=0)):
        for hits in rankings:
            if rank < len(hits):
                merged.setdefault(hits[rank].id, hits[rank])
    return list(merged.values())


def own_wording(task: ResearchTask, n: int) -> bool:
    """Whether the task's `n`-th query is the question in its own words: the first query of a first-round task
    (later rounds search other wordings, names and second hops; extra queries are names). Only its hits keep the
    sentences a document server found near the query by meaning (`graph.text.meaning`): near the question too."""
    return n == 0 and "@" not in task.id


def _words_only(hits: list[Evidence]) -> list[Evidence]:
    return [h.model_copy(update={"matching_sentences": []}) if h.matching_sentences else h for h in hits]


async def search_all(ctx: Context, task: ResearchTask) -> list[Evidence]:
    """The task's queries on its collection, in parallel; one that fails fails the task (its first error). A single
    query is awaited here: a task of its own would send it only after what is already queued (the think lines)."""
    if len(task.queries) == 1:
        hits = await ctx.docs.search(task.collection, task.queries[0])
        return hits if own_wording(task, 0) else _words_only(hits)
    results = await asyncio.gather(*(ctx.docs.search(task.collection, q) for q in task.queries),
                                   return_exceptions=True)
    for result in results:
        if isinstance(result, BaseException):
            raise result
    return interleave([hits if own_wording(task, n) else _words_only(hits)  # type: ignore[arg-type]
                       for n, hits in enumerate(results)])


def focus(hits: list[Evidence], doc_ids: list[str], limit: int) -> list[Evidence]:
    """Hits from the focus documents first (stable), then the rest, cut at `limit`."""
    if doc_ids:
        hits = [h for h in hits if h.doc_id in doc_ids] + [h for h in hits if h.doc_id not in doc_ids]
    return hits[:limit]


async def gather(ctx: Context, task: ResearchTask) -> list[Evidence]:
    """What a task keeps of its searches: the hits the request's filters admit, its focus documents first, cut at
    its limit, without sentences addressed to the model (before any prompt or quote is built). `POST /v1/search`
    answers with the same (`graph/nodes/search.py`)."""
    hits = [h for h in await search_all(ctx, task) if ctx.answer.filters.admits(h)]
    return screen(focus(hits, task.doc_ids, task.limit + (task.depth - 1) * 3 + 3 * len(task.extra)))


async def condense(task: ResearchTask, question: str, evidence: list[Evidence], ctx: Context
                   ) -> tuple[list[Fact], Usage]:
    """The sub-agent's key facts: one fast-model call, or its best sentences offline and as the fallback."""
    limit = ctx.config.facts_per_agent
    if ctx.llm is not None and ctx.config.model_condense and ctx.answer.optional_steps:
        # the best passages only: on a small local model every prompt token is latency
        ledger = Ledger(evidence[: ctx.config.prompt_passages])
        prompt = ctx.prompts.render(
            "condense", ctx.language, question=question, focus=task.query, source=ctx.display(task.collection),
            evidence=ledger.render(max_chars=ctx.config.passage_chars, display=ctx.display, language=ctx.language,
                                   fence=ctx.fence()),
            max_facts=limit,
        )
        facts, usage = await ask_json(ctx, "condense", prompt, FactsReply, lambda reply: reply.to_facts(ledger, limit),
                                      max_tokens=600)
        if facts is not None:
            return facts, usage
    else:
        usage = Usage()
    # a sub-agent researches a source the question named: its best sentences count, no relevance floor
    return select_facts(task.query or question, evidence, limit, language=ctx.language, min_coverage=0,
                        glossary=ctx.catalog.glossary), usage


async def research(state: ResearchInput, runtime: Runtime[Context]) -> ResearchOutput:
    """Search, then condense what was found (a failed search ends the sub-agent with its gap)."""
    ctx, task = runtime.context, state["task"]
    language = ctx.language
    emit(SubAgentStatus(task.label, "started"))
    emit(Step(messages.line("searching", language, coll=task.label, query=" · ".join(task.queries))))
    try:
        evidence = await gather(ctx, task)
    except DocumentError as exc:
        emit(SubAgentStatus(task.label, "failed", str(exc)))
        degrade("documents", messages.line("failed", language, coll=task.label, error=exc))
        gap = messages.line("gap", language, coll=ctx.display(task.collection), error=exc)
        return {"outcomes": [Outcome(task_id=task.id, collection=task.collection, error=str(exc))], "gaps": [gap]}
    outcome = Outcome(task_id=task.id, collection=task.collection)
    if where := pages_read(evidence):
        emit(Step(messages.line("pages_read", language, coll=task.label, where=where)))
    if not task.condense or not evidence:
        emit(Step(messages.line("found" if evidence else "none_found", language, coll=task.label, n=len(evidence))))
        emit(SubAgentStatus(task.label, "done", str(len(evidence))))
        return {"evidence": evidence, "outcomes": [outcome]}
    facts, usage = await condense(task, state["question"], evidence, ctx)
    emit(Step(messages.line("agent_done", language, coll=task.label, n=len(evidence), m=len(facts))))
    emit(SubAgentStatus(task.label, "done", f"{len(evidence)}/{len(facts)}"))
    return {"evidence": evidence, "facts": facts, "usage": usage,
            "outcomes": [outcome.model_copy(update={"facts": len(facts)})]}
