"""Route: follow-up rewrite, query type, target collections. Heuristics first; the fast model only when the
question is ambiguous (validated JSON); on any failure all configured collections."""

from __future__ import annotations

import json
import re

from langgraph.runtime import Runtime
from pydantic import BaseModel

from graph import messages
from graph.events import Step, emit
from graph.routing import focus_terms, heuristic_route, is_ambiguous, is_follow_up, standalone
from graph.state import Context, Language, QueryType, Route, State, Usage
from graph.structured import ask_fast


class _LLMRoute(BaseModel):
    query_type: QueryType
    collections: list[str]


def parse_route(text: str, ctx: Context, question: str) -> Route:
    match = re.search(r"\{.*\}", text, re.DOTALL)
    if not match:
        raise ValueError("no JSON object")
    parsed = _LLMRoute.model_validate(json.loads(match.group(0)))
    known = [c.name for c in ctx.collections]
    chosen = [name for name in known if name in parsed.collections] or known  # never a single-collection fallback
    return Route(query_type=parsed.query_type, collections=chosen, reason="model",
                 search_query=focus_terms(question, ctx.collections))


def _one_line(text: str) -> str:
    line = text.strip().strip('"').splitlines()[0].strip() if text.strip() else ""
    if not 3 <= len(line) <= 400:
        raise ValueError("no usable standalone question")
    return line


async def rewrite_follow_up(state: State, ctx: Context) -> tuple[str, Usage]:
    question, history, language = state["question"], state.get("history", []), state["language"]
    previous = next((t.content for t in reversed(history) if t.role == "user"), "")
    if ctx.llm is None:
        return standalone(question, previous, ctx.collections), Usage()
    convo = "\n".join(f"{t.role}: {t.content[:400]}" for t in history[-4:])
    prompt = ctx.prompts.render("rewrite", language, history=convo, question=question)
    text, usage = await ctx.cached(
        "rewrite", (convo, question), lambda: ask_fast(ctx, prompt, language, _one_line, max_tokens=120)
    )
    return (text or standalone(question, previous, ctx.collections)), usage


async def classify(question: str, language: Language, ctx: Context) -> tuple[Route | None, Usage]:
    """The fast model's route for an ambiguous question (plan-cached); None when it fails."""
    options = "\n".join(f"- {c.name}: {c.focus}" for c in ctx.collections)
    prompt = ctx.prompts.render("route", language, question=question, collections=options)
    value, usage = await ctx.cached(
        "route",
        (question, language),
        lambda: ask_fast(ctx, prompt, language, lambda text: parse_route(text, ctx, question).model_dump(),
                         max_tokens=150),
    )
    return (Route.model_validate(value) if value else None), usage


async def route(state: State, runtime: Runtime[Context]) -> dict:
    ctx, language = runtime.context, state["language"]
    question, usage = state["question"], Usage()
    update: dict = {}
    if is_follow_up(question, any(t.role == "user" for t in state.get("history", []))):
        question, usage = await rewrite_follow_up(state, ctx)
        update["question"] = question
        emit(Step(messages.line("rewritten", language, question=question)))
    decision = heuristic_route(question, ctx.collections)
    if is_ambiguous(decision) and ctx.llm is not None:
        by_model, spent = await classify(question, language, ctx)
        usage = usage + spent
        # on failure: all configured collections, never a single-collection guess
        decision = by_model or decision.model_copy(update={"collections": [c.name for c in ctx.collections]})
    kind = messages.kind_label(decision.query_type, language)
    if decision.reason:
        emit(Step(messages.line("route_signal", language, kind=kind, signal=decision.reason)))
    else:
        emit(Step(messages.line("route", language, kind=kind)))
    emit(Step(messages.line("collections", language, names=", ".join(ctx.display(c) for c in decision.collections))))
    if ctx.llm is None:
        emit(Step(messages.line("offline", language)))
    return {**update, "route": decision, "usage": usage}


def after_route(state: State) -> str:
    return "explore" if state["route"].query_type in ("exploratory", "deep_dive") else "plan"


def after_explore(state: State) -> str:
    return "deep_read" if state["route"].query_type == "deep_dive" else "plan"
