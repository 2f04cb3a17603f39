"""`python -m eval.llm`: LLM mode against a real local model, beside a naive RAG, an oracle and offline mode.

Two question sets: about 30 questions of the gold set (`eval/gold.jsonl`, stratified by query type and
answerability) over the bundled corpus, and 100 public HotpotQA questions of the test half
(`eval.hotpot_eval.halves`, stratified by type) over a pooled corpus of every paragraph of the file, both halves,
as `make eval` pools them (`eval.hotpot`), so the search is as hard as there. Modes (`--modes`, the columns):
`llm` runs the real graph with the model configured by `LLM_BASE_URL` / `LLM_MODEL`; `naive` is one search of
every collection and one plain call to the same model on the five best passages (`naive_answer`); `oracle` is
that same call given only the question's gold paragraphs (HotpotQA only; `oracle_passages`); `offline` runs the
graph with `llm=None`. Each column can be run on its own (on an otherwise idle machine) into the same `--dump`,
which keeps the columns run before; the report goes to docs/EVAL-LLM.md.

Definitions (per question, then averaged or counted per group of questions):

- structured steps attempted: the `UsageEvent`s before the first `AnswerDelta` (each is one structured model
  step that got a reply: route, rewrite, decompose, condense, summarize, judge) plus the `LLMFallback`s with
  reason `unavailable` of steps other than `synthesize` (a step whose call failed emits no usage);
  structured replies valid = 1 - (`LLMFallback`s with reason `invalid` of those steps) / attempted (the answer
  step's own `invalid`, an answer the echo guard or the support check left empty, is not a structured reply).
- fallbacks: the `LLMFallback` events, by step and reason.
- key facts found: gold, the share of `key_facts` in the answer body (answerable questions with key facts);
  HotpotQA, whether the normalised answer occurs in the body (answer present); unasked: the same over the
  questions whose answer is neither yes/no nor words of the question (`hotpot.unasked`); gold articles cited: the
  share of the supporting articles among the titles of the `[n]` the body cites.
- LLM mode as a share of the oracle: answer present of `llm` / answer present of `oracle` over the questions run
  in both modes (all, and unasked).
- citation precision: supported `[n]` / all `[n]` (`graph.text.claims.supported`, as in `eval.run`).
- unsupported sentences: the sentences of the pipeline's `Unsupported` events, per answer.
- declined: the answer opens with the "no passages found" line; extractive fallback: the answer carries the
  banner of a model that was unavailable (`fallback_banner`).
- upstream calls and tokens: the sums of the `UsageEvent`s (calls that returned); latency: wall time per question.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import statistics
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

import httpx

from app.settings import ROOT, Settings
from docserver.embedded import EmbeddedServer, serve_in_background
from eval import hotpot, hotpot_eval
from eval.answers import body_of, is_declined
from eval.gold import GOLD_FILE, load_gold
from graph.answer import messages
from graph.answer.events import AnswerDelta, EchoVerdicts, LLMFallback, Unsupported, UsageEvent
from graph.answer.ledger import Ledger
from graph.answer.prompts import Prompts
from graph.build import build_graph
from graph.clients.llm import Completion, LLMClient, LLMError
from graph.clients.mcp_client import DocumentClient
from graph.collections import Catalog, load_catalog
from graph.config import PipelineConfig
from graph.context import AnswerOptions, Context
from graph.models import Evidence, Turn, Usage
from graph.runner import start
from graph.text.claims import cited_numbers, claim_sentences, supported

Mode = Literal["llm", "naive", "oracle", "offline"]
MODES: tuple[Mode, ...] = ("llm", "naive", "oracle", "offline")  # the columns, in this order
ONE_CALL: tuple[Mode, ...] = ("naive", "oracle")  # one plain call to the model, no pipeline
GOLD_TYPES = ("factual", "exploratory", "deep_dive", "comparative")
HOTPOT_TYPES = ("bridge", "comparison")
_FALLBACK_PREFIXES = tuple(messages.line("fallback_banner", lang, error="").split("(")[0] for lang in ("nl", "en"))


@dataclass(frozen=True)
class Question:
    """One question of either set, with what a good answer has."""

    id: str
    text: str
    kind: str  # gold: the query type; HotpotQA: bridge or comparison
    answerable: bool
    key_facts: tuple[str, ...]  # gold: key facts; HotpotQA: the answer
    expected_type: str | None = None  # gold: the query type routing should choose
    gold_titles: tuple[str, ...] = ()  # HotpotQA: the supporting articles
    hotpot: bool = False  # match the answer after HotpotQA normalisation

    @property
    def unasked(self) -> bool:
        """HotpotQA: the answer is neither yes/no nor words of the question (`hotpot.unasked`)."""
        return self.hotpot and hotpot.unasked(self.text, self.key_facts[0])

    @property
    def set_name(self) -> str:
        return "HotpotQA" if self.hotpot else "gold set"


@dataclass
class Run:
    """What one question in one mode produced."""

    question: Question
    mode: Mode
    route_type: str = ""
    route_collections: list[str] = field(default_factory=list)
    answer: str = ""
    seconds: float = 0.0
    calls: int = 0
    tokens: int = 0
    prompt_tokens: int = 0
    steps: dict[str, int] = field(default_factory=dict)  # prompt tokens per pipeline step
    by_step: dict[str, list[float]] = field(default_factory=dict)  # step -> [calls, prompt, completion, seconds]
    rounds: int = 0  # research rounds (pipeline)
    structured: int = 0  # structured model steps attempted (see the module docstring)
    fallbacks: list[tuple[str, str]] = field(default_factory=list)  # (step, reason)
    echo: dict[str, int] = field(default_factory=dict)  # the prompt-echo guard's verdicts, "step verdict" -> lines
    unsupported: int = 0
    withdrawn: list[str] = field(default_factory=list)  # the sentences the support check withdrew (for the dump)
    markers: int = 0
    supported_markers: int = 0
    key_facts: float | None = None  # share found; None when the question has none to find
    titles_cited: float | None = None
    em: float | None = None  # HotpotQA: exact match / token F1 of the first sentence (`short_answer`)
    f1: float | None = None

    @property
    def invalid(self) -> int:
        return sum(reason == "invalid" and step != "synthesize" for step, reason in self.fallbacks)

    @property
    def declined(self) -> bool:
        return is_declined(self.answer)

    @property
    def extractive_fallback(self) -> bool:
        return any(prefix in self.answer for prefix in _FALLBACK_PREFIXES)


def gold_questions(n: int) -> list[Question]:
    """`n` gold questions, stratified by (query type, answerable)."""
    items = hotpot.stratified(load_gold(GOLD_FILE), lambda g: (g["type"], g["answerable"]), n)
    return [Question(g["id"], g["question"], g["type"], g["answerable"], tuple(g["key_facts"]), g["type"])
            for g in items]


def hotpot_questions(items: Sequence[dict[str, Any]]) -> list[Question]:
    return [Question(q["id"], q["question"], q["type"], True, (q["answer"],), None, tuple(hotpot.gold_titles(q)),
                     hotpot=True) for q in items]


def oracle_passages(item: dict[str, Any]) -> list[Evidence]:
    """What the oracle reads: exactly the question's gold paragraphs, as the pooled corpus holds them (text,
    title, collection and doc id as `hotpot.build_corpus` writes them), in the order of its context."""
    return [Evidence(id=f"{hotpot.collection_of(title)}/{hotpot.doc_id_of(title)}#0",
                     collection=hotpot.collection_of(title), doc_id=hotpot.doc_id_of(title), title=title, text=text)
            for title, text in hotpot.gold_paragraphs(item).items()]


async def observe(question: Question, mode: Mode, graph: Any, ctx: Context) -> Run:
    """Run the graph for one question as the service does (`graph.runner.start`, the same run config as
    `run_pipeline`), reading the thought events and the final state from one stream."""
    run = Run(question, mode)
    started = time.perf_counter()
    state, request = start([Turn(role="user", content=question.text)], ctx, answer=AnswerOptions(seed=SEED))
    final: dict[str, Any] = dict(state)
    answering = False
    config = {"max_concurrency": 8, "recursion_limit": 50}
    async for kind, chunk in graph.astream(state, config, context=request, stream_mode=["custom", "values"]):
        if kind == "values":
            final = chunk
        elif isinstance(chunk, UsageEvent):
            run.calls += chunk.calls
            run.tokens += chunk.prompt_tokens + chunk.completion_tokens
            run.prompt_tokens += chunk.prompt_tokens
            run.steps[chunk.step] = run.steps.get(chunk.step, 0) + chunk.prompt_tokens
            spent = run.by_step.setdefault(chunk.step, [0, 0, 0, 0.0])
            for i, value in enumerate((chunk.calls, chunk.prompt_tokens, chunk.completion_tokens, chunk.seconds)):
                spent[i] += value
            run.structured += not answering
        elif isinstance(chunk, AnswerDelta):
            answering = True
        elif isinstance(chunk, LLMFallback):
            run.fallbacks.append((chunk.step, chunk.reason))
            run.structured += chunk.reason == "unavailable" and chunk.step != "synthesize" and not answering
        elif isinstance(chunk, Unsupported):
            run.unsupported += len(chunk.sentences)
            run.withdrawn += chunk.sentences
        elif isinstance(chunk, EchoVerdicts):
            for verdict, n in chunk.counts().items():
                key = f"{chunk.step} {verdict}"
                run.echo[key] = run.echo.get(key, 0) + n
    run.seconds = time.perf_counter() - started
    route = final["route"]
    run.route_type, run.route_collections, run.answer = route.query_type, list(route.collections), final["answer"]
    run.rounds = final["loop"].round

    score(run, Ledger(final["sources"]), body_of(run.answer))  # what the answer's [1], [2], ... point at
    return run


NAIVE_PASSAGES = 5
# every answer call of every column is sent with this seed (and the pipeline's passage fences derive from it and
# EVAL_FENCE_KEY, `Context.fence`): the same prompt gets the same answer on a server that honours seeds
# (llama.cpp, vLLM), so two runs differ only where their prompts do
SEED = 1
EVAL_FENCE_KEY = b"eval"
NAIVE_SYSTEM = ("You answer questions from the passages you are given. Write a short answer in the language of the "
                "question and cite the passages you use with their numbers in brackets, for example [1]. If the "
                "passages do not contain the answer, say so.")


async def naive_passages(question: str, docs: DocumentClient, collections: Sequence[str]) -> list[Evidence]:
    """One search of every collection with the question as typed; the five best passages by the server's score."""
    found = await asyncio.gather(*(docs.search(c, question) for c in collections))
    return sorted((e for hits in found for e in hits), key=lambda e: -e.relevance)[:NAIVE_PASSAGES]


