"""`python -m eval.llm`: LLM mode against a real local model, beside offline mode, on a fixed subset.

Two question sets: about 30 questions of the gold set (`eval/gold.jsonl`, stratified by query type and
answerability) over the bundled corpus, and about 30 public HotpotQA questions (stratified by type) over a pooled
corpus of all their paragraphs (`eval.hotpot`). Every question runs through the real graph twice, with the model
configured by `LLM_BASE_URL` / `LLM_MODEL` and with `llm=None` (offline), and the report goes to
docs/EVAL-LLM.md.

Definitions (per question, then averaged or counted per group of questions):

- structured steps attempted: the `UsageEvent`s before the first `AnswerDelta` (each is one structured model
  step that got a reply: route, rewrite, decompose, condense, summarize, judge) plus the `LLMFallback`s with
  reason `unavailable` of steps other than `synthesize` (a step whose call failed emits no usage);
  structured replies valid = 1 - (`LLMFallback`s with reason `invalid`) / attempted.
- fallbacks: the `LLMFallback` events, by step and reason.
- key facts found: gold, the share of `key_facts` in the answer body (answerable questions with key facts);
  HotpotQA, whether the normalised answer occurs in the body; gold articles cited: the share of the supporting
  articles among the titles of the `[n]` the body cites.
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
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

import httpx

from app.settings import ROOT, Settings
from docserver.embedded import EmbeddedServer, serve_in_background
from eval import hotpot, hotpot_eval
from eval.answers import body_of, is_declined
from eval.run import EVAL_DIR, load_gold
from graph.answer import messages
from graph.answer.events import AnswerDelta, LLMFallback, Unsupported, UsageEvent
from graph.answer.ledger import Ledger
from graph.answer.prompts import Prompts
from graph.build import build_graph
from graph.clients.llm import LLMClient
from graph.clients.mcp_client import DocumentClient
from graph.collections import Catalog, load_catalog
from graph.context import Context
from graph.models import Evidence, Turn, Usage
from graph.runner import start
from graph.text.claims import cited_numbers, claim_sentences, supported

Mode = Literal["llm", "naive", "offline"]
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
    gold_pooled: bool | None = None  # HotpotQA: every supporting article is a pooled paragraph (answerable here)


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
    rounds: int = 0  # research rounds (pipeline)
    structured: int = 0  # structured model steps attempted (see the module docstring)
    fallbacks: list[tuple[str, str]] = field(default_factory=list)  # (step, reason)
    unsupported: int = 0
    markers: int = 0
    supported_markers: int = 0
    key_facts: float | None = None  # share found; None when the question has none to find
    titles_cited: float | None = None
    em: float | None = None  # HotpotQA: exact match / token F1 of the first sentence (`short_answer`)
    f1: float | None = None

    @property
    def invalid(self) -> int:
        return sum(reason == "invalid" for _, reason in self.fallbacks)

    @property
    def declined(self) -> bool:
        return is_declined(self.answer)

    @property
    def extractive_fallback(self) -> bool:
        return any(prefix in self.answer for prefix in _FALLBACK_PREFIXES)


def gold_questions(n: int) -> list[Question]:
    """`n` gold questions, stratified by (query type, answerable)."""
    items = hotpot.stratified(load_gold(EVAL_DIR / "gold.jsonl"), lambda g: (g["type"], g["answerable"]), n)
    return [Question(g["id"], g["question"], g["type"], g["answerable"], tuple(g["key_facts"]), g["type"])
            for g in items]


def hotpot_questions(items: Sequence[dict[str, Any]]) -> list[Question]:
    pool = hotpot.paragraphs(items)
    return [Question(q["id"], q["question"], q["type"], True, (q["answer"],), None, tuple(hotpot.gold_titles(q)),
                     hotpot=True, gold_pooled=hotpot.pooled_gold(q, pool) == set(hotpot.gold_titles(q)))
            for q in items]


async def observe(question: Question, mode: Mode, graph: Any, ctx: Context) -> Run:
    """Run the graph for one question as the service does (`graph.runner.start`, the same run config as
    `run_pipeline`), reading the thought events and the final state from one stream."""
    run = Run(question, mode)
    started = time.perf_counter()
    state, request = start([Turn(role="user", content=question.text)], ctx)
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
            run.structured += not answering
        elif isinstance(chunk, AnswerDelta):
            answering = True
        elif isinstance(chunk, LLMFallback):
            run.fallbacks.append((chunk.step, chunk.reason))
            run.structured += chunk.reason == "unavailable" and chunk.step != "synthesize" and not answering
        elif isinstance(chunk, Unsupported):
            run.unsupported += len(chunk.sentences)
    run.seconds = time.perf_counter() - started
    route = final["route"]
    run.route_type, run.route_collections, run.answer = route.query_type, list(route.collections), final["answer"]
    run.rounds = final["loop"].round

    score(run, Ledger(final["sources"]), body_of(run.answer))  # what the answer's [1], [2], ... point at
    return run


NAIVE_PASSAGES = 5
NAIVE_SYSTEM = ("You answer questions from the passages you are given. Write a short answer in the language of the "
                "question and cite the passages you use with their numbers in brackets, for example [1]. If the "
                "passages do not contain the answer, say so.")


async def naive_answer(question: str, docs: DocumentClient, collections: Sequence[str], llm: LLMClient
                       ) -> tuple[str, list[Evidence], Usage]:
    """The twenty-line RAG a user could write instead of this service: one search of every collection with the
    question as typed, the five best passages by the server's score, one plain call to the main model."""
    found = await asyncio.gather(*(docs.search(c, question) for c in collections))
    passages = sorted((e for hits in found for e in hits), key=lambda e: -e.relevance)
    passages = passages[:NAIVE_PASSAGES]
    context = "\n\n".join(f"[{n}] {e.title}\n{e.text}" for n, e in enumerate(passages, 1))
    reply = await llm.complete([{"role": "system", "content": NAIVE_SYSTEM},
                                {"role": "user", "content": f"Passages:\n{context}\n\nQuestion: {question}"}])
    return reply.text, passages, reply.usage


