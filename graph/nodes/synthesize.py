"""Synthesize: one answer in the user's language with `[n]` citations checked against the ledger.

The answer streams as the upstream produces it; the sources list is rendered from the ledger afterwards.
"""

from __future__ import annotations

import json
import logging
import re
import time

from langgraph.runtime import Runtime

from graph.answer import messages
from graph.answer.answer_stream import AnswerStream, SentenceCiter, repeating
from graph.answer.contacts import ContactFilter
from graph.answer.events import (
    AnswerCut,
    AnswerDelta,
    Finished,
    InstructionsIgnored,
    SourceFound,
    Step,
    Unsupported,
    UsageEvent,
    degrade,
    emit,
)
from graph.answer.evidence_policy import allowed_addresses, answer_ledger, named_documents, reads_pair
from graph.answer.ledger import Ledger, answer_order, cut_at_word, fence_rule, page_label
from graph.answer.prompts import clauses
from graph.answer.template import template_answer
from graph.clients.llm import LLMError, StreamEnd
from graph.clients.prefetch import Prefetched
from graph.context import Context
from graph.loop import Loop
from graph.models import Evidence, Fact, Route, Usage, side_by_side
from graph.nodes.json_answer import cited_entries, write_json
from graph.state import State
from graph.structured import fallback
from graph.text.claims import (
    best_sources,
    cited_numbers,
    high_stakes_question,
    sentence_supported,
    unsupported_claims,
    withdraw,
)
from graph.text.injection import screen_text, suspected
from graph.text.pairs import linked_pair

log = logging.getLogger(__name__)

BRIEF_FACTS = 3  # facts of an extractive answer the user asked to keep brief
PREVIEW_CHARS = 500  # of a source's text in Open WebUI's source preview


def _documents_block(state: State, ledger: Ledger, ctx: Context) -> str:
    """The documents an exploratory answer names (`named_documents`), for the answer prompt."""
    documents = named_documents(state["route"], state["documents"], ledger)
    if not documents:
        return ""
    # a title from the server's document list is the document author's text too: screened like a passage
    lines = [f"- {ctx.display(d['collection'])}: {screen_text(d['title'])[0]}" + (f" ({d['year']})" if d.get("year") else "")
             for d in documents]
    return "Documents:\n" + "\n".join(lines)


def system_prompt(ctx: Context, ledger: Ledger, style: str) -> str:
    """The synthesis rules; the rule about summaries only when a source's metadata marks it as one."""
    summaries = messages.line("summaries_rule", ctx.language) if ledger.summaries() else ""
    return ctx.prompts.render("synthesize_system", ctx.language, style=style, summaries=summaries)


def instructions_line(state: State, language: str) -> str:
    """The user's instructions about the answer ("answer briefly"), kept out of retrieval, for the model."""
    texts = state["instructions"].texts
    return messages.line("instructions", language, texts=" ".join(texts)) if texts else ""


def evidence_block(ctx: Context, ledger: Ledger, only: list[int] | None = None) -> str:
    """The evidence of an answer prompt: the whole ledger as `Ledger.fit` cut it to the evidence budget, or a
    comparison side's few passages (`only`), each at most PASSAGE_CHARS."""
    max_chars = ctx.config.passage_chars if only is not None else ctx.config.evidence_tokens * 4
    return ledger.render(max_chars, ctx.display, only=only, summary_mark=messages.line("summary_mark", ctx.language),
                         language=ctx.language, fence=ctx.fence())


def answer_style(route: Route) -> str:
    """The answer's form (prompts/*/style_*.md): per query type; a comparison of things rather than of sources
    (`side_by_side`) answers which one, or how they differ, first."""
    if route.query_type == "comparative" and not side_by_side(route):
        return "comparative_items"
    return route.query_type


def check_claims(setting: str, high_stakes: bool) -> bool:
    """Whether a model's answer gets the support check: CLAIM_CHECK=on (the default) always, auto only for
    high-stakes questions, off never."""
    return setting == "on" or (setting == "auto" and high_stakes)