async def one_call(question: str, passages: Sequence[Evidence], llm: LLMClient,
                   max_tokens: int = PipelineConfig().answer_max_tokens) -> Completion:
    """One plain call to the main model: NAIVE_SYSTEM, then the numbered passages and the question, with the
    service's cap on an answer's length (a small model can loop until its context is full: minutes on a CPU)."""
    context = "\n\n".join(f"[{n}] {e.title}\n{e.text}" for n, e in enumerate(passages, 1))
    return await llm.complete([{"role": "system", "content": NAIVE_SYSTEM},
                               {"role": "user", "content": f"Passages:\n{context}\n\nQuestion: {question}"}],
                              max_tokens=max_tokens, sampling={"seed": SEED})


async def naive_answer(question: str, docs: DocumentClient, collections: Sequence[str], llm: LLMClient
                       ) -> tuple[str, list[Evidence], Usage]:
    """The twenty-line RAG a user could write instead of this service: `naive_passages`, then `one_call`."""
    passages = await naive_passages(question, docs, collections)
    reply = await one_call(question, passages, llm)
    return reply.text, passages, reply.usage


async def observe_naive(question: Question, docs: DocumentClient, catalog: Catalog, llm: LLMClient) -> Run:
    """The naive RAG on one question, timed from its search."""
    started = time.perf_counter()
    passages = await naive_passages(question.text, docs, catalog.names)
    run = Run(question, "naive", route_type="naive", route_collections=list(catalog.names))
    return await observe_call(run, passages, llm, started)


