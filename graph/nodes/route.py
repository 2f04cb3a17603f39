"""Route: follow-up rewrite, query type, target collections. Heuristics first; the fast model only when they are
torn between types (`graph.text.routing.asks_model`; a validated reply, and a comparison only where something is
compared); on any failure all configured collections."""

from __future__ import annotations

from langgraph.runtime import Runtime
from pydantic import BaseModel

from graph.answer import messages
from graph.answer.events import Searched, Step, emit
from graph.context import Context
from graph.models import QueryType, Route, Usage
from graph.state import State
from graph.structured import ask_json, ask_text
from graph.text.routing import (
    asks_model,
    focus_terms,
    heuristic_route,
    is_ambiguous,
    is_follow_up,
    mentioned_collections,
    model_type_plausible,
    restricted_to,
    search_scope,
    standalone,
)


class RouteReply(BaseModel):
    query_type: QueryType
    collections: list[str]


def accept_route(reply: RouteReply, ctx: Context, question: str) -> Route:
    """The model's type; the collections it names only go first (as named ones do), never exclude the others."""
    known, collections = ctx.catalog.names, ctx.catalog.collections
    named = {ctx.catalog.resolve(c) for c in reply.collections}
    chosen = [name for name in known if name in named]
    if reply.collections and not chosen:
        raise ValueError(f"no configured collection among {sorted(reply.collections)}")
    restricted = restricted_to(question, collections, mentioned_collections(question, collections))
    scope = search_scope(reply.query_type, chosen, restricted, known)
    return Route(query_type=reply.query_type, collections=scope, preferred=[c for c in chosen if c in scope],
                 reason="model", search_query=focus_terms(question, collections))


def _one_line(text: str) -> str:
    line = text.strip().strip('"').splitlines()[0].strip() if text.strip() else ""
    if not 3 <= len(line) <= 400:
        raise ValueError("no usable standalone question")
    return line


async def rewrite_follow_up(state: State, ctx: Context) -> tuple[str, Usage]:
    question, history = state["question"], state["history"]
    previous = next((t.content for t in reversed(history) if t.role == "user"), "")
    if ctx.llm is None:
        return standalone(question, previous, ctx.catalog.collections), Usage()
    convo = "\n".join(f"{t.role}: {t.content[:400]}" for t in history[-4:])
    prompt = ctx.prompts.render("rewrite", ctx.language, history=convo, question=question)
    text, usage = await ctx.cached(
        "rewrite", (convo, question), lambda: ask_text(ctx, "rewrite", prompt, _one_line, max_tokens=120)
    )
    return (text or standalone(question, previous, ctx.catalog.collections)), usage


async def classify(question: str, ctx: Context) -> tuple[Route | None, Usage]:
    """The fast model's route for an ambiguous question (plan-cached); None when it fails."""
    options = "\n".join(f"- {c.name}: {c.focus}" for c in ctx.catalog.collections)
    prompt = ctx.prompts.render("route", ctx.language, question=question, collections=options)
    value, usage = await ctx.cached(
        "route",
        (question, ctx.language),
        lambda: ask_json(ctx, "route", prompt, RouteReply, lambda reply: accept_route(reply, ctx, question).model_dump(),
                         max_tokens=150),
    )
    return (Route.model_validate(value) if value else None), usage


def filter_items(ctx: Context) -> str:
    """The request's filters as the think block names them ("collecties A, B · alleen officiële teksten")."""
    filters, language = ctx.answer.filters, ctx.language
    items = []
    if filters.collections:
        names = dict.fromkeys(ctx.display(ctx.catalog.resolve(c) or c) for c in filters.collections)
        items.append(messages.line("filter_collections", language, names=", ".join(names)))
    if filters.kind:
        items.append(messages.line(f"filter_{filters.kind}", language))
    if filters.language:
        items.append(messages.line("filter_language", language, name=messages.language_name(filters.language, language)))
    return " · ".join(items)


async def route(state: State, runtime: Runtime[Context]) -> dict:
    ctx, language = runtime.context, runtime.context.language
    question, usage = state["question"], Usage()
    update: dict = {}
    if ctx.answer.filters:
        emit(Step(messages.line("filters", language, items=filter_items(ctx))))
    if ctx.answer.depth:  # the caller chose a research depth (`reasoning_effort`)
        emit(Step(messages.line(f"depth_{ctx.answer.depth}", language, rounds=ctx.config.max_iterations)))
    if is_follow_up(question, any(t.role == "user" for t in state["history"])):
        question, usage = await rewrite_follow_up(state, ctx)
        update["question"] = question
        emit(Step(messages.line("rewritten", language, question=question)))
    decision = heuristic_route(question, ctx.catalog.collections, state["instructions"].detailed)
    # torn between types: one call, when MODEL_ROUTE is on
    if asks_model(decision) and ctx.llm is not None and ctx.config.model_route and ctx.answer.optional_steps:
        by_model, spent = await classify(question, ctx)
        usage = usage + spent
        if by_model is not None and not model_type_plausible(by_model.query_type, decision):
            emit(Step(messages.line("route_implausible", language, kind=messages.kind_label(by_model.query_type,
                                                                                          language))))
            by_model = None
        decision = by_model or decision  # on failure: the heuristics' best guess
    kind = messages.kind_label(decision.query_type, language)
    if decision.reason == "model":
        emit(Step(messages.line("route_model", language, kind=kind)))
    elif decision.reason and not is_ambiguous(decision):
        emit(Step(messages.line("route_signal", language, kind=kind, signal=decision.signal_words or decision.reason)))
    else:
        emit(Step(messages.line("route_unsure", language, kind=kind)))
    emit(Step(messages.line("collections", language, names=", ".join(ctx.display(c) for c in decision.collections))))
    emit(Searched(tuple(decision.collections)))  # for the audit line: research searches these and no others
    if ctx.llm is None:
        emit(Step(messages.line("offline", language)))
    return {**update, "route": decision, "usage": usage}