def not_found(unfound: list[str], loop: Loop) -> list[str]:
    """What the answer's one not-found line names: things the question lists that no passage names, then the
    sources research ended without (unless it ended satisfied)."""
    missing = loop.verdict.missing if loop.verdict and loop.stop != "sufficient" else []
    return list(dict.fromkeys(unfound + missing))


def report_withheld(evidence: list[Evidence], ctx: Context) -> None:
    """One think line, one log line and the metric's event for the passages research found planted sentences in
    (`graph.text.injection.screen` took them out as the passages came in)."""
    counts = suspected(evidence)
    if counts:
        emit(Step(messages.line("instructions_withheld", ctx.language, n=sum(counts.values()))))
        emit(InstructionsIgnored(tuple(sorted(counts.items()))))


async def synthesize(state: State, runtime: Runtime[Context]) -> dict:
    ctx, route, loop = runtime.context, state["route"], state["loop"]
    report_withheld(state["evidence"], ctx)
    model = ctx.llm is not None
    pair = linked_pair(state["question"], state["evidence"], ctx.catalog.glossary) if reads_pair(route, model) else []
    ledger, sides = answer_ledger(state["facts"], state["evidence"], route, ctx.config, model, pair)
    gaps = state["gaps"]
    missing = not_found(state["unfound"], loop)
    if ledger and missing:
        gaps = gaps + [messages.line("not_found", ctx.language, missing=", ".join(missing))]
    if ctx.answer.structured:
        return await answer_as_json(state, ctx, ledger, gaps)
    system = ""
    if ctx.llm is not None:
        style = ctx.prompts.render(f"style_{answer_style(route)}", ctx.language)
        system = system_prompt(ctx, ledger, style)
    citer = citer_for(ledger, [n for n, _ in ledger.numbered()], ctx) if ctx.llm is not None else None
    # a source goes out as the answer first cites it, numbered as the reader sees it ([1] first)
    contacts = ContactFilter(allowed_addresses(ledger, state["evidence"], state["facts"]),
                             messages.line("contact_removed", ctx.language))
    # no line of the rules reaches the reader, nor the evidence block's rule that passages are data
    leak_lines = f"{system}\n{messages.line('fence_data', ctx.language)}" if system else ""
    answer = AnswerStream(ledger.citation_filter(lambda shown, n: emit(source_found(shown, ledger.entries[n - 1]))),
                          leak_lines, ctx.config.stream_interval_s, citer, contacts)
    try:
        usage = await write_answer(state, ctx, ledger, gaps, system, answer, sides)
    except BaseException:  # cancelled (client gone) or failed: nothing more is sent
        answer.cancel()
        raise
    answer.finish()
    return {"answer": withdraw(answer.text, answer.withdrawn), "sources": ledger.shown(answer.filter.cited),
            "usage": usage}


async def answer_as_json(state: State, ctx: Context, ledger: Ledger, gaps: list[str]) -> dict:
    """The answer as the JSON document the request's `response_format` asks for (`json_answer`): what the model
    reads is the ledger as the evidence budget cuts it; the documents the JSON cites go out as sources."""
    assert ctx.llm is not None  # the HTTP edge refuses a JSON answer offline
    language = ctx.language
    if ledger:
        ledger = ledger.fit(ctx.config.evidence_tokens, ctx.config.passage_chars)
    hint = messages.line("json_hint", language, hint=ctx.answer.json_hint) if ctx.answer.json_hint else ""
    user = ctx.prompts.render(
        "answer_json", language, question=state["question"],
        evidence=evidence_block(ctx, ledger) if ledger else messages.line("no_sources", language),
        documents=_documents_block(state, ledger, ctx), gaps="\n".join(gaps),
        facts=ledger.facts_block(state["facts"], ctx.display, messages.line("key_facts", language)),
        schema=json.dumps(ctx.answer.json_schema, ensure_ascii=False), hint=hint,
        instructions=instructions_line(state, language))
    document, usage = await write_json(ctx, ledger, user, system_prompt(ctx, ledger, ""))
    cited = cited_entries(document, ledger)
    for n, entry in cited:
        emit(source_found(n, entry))
    emit(AnswerDelta(document))
    emit(Finished(messages.line("finished", language, n=len(cited))))
    return {"answer": document, "sources": [entry for _, entry in cited], "usage": usage}