async def observe_oracle(question: Question, passages: Sequence[Evidence], llm: LLMClient) -> Run:
    """The naive RAG's call given the question's gold paragraphs (`oracle_passages`) instead of a search."""
    return await observe_call(Run(question, "oracle", route_type="oracle"), passages, llm, time.perf_counter())


async def observe_call(run: Run, passages: Sequence[Evidence], llm: LLMClient, started: float) -> Run:
    """`one_call` on `passages` for `run` (timed from `started`), scored against those passages; a call that
    fails is an empty answer with an `unavailable` fallback (the column goes on)."""
    try:
        reply = await one_call(run.question.text, passages, llm)
    except LLMError as exc:
        print(f"{run.mode} {run.question.id}: the call failed ({exc})", file=sys.stderr)
        run.seconds, run.fallbacks = time.perf_counter() - started, [("answer", "unavailable")]
        score(run, Ledger(passages), "")
        return run
    run.answer, run.seconds = reply.text, time.perf_counter() - started
    run.calls, run.tokens, run.prompt_tokens = reply.usage.calls, reply.usage.total_tokens, reply.usage.prompt_tokens
    run.steps = {"answer": reply.usage.prompt_tokens}
    score(run, Ledger(passages), run.answer)
    return run


def score(run: Run, ledger: Ledger, body: str) -> None:
    """The answer's measures against the numbered evidence it could cite (`ledger`)."""
    question = run.question
    cited: set[int] = set()
    for sentence in claim_sentences(body):
        for number in cited_numbers(sentence, len(ledger)):
            run.supported_markers += supported(sentence, ledger.entries[number - 1].text)
    for number in (int(n) for n in re.findall(r"\[(\d+)\]", body)):
        run.markers += 1
        if 1 <= number <= len(ledger):
            cited.add(number)
    if question.hotpot:
        run.key_facts = float(hotpot.answer_found(question.key_facts[0], body))
        short = short_answer(body)
        run.em, run.f1 = hotpot.exact_match(short, question.key_facts[0]), hotpot.f1_score(short, question.key_facts[0])
        titles = {ledger.entries[n - 1].title for n in cited}
        run.titles_cited = sum(t in titles for t in question.gold_titles) / len(question.gold_titles)
    elif question.answerable and question.key_facts:
        run.key_facts = sum(f.lower() in body.lower() for f in question.key_facts) / len(question.key_facts)


def short_answer(body: str) -> str:
    """The answer's first sentence without citation marks: what EM/F1 compare with the gold answer (both systems
    write prose; neither is asked for a bare span)."""
    sentences = claim_sentences(re.sub(r"\[\d+\]", "", body)) or [body]
    return sentences[0].strip()


def _mean(values: Sequence[float]) -> float:
    return statistics.fmean(values) if values else float("nan")


def metrics(runs: Sequence[Run]) -> dict[str, float]:
    """The report's numbers for a group of runs (one mode, one question set, one or all query types)."""
    structured = sum(r.structured for r in runs)
    markers = sum(r.markers for r in runs)
    routed = [r for r in runs if r.question.expected_type and r.mode not in ONE_CALL]
    return {
        "questions": len(runs),
        "routing_accuracy": _mean([r.route_type == r.question.expected_type for r in routed]),
        "structured_steps": structured,
        "structured_valid": 1 - sum(r.invalid for r in runs) / structured if structured else float("nan"),
        "fallbacks": sum(len(r.fallbacks) for r in runs),
        "key_facts": _mean([r.key_facts for r in runs if r.key_facts is not None]),
        "key_facts_unasked": _mean([r.key_facts for r in runs if r.key_facts is not None and r.question.unasked]),
        "titles_cited": _mean([r.titles_cited for r in runs if r.titles_cited is not None]),
        "citation_precision": sum(r.supported_markers for r in runs) / markers if markers else float("nan"),
        "unsupported": _mean([r.unsupported for r in runs]),
        "declined_answerable": _mean([r.declined for r in runs if r.question.answerable]),
        "declined_unanswerable": _mean([r.declined for r in runs if not r.question.answerable]),
        "extractive_fallback": sum(r.extractive_fallback for r in runs),
        "em": _mean([r.em for r in runs if r.em is not None]),
        "f1": _mean([r.f1 for r in runs if r.f1 is not None]),
        "calls": _mean([r.calls for r in runs]),
        "prompt_tokens": _mean([r.prompt_tokens for r in runs]),
        "tokens": _mean([r.tokens for r in runs]),
        "seconds_p50": statistics.median([r.seconds for r in runs]) if runs else float("nan"),
    }


