"""Synthesize: one answer in the user's language with `[n]` citations checked against the ledger.

The answer streams as the upstream produces it; the sources list is rendered from the ledger afterwards.
"""

from __future__ import annotations

from langgraph.runtime import Runtime

from graph import messages
from graph.answer_stream import AnswerStream
from graph.claims import high_stakes_question, unsupported_claims
from graph.context import Context
from graph.events import SourceFound, Step, Unsupported, UsageEvent, degrade, emit
from graph.extractive import template_answer
from graph.ledger import Ledger
from graph.llm import LLMError
from graph.models import Usage
from graph.state import State
from graph.structured import fallback


def named_documents(state: State, ledger: Ledger) -> list[dict]:
    """Exploratory answers name documents: the title matches plus the documents the evidence came from."""
    if state["route"].query_type != "exploratory":
        return []
    documents = list(state["documents"])
    known = {d["doc_id"] for d in documents}
    for e in ledger:
        if e.doc_id not in known:
            known.add(e.doc_id)
            documents.append({"collection": e.collection, "doc_id": e.doc_id, "title": e.title, "year": e.year})
    return documents


def _documents_block(documents: list[dict], ctx: Context) -> str:
    if not documents:
        return ""
    lines = [f"- {ctx.display(d['collection'])}: {d['title']}" + (f" ({d['year']})" if d.get("year") else "")
             for d in documents]
    return "Documents:\n" + "\n".join(lines)


def check_claims(setting: str, high_stakes: bool) -> bool:
    """Whether a model's answer gets the support check: CLAIM_CHECK=on (the default) always, auto only for
    high-stakes questions, off never."""
    return setting == "on" or (setting == "auto" and high_stakes)


async def synthesize(state: State, runtime: Runtime[Context]) -> dict:
    ctx, route, loop = runtime.context, state["route"], state["loop"]
    ledger = Ledger.for_answer(state["facts"], state["evidence"], route.collections, ctx.config.ledger_limit)
    gaps = state["gaps"]
    if ledger and loop.verdict and loop.verdict.missing and loop.stop != "sufficient":
        gaps = gaps + [messages.line("not_found", ctx.language, missing=", ".join(loop.verdict.missing))]
    system = ""
    if ctx.llm is not None:
        style = ctx.prompts.render(f"style_{route.query_type}", ctx.language)
        system = ctx.prompts.render("synthesize_system", ctx.language, style=style)
    answer = AnswerStream(ledger.citation_filter(), system, ctx.config.stream_interval_s)
    try:
        usage = await write_answer(state, ctx, ledger, gaps, system, answer)
    except BaseException:  # cancelled (client gone) or failed: nothing more is sent
        answer.cancel()
        raise
    answer.finish()
    return {"answer": answer.text, "usage": usage}


async def write_answer(state: State, ctx: Context, ledger: Ledger, gaps: list[str], system: str,
                       answer: AnswerStream) -> Usage:
    """The answer: the model's (or, without one, the template's) text, the claim check, gaps, sources."""
    language, question, route, facts = ctx.language, state["question"], state["route"], state["facts"]
    usage = Usage()
    for n, e in ledger.numbered():
        emit(SourceFound(n, e.title, e.collection, e.url, e.id, e.text[:500]))
    if not ledger:
        names = ", ".join(ctx.display(c) for c in route.collections)
        answer.write(messages.line("nothing", language, names=names))
        for gap in gaps:
            answer.write(f"\n\n{gap}")
        return usage

    emit(Step(messages.line("writing", language, n=len(ledger))))
    banner = messages.line("offline_banner", language)
    if ctx.llm is not None:
        user = ctx.prompts.render(
            "synthesize",
            language,
            question=question,
            facts=ledger.facts_block(facts, ctx.display),
            evidence=ledger.render(max_chars=ctx.config.passage_chars, display=ctx.display),
            gaps="\n".join(gaps),
            documents=_documents_block(named_documents(state, ledger), ctx),
        )
        try:
            async for piece in ctx.llm.stream([{"role": "system", "content": system}, {"role": "user", "content": user}]):
                if isinstance(piece, Usage):
                    usage = piece
                    emit(UsageEvent(piece.prompt_tokens, piece.completion_tokens, piece.calls))
                else:
                    answer.write(piece)
            banner = ""
        except LLMError as exc:
            if answer.parts:
                degrade("llm")
                answer.close()
                answer.write(messages.line("interrupted", language), check=False)
                banner = ""
            else:
                fallback(ctx, "synthesize", "unavailable", exc,
                         messages.line("llm_fallback", language, error=type(exc).__name__))
                banner = messages.line("fallback_banner", language, error="upstream")
    if banner:
        answer.write(template_answer(facts, ledger, language, ctx.display, banner, named_documents(state, ledger)))
    answer.close()
    high_stakes = ctx.catalog.high_stakes(route.collections) or high_stakes_question(question)
    if not banner and check_claims(ctx.config.claim_check, high_stakes):
        claims = unsupported_claims(answer.text, ledger.entries, language, ctx.display)
        if claims:
            emit(Step(messages.line("claims_flagged", language, n=len(claims))))
            emit(Unsupported(tuple(claims)))
            quoted = "; ".join(f"“{c.strip()}”" for c in claims)
            answer.write("\n\n" + messages.line("unsupported", language, claims=quoted), check=False)
    for gap in gaps:
        answer.write(f"\n\n{gap}", check=False)
    answer.write(f"\n\n{ledger.sources(answer.filter.cited, language, ctx.display)}", check=False)
    return usage