def source_found(shown: int, e: Evidence) -> SourceFound:
    return SourceFound(shown, e.title, e.collection, e.url, e.id, cut_at_word(e.text, PREVIEW_CHARS), e.year, e.page,
                       page_label(e))


ANSWER_BLOCKS = ("evidence", "documents", "gaps", "facts", "sides")  # an answer prompt's variable blocks


def prompt_lines(ctx: Context, name: str, question: str, **values: object) -> list[str]:
    """The lines of an answer prompt a model may copy instead of answering (`EchoGate`): the template's own and
    their clauses, the question alone and the key-facts heading (`stream_into` adds the system prompt's)."""
    blocks = tuple(b for b in ANSWER_BLOCKS if b not in values)
    lines = [*ctx.prompts.fixed_lines(name, ctx.language, blocks, question=question, **values),
             *ctx.prompts.fixed_clauses(name, ctx.language, blocks, question=question, **values)]
    # the evidence block's opening rule, as it reads once its marks are taken out (the 1.5B model copied it once),
    # also with its second sentence already redacted by the leak filter (which reads the text first)
    rule = fence_rule(ctx.language, "")
    return [*lines, question, messages.line("key_facts", ctx.language), rule,
            rule.replace(messages.line("fence_data", ctx.language), "[…]")]


def answer_tokens(ctx: Context, max_tokens: int) -> int:
    """An answer call's `max_tokens`: the pipeline's, or the caller's `max_tokens` when smaller."""
    return min(max_tokens, ctx.answer.max_tokens) if ctx.answer.max_tokens else max_tokens


def answer_prompt(system: str, user: str) -> list[dict[str, str]]:
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]


async def stream_into(answer: AnswerStream, ctx: Context, system: str, user: str, max_tokens: int,
                      heading: str = "", echo: list[str] | None = None, step: str = "synthesize",
                      call: Prefetched | None = None) -> Usage:
    """One streamed model call written into the answer as it arrives (cut when the model loops or starts a
    sources list of its own, `SourceListGate`; lines copied from its prompt, `echo` and the `system` prompt's
    lines and clauses, dropped); `heading` (the service's text) goes out with the first piece, so a call that
    fails at once has written nothing. `call`: the same call already started (`Prefetched`, a comparison's
    later side), read instead of starting one."""
    assert ctx.llm is not None
    usage = Usage()
    # the system prompt is the service's text only (rules, style): split whole into clauses, no value is cut
    answer.echo.expect([*(echo or []), *system.splitlines(), *clauses(system)])
    answer.step = step  # `answer.close()` reports the echo guard's verdicts on this call
    max_tokens = answer_tokens(ctx, max_tokens)

    def stop(text: str) -> bool:
        return answer.gate.closed or repeating(text)

    started = time.perf_counter()
    pieces = call.pieces() if call is not None else ctx.llm.stream(
        answer_prompt(system, user), max_tokens=max_tokens, stop=stop, sampling=ctx.answer.sampling(), step=step)
    async for piece in pieces:
        if isinstance(piece, StreamEnd):
            usage = piece.usage
            seconds = call.seconds if call is not None else time.perf_counter() - started
            emit(UsageEvent(usage.prompt_tokens, usage.completion_tokens, usage.calls, "synthesize", seconds))
            if piece.finish_reason == "length" and max_tokens == ctx.answer.max_tokens:
                emit(AnswerCut())
            continue
        if heading:
            answer.write(heading, check=False)
            heading = ""
        answer.write(piece)
        if call is not None and answer.gate.closed:
            call.cut()  # as `stop` cuts a direct call
    return usage


