"""Judge: is the evidence sufficient? Coverage first (no call), then the fast model, or rules offline; then
the loop's rule (`graph/loop.py:decide`) says whether another round runs and with which tasks."""

from __future__ import annotations

import asyncio
import logging
import time

from langgraph.runtime import Runtime
from pydantic import BaseModel, Field

from graph.answer import messages
from graph.answer.events import Step, emit
from graph.clients.mcp_client import DocumentError, DocumentRef
from graph.context import Context
from graph.loop import (
    Decision,
    Limits,
    assessment,
    coverage_verdict,
    covered_tasks,
    decide,
    failed_collections,
    follow_up_tasks,
    follows_links,
    lookup_tasks,
    model_judges,
    refines,
    research_rounds,
    rules_verdict,
    unexplored,
    untried,
    with_findings,
)
from graph.models import Language, ResearchTask, Status, Usage, Verdict, side_by_side
from graph.nodes.plan import in_language_by_model, language_label
from graph.state import State
from graph.structured import ask_json
from graph.text.hops import bridge_queries, complete, link_candidates, link_queries, titled

log = logging.getLogger(__name__)


class Missing(BaseModel):
    source: str = ""  # a research task's label
    query: str = ""  # a better search query for it


class JudgeReply(BaseModel):
    status: Status
    missing: list[Missing | str] = Field(default_factory=list)  # small models often write just the source's name


def accept_verdict(reply: JudgeReply, tasks: list[ResearchTask]) -> Verdict:
    """`missing` may only name research tasks (by label); other names are dropped."""
    by_label = {t.label.lower(): t for t in tasks}
    missing, queries = [], {}
    for item in reply.missing:
        item = Missing(source=item) if isinstance(item, str) else item
        task = by_label.get(item.source.split(" (")[0].strip().lower())  # the prompt lists "IAEA (English)"
        if task:
            missing.append(task.label)
            if item.query:
                queries[task.id] = item.query
    return Verdict(status=reply.status, missing=missing, queries=queries, judged_by="llm")


def alternatives(tasks: list[ResearchTask], ctx: Context) -> dict[str, list[str]]:
    """Other wordings a correction round may try per collection: the query with the glossary's wordings in
    both languages, and for a side of a comparison (a sub-agent that condenses), with the collection's name: it is
    searched by who it is. Other questions are about what documents say, which seldom name their collection."""
    out: dict[str, list[str]] = {}
    glossary = ctx.catalog.glossary
    for task in tasks:
        wordings = [glossary.expand(glossary.expand(task.query, "nl"), "en")]
        if task.condense and ctx.display(task.collection).lower() not in task.query.lower():
            wordings.append(f"{ctx.display(task.collection)} {task.query}")
        out.setdefault(task.collection, []).extend(w for w in wordings if w != task.query)
    return out


async def title_lookups(ctx: Context, names: list[str]) -> list[tuple[str, str, str]]:
    """(name, collection, doc_id) for each name that titles a document (`list_documents`, one call per name, at
    once). A failed lookup finds nothing and is logged: the research goes on with what the searches find."""
    if not names:
        return []
    replies = await asyncio.gather(*(ctx.docs.list_documents(n) for n in names), return_exceptions=True)
    refs: list[DocumentRef] = []
    for reply in replies:
        if isinstance(reply, DocumentError):
            log.warning("title lookup failed: %s", reply)
            continue
        if isinstance(reply, BaseException):
            raise reply
        refs.extend(reply)
    return [(name, ref.collection, ref.doc_id) for name, ref in titled(names, refs)]


def sources(tasks: list[ResearchTask], ctx: Context) -> list[str]:
    """The researched sources as the judging prompt names them: label and the language of its documents, so that
    a refined query is written in that language."""
    return [f"{t.label} ({language_label(t.collection, ctx)})" for t in tasks]


def decision_lines(verdict: Verdict, decision: Decision, hops: list[str], language: Language) -> list[str]:
    """The think lines of the loop's decision, all read from the `decision` that routes (one decision, one
    place): the assessment as the decision has it (`assessment`: never "sufficient" before another round), the
    hops the next round searches (only those it does), or why research stopped when not for enough evidence."""
    status = messages.status_label(assessment(verdict, decision), language)
    lines = [messages.line("verdict_missing", language, status=status, missing=", ".join(verdict.missing))
             if verdict.missing else messages.line("verdict", language, status=status)]
    taken = list(dict.fromkeys(q for t in decision.tasks for q in t.queries if q in hops))
    if taken:
        lines.append(messages.line("hops", language, queries=" · ".join(taken)))
    if decision.stop not in (None, "sufficient"):
        lines.append(messages.line("stop", language, reason=messages.reason_label(decision.stop, language)))
    return lines