ROWS: list[tuple[str, str, str]] = [  # label, key, format
    ("Questions", "questions", ".0f"),
    ("Routing accuracy (query type)", "routing_accuracy", ".2f"),
    ("Structured steps attempted", "structured_steps", ".0f"),
    ("Structured replies valid", "structured_valid", ".3f"),
    ("Fallbacks (all steps)", "fallbacks", ".0f"),
    ("Key facts found (HotpotQA: answer present)", "key_facts", ".2f"),
    ("… HotpotQA, unasked (answer neither yes/no nor in the question)", "key_facts_unasked", ".2f"),
    ("Gold articles cited", "titles_cited", ".2f"),
    ("EM (first sentence)", "em", ".2f"),
    ("F1 (first sentence)", "f1", ".2f"),
    ("Citation precision", "citation_precision", ".2f"),
    ("Unsupported sentences per answer", "unsupported", ".2f"),
    ("Answerable questions declined", "declined_answerable", ".2f"),
    ("Unanswerable questions declined", "declined_unanswerable", ".2f"),
    ("Answers in extractive fallback", "extractive_fallback", ".0f"),
    ("Upstream calls per question", "calls", ".2f"),
    ("Prompt tokens per question", "prompt_tokens", ".0f"),
    ("Tokens per question (prompt + completion)", "tokens", ".0f"),
    ("Seconds per question (p50)", "seconds_p50", ".1f"),
]


def _show(value: float, fmt: str = ".2f") -> str:
    return "–" if value != value else format(value, fmt)  # nan: nothing to measure


def _targets(runs: Sequence[Run]) -> list[tuple[str, float, bool | None]]:
    """(target, measured, met; None when its group has nothing to measure) over the LLM runs of both sets; calls and latency grouped by the routed type
    (the work the pipeline does follows the route). Calls are the mean per question of the group."""
    llm = [r for r in runs if r.mode == "llm"]
    factual = [r for r in llm if r.route_type == "factual"]
    comparative = [r for r in llm if r.route_type == "comparative"]
    narrow = [r for r in comparative if len(r.route_collections) <= 2]
    wide = [r for r in comparative if len(r.route_collections) > 2]
    every = metrics(llm)
    p50 = {name: statistics.median([r.seconds for r in group]) if group else float("nan")
           for name, group in (("factual", factual), ("comparative", comparative))}
    checks: list[tuple[str, float, Callable[[float], bool]]] = [
        ("Structured replies valid ≥ 0.98", every["structured_valid"], lambda v: v >= 0.98),
        ("Answers in extractive fallback = 0 (model up)", every["extractive_fallback"], lambda v: v == 0),
        ("Upstream calls, factual ≤ 2", _mean([r.calls for r in factual]), lambda v: v <= 2),
        ("Upstream calls, comparative over ≤ 2 collections ≤ 4", _mean([r.calls for r in narrow]), lambda v: v <= 4),
        ("Upstream calls, comparative over 3–4 collections ≤ 6", _mean([r.calls for r in wide]), lambda v: v <= 6),
        ("Latency p50, factual ≤ 30 s", p50["factual"], lambda v: v <= 30),
        ("Latency p50, comparative ≤ 60 s", p50["comparative"], lambda v: v <= 60),
    ]
    return _judged(checks)


def _judged(checks: Sequence[tuple[str, float, Callable[[float], bool]]]) -> list[tuple[str, float, bool | None]]:
    """(target, measured, met), met None when there was nothing to measure (nan)."""
    return [(label, value, ok(value) if value == value else None) for label, value, ok in checks]


def _target_table(targets: Sequence[tuple[str, float, bool | None]], fmt: Callable[[str], str]) -> list[str]:
    """A targets table; `fmt(label)` is the format of that row's measured value."""
    return ["| target | measured | met |", "|---|---|---|"] + [
        f"| {label} | {_show(value, fmt(label))} | {'n/a' if ok is None else '✅' if ok else '❌'} |"
        for label, value, ok in targets]


# LLM mode on the gold set before the evidence budget and the cheap path (docs/EVAL-LLM.md of 2026-11-25 10:24,
# 30 questions): what "no loss" in the cost targets is measured against
GOLD_BEFORE = {"key_facts": 0.59, "citation_precision": 0.73}


def _ratio(a: float, b: float) -> float:
    return a / b if b else float("nan")


TOKENS_RATIO = 1.2  # cost targets: LLM mode's prompt tokens and median seconds at most these times the naive RAG's
SECONDS_RATIO = 1.3
CITED_GAIN = 0.25  # its share of gold articles cited at least this much above the naive RAG's


def cost_targets(gold: Sequence[Run], hotpot_runs: Sequence[Run]) -> list[tuple[str, float, bool | None]]:
    """LLM mode on HotpotQA against the naive one-call RAG on the same questions and model: prompt tokens, median
    seconds and gold articles cited; its answer present against the better of the naive RAG and the oracle (over
    the questions run in all of them; the naive RAG alone when no oracle was run). The gold set against LLM mode's
    earlier figures."""
    by_mode = {mode: {r.question.id: r for r in hotpot_runs if r.mode == mode} for mode in ("llm", *ONE_CALL)}
    llm, naive, oracle = by_mode["llm"], by_mode["naive"], by_mode["oracle"]
    both = [q for q in llm if q in naive]
    ours, theirs = metrics([llm[q] for q in both]), metrics([naive[q] for q in both])
    rivals = {"naive": naive, "oracle": oracle} if oracle else {"naive": naive}
    compared = [q for q in llm if all(q in rival for rival in rivals.values())]
    best = max(metrics([rival[q] for q in compared])["key_facts"] for rival in rivals.values())
    mine = metrics([r for r in gold if r.mode == "llm"])
    checks: list[tuple[str, float, Callable[[float], bool]]] = [
        (f"HotpotQA answer present − max({', '.join(rivals)}) ≥ 0",
         metrics([llm[q] for q in compared])["key_facts"] - best, lambda v: v >= 0),
        (f"HotpotQA gold articles cited − naive ≥ +{CITED_GAIN}", ours["titles_cited"] - theirs["titles_cited"],
         lambda v: v >= CITED_GAIN),
        (f"HotpotQA prompt tokens ÷ naive ≤ {TOKENS_RATIO}", _ratio(ours["prompt_tokens"], theirs["prompt_tokens"]),
         lambda v: v <= TOKENS_RATIO),
        (f"HotpotQA median seconds ÷ naive ≤ {SECONDS_RATIO}", _ratio(ours["seconds_p50"], theirs["seconds_p50"]),
         lambda v: v <= SECONDS_RATIO),
        (f"Gold key facts ≥ {GOLD_BEFORE['key_facts']} (before)", mine["key_facts"],
         lambda v: v >= GOLD_BEFORE["key_facts"]),
        (f"Gold citation precision ≥ {GOLD_BEFORE['citation_precision']} (before)", mine["citation_precision"],
         lambda v: v >= GOLD_BEFORE["citation_precision"]),
    ]
    return _judged(checks)


