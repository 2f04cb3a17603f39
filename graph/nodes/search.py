"""The first research round of a question without the rest of the pipeline (`POST /v1/search`): the same route
heuristics, the same per-collection tasks and the same searches, filters and screening as `plan` and `research`,
so a tool or an evaluation sees the passages research would start from. No model call: a question the heuristics
are unsure of is routed by their best guess (the pipeline may ask its fast model), and an overview question
searches without the document listing the pipeline reads first."""

from __future__ import annotations

import asyncio

from graph.clients.mcp_client import DocumentError
from graph.context import Context
from graph.models import Evidence, side_by_side
from graph.nodes.plan import template_tasks
from graph.nodes.research import gather
from graph.state import State, merge_evidence
from graph.text.hops import entity_queries
from graph.text.routing import heuristic_route


async def first_round(state: State, ctx: Context) -> list[Evidence]:
    """The passages the first round gathers for the question of `state` and `ctx` (`graph/runner.py:start`'s, as
    for a pipeline run), best first. A collection whose search fails is left out; when every search fails, the
    first error is raised."""
    question = state["question"]
    route = heuristic_route(question, ctx.catalog.collections, state["instructions"].detailed)
    extra = [] if side_by_side(route) else entity_queries(question, route.search_query, ctx.catalog.words())
    tasks = template_tasks(route, ctx, None, extra)
    results = await asyncio.gather(*(gather(ctx, task) for task in tasks), return_exceptions=True)
    found: list[Evidence] = []
    failures = []
    for result in results:
        if isinstance(result, DocumentError):
            failures.append(result)
        elif isinstance(result, BaseException):
            raise result
        else:
            found = merge_evidence(found, result)
    if failures and len(failures) == len(results):
        raise failures[0]
    return sorted(found, key=lambda e: -e.relevance)  # stable: a collection's own ranking breaks ties
