"""Research sub-agent: searches one collection and condenses what it found; one per task, run in parallel
by `Send` from the parent graph.

Its input and output types are the context firewall: the parent sends a `ResearchInput` and gets back only a
`ResearchOutput` (evidence, facts with evidence ids, coverage and gaps), never the sub-agent's prompts or
scratch state. A failing search becomes a recorded gap; the other sub-agents go on.

It is one node of two steps rather than a two-node subgraph: a compiled subgraph runs a Pregel loop of its
own per invocation (channels, checkpoints, task preparation), which py-spy showed at 17% of the service's
CPU during the benchmark's concurrency sweep, for a sequence that has no branches.
"""

from __future__ import annotations

from typing import TypedDict

from langgraph.runtime import Runtime

from graph import messages
from graph.citations import render_ledger
from graph.events import Step, SubAgentStatus, degrade, emit
from graph.extractive import select_facts
from graph.mcp_client import DocumentError
from graph.nodes.summarize import parse_facts
from graph.state import Context, Evidence, Fact, Language, ResearchTask, Usage
from graph.structured import ask_fast


class ResearchInput(TypedDict):
    task: ResearchTask
    question: str
    language: Language


class ResearchOutput(TypedDict, total=False):
    evidence: list[Evidence]
    facts: list[Fact]
    covered: list[str]
    failed: list[str]
    gaps: list[str]
    usage: Usage


class ResearchState(ResearchInput, ResearchOutput, total=False):
    """What the two steps share inside one sub-agent."""


def focus(hits: list[Evidence], doc_ids: list[str], limit: int) -> list[Evidence]:
    """Hits from the focus documents first (stable), then the rest, cut at `limit`."""
    if doc_ids:
        hits = [h for h in hits if h.doc_id in doc_ids] + [h for h in hits if h.doc_id not in doc_ids]
    return hits[:limit]


async def search(state: ResearchState, runtime: Runtime[Context]) -> dict:
    ctx, task, language = runtime.context, state["task"], state["language"]
    name = ctx.display(task.collection)
    emit(SubAgentStatus(task.label, "started"))
    emit(Step(messages.line("searching", language, coll=task.label)))
    try:
        hits = await ctx.docs.search(task.collection, task.query)
    except DocumentError as exc:
        emit(SubAgentStatus(task.label, "failed", str(exc)))
        degrade("documents", messages.line("failed", language, coll=task.label, error=exc))
        return {"evidence": [], "failed": [task.collection], "gaps": [messages.line("gap", language, coll=name, error=exc)]}
    return {"evidence": focus(hits, task.doc_ids, task.limit + (task.depth - 1) * 3)}


async def condense(state: ResearchState, runtime: Runtime[Context]) -> dict:
    ctx, task, language = runtime.context, state["task"], state["language"]
    evidence = state.get("evidence") or []
    if state.get("gaps"):
        return {}
    if not task.condense or not evidence:
        key = "found" if evidence else "none_found"
        emit(Step(messages.line(key, language, coll=task.label, n=len(evidence))))
        emit(SubAgentStatus(task.label, "done", str(len(evidence))))
        return {}
    usage, facts = Usage(), None
    if ctx.llm is not None:
        prompt = ctx.prompts.render(
            "condense", language, question=state["question"], focus=task.query, source=ctx.display(task.collection),
            evidence=render_ledger(evidence, max_chars=900), max_facts=ctx.facts_per_agent,
        )
        facts, usage = await ask_fast(
            ctx, prompt, language, lambda text: parse_facts(text, evidence)[: ctx.facts_per_agent], max_tokens=600
        )
    if facts is None:
        # a sub-agent researches a source the question named: its best sentences count, no relevance floor
        facts = select_facts(
            task.query or state["question"], evidence, ctx.facts_per_agent, language=language, min_coverage=0
        )
    emit(Step(messages.line("agent_done", language, coll=task.label, n=len(evidence), m=len(facts))))
    emit(SubAgentStatus(task.label, "done", f"{len(evidence)}/{len(facts)}"))
    return {"facts": facts, "covered": [task.id] if facts else [], "usage": usage}


async def research(state: ResearchInput, runtime: Runtime[Context]) -> ResearchOutput:
    """search, then condense what was found (a failed search ends the sub-agent with its gap)."""
    work: ResearchState = {**state, **await search(state, runtime)}  # type: ignore[typeddict-item]
    if not work.get("gaps"):
        work.update(await condense(work, runtime))  # type: ignore[typeddict-item]
    return {key: work[key] for key in ResearchOutput.__annotations__ if key in work}  # type: ignore[return-value]