def oracle_share(runs: Sequence[Run]) -> list[str]:
    """HotpotQA, LLM mode as a share of the oracle: answer present of `llm` / answer present of `oracle` over the
    questions run in both modes, over all of them and unasked, per type; no table when either was not run."""
    llm = {r.question.id: r for r in runs if r.mode == "llm"}
    oracle = {r.question.id: r for r in runs if r.mode == "oracle"}
    both = [q for q in llm if q in oracle]
    if not both:
        return []
    groups = [("all", both)] + [(k, [q for q in both if llm[q].question.kind == k]) for k in HOTPOT_TYPES]
    pairs = [(name, len(ids), metrics([llm[q] for q in ids]), metrics([oracle[q] for q in ids]))
             for name, ids in groups if ids]
    lines = ["| LLM mode ÷ oracle | " + " | ".join(f"{name} ({n} q)" for name, n, _, _ in pairs) + " |",
             "|---" * (len(pairs) + 1) + "|"]
    for label, key in (("Answer present", "key_facts"), ("Answer present, unasked", "key_facts_unasked")):
        lines.append(f"| {label} | " + " | ".join(_show(_ratio(ours[key], theirs[key])) for _, _, ours, theirs in pairs)
                     + " |")
    return lines


def step_tokens(runs: Sequence[Run]) -> list[str]:
    """Prompt tokens per question by pipeline step, per routed query type (LLM mode), and the one calls (naive
    RAG, oracle)."""
    groups: dict[str, list[Run]] = {}
    for r in runs:
        if r.mode in ("llm", *ONE_CALL):
            groups.setdefault(r.route_type, []).append(r)
    steps = sorted({s for group in groups.values() for r in group for s in r.steps})
    lines = ["| routed as | questions | " + " | ".join(steps) + " | all |", "|---|---" + "|---" * (len(steps) + 1) + "|"]
    for kind, group in sorted(groups.items()):
        cells = [f"{_mean([r.steps.get(s, 0) for r in group]):.0f}" for s in steps]
        lines.append(f"| {kind} | {len(group)} | " + " | ".join(cells)
                     + f" | {_mean([r.prompt_tokens for r in group]):.0f} |")
    return lines


def step_time(runs: Sequence[Run]) -> list[str]:
    """Where LLM mode's time goes: per pipeline step, calls and model seconds per question, tokens per call, and
    the step's share of the questions' time; "outside model calls" is the rest (search, selection, the service).
    Calls that run at once each count their own time, so shares may add up to more than 1."""
    runs = [r for r in runs if r.mode == "llm" and r.by_step]
    if not runs:
        return ["No LLM-mode run with per-step usage."]
    total = sum(r.seconds for r in runs) or 1.0
    steps = sorted({s for r in runs for s in r.by_step})
    lines = ["| step | calls per question | prompt tokens per call | completion tokens per call | model seconds per "
             "question | share of the time |", "|---|---|---|---|---|---|"]
    for s in steps:
        calls, prompt, completion, seconds = (sum(r.by_step.get(s, [0, 0, 0, 0.0])[i] for r in runs) for i in range(4))
        lines.append(f"| {s} | {calls / len(runs):.2f} | {prompt / max(calls, 1):.0f} | {completion / max(calls, 1):.0f} "
                     f"| {seconds / len(runs):.1f} | {seconds / total:.2f} |")
    model = sum(v[3] for r in runs for v in r.by_step.values())
    lines.append(f"| outside model calls | – | – | – | {(total - model) / len(runs):.1f} | {(total - model) / total:.2f} |")
    return lines


def modes_of(runs: Sequence[Run]) -> list[Mode]:
    """The modes the runs were made in, in column order."""
    done = {r.mode for r in runs}
    return [m for m in MODES if m in done]


def echo_table(title: str, runs: Sequence[Run]) -> list[str]:
    """The prompt-echo guard's verdicts per answer step over `runs` (LLM mode): lines dropped as a copy of the
    prompt, lines whose copied label or question was cut off, lines kept, and answers of which nothing was kept
    (the extractive answer instead)."""
    counts: Counter[tuple[str, str]] = Counter()
    for r in runs:
        for key, n in r.echo.items():
            step, _, verdict = key.partition(" ")
            counts[step, verdict] += n
    steps = sorted({step for step, _ in counts})
    lines = [f"### {title}: the prompt-echo guard by step (LLM mode)", ""]
    if not steps:
        return [*lines, "No answer call reported." if runs else "Not run (no LLM column)."]
    discarded = Counter(step for r in runs for step, reason in r.fallbacks if reason == "invalid")
    lines += ["| step | copied lines (dropped) | copied start cut, rest kept | lines kept | answers with nothing kept |",
              "|---|---|---|---|---|"]
    return lines + [f"| {s} | {counts[s, 'copy']} | {counts[s, 'trimmed']} | {counts[s, 'answer']} | {discarded[s]} |"
                    for s in steps]


