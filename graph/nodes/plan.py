"""Plan: the research tasks of a round. Round 1 comes from the route (comparative questions are decomposed
in one LLM call, or by per-collection templates); later rounds refine what the judge found missing."""

from __future__ import annotations

import json
import re
import time

from langgraph.runtime import Runtime
from pydantic import BaseModel, Field

from graph import messages
from graph.events import Step, emit
from graph.loop import refine
from graph.state import Context, ResearchTask, Route, State, Usage
from graph.structured import ask_fast


class _SubQuestion(BaseModel):
    collection: str
    query: str = Field(min_length=3)
    after: int | None = None  # 1-based number of a sub-question whose answer this one needs


class _Decomposition(BaseModel):
    sub_questions: list[_SubQuestion] = Field(min_length=1, max_length=5)


def source_query(query: str, name: str, route: Route, ctx: Context) -> str:
    """For one side of a comparison: the query without the words that name the other compared sources."""
    others = {k for c in ctx.collections if c.name in route.collections and c.name != name for k in c.keywords}
    own = next((set(c.keywords) for c in ctx.collections if c.name == name), set())
    kept = [w for w in query.split() if w.lower() not in others - own]
    return " ".join(kept) or query


def template_tasks(route: Route, ctx: Context, doc_ids: dict[str, list[str]] | None = None) -> list[ResearchTask]:
    """Deterministic per-collection tasks (offline mode and fallback)."""
    condense = route.query_type == "comparative"
    # a question aimed at one or two collections reads deeper into each ranking
    limit = ctx.top_k if len(route.collections) > 2 else max(ctx.top_k, 10)
    return [
        ResearchTask(
            id=name,
            collection=name,
            query=source_query(route.search_query, name, route, ctx) if condense else route.search_query,
            label=ctx.display(name),
            condense=condense,
            doc_ids=(doc_ids or {}).get(name, []),
            limit=limit,
        )
        for name in route.collections
    ]


def parse_decomposition(text: str, route: Route, ctx: Context) -> list[ResearchTask]:
    """Validate the model's JSON: known collections only, 2 to 5 sub-questions, at least one per collection."""
    match = re.search(r"\{.*\}", text, re.DOTALL)
    if not match:
        raise ValueError("no JSON object")
    plan = _Decomposition.model_validate(json.loads(match.group(0)))
    tasks: list[ResearchTask] = []
    ids: dict[int, str] = {}
    for number, item in enumerate(plan.sub_questions, 1):
        if item.collection not in route.collections:
            continue
        n = sum(t.collection == item.collection for t in tasks)
        ids[number] = item.collection if n == 0 else f"{item.collection}-{n + 1}"
        tasks.append(
            ResearchTask(
                id=ids[number],
                collection=item.collection,
                query=item.query.strip(),
                label=ctx.display(item.collection) + ("" if n == 0 else f" ({n + 1})"),
                limit=ctx.top_k,
                after=str(item.after) if item.after and item.after < number else None,
            )
        )
    for task in tasks:  # dependencies point at earlier sub-questions only, so there are no cycles
        if task.after is not None:
            task.after = ids.get(int(task.after))
    if len(tasks) < 2 or {t.collection for t in tasks} != set(route.collections):
        raise ValueError("decomposition does not cover the routed collections")
    return tasks


async def decompose(state: State, ctx: Context) -> tuple[list[ResearchTask], Usage]:
    route, language = state["route"], state["language"]
    if ctx.llm is None or len(route.collections) < 2:
        return template_tasks(route, ctx), Usage()

    sources = "\n".join(
        f"- {c.name}: {c.display_name} — {c.focus}" for c in ctx.collections if c.name in route.collections
    )
    prompt = ctx.prompts.render("decompose", language, question=state["question"], sources=sources)

    def parse(text: str) -> list[dict]:
        return [t.model_dump() for t in parse_decomposition(text, route, ctx)]

    value, usage = await ctx.cached(
        "decompose",
        (state["question"], route.collections, language),
        lambda: ask_fast(ctx, prompt, language, parse, max_tokens=500),
    )
    if value is None:
        return template_tasks(route, ctx), usage
    return [ResearchTask.model_validate(t) for t in value], usage


def with_findings(task: ResearchTask, state: State) -> ResearchTask:
    """A dependent sub-question, sharpened with the names and numbers its prerequisite found."""
    source = next((t.collection for t in state.get("tasks", []) if t.id == task.after), None)
    in_source = {e.id for e in state.get("evidence", []) if e.collection == source}
    found = " ".join(f.text for f in state.get("facts", []) if set(f.evidence_ids) & in_source)
    extra = " ".join(dict.fromkeys(re.findall(r"\b[A-Z][\w/-]{2,}|\b\d[\w./-]*", found)))[:120]
    return task.model_copy(update={"query": f"{task.query} {extra}".strip(), "after": None})


async def plan(state: State, runtime: Runtime[Context]) -> dict:
    ctx, language, route = runtime.context, state["language"], state["route"]
    round_no = state.get("round", 0) + 1
    usage = Usage()
    pending: list[ResearchTask] = []
    if round_no == 1:
        if route.query_type == "comparative":
            tasks, usage = await decompose(state, ctx)
            items = "; ".join(f"{t.label}: {t.query}" for t in tasks)
            emit(Step(messages.line("subquestions", language, items=items)))
            tasks, pending = [t for t in tasks if not t.after], [t for t in tasks if t.after]
        else:
            docs: dict[str, list[str]] = {}
            for ref in state.get("documents", []):
                docs.setdefault(ref["collection"], []).append(ref["doc_id"])
            tasks = template_tasks(route, ctx, docs)
    else:
        ready = [with_findings(t, state) for t in state.get("pending", [])]
        if ready:
            emit(Step(messages.line("dependent", language, items=", ".join(f"{t.label}: {t.query}" for t in ready))))
        refined = refine(state.get("tasks", []), state["verdict"], state.get("round", 1), set(state.get("failed", [])))
        if refined:
            emit(Step(messages.line("round", language, n=round_no, items=", ".join(t.label for t in refined))))
        tasks = ready + refined
    update = {
        "tasks": tasks,
        "pending": pending,
        "round": round_no,
        "evidence_seen": len(state.get("evidence", [])),
        "usage": usage,
    }
    if round_no == 1:
        update["deadline"] = time.monotonic() + ctx.research_seconds
    return update
