"""Plan: the first round's research tasks. Comparative questions are decomposed in one fast-model call (or
by per-collection templates); the other types get one task per routed collection. Later rounds come from
the loop's decision (`graph/loop.py`)."""

from __future__ import annotations

import re
from functools import partial

from langgraph.runtime import Runtime
from pydantic import BaseModel, Field

from graph.answer import messages
from graph.answer.events import Step, emit
from graph.context import Context
from graph.glossary import Glossary
from graph.models import Language, ResearchTask, Route, Usage, side_by_side
from graph.state import State
from graph.structured import ask_json
from graph.text.hops import entity_queries
from graph.text.relevance import entity_words
from textkit import analyze


class SubQuestion(BaseModel):
    collection: str
    query: str = Field(min_length=3)
    after: int | None = None  # 1-based number of a sub-question whose answer this one needs


class Decomposition(BaseModel):
    sub_questions: list[SubQuestion] = Field(min_length=1, max_length=5)


MAX_TRANSLATIONS = 8  # queries per translation call (a round has at most one per collection and query)


class Translation(BaseModel):
    queries: list[str] = Field(min_length=1, max_length=MAX_TRANSLATIONS)


def source_query(query: str, name: str, route: Route, ctx: Context) -> str:
    """For one side of a comparison: the query without the words that name the other compared sources."""
    collections = ctx.catalog.collections
    others = {k for c in collections if c.name in route.collections and c.name != name for k in c.keywords}
    own = next((set(c.keywords) for c in collections if c.name == name), set())
    kept = [w for w in query.split() if w.lower() not in others - own]
    return " ".join(kept) or query


def in_language(query: str, collection: str, ctx: Context) -> str:
    """A query for a collection whose documents are in another language than the question gets the glossary's
    wordings in that language ("veiligheidscultuur" -> "veiligheidscultuur safety culture")."""
    language = ctx.catalog.language(collection)
    return ctx.catalog.glossary.expand(query, language) if language and language != ctx.language else query


def language_label(collection: str, ctx: Context) -> str:
    """The language of a collection's documents, named in the question's language, as prompts list a source."""
    return messages.language_name(ctx.catalog.language(collection) or ctx.language, ctx.language)


def kept(query: str, glossary: Glossary) -> set[str]:
    """What a translation must keep of a query: its names and numbers (`entity_words`, and an abbreviation in
    first place: "Borssele", "DBT", "2033") and the glossary's concepts it mentions (as `≈n`: "kerncentrale" must
    come back as "nuclear power plant", not as "central")."""
    first = re.findall(r"[\w/.-]+", query)[:1]
    names = entity_words(query) + [w for w in first if w.isupper()]
    return {w.lower() for w in names} | glossary.concepts(analyze(query))


def accept_translation(reply: Translation, queries: list[str], glossary: Glossary) -> list[str | None]:
    """Per query asked for, its translation when it is a short line that keeps what `kept` says, else None: a
    small model drops or invents names and terms ("vervalt vergunning kerncentrale Borssele" came back as a
    question about a central bank, "veiligheidscultuur" as a neighbouring concept of the glossary). The reply
    must hold as many queries as were asked for."""
    if len(reply.queries) != len(queries):
        raise ValueError("translation does not match the queries asked for")
    out: list[str | None] = []
    for query, wording in zip(queries, reply.queries, strict=True):
        wording = " ".join(wording.split())
        has = {w.lower() for w in re.findall(r"[\w/.-]+", wording)} | glossary.concepts(analyze(wording))
        usable = 3 <= len(wording) <= 200 and wording.lower() != query.lower() and kept(query, glossary) <= has
        out.append(wording if usable else None)
    return out


async def in_language_by_model(tasks: list[ResearchTask], ctx: Context) -> tuple[list[ResearchTask], Usage]:
    """With a model, the tasks of a correction round on collections whose documents are in another language than
    the question get a query the fast model wrote in that language: one call per language, for a round that
    runs anyway (`judge` asks only for the first correction round, so a request pays it once; the first
    round's glossary wording, `in_language`, costs nothing). The query the round had becomes the task's next
    query."""
    if ctx.llm is None:
        return tasks, Usage()
    usage, wordings, glossary = Usage(), {}, ctx.catalog.glossary
    # a second hop ("+") searches names found in the evidence: nothing to translate
    targets = [None if task.id.endswith("+") else ctx.catalog.language(task.collection) for task in tasks]
    foreign: dict[Language, list[str]] = {}
    for task, target in zip(tasks, targets, strict=True):
        queries = foreign.setdefault(target, []) if target and target != ctx.language else None
        if queries is not None and task.query not in queries and len(queries) < MAX_TRANSLATIONS:
            queries.append(task.query)
    for target, queries in foreign.items():
        prompt = ctx.prompts.render("translate", ctx.language, source=messages.language_name(ctx.language, ctx.language),
                                    target=messages.language_name(target, ctx.language),
                                    queries="\n".join(f"- {q}" for q in queries))
        value, used = await ctx.cached("translate", (queries, target), partial(
            ask_json, ctx, "translate", prompt, Translation, partial(accept_translation, queries=queries, glossary=glossary),
            max_tokens=200))
        usage += used
        wordings.update({(target, query): wording for query, wording in zip(queries, value or [None] * len(queries),
                                                                             strict=True)})
    out = []
    for task, target in zip(tasks, targets, strict=True):
        if target and (wording := wordings.get((target, task.query))):
            emit(Step(messages.line("translated", ctx.language, coll=task.label, query=wording,
                                    target=messages.language_name(target, ctx.language))))
            task = task.model_copy(update={"query": wording, "extra": [task.query, *task.extra]})
        out.append(task)
    return out, usage