def _section(title: str, intro: str, runs: Sequence[Run], kinds: Sequence[str], after_table: Sequence[str] = ()
             ) -> list[str]:
    """A question set: metrics per query type, each mode run beside the other (then `after_table`); fallbacks;
    the questions."""
    modes = modes_of(runs)
    groups = [("all", list(runs))] + [(k, [r for r in runs if r.question.kind == k]) for k in kinds]
    columns = [(name, mode, metrics([r for r in group if r.mode == mode])) for name, group in groups for mode in modes
               if group]
    lines = [f"## {title}", "", intro, "", "| metric | " + " | ".join(f"{n}: {m}" for n, m, _ in columns) + " |",
             "|---" * (len(columns) + 1) + "|"]
    for label, key, fmt in ROWS:
        lines.append(f"| {label} | " + " | ".join(_show(float(m[key]), fmt) for _, _, m in columns) + " |")
    lines += ["", *after_table] if after_table else []
    fallbacks = Counter((r.question.kind, step, reason) for r in runs if r.mode == "llm" for step, reason in r.fallbacks)
    lines += ["", f"### {title}: fallbacks by step and reason (LLM mode)", ""]
    if fallbacks:
        lines += ["| type | step | reason | count |", "|---|---|---|---|"]
        lines += [f"| {k} | {s} | {why} | {n} |" for (k, s, why), n in sorted(fallbacks.items())]
    else:
        lines.append("None." if "llm" in modes else "Not run (no LLM column).")
    lines += ["", *echo_table(title, [r for r in runs if r.mode == "llm"])]
    lines += ["", f"### {title}: per question", "",
              "| id | type | " + " | ".join(f"{m}: routed, calls, s, key facts" for m in modes) + " |",
              "|---|---" + "|---" * len(modes) + "|"]
    by_id: dict[str, dict[str, Run]] = {}
    for r in runs:
        by_id.setdefault(r.question.id, {})[r.mode] = r
    for qid, pair in by_id.items():
        cells = [f"{r.route_type}, {r.calls}, {r.seconds:.1f}, " + ("–" if r.key_facts is None else f"{r.key_facts:.2f}")
                 + (" (fallback)" if r.extractive_fallback else "") if (r := pair.get(m)) else "–" for m in modes]
        lines.append(f"| {qid} | {next(iter(pair.values())).question.kind} | " + " | ".join(cells) + " |")
    return lines + [""]


COLUMNS = {
    "llm": "`llm` = LLM mode",
    "naive": f"`naive` = one search of every collection, the {NAIVE_PASSAGES} best passages, one call to the same model",
    "oracle": "`oracle` = the naive RAG's call given only the question's gold paragraphs (HotpotQA)",
    "offline": "`offline` = the same questions with llm=None",
}


def header_lines(produced: Mapping[str, str], modes: Sequence[Mode]) -> list[str]:
    """What each column is; then, per run, the columns it produced (`set: mode`) and how (command, time, model,
    machine)."""
    by_run: dict[str, list[str]] = {}
    for column, how in produced.items():
        by_run.setdefault(how, []).append(column)
    return (["Columns: " + ", ".join(COLUMNS[m] for m in modes) + ".", ""]
            + [f"- {', '.join(columns)}: {how}" for how, columns in by_run.items()])


def write_report(out: Path, produced: Mapping[str, str], gold: Sequence[Run], hotpot_runs: Sequence[Run] | None,
                 hotpot_note: str) -> Path:
    """docs/EVAL-LLM.md (in `out`) from the runs of every column, however many invocations made them."""
    modes = modes_of([*gold, *(hotpot_runs or [])])
    lines = ["# LLM-mode evaluation", "", *header_lines(produced, modes), "", "## Targets", ""]
    if "naive" in modes and hotpot_runs:
        lines += ["Cost against the naive RAG (one search of every collection, the five best passages, one call to the "
                  "same model) on the same HotpotQA questions, and answers against the better of the naive RAG and "
                  "the oracle (the same call on the gold paragraphs); gold set against LLM mode before this change.",
                  "", *_target_table(cost_targets(gold, hotpot_runs), lambda _: ".2f")]
        lines += ["", "Prompt tokens per question by step (mean over the questions of the group, both sets; "
                  "`naive` = the naive RAG's one call, `oracle` = the oracle's):", "",
                  *step_tokens([*gold, *hotpot_runs]), ""]
    if "llm" in modes and hotpot_runs:
        lines += ["Where LLM mode's time goes on HotpotQA (per step, from the usage and time of every model call):", "",
                  *step_time(hotpot_runs), ""]
    if "llm" in modes:
        lines += ["LLM mode over both question sets; calls (mean per question) and latency grouped by the routed "
                  "query type; n/a: no question in the group.", "",
                  *_target_table(_targets([*gold, *(hotpot_runs or [])]),
                                 lambda label: ".3f" if "valid" in label else ".1f")]
    else:
        lines.append("Not evaluated: no LLM column.")
    lines += ["", (__doc__ or "")[(__doc__ or "").index("Definitions"):].strip(), ""]
    if gold:
        lines += _section("Gold set", f"{len({r.question.id for r in gold})} questions of `eval/gold.jsonl` over the "
                          "bundled corpus, stratified by query type and answerability.", gold, GOLD_TYPES)
    else:
        lines += ["## Gold set", "", "Not run (`--gold-n 0`, or only the oracle column, which is HotpotQA's).", ""]
    if hotpot_runs is None:
        lines += ["## HotpotQA", "", hotpot_note, ""]
    else:
        share = oracle_share(hotpot_runs)
        lines += _section("HotpotQA", hotpot_note, hotpot_runs, HOTPOT_TYPES,
                          ["### HotpotQA: LLM mode as a share of the oracle", "",
                           "Answer present of `llm` ÷ answer present of `oracle` (the naive call on the question's "
                           "gold paragraphs), over the questions run in both modes:", "", *share] if share else ())
    out.mkdir(parents=True, exist_ok=True)
    path = out / "EVAL-LLM.md"
    path.write_text("\n".join(lines), "utf-8")
    return path