async def observe_naive(question: Question, docs: DocumentClient, catalog: Catalog, llm: LLMClient) -> Run:
    run = Run(question, "naive", route_type="naive", route_collections=list(catalog.names))
    started = time.perf_counter()
    run.answer, passages, usage = await naive_answer(question.text, docs, catalog.names, llm)
    run.seconds = time.perf_counter() - started
    run.calls, run.tokens, run.prompt_tokens = usage.calls, usage.total_tokens, usage.prompt_tokens
    run.steps = {"answer": usage.prompt_tokens}
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
    routed = [r for r in runs if r.question.expected_type and r.mode != "naive"]
    return {
        "questions": len(runs),
        "routing_accuracy": _mean([r.route_type == r.question.expected_type for r in routed]),
        "structured_steps": structured,
        "structured_valid": 1 - sum(r.invalid for r in runs) / structured if structured else float("nan"),
        "fallbacks": sum(len(r.fallbacks) for r in runs),
        "key_facts": _mean([r.key_facts for r in runs if r.key_facts is not None]),
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
    ("Key facts found", "key_facts", ".2f"),
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


def cost_targets(gold: Sequence[Run], hotpot_runs: Sequence[Run]) -> list[tuple[str, float, bool | None]]:
    """The pipeline against the naive one-call RAG on the same questions and model (HotpotQA), and against its
    own earlier figures on the gold set. "The first search answers": the pipeline stopped after one research
    round."""
    llm = {r.question.id: r for r in hotpot_runs if r.mode == "llm"}
    naive = {r.question.id: r for r in hotpot_runs if r.mode == "naive"}
    both = [q for q in llm if q in naive]
    ours, theirs = metrics([llm[q] for q in both]), metrics([naive[q] for q in both])
    first = [q for q in both if llm[q].rounds == 1]
    first_ratio = _ratio(_mean([llm[q].prompt_tokens for q in first]), _mean([naive[q].prompt_tokens for q in first]))
    mine = metrics([r for r in gold if r.mode == "llm"])
    checks: list[tuple[str, float, Callable[[float], bool]]] = [
        ("HotpotQA answer present − naive ≥ +0.10", ours["key_facts"] - theirs["key_facts"], lambda v: v >= 0.10),
        ("HotpotQA gold articles cited − naive ≥ +0.20", ours["titles_cited"] - theirs["titles_cited"],
         lambda v: v >= 0.20),
        ("HotpotQA prompt tokens ÷ naive ≤ 2.0", _ratio(ours["prompt_tokens"], theirs["prompt_tokens"]),
         lambda v: v <= 2.0),
        (f"HotpotQA prompt tokens ÷ naive, first search answers ({len(first)} q) ≤ 1.2", first_ratio,
         lambda v: v <= 1.2),
        ("HotpotQA median seconds ÷ naive ≤ 3.0", _ratio(ours["seconds_p50"], theirs["seconds_p50"]),
         lambda v: v <= 3.0),
        (f"Gold key facts ≥ {GOLD_BEFORE['key_facts']} (before)", mine["key_facts"],
         lambda v: v >= GOLD_BEFORE["key_facts"]),
        (f"Gold citation precision ≥ {GOLD_BEFORE['citation_precision']} (before)", mine["citation_precision"],
         lambda v: v >= GOLD_BEFORE["citation_precision"]),
    ]
    return _judged(checks)


def step_tokens(runs: Sequence[Run]) -> list[str]:
    """Prompt tokens per question by pipeline step, per routed query type (LLM mode), and the naive call."""
    groups: dict[str, list[Run]] = {}
    for r in runs:
        if r.mode in ("llm", "naive"):
            groups.setdefault(r.route_type, []).append(r)
    steps = sorted({s for group in groups.values() for r in group for s in r.steps})
    lines = ["| routed as | questions | " + " | ".join(steps) + " | all |", "|---|---" + "|---" * (len(steps) + 1) + "|"]
    for kind, group in sorted(groups.items()):
        cells = [f"{_mean([r.steps.get(s, 0) for r in group]):.0f}" for s in steps]
        lines.append(f"| {kind} | {len(group)} | " + " | ".join(cells)
                     + f" | {_mean([r.prompt_tokens for r in group]):.0f} |")
    return lines


def _section(title: str, intro: str, runs: Sequence[Run], kinds: Sequence[str], modes: Sequence[Mode]) -> list[str]:
    """A question set: metrics per query type, each mode beside the other; fallbacks; the questions."""
    groups = [("all", list(runs))] + [(k, [r for r in runs if r.question.kind == k]) for k in kinds]
    columns = [(name, mode, metrics([r for r in group if r.mode == mode])) for name, group in groups for mode in modes
               if group]
    lines = [f"## {title}", "", intro, "", "| metric | " + " | ".join(f"{n}: {m}" for n, m, _ in columns) + " |",
             "|---" * (len(columns) + 1) + "|"]
    for label, key, fmt in ROWS:
        lines.append(f"| {label} | " + " | ".join(_show(float(m[key]), fmt) for _, _, m in columns) + " |")
    fallbacks = Counter((r.question.kind, step, reason) for r in runs if r.mode == "llm" for step, reason in r.fallbacks)
    lines += ["", f"### {title}: fallbacks by step and reason (LLM mode)", ""]
    if fallbacks:
        lines += ["| type | step | reason | count |", "|---|---|---|---|"]
        lines += [f"| {k} | {s} | {why} | {n} |" for (k, s, why), n in sorted(fallbacks.items())]
    else:
        lines.append("None." if any(r.mode == "llm" for r in runs) else "Not run (offline only).")
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


CEILING_ROWS = [("Answer present", "key_facts"), ("F1 (first sentence)", "f1"), ("Gold articles cited", "titles_cited"),
                ("Answerable questions declined", "declined_answerable"), ("Prompt tokens per question", "prompt_tokens")]


def ceiling_table(runs: Sequence[Run], modes: Sequence[Mode]) -> list[str]:
    """HotpotQA split by what the data allows: questions whose supporting articles are all pooled paragraphs (the
    corpus can answer them) and the rest, where a grounded answer can only decline or be partial and a model that
    answers anyway answers from its own memory."""
    groups = [("all supporting articles pooled", [r for r in runs if r.question.gold_pooled]),
              ("a supporting article missing", [r for r in runs if r.question.gold_pooled is False])]
    columns = [(f"{name} ({len({r.question.id for r in group})} q): {mode}", metrics([r for r in group if r.mode == mode]))
               for name, group in groups for mode in modes if group]
    if not columns:
        return []
    lines = ["| metric | " + " | ".join(name for name, _ in columns) + " |", "|---" * (len(columns) + 1) + "|"]
    for label, key in CEILING_ROWS:
        fmt = ".0f" if key == "prompt_tokens" else ".2f"
        lines.append(f"| {label} | " + " | ".join(_show(float(m[key]), fmt) for _, m in columns) + " |")
    return lines


def write_report(out: Path, header: list[str], gold: Sequence[Run], hotpot_runs: Sequence[Run] | None,
                 hotpot_note: str, modes: Sequence[Mode]) -> Path:
    lines = ["# LLM-mode evaluation", "", *header, "", "## Targets", ""]
    if "naive" in modes and hotpot_runs:
        lines += ["Cost against the naive RAG (one search of every collection, the five best passages, one call to the "
                  "same model) on the same HotpotQA questions; gold set against LLM mode before this change.", "",
                  *_target_table(cost_targets(gold, hotpot_runs), lambda _: ".2f")]
        lines += ["", "Prompt tokens per question by step (mean over the questions of the group, both sets; "
                  "`naive` = the naive RAG's one call):", "", *step_tokens([*gold, *hotpot_runs]), ""]
    if "llm" in modes:
        lines += ["LLM mode over both question sets; calls (mean per question) and latency grouped by the routed "
                  "query type; n/a: no question in the group.", "",
                  *_target_table(_targets([*gold, *(hotpot_runs or [])]),
                                 lambda label: ".3f" if "valid" in label else ".1f")]
    else:
        lines.append("Not evaluated: offline only (no model configured).")
    lines += ["", (__doc__ or "")[(__doc__ or "").index("Definitions"):].strip(), ""]
    lines += _section("Gold set", f"{len({r.question.id for r in gold})} questions of `eval/gold.jsonl` over the "
                      "bundled corpus, stratified by query type and answerability.", gold, GOLD_TYPES, modes)
    if hotpot_runs is None:
        lines += ["## HotpotQA", "", hotpot_note, ""]
    else:
        lines += _section("HotpotQA", hotpot_note, hotpot_runs, HOTPOT_TYPES, modes)
        if table := ceiling_table(hotpot_runs, modes):
            lines += ["### HotpotQA: what the data allows", "",
                      "This HotpotQA file often lacks a question's supporting paragraphs (docs/EVAL.md, data ceilings). "
                      "Where the pool holds them all, the corpus can answer; where one is missing, the pipeline declines "
                      "or answers in part from what it found, and the naive RAG answers anyway, from passages about "
                      "something else or the model's own memory.", "", *table, ""]
    out.mkdir(parents=True, exist_ok=True)
    path = out / "EVAL-LLM.md"
    path.write_text("\n".join(lines), "utf-8")
    return path


async def run_set(name: str, questions: Sequence[Question], catalog: Catalog, server: EmbeddedServer,
                  settings: Settings, modes: Sequence[Mode]) -> list[Run]:
    """Every question in every mode against one running document server."""
    docs = DocumentClient(server.url, timeout_s=30, display_names=catalog.display_names())
    graph, runs = build_graph(), []
    try:
        for mode in modes:
            llm = None if mode == "offline" else LLMClient(
                settings.llm_base_url, api_key=settings.llm_api_key, model=settings.llm_model,
                fast_model=settings.fast_model, timeout_s=settings.llm_timeout_s,
                max_concurrency=settings.llm_max_concurrency, max_retries=settings.llm_max_retries)
            ctx = Context(llm=llm, docs=docs, catalog=catalog, prompts=Prompts(settings.prompts_dir),
                          config=settings.pipeline)
            try:
                for i, question in enumerate(questions, 1):
                    if mode == "naive":
                        assert llm is not None
                        run = await observe_naive(question, docs, catalog, llm)
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


def dump(path: Path, runs: Sequence[Run], header: list[str], hotpot_note: str, modes: Sequence[Mode]) -> None:
    """One JSON line per run (what a developer reads to see why a question was lost) after one line with the
    report's header: `--from-dump` renders the report again from it, without asking a model."""
    with path.open("w", encoding="utf-8") as out:
        out.write(json.dumps({"report": {"header": header, "hotpot_note": hotpot_note, "modes": list(modes)}},
                             ensure_ascii=False) + "\n")
        for run in runs:
            row = asdict(run) | {"declined": run.declined, "extractive_fallback": run.extractive_fallback}
            out.write(json.dumps(row, ensure_ascii=False) + "\n")


def load_dump(path: Path) -> tuple[list[str], str, list[Mode], list[Run], list[Run]]:
    """(header, HotpotQA note, modes, gold runs, HotpotQA runs) of a `--dump` file."""
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
    return report["header"], report["hotpot_note"], report["modes"], gold, hotpot_runs


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


async def main(argv: list[str] | None = None) -> Path:
    parser = argparse.ArgumentParser(prog="python -m eval.llm", description=__doc__.split("\n\n")[0])
    parser.add_argument("--gold-n", type=int, default=30, help="gold questions (default 30)")
    parser.add_argument("--hotpot-n", type=int, default=60, help="HotpotQA questions (default 60; 0 = none)")
    parser.add_argument("--hotpot", type=Path, default=hotpot.HOTPOT_FILE, help="the HotpotQA file "
                        "(default: $NEO_SHARED_DIR/eval/hotpotqa/dev_distractor_492.jsonl, NEO_SHARED_DIR=../shared)")
    parser.add_argument("--out", type=Path, default=ROOT / "docs")
    parser.add_argument("--limit", type=int, default=0, help="only the first N questions of each set (smoke runs)")
    parser.add_argument("--split", choices=("test", "tune", "all"), default="test",
                        help="the HotpotQA half the questions come from (`eval.hotpot_eval.halves`): report on the "
                             "held-apart test half (default), tune on the tuning half")
    parser.add_argument("--dump", type=Path, help="also write every run (question, mode, answer, measures) as JSONL")
    parser.add_argument("--from-dump", type=Path, help="render the report again from a --dump file (no model needed)")
    modes_group = parser.add_mutually_exclusive_group()
    modes_group.add_argument("--skip-offline", action="store_true", help="only the LLM and naive columns")
    modes_group.add_argument("--offline-only", action="store_true", help="only the offline columns (no model needed)")
    modes_group.add_argument("--llm-only", action="store_true", help="only the LLM column (a re-run after a change "
                             "of the pipeline: the naive call does not change with it)")
    args = parser.parse_args(argv)
    if args.from_dump:
        header, note, modes_done, gold_done, hotpot_done = load_dump(args.from_dump)
        path = write_report(args.out, header, gold_done, hotpot_done or None, note, modes_done)
        print(f"wrote {path} (from {args.from_dump})", file=sys.stderr)
        return path

    settings = Settings()
    if settings.offline and not args.offline_only:
        print("No language model configured: set LLM_BASE_URL (and LLM_MODEL) to an OpenAI-compatible server, "
              "e.g. LLM_BASE_URL=http://127.0.0.1:8080/v1, or pass --offline-only.", file=sys.stderr)
        raise SystemExit(2)
    modes: list[Mode] = (["offline"] if args.offline_only else ["llm"] if args.llm_only
                         else ["llm", "naive"] if args.skip_offline else ["llm", "naive", "offline"])
    model = model_names(settings) if "llm" in modes else "none (offline only)"
    command = "python -m eval.llm" + "".join(f" {a}" for a in (sys.argv[1:] if argv is None else argv))
    header = [f"Produced by `{command}` on {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; model: `{model}` "
              f"(LLM_BASE_URL={settings.llm_base_url or '–'}); machine: {os.cpu_count()} cores. Columns: "
              + ", ".join({"llm": "`llm` = LLM mode", "offline": "`offline` = the same questions with llm=None",
                           "naive": f"`naive` = one search of every collection, the {NAIVE_PASSAGES} best passages, "
                                    "one call to the same model"}[m]
                          for m in modes) + "."]

    gold = gold_questions(args.gold_n)[: args.limit or None]
    with tempfile.TemporaryDirectory(prefix="neo-nl-eval-llm-") as tmp:
        catalog = load_catalog(settings.collections_file)
        server = await serve_in_background(index_path=Path(tmp) / "none.sqlite3")  # the bundled corpus only
        try:
            gold_runs = await run_set("gold", gold, catalog, server, settings, modes)
        finally:
            await server.stop()

        hotpot_runs: list[Run] | None = None
        if args.hotpot_n <= 0:
            note = "Not run (`--hotpot-n 0`)."
        elif not args.hotpot.is_file():
            note = f"Skipped: {args.hotpot} is absent (set NEO_SHARED_DIR or --hotpot)."
            print(f"HotpotQA skipped: {args.hotpot} is absent", file=sys.stderr)
        else:
            questions = hotpot.load_questions(args.hotpot)
            pool = questions if args.split == "all" else hotpot_eval.halves(questions)[args.split]
            items = hotpot.select_questions(pool, args.hotpot_n)[: args.limit or None]
            pooled = hotpot.build_corpus(items, Path(tmp) / "hotpot")
            half = "" if args.split == "all" else f" {args.split} half"
            note = (f"{len(items)} questions of the HotpotQA dev{half} (distractor setting, `{args.hotpot.name}`, CC BY-SA 4.0), "
                    f"stratified by type, over a pooled corpus of all their {len(pooled.titles)} paragraphs in "
                    f"{len(pooled.catalog.names)} collections (split by a hash of the title).")
            server = await pooled.serve()
            try:
                hotpot_runs = await run_set("hotpot", hotpot_questions(items), pooled.catalog, server, settings, modes)
            finally:
                await server.stop()
    if args.dump:
        dump(args.dump, gold_runs + (hotpot_runs or []), header, note, modes)
    path = write_report(args.out, header, gold_runs, hotpot_runs, note, modes)
    print(f"wrote {path}", file=sys.stderr)
    return path


if __name__ == "__main__":
    asyncio.run(main())