def template_tasks(route: Route, ctx: Context, doc_ids: dict[str, list[str]] | None = None,
                   extra: list[str] | None = None) -> list[ResearchTask]:
    """Deterministic per-collection tasks (offline mode and fallback); `extra`: more queries for each (the names
    of a question about several, searched on their own)."""
    condense = side_by_side(route)
    top_k = ctx.config.top_k
    # a question aimed at one or two collections reads deeper into each ranking
    limit = top_k if len(route.collections) > 2 else max(top_k, 10)
    return [
        ResearchTask(
            id=name,
            collection=name,
            query=in_language(source_query(route.search_query, name, route, ctx) if condense else route.search_query,
                              name, ctx),
            label=ctx.display(name),
            condense=condense,
            doc_ids=(doc_ids or {}).get(name, []),
            limit=limit,
            extra=[] if condense else (extra or []),
        )
        for name in route.collections
    ]


def accept_decomposition(plan: Decomposition, route: Route, ctx: Context) -> list[ResearchTask]:
    """Known collections only, 2 to 5 sub-questions, at least one per routed collection."""
    tasks: list[ResearchTask] = []
    ids: dict[int, str] = {}
    for number, item in enumerate(plan.sub_questions, 1):
        collection = ctx.catalog.resolve(item.collection)  # small models write "IAEA", not the key "iaea"
        if collection not in route.collections:
            continue
        item = item.model_copy(update={"collection": collection})
        n = sum(t.collection == item.collection for t in tasks)
        ids[number] = item.collection if n == 0 else f"{item.collection}-{n + 1}"
        tasks.append(
            ResearchTask(
                id=ids[number],
                collection=item.collection,
                query=item.query.strip(),
                label=ctx.display(item.collection) + ("" if n == 0 else f" ({n + 1})"),
                limit=ctx.config.top_k,
                after=str(item.after) if item.after and item.after < number else None,
            )
        )
    for task in tasks:  # dependencies point at earlier sub-questions only, so there are no cycles
        if task.after is not None:
            task.after = ids.get(int(task.after))
    if len(tasks) < 2 or {t.collection for t in tasks} != set(route.collections):
        raise ValueError("decomposition does not cover the routed collections")
    return tasks


async def decompose(question: str, route: Route, ctx: Context) -> tuple[list[ResearchTask], Usage]:
    if ctx.llm is None or not ctx.config.model_decompose or len(route.collections) < 2 or not ctx.answer.optional_steps:
        return template_tasks(route, ctx), Usage()
    sources = "\n".join(
        f"- {c.name}: {c.display_name} ({language_label(c.name, ctx)}) — {c.focus}"
        for c in ctx.catalog.collections if c.name in route.collections
    )
    prompt = ctx.prompts.render("decompose", ctx.language, question=question, sources=sources)

    def accept(plan: Decomposition) -> list[dict]:
        return [t.model_dump() for t in accept_decomposition(plan, route, ctx)]

    value, usage = await ctx.cached(
        "decompose",
        (question, route.collections, ctx.language),
        lambda: ask_json(ctx, "decompose", prompt, Decomposition, accept, max_tokens=500),
    )
    if value is None:
        return template_tasks(route, ctx), usage
    return [ResearchTask.model_validate(t) for t in value], usage


async def plan(state: State, runtime: Runtime[Context]) -> dict:
    ctx, route = runtime.context, state["route"]
    usage = Usage()
    if side_by_side(route):
        tasks, usage = await decompose(state["question"], route, ctx)
        items = "; ".join(f"{t.label}: {t.query}" for t in tasks)
        emit(Step(messages.line("subquestions", ctx.language, items=items)))
    else:
        docs: dict[str, list[str]] = {}
        for ref in state["documents"]:
            docs.setdefault(ref["collection"], []).append(ref["doc_id"])
        extra = entity_queries(state["question"], route.search_query, ctx.catalog.words())
        tasks = template_tasks(route, ctx, docs, extra)
    ready, pending = [t for t in tasks if not t.after], [t for t in tasks if t.after]
    return {"loop": state["loop"].start(ready, pending, len(state["evidence"])), "usage": usage}