async def run_set(name: str, questions: Sequence[Question], catalog: Catalog, server: EmbeddedServer,
                  settings: Settings, modes: Sequence[Mode], oracle: Mapping[str, list[Evidence]] | None = None
                  ) -> list[Run]:
    """Every question in every mode against one running document server; `oracle`: the oracle's passages per
    question id (`oracle_passages`), needed for that mode."""
    docs = DocumentClient(server.url, timeout_s=30, display_names=catalog.display_names(), auth_token=server.token)
    graph, runs = build_graph(), []
    try:
        for mode in modes:
            llm = None if mode == "offline" else LLMClient(
                settings.llm_base_url, api_key=settings.llm_api_key, model=settings.llm_model,
                fast_model=settings.fast_model, timeout_s=settings.llm_timeout_s,
                max_concurrency=settings.llm_max_concurrency, max_retries=settings.llm_max_retries)
            ctx = Context(llm=llm, docs=docs, catalog=catalog, prompts=Prompts(settings.prompts_dir),
                          config=settings.pipeline, fence_key=EVAL_FENCE_KEY)
            try:
                for i, question in enumerate(questions, 1):
                    if mode in ONE_CALL:
                        assert llm is not None
                        run = (await observe_naive(question, docs, catalog, llm) if mode == "naive" else
                               await observe_oracle(question, (oracle or {})[question.id], llm))
                    else:
                        run = await observe(question, mode, graph, ctx)
                    runs.append(run)
                    print(f"[{name} {mode} {i}/{len(questions)}] {question.id} {question.kind}→{run.route_type} "
                          f"calls={run.calls} fallbacks={len(run.fallbacks)} {run.seconds:.1f}s", file=sys.stderr)
            finally:
                if llm:
                    await llm.aclose()
    finally:
        await docs.aclose()
    return runs


def dump(path: Path, runs: Sequence[Run], produced: Mapping[str, str], hotpot_note: str) -> None:
    """One JSON line per run (what a developer reads to see why a question was lost) after one line with the
    report's header (how each column was produced, the HotpotQA note): `--from-dump` renders the report again
    from it, without asking a model, and a later run with the same `--dump` adds its columns (`merge`)."""
    with path.open("w", encoding="utf-8") as out:
        out.write(json.dumps({"report": {"produced": dict(produced), "hotpot_note": hotpot_note}},
                             ensure_ascii=False) + "\n")
        for run in runs:
            row = asdict(run) | {"declined": run.declined, "extractive_fallback": run.extractive_fallback}
            out.write(json.dumps(row, ensure_ascii=False) + "\n")


def load_dump(path: Path) -> tuple[dict[str, str], str, list[Run], list[Run]]:
    """(how each column was produced, HotpotQA note, gold runs, HotpotQA runs) of a `--dump` file."""
    lines = [json.loads(line) for line in path.read_text("utf-8").splitlines() if line.strip()]
    report = lines[0]["report"]
    runs = []
    for row in lines[1:]:
        q = row.pop("question")
        question = Question(**{**q, "key_facts": tuple(q["key_facts"]), "gold_titles": tuple(q["gold_titles"])})
        fields = {k: v for k, v in row.items() if k in Run.__dataclass_fields__}
        runs.append(Run(**{**fields, "question": question, "fallbacks": [tuple(f) for f in row["fallbacks"]]}))
    gold = [r for r in runs if not r.question.hotpot]
    hotpot_runs = [r for r in runs if r.question.hotpot]
    return report["produced"], report["hotpot_note"], gold, hotpot_runs


def differing_sets(kept: Sequence[Run], asked: Mapping[str, set[str]]) -> list[str]:
    """The question sets (`Question.set_name`) about to be asked (`asked`: set -> question ids; a set not run
    now left out) whose questions differ from the kept runs of that set: their columns would not answer the
    same questions."""
    return [name for name, ids in asked.items()
            if (before := {r.question.id for r in kept if r.question.set_name == name}) and before != ids]


def merge(kept: Sequence[Run], fresh: Sequence[Run]) -> list[Run]:
    """The runs of a dump with the runs just made: the fresh runs of a question set and mode (a column) replace
    the kept runs of that column; the kept runs of the other columns stay."""
    columns = {(r.question.set_name, r.mode) for r in fresh}
    return [r for r in kept if (r.question.set_name, r.mode) not in columns] + list(fresh)


def model_names(settings: Settings) -> str:
    """The model ids the upstream's `/v1/models` lists (what is really answering), else the configured name."""
    headers = {"Authorization": f"Bearer {settings.llm_api_key}"} if settings.llm_api_key else {}
    try:
        reply = httpx.get(settings.llm_base_url.rstrip("/") + "/models", headers=headers, timeout=10)
        reply.raise_for_status()
        return ", ".join(m["id"] for m in reply.json()["data"]) or settings.llm_model
    except (httpx.HTTPError, ValueError, KeyError, TypeError) as exc:
        print(f"warning: {settings.llm_base_url}/models did not answer ({exc}); is the model up?", file=sys.stderr)
        return f"{settings.llm_model} (the server's /v1/models did not answer)"


def _modes(text: str) -> list[Mode]:
    """`--modes`: column names separated by commas, returned in column order."""
    chosen = {m.strip() for m in text.split(",") if m.strip()}
    if not chosen or chosen - set(MODES):
        raise argparse.ArgumentTypeError(f"choose among {', '.join(MODES)} (comma-separated), not {text!r}")
    return [m for m in MODES if m in chosen]


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m eval.llm", description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--gold-n", type=int, default=30, help="gold questions (default 30; 0 = none)")
    parser.add_argument("--hotpot-n", type=int, default=100, help="HotpotQA questions of the chosen half, stratified "
                        "by type (default 100; 0 = none); the pool holds every question's paragraphs either way")
    parser.add_argument("--hotpot", type=Path, default=hotpot.HOTPOT_FILE, help="the HotpotQA file "
                        "(default: $NEO_SHARED_DIR/eval/hotpotqa/dev_distractor_1000.jsonl, NEO_SHARED_DIR=../shared)")
    parser.add_argument("--out", type=Path, default=ROOT / "docs")
    parser.add_argument("--limit", type=int, default=0, help="only the first N questions of each set (smoke runs)")
    parser.add_argument("--split", choices=("test", "tune", "all"), default="test",
                        help="the HotpotQA half the questions come from (`eval.hotpot_eval.halves`): report on the "
                             "held-apart test half (default), tune on the tuning half")
    parser.add_argument("--modes", type=_modes, default=list(MODES), metavar="MODE[,MODE...]",
                        help=f"the columns to run (default: {','.join(MODES)}; oracle runs on HotpotQA only). Run "
                             "them apart, each on an otherwise idle machine, into the same --dump")
    parser.add_argument("--dump", type=Path, help="also write every run (question, mode, answer, measures) as JSONL; "
                        "when the file exists, its columns not run now are kept and the report shows them all")
    parser.add_argument("--from-dump", type=Path, help="render the report again from a --dump file (no model needed)")
    return parser