# what says nothing: a marker, a heading line (a short bold phrase without a sentence's end, as the sides carry)
_NOT_SAYING = re.compile(r"\[\d+\]|^[ \t]*(?:#{1,6}[ \t]*)?\*\*[^*\n.!?]{0,60}\*\*[ \t]*:?[ \t]*$", re.MULTILINE)


def says_anything(text: str) -> bool:
    """Whether an answer (as a reader of the whole text gets it, `withdraw`) still says something: a word
    beyond markup, headings of the service's own and citation markers."""
    return any(c.isalpha() for c in _NOT_SAYING.sub("", text))


async def write_sides(state: State, ctx: Context, ledger: Ledger, sides: dict[str, list[int]],
                      answer: AnswerStream) -> Usage:
    """A comparison written side by side: one short streamed call per organisation that sees only its own
    passages (so nothing it writes can be another organisation's position), under a heading the service
    writes, then one call that contrasts what the sides said. Every heading but the first goes out as soon as
    the part before it ends, before its call's first words (a reader sees where the answer goes while the
    model starts); the first goes out with its call's first words, so that a call that fails at once leaves
    the extractive answer without a heading above it.

    Why: given all passages of a comparison at once, the local 1.5B model (`make llm`) wrote answers without
    a single `[n]`, cited one organisation's passage for both sides, or looped; side by side it cites each side
    (tests/llm). It costs one short call per side plus the contrast. When the upstream takes more than one
    request at a time (`LLM_MAX_CONCURRENCY` > 1) every side is generated at once: the first streams live, the
    others are read from their `Prefetched` calls in order as the side before them ends, so the answer waits
    for about two calls (the longest side and the contrast) instead of one per side plus one."""
    language, question = ctx.language, state["question"]
    instructions = instructions_line(state, language)
    system = system_prompt(ctx, ledger, "")
    tokens = answer_tokens(ctx, ctx.config.answer_max_tokens // 3)
    prompts = []
    for collection, numbers in sides.items():
        name = ctx.display(collection)
        # MODEL_CONDENSE's facts, if any, that cite one of this side's documents (through any of its chunks)
        facts = [f for f in state["facts"] if any(ledger.number(i) in numbers for i in f.evidence_ids)]
        user = ctx.prompts.render("synthesize_side", language, question=question, source=name,
                                  evidence=evidence_block(ctx, ledger, numbers),
                                  facts=ledger.facts_block(facts, ctx.display, messages.line("key_facts", language)),
                                  example=numbers[0], instructions=instructions)
        echo = prompt_lines(ctx, "synthesize_side", question, source=name, example=numbers[0],
                            instructions=instructions)
        prompts.append((name, numbers, user, echo))
    assert ctx.llm is not None
    calls: list[Prefetched | None] = [None] * len(prompts)
    if ctx.llm.max_concurrency > 1:  # the first side is started by its reader, before any of these runs
        calls[1:] = [Prefetched(ctx.llm, answer_prompt(system, user), max_tokens=tokens, stop=repeating,
                                sampling=ctx.answer.sampling(), step="synthesize_side") for _, _, user, _ in prompts[1:]]
    usage, written = Usage(), []
    try:
        for (name, numbers, user, echo), call in zip(prompts, calls, strict=True):
            heading = ("\n\n" if written else "") + f"**{name}**\n\n"
            answer.citer = citer_for(ledger, numbers, ctx)
            if written:  # a later side's heading goes out as the side before it ends, not after its first words
                answer.write(heading, check=False)
                heading = ""
            start = len(answer.text) + len(heading)  # the first side's heading goes out with its first piece
            usage += await stream_into(answer, ctx, system, user, tokens, heading, echo, "synthesize_side", call)
            answer.close()
            written.append(f"{name}: {answer.filter.to_ledger_numbers(answer.text[start:].strip())}")
    finally:  # a side failed (the answer ends there, as without prefetching) or the request is gone
        for call in calls:
            if call is not None:
                call.cancel()
    answer.citer = citer_for(ledger, [n for numbers in sides.values() for n in numbers], ctx)
    answer.write("\n\n**" + messages.line("contrast", language) + "**\n\n", check=False)
    names = ", ".join(ctx.display(c) for c in sides)
    user = ctx.prompts.render("synthesize_contrast", language, question=question, sides="\n\n".join(written),
                              names=names, instructions=instructions)
    echo = prompt_lines(ctx, "synthesize_contrast", question, names=names, instructions=instructions)
    return usage + await stream_into(answer, ctx, system, user, tokens, "", echo, "synthesize_contrast")


def citer_for(ledger: Ledger, numbers: list[int], ctx: Context) -> SentenceCiter | None:
    """The `AUTO_CITE` citer of a model's text that may cite the passages `numbers` (a comparison side's, or
    all): an uncited or wrongly cited sentence gets the one of them that supports it."""
    if not ctx.config.auto_cite:
        return None
    candidates = [ledger.entries[n - 1] for n in numbers]

    def cite(sentence: str) -> tuple[int, ...]:
        return tuple(numbers[n - 1] for n in best_sources(sentence, candidates, ctx.language, ctx.display))

    def supported(sentence: str) -> bool:
        cited = [ledger.entries[n - 1] for n in cited_numbers(sentence, len(ledger))]
        return not cited or sentence_supported(sentence, cited, ctx.language, ctx.display)

    return SentenceCiter(cite, supported)


async def write_answer(state: State, ctx: Context, ledger: Ledger, gaps: list[str], system: str,
                       answer: AnswerStream, sides: dict[str, list[int]]) -> Usage:
    """The answer: the model's (or, without one, the template's) text, the claim check, gaps, sources."""
    if not ledger:  # the service's own text: no model filter has anything to hold back or check in it
        write_nothing(ctx, state["route"], gaps, answer)
        return Usage()
    emit(Step(messages.line("writing", ctx.language, n=len(ledger))))
    usage, banner = Usage(), messages.line("offline_banner", ctx.language)
    if ctx.llm is not None:
        usage, banner = await write_model_answer(state, ctx, ledger, gaps, system, answer, sides)
    if banner:
        if ledger.summaries():
            banner += "\n" + messages.line("summaries_note", ctx.language)
        # an extractive answer honours a request for a brief answer with its best facts only
        facts = state["facts"]
        shown = answer_order(facts, ledger.collection_of())[:BRIEF_FACTS] if state["instructions"].brief else facts
        answer.write(write_template(state, ctx, ledger, shown, banner))
    answer.close()
    if not banner:
        check_support(state, ctx, ledger, answer)
    for gap in gaps:
        answer.write(f"\n\n{gap}", check=False)
    if not answer.filter.cited:  # an answer that cites nothing lists every source it was written from
        for n, e in ledger.numbered():
            emit(source_found(n, e))
    answer.write(f"\n\n{ledger.sources(answer.filter.cited, ctx.language, ctx.display)}", check=False)
    emit(Finished(messages.line("finished", ctx.language, n=len(ledger.shown(answer.filter.cited)))))
    return usage


def write_nothing(ctx: Context, route: Route, gaps: list[str], answer: AnswerStream) -> None:
    """The answer when no passage holds the question: which collections were searched, and the gaps."""
    names = ", ".join(ctx.display(c) for c in route.collections)
    answer.write(messages.line("nothing", ctx.language, names=names), check=False)
    for gap in gaps:
        answer.write(f"\n\n{gap}", check=False)
    emit(Finished(messages.line("finished_none", ctx.language)))


def write_template(state: State, ctx: Context, ledger: Ledger, facts: list[Fact], banner: str) -> str:
    """The template answer (`template_answer`) of `facts` under `banner`, naming an exploratory answer's documents."""
    documents = named_documents(state["route"], state["documents"], ledger)
    return template_answer(facts, ledger, ctx.language, ctx.display, banner, documents)


async def write_model_answer(state: State, ctx: Context, ledger: Ledger, gaps: list[str], system: str,
                             answer: AnswerStream, sides: dict[str, list[int]]) -> tuple[Usage, str]:
    """A model's answer, side by side or in one call, and the banner of the template answer that must follow it
    ("" when the model's answer stands): the model only repeated its prompt (`EchoGate`), wrote its own list or
    nothing, or failed before its first words. A failure after them ends the answer where it stopped."""
    language = ctx.language
    try:
        if sides:
            usage = await write_sides(state, ctx, ledger, sides, answer)
        else:
            usage = await write_one(state, ctx, ledger, gaps, system, answer)
        answer.close()
    except LLMError as exc:
        answer.settle()  # what the model wrote before the failure, through the filters
        if answer.parts:
            degrade("llm")
            answer.close()
            answer.write(messages.line("interrupted", language), check=False)
            return Usage(), ""
        fallback(ctx, "synthesize", "unavailable", exc, messages.line("llm_fallback", language, error=type(exc).__name__))
        return Usage(), messages.line("fallback_banner", language, error="upstream")
    if answer.answered:
        return usage, ""
    reply = "".join(answer.raw)
    log.debug("synthesize: nothing of the model's reply was kept (%s, %d characters): %r",
              answer.unanswered, len(reply), reply)
    fallback(ctx, "synthesize", "invalid", ValueError(f"no answer text ({answer.unanswered})"),
             messages.line(f"llm_no_answer_{answer.unanswered}", language))
    return usage, messages.line("no_answer_banner", language)


async def write_one(state: State, ctx: Context, ledger: Ledger, gaps: list[str], system: str,
                    answer: AnswerStream) -> Usage:
    """The answer in one streamed model call that reads the whole ledger."""
    language, question = ctx.language, state["question"]
    instructions = instructions_line(state, language)
    user = ctx.prompts.render(
        "synthesize",
        language,
        question=question,
        facts=ledger.facts_block(state["facts"], ctx.display, messages.line("key_facts", language)),
        evidence=evidence_block(ctx, ledger),
        gaps="\n".join(gaps),
        documents=_documents_block(state, ledger, ctx),
        instructions=instructions,
    )
    return await stream_into(answer, ctx, system, user, ctx.config.answer_max_tokens,
                             echo=prompt_lines(ctx, "synthesize", question, instructions=instructions))


def check_support(state: State, ctx: Context, ledger: Ledger, answer: AnswerStream) -> None:
    """The support check of a model's answer (`check_claims`): its unsupported claims are withdrawn, and when
    nothing the reader keeps is left, the key facts follow as the template answer."""
    language, route = ctx.language, state["route"]
    high_stakes = ctx.catalog.high_stakes(route.collections) or high_stakes_question(state["question"])
    if not check_claims(ctx.config.claim_check, high_stakes):
        return
    claims = unsupported_claims(answer.text, ledger.shown(answer.filter.cited), language, ctx.display)
    if not claims:
        return
    # withdrawn: a stream gets the correction after the answer, a whole answer leaves them out
    emit(Step(messages.line("claims_flagged", language, n=len(claims))))
    quoted = " ".join(f"~~{c.strip()}~~" for c in claims)
    answer.withdrawn = claims
    answer.finish()  # the answer text held for the timer goes out before the correction
    emit(Unsupported(tuple(claims), "\n\n" + messages.line("withdrawn", language, claims=quoted)))
    if not says_anything(withdraw(answer.text, claims)):  # nothing the reader keeps: the facts instead
        fallback(ctx, "synthesize", "invalid", ValueError("no supported sentence"),
                 messages.line("llm_unsupported", language))
        answer.write("\n\n", check=False)
        answer.write(write_template(state, ctx, ledger, state["facts"], messages.line("unsupported_banner", language)))
        answer.close()