async def judge(state: State, runtime: Runtime[Context]) -> dict:
    ctx, route, loop = runtime.context, state["route"], state["loop"]
    language, facts, evidence = ctx.language, state["facts"], state["evidence"]
    covered = covered_tasks(loop.tasks, state["outcomes"], facts, evidence)
    usage = Usage()
    focus = route.search_query or state["question"]
    verdict = coverage_verdict(route.query_type, loop.tasks, covered, facts,
                               complete(focus, facts, evidence, ctx.catalog.glossary))
    if model_judges(ctx.answer.depth, verdict is not None, ctx.llm is not None):
        prompt = ctx.prompts.render("judge", language, question=state["question"],
                                    facts="\n".join(f"- {f.text}" for f in facts),
                                    sources=", ".join(sources(loop.tasks, ctx)))
        verdict, usage = await ask_json(ctx, "judge", prompt, JudgeReply, lambda reply: accept_verdict(reply, loop.tasks),
                                        max_tokens=300)
    if verdict is None:
        verdict = rules_verdict(loop.tasks, covered)

    limits = Limits(max_rounds=research_rounds(ctx.config.max_iterations, ctx.answer.depth),
                    tokens_left=ctx.config.token_budget - (state["usage"] + usage).total_tokens,
                    seconds_left=ctx.deadline - time.monotonic())
    failed = failed_collections(state["outcomes"])
    hops: list[str] = []
    # a second hop, from the evidence, for a question about one thing or a comparison of things
    if route.query_type in ("factual", "comparative") and not side_by_side(route) and verdict.status != "sufficient":
        hops = bridge_queries(state["question"], focus, evidence, ctx.catalog.words())
    links: list[str] = []
    found: list[tuple[str, str, str]] = []
    if follows_links(route.query_type, side_by_side(route), loop.round) and loop.round < limits.max_rounds:
        # the first names of the passages covering the question best are searched on every collection; the other
        # names they and the documents the question names give, only where `list_documents` finds a document
        # titled by them (a call each, at once; a search only for a title found)
        links = link_queries(state["question"], focus, evidence, ctx.catalog.words())
        found = await title_lookups(ctx, [n for n in link_candidates(state["question"], focus, evidence,
                                                                     ctx.catalog.words()) if n not in links])
    if links or found:  # the first round's passages name things no gathered document is about: look them up
        hops = list(dict.fromkeys(links + hops))
        verdict = unexplored(verdict)
    # a title found is searched on its collection first: `untried` keeps the first task of a (collection, query)
    follow_ups = lookup_tasks(loop.tasks, found, loop.round, failed) + follow_up_tasks(loop.tasks, hops, loop.round, failed)
    hops = list(dict.fromkeys(hops + [n for n, _, _ in found]))  # what the think line may name
    decision = decide(loop, verdict, kind=route.query_type, new_evidence=len(evidence) - loop.evidence_seen,
                      failed=failed, limits=limits, follow_ups=follow_ups,
                      # other wordings only where a task is researched again (most verdicts refine none)
                      alternatives=alternatives(loop.tasks, ctx) if any(refines(t, verdict) for t in loop.tasks)
                      else None)
    for line in decision_lines(verdict, decision, hops, language):
        emit(Step(line))
    # sub-questions that waited for earlier findings are sharpened with them; the rest are refinements
    ready = [with_findings(t, loop.tasks, facts, evidence) for t in decision.tasks if t.after]
    refined = [t for t in decision.tasks if not t.after]
    if loop.round == 1:  # the first correction round searches other-language collections in their language
        refined, translating = await in_language_by_model(refined, ctx)
        refined, usage = untried(refined, loop.tried), usage + translating
    if ready:
        emit(Step(messages.line("dependent", language, items=", ".join(f"{t.label}: {t.query}" for t in ready))))
    if refined:
        emit(Step(messages.line("round", language, n=loop.round + 1, items=", ".join(t.label for t in refined))))
    return {"loop": loop.after(verdict, Decision(decision.stop, ready + refined), len(evidence)), "usage": usage}