def hotpot_items(path: Path, split: str, n: int, limit: int) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(the questions asked: `n` of the `split` half stratified by type, cut to `limit`; every question of the
    file, whose paragraphs are pooled as `make eval` pools them)."""
    questions = hotpot.load_questions(path)
    half = questions if split == "all" else hotpot_eval.halves(questions)[split]
    return hotpot.select_questions(half, n)[: limit or None], questions


async def main(argv: list[str] | None = None) -> Path:
    parser = _parser()
    args = parser.parse_args(argv)
    if args.from_dump:
        produced, note, gold_done, hotpot_done = load_dump(args.from_dump)
        path = write_report(args.out, produced, gold_done, hotpot_done or None, note)
        print(f"wrote {path} (from {args.from_dump})", file=sys.stderr)
        return path

    settings = Settings()
    modes: list[Mode] = args.modes
    if settings.offline and modes != ["offline"]:
        print("No language model configured: set LLM_BASE_URL (and LLM_MODEL) to an OpenAI-compatible server, "
              "e.g. LLM_BASE_URL=http://127.0.0.1:8080/v1, or pass --modes offline.", file=sys.stderr)
        raise SystemExit(2)
    gold_modes = [m for m in modes if m != "oracle"]
    gold = gold_questions(args.gold_n)[: args.limit or None] if gold_modes else []
    items: list[dict[str, Any]] = []
    pool: list[dict[str, Any]] = []
    if args.hotpot_n <= 0:
        note = "Not run (`--hotpot-n 0`)."
    elif not args.hotpot.is_file():
        note = f"Skipped: {args.hotpot} is absent (set NEO_SHARED_DIR or --hotpot)."
        print(f"HotpotQA skipped: {args.hotpot} is absent", file=sys.stderr)
    else:
        items, pool = hotpot_items(args.hotpot, args.split, args.hotpot_n, args.limit)
    kept: list[Run] = []
    kept_produced: dict[str, str] = {}
    kept_note = ""
    if args.dump and args.dump.is_file():
        kept_produced, kept_note, kept_gold, kept_hotpot = load_dump(args.dump)
        kept = kept_gold + kept_hotpot
        asked = {"gold set": {q.id for q in gold}, "HotpotQA": {q["id"] for q in items}}
        if differing := differing_sets(kept, {name: ids for name, ids in asked.items() if ids}):
            parser.error(f"{args.dump} holds other {' and '.join(differing)} questions than this run would ask "
                         "(same --gold-n, --hotpot-n, --split and --limit, or another --dump)")

    model = model_names(settings) if modes != ["offline"] else "none (offline only)"
    command = "python -m eval.llm" + "".join(f" {a}" for a in (sys.argv[1:] if argv is None else argv))
    how = (f"`{command}` on {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; model: `{model}` "
           f"(LLM_BASE_URL={settings.llm_base_url or '–'}), answer calls with seed {SEED}; machine: {os.cpu_count()} cores")
    gold_runs: list[Run] = []
    hotpot_runs: list[Run] = []
    with tempfile.TemporaryDirectory(prefix="neo-nl-eval-llm-") as tmp:
        if gold:
            catalog = load_catalog(settings.collections_file)
            server = await serve_in_background(index_path=Path(tmp) / "none.sqlite3")  # the bundled corpus only
            try:
                gold_runs = await run_set("gold", gold, catalog, server, settings, gold_modes)
            finally:
                await server.stop()
        if items:
            pooled = hotpot.build_corpus(pool, Path(tmp) / "hotpot")
            half = "" if args.split == "all" else f" {args.split} half"
            note = (f"{len(items)} questions of the HotpotQA dev{half} (distractor setting, `{args.hotpot.name}`, "
                    f"CC BY-SA 4.0), stratified by type, over a pooled corpus of all {len(pooled.titles)} paragraphs "
                    f"of the file's {len(pool)} questions (both halves, as `make eval` pools them) in "
                    f"{len(pooled.catalog.names)} collections (split by a hash of the title). The oracle reads only "
                    "the question's two gold paragraphs.")
            server = await pooled.serve()
            try:
                hotpot_runs = await run_set("hotpot", hotpot_questions(items), pooled.catalog, server, settings,
                                            modes, {q["id"]: oracle_passages(q) for q in items})
            finally:
                await server.stop()
    fresh = gold_runs + hotpot_runs
    produced = kept_produced | {f"{r.question.set_name}: {r.mode}": how for r in fresh}
    runs = merge(kept, fresh)
    if any(r.question.hotpot for r in kept) and not hotpot_runs:
        note = kept_note
    if args.dump:
        dump(args.dump, runs, produced, note)
    hotpot_done = [r for r in runs if r.question.hotpot]
    path = write_report(args.out, produced, [r for r in runs if not r.question.hotpot], hotpot_done or None, note)
    print(f"wrote {path}", file=sys.stderr)
    return path


if __name__ == "__main__":
    asyncio.run(main())
