"""Synthesize: one answer in the user's language with `[n]` citations checked against the ledger.

The answer streams as the upstream produces it; the sources list is rendered from the ledger afterwards.
"""

from __future__ import annotations

import asyncio

from langgraph.runtime import Runtime

from graph import messages
from graph.citations import CitationFilter, order_evidence, render_ledger, render_sources
from graph.claims import high_stakes, unsupported_claims
from graph.events import AnswerDelta, SourceFound, Step, UsageEvent, degrade, emit
from graph.extractive import template_answer
from graph.llm import LLMError
from graph.sanitize import LeakFilter
from graph.state import Context, Evidence, Fact, State, Usage


def build_ledger(facts: list[Fact], evidence: list[Evidence], collections: list[str], limit: int = 12) -> list[Evidence]:
    """The evidence the facts rest on, in stable order. No facts, no ledger: the answer then declines rather
    than writing from passages that nothing showed to be relevant."""
    cited = {i for f in facts for i in f.evidence_ids}
    return [e for e in order_evidence(evidence, collections) if e.id in cited][:limit]


def _facts_block(facts: list[Fact], ledger: list[Evidence]) -> str:
    number = {e.id: n for n, e in enumerate(ledger, 1)}
    return "\n".join(
        f"- {f.text} " + "".join(f"[{number[i]}]" for i in f.evidence_ids if i in number) for f in facts
    )


def _documents(state: State, ledger: list[Evidence]) -> list[dict]:
    """Exploratory answers name documents: the title matches plus the documents the evidence came from."""
    if state["route"].query_type != "exploratory":
        return []
    documents = list(state.get("documents", []))
    known = {d["doc_id"] for d in documents}
    for e in ledger:
        if e.doc_id not in known:
            known.add(e.doc_id)
            documents.append({"collection": e.collection, "doc_id": e.doc_id, "title": e.title, "year": e.year})
    return documents


def _documents_block(documents: list[dict], ctx: Context) -> str:
    if not documents:
        return ""
    lines = [f"- {ctx.display(d['collection'])}: {d['title']}" + (f" ({d['year']})" if d.get("year") else "") for d in documents]
    return "Documents:\n" + "\n".join(lines)


def _check_claims(ctx: Context, question: str, collections: list[str]) -> bool:
    return ctx.claim_check == "on" or (ctx.claim_check == "auto" and high_stakes(question, collections))


class _Answer:
    """Collects the answer while emitting it; citation markers pass the ledger check first.

    Deltas that arrive within `interval_s` of the previous send go out together: the first at once, the
    rest at most `interval_s` later (a timer sends what is held when the upstream pauses). Every sent delta
    costs a trip through the graph stream, the renderer and the socket for each streaming client, so at
    10 ms per upstream token the default 50 ms interval sends a fifth of the deltas (20 updates a second, too
    fast for a reader to tell from token by token) and saved about 15% of the service's CPU per request in the
    benchmark's sweep.
    `finish()` must run before the node returns: it sends what is still held and stops the timer.
    """

    def __init__(self, size: int, system_prompt: str = "", interval_s: float = 0.0) -> None:
        self.filter = CitationFilter(size)
        self.leak = LeakFilter(system_prompt)
        self.parts: list[str] = []
        self.interval_s = interval_s
        self._held: list[str] = []
        self._sent_at = float("-inf")  # loop.time() of the last send
        self._timer: asyncio.TimerHandle | None = None

    def write(self, text: str, *, check: bool = True) -> None:
        out = self.filter.feed(self.leak.feed(text)) if check else text
        if not out:
            return
        self.parts.append(out)
        loop = asyncio.get_running_loop()
        wait = self._sent_at + self.interval_s - loop.time()
        if wait <= 0 and not self._held:
            self._send(out, loop.time())
            return
        self._held.append(out)
        if self._timer is None:  # the callback runs in this task's context, where emit() reaches the stream
            self._timer = loop.call_later(max(wait, 0.0), self._flush)

    def _send(self, text: str, now: float) -> None:
        self._sent_at = now
        emit(AnswerDelta(text))

    def _flush(self) -> None:
        self._timer = None
        if self._held:
            text = "".join(self._held)
            self._held.clear()
            self._send(text, asyncio.get_running_loop().time())

    def close(self) -> None:
        self.write(self.filter.feed(self.leak.flush()) + self.filter.flush(), check=False)

    def finish(self) -> None:
        self.cancel()
        self._flush()

    def cancel(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    @property
    def text(self) -> str:
        return "".join(self.parts)


async def synthesize(state: State, runtime: Runtime[Context]) -> dict:
    ctx, language = runtime.context, state["language"]
    route, facts, gaps = state["route"], state.get("facts", []), state.get("gaps", [])
    ledger = build_ledger(facts, state.get("evidence", []), route.collections, limit=ctx.ledger_limit)
    verdict = state.get("verdict")
    if ledger and verdict and verdict.missing and state.get("stop_reason") != "sufficient":
        gaps = gaps + [messages.line("not_found", language, missing=", ".join(verdict.missing))]
    display = {c.name: c.display_name for c in ctx.collections}
    system = ""
    if ctx.llm is not None:
        style = ctx.prompts.render(f"style_{route.query_type}", language)
        system = ctx.prompts.render("synthesize_system", language, style=style)
    answer = _Answer(len(ledger), system, ctx.stream_interval_s)
    try:
        result = await _write_answer(state, ctx, ledger, gaps, display, system, answer)
    except BaseException:  # cancelled (client gone) or failed: nothing more is sent
        answer.cancel()
        raise
    answer.finish()
    return result


async def _write_answer(
    state: State, ctx: Context, ledger: list[Evidence], gaps: list[str], display: dict[str, str], system: str,
    answer: _Answer,
) -> dict:
    language, question, route, facts = state["language"], state["question"], state["route"], state.get("facts", [])
    usage = Usage()
    for n, e in enumerate(ledger, 1):
        emit(SourceFound(n, e.title, e.collection, e.url, e.id, e.text[:500]))
    if not ledger:
        names = ", ".join(ctx.display(c) for c in route.collections)
        answer.write(messages.line("nothing", language, names=names))
        for gap in gaps:
            answer.write(f"\n\n{gap}")
        return {"answer": answer.text, "usage": usage}

    emit(Step(messages.line("writing", language, n=len(ledger))))
    banner = messages.line("offline_banner", language)
    if ctx.llm is not None:
        user = ctx.prompts.render(
            "synthesize",
            language,
            question=question,
            facts=_facts_block(facts, ledger),
            evidence=render_ledger(ledger),
            gaps="\n".join(gaps),
            documents=_documents_block(_documents(state, ledger), ctx),
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
                degrade("llm", messages.line("llm_fallback", language, error=type(exc).__name__))
                banner = messages.line("fallback_banner", language, error="upstream")
    if banner:
        answer.write(template_answer(facts, ledger, language, display, banner, _documents(state, ledger)))
    answer.close()
    if not banner and _check_claims(ctx, question, route.collections):
        claims = unsupported_claims(answer.text, ledger)
        if claims:
            emit(Step(messages.line("claims_flagged", language, n=len(claims))))
            quoted = "; ".join(f"“{c.strip()}”" for c in claims)
            answer.write("\n\n" + messages.line("unsupported", language, claims=quoted), check=False)
    for gap in gaps:
        answer.write(f"\n\n{gap}", check=False)
    sources = render_sources(ledger, answer.filter.cited, language, display)
    answer.write(f"\n\n{sources}", check=False)
    return {"answer": answer.text, "usage": usage}
