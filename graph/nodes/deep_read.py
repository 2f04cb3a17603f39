"""Deep read: `read_document` of the best-matching document (fallback: several `search_collection` calls)."""

from __future__ import annotations

from langgraph.runtime import Runtime

from graph.answer import messages
from graph.answer.events import Step, degrade, emit
from graph.answer.ledger import pages_read
from graph.clients.mcp_client import DocumentError
from graph.context import Context
from graph.models import Evidence
from graph.state import State
from graph.text.injection import screen


async def deep_read(state: State, runtime: Runtime[Context]) -> dict:
    ctx, route = runtime.context, state["route"]
    language = ctx.language
    evidence: list[Evidence] = []
    gaps: list[str] = []
    if state["documents"]:
        best = state["documents"][0]
        emit(Step(messages.line("reading", language, title=best["title"])))
        try:
            evidence = await ctx.docs.read_document(best["collection"], best["doc_id"], route.search_query)
            if where := pages_read(evidence):
                emit(Step(messages.line("pages_read", language, coll=ctx.display(best["collection"]), where=where)))
        except DocumentError as exc:
            degrade("documents", messages.line("failed", language, coll=best["title"], error=exc))
    # the best title match may not be the whole story: the routed collections are searched as well
    for name in route.collections:
        try:
            evidence += (await ctx.docs.search(name, route.search_query))[: ctx.config.top_k]
        except DocumentError as exc:
            degrade("documents")
            gaps.append(messages.line("gap", language, coll=ctx.display(name), error=exc))
    evidence = [e for e in evidence if ctx.answer.filters.admits(e)]
    emit(Step(messages.line("found", language, coll=", ".join(map(ctx.display, route.collections)), n=len(evidence))))
    return {"evidence": screen(evidence), "gaps": gaps}  # without sentences addressed to the model
