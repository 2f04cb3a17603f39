"""Deep read: `read_document` of the best-matching document (fallback: several `search_collection` calls)."""

from __future__ import annotations

from langgraph.runtime import Runtime

from graph import messages
from graph.events import Step, degrade, emit
from graph.mcp_client import DocumentError
from graph.state import Context, Evidence, State


async def deep_read(state: State, runtime: Runtime[Context]) -> dict:
    ctx, language, route = runtime.context, state["language"], state["route"]
    documents = state.get("documents", [])
    evidence: list[Evidence] = []
    gaps: list[str] = []
    if documents:
        best = documents[0]
        emit(Step(messages.line("reading", language, title=best["title"])))
        try:
            evidence = await ctx.docs.read_document(best["collection"], best["doc_id"], route.search_query)
        except DocumentError as exc:
            degrade("documents", messages.line("failed", language, coll=best["title"], error=exc))
    # the best title match may not be the whole story: the routed collections are searched as well
    for name in route.collections:
        try:
            evidence += (await ctx.docs.search(name, route.search_query))[: ctx.top_k]
        except DocumentError as exc:
            degrade("documents")
            gaps.append(messages.line("gap", language, coll=ctx.display(name), error=exc))
    emit(Step(messages.line("found", language, coll=", ".join(map(ctx.display, route.collections)), n=len(evidence))))
    return {"evidence": evidence, "gaps": gaps, "round": 1, "tasks": [], "evidence_seen": 0}
