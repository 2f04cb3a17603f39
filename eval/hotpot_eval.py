"""HotpotQA in `make eval`: public multi-hop questions through the real graph in offline mode, beside plain BM25.

The chosen questions (by default all of `dev_distractor_492.jsonl`) are split into a tuning and a test half
(`hotpot.split_halves`: alternating within each type in file order). Every paragraph of every chosen question
is pooled in the reference server over four collections (`hotpot.build_corpus`), whichever half is asked, so
that the search is equally hard in a run of one half. Each question then runs through the graph as the service
runs it (`graph.runner.start`, `llm=None`), and through a baseline: one BM25 search (`docserver.index.Index`)
of the question over the whole pool as a single collection.

Measured per question, then averaged per type (`bridge`, `comparison`) and over all:

- both / one gold retrieved: both / at least one of the two gold (supporting) articles are among the documents
  of the pipeline's evidence (`state["evidence"]`);
- gold cited: the share of the gold articles among the documents the answer body cites (`[n]` mapped to a title
  through the rendered sources list, else through the answer's ledger);
- answer present: the normalised gold answer occurs in the answer body as whole words (`hotpot.answer_found`);
  for a yes/no answer (counted per group) that says little: the word merely occurs in the extracted sentences;
- EM and F1: `hotpot_evaluate_v1.py` exact match and token F1 of the answer body (without sources list and
  `[n]` markers) against the gold answer; an offline answer is a set of extracted sentences, so EM is about 0
  and F1 low by construction;
- declined: the answer opens with the "no passages found" line;
- baseline, over the 5 best-ranked documents: both / one gold among them, the share of gold articles among
  them (the comparator of gold cited), and the gold answer in the text of the best 3 and 5.
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Literal

from app.settings import Settings
from docserver.index import Index
from docserver.store import load_documents
from eval import hotpot
from eval.answers import MARKER, body_of, cited_titles, is_declined
from graph.build import build_graph
from graph.context import Context
from graph.ledger import Ledger
from graph.mcp_client import DocumentClient
from graph.models import Turn
from graph.prompts import Prompts
from graph.runner import start

Split = Literal["tune", "test"]
SPLITS: tuple[Split, ...] = ("tune", "test")
TYPES = ("bridge", "comparison")
POOL = "pool"  # the baseline's single collection
TOP_K = 5
CITED_MARGIN = 0.15  # gold cited must beat the baseline's top-5 share by this much
TARGETS = {"both_retrieved": 0.90, "answer_present": 0.65}


@dataclass(frozen=True)
class Outcome:
    """One question through the pipeline and through the BM25 baseline."""

    question: dict[str, Any]
    split: Split
    retrieved: frozenset[str]  # titles of the evidence documents
    cited: frozenset[str]  # titles of the cited documents
    prediction: str  # the answer body without sources list and markers
    declined: bool
    seconds: float
    top: tuple[str, ...]  # baseline: the titles of the best TOP_K documents
    answer_in_top: tuple[bool, bool]  # baseline: the gold answer in the best 3, in the best 5 paragraphs

    @property
    def gold(self) -> list[str]:
        return hotpot.gold_titles(self.question)


def halves(questions: Sequence[dict[str, Any]], n: int | None = None) -> dict[Split, list[dict[str, Any]]]:
    """The tuning and test halves of the file (all of it, or `n` questions: each half its share, stratified by
    type)."""
    split = dict(zip(SPLITS, hotpot.split_halves(questions, lambda q: q["type"]), strict=True))
    if n is None:
        return split
    return {name: hotpot.select_questions(half, round(n * len(half) / len(questions))) for name, half in split.items()}


def baseline_index(index_path: Path) -> Index:
    """An in-process BM25 index of every pooled paragraph in one collection."""
    return Index(replace(d, collection=POOL) for d in load_documents(index_path))


def baseline(question: dict[str, Any], index: Index, texts: dict[str, str]
             ) -> tuple[tuple[str, ...], tuple[bool, bool]]:
    """The titles of the TOP_K documents one BM25 search of the question ranks best, and whether the gold
    answer occurs in the best 3 and in the best 5 of their paragraphs."""
    titles = tuple(dict.fromkeys(h.document.title for h in index.search(question["question"], POOL, limit=50)))
    top = titles[:TOP_K]
    found = [hotpot.answer_found(question["answer"], texts[t]) for t in top]
    return top, (any(found[:3]), any(found[:5]))


async def ask(question: dict[str, Any], graph: Any, ctx: Context, known: set[str]
              ) -> tuple[set[str], set[str], str, float]:
    """The graph's answer to one question: (evidence titles, cited titles, answer, seconds)."""
    started = time.perf_counter()
    state, request = start([Turn(role="user", content=question["question"])], ctx)
    state = await graph.ainvoke(state, context=request)
    seconds = time.perf_counter() - started
    route = state["route"]
    ledger = Ledger.for_answer(state["facts"], state["evidence"], route.collections, ctx.config.ledger_limit).entries
    return {e.title for e in state["evidence"]}, cited_titles(state["answer"], ledger, known), state["answer"], seconds


async def run(path: Path, n: int | None, splits: Sequence[Split], settings: Settings) -> tuple[list[Outcome], int]:
    """Every chosen question of `splits` through the pipeline and the baseline; also the pool size (paragraphs)."""
    chosen = halves(hotpot.load_questions(path), n)
    pool = [q for name in SPLITS for q in chosen[name]]
    outcomes: list[Outcome] = []
    with tempfile.TemporaryDirectory(prefix="neo-nl-hotpot-") as tmp:
        pooled = hotpot.build_corpus(pool, Path(tmp))
        texts, index = hotpot.paragraphs(pool), baseline_index(pooled.index_path)
        known = set(texts)
        server = await pooled.serve()
        docs = DocumentClient(server.url, timeout_s=30, display_names=pooled.catalog.display_names())
        ctx = Context(llm=None, docs=docs, catalog=pooled.catalog, prompts=Prompts(settings.prompts_dir),
                      config=settings.pipeline)
        graph = build_graph()
        try:
            for name in splits:
                for question in chosen[name]:
                    retrieved, cited, answer, seconds = await ask(question, graph, ctx, known)
                    prediction = MARKER.sub("", body_of(answer))
                    outcomes.append(Outcome(question, name, frozenset(retrieved), frozenset(cited), prediction,
                                            is_declined(answer), seconds, *baseline(question, index, texts)))
        finally:
            await docs.aclose()
            await server.stop()
    return outcomes, len(texts)


def _mean(values: Sequence[float]) -> float:
    return statistics.fmean(values) if values else float("nan")


def pipeline_metrics(outcomes: Sequence[Outcome]) -> dict[str, float]:
    """The pipeline's figures for a group of questions (see the module docstring)."""
    return {
        "questions": len(outcomes),
        "yes_no": sum(hotpot.normalize_answer(o.question["answer"]) in ("yes", "no") for o in outcomes),
        "both_retrieved": _mean([all(t in o.retrieved for t in o.gold) for o in outcomes]),
        "one_retrieved": _mean([any(t in o.retrieved for t in o.gold) for o in outcomes]),
        "gold_cited": _mean([sum(t in o.cited for t in o.gold) / len(o.gold) for o in outcomes]),
        "answer_present": _mean([hotpot.answer_found(o.question["answer"], o.prediction) for o in outcomes]),
        "em": _mean([hotpot.exact_match(o.prediction, o.question["answer"]) for o in outcomes]),
        "f1": _mean([hotpot.f1_score(o.prediction, o.question["answer"]) for o in outcomes]),
        "declined": _mean([o.declined for o in outcomes]),
        "seconds_mean": _mean([o.seconds for o in outcomes]),
    }


def baseline_metrics(outcomes: Sequence[Outcome]) -> dict[str, float]:
    """The BM25 baseline's figures for a group of questions (see the module docstring)."""
    return {
        "questions": len(outcomes),
        "both_top5": _mean([all(t in o.top for t in o.gold) for o in outcomes]),
        "one_top5": _mean([any(t in o.top for t in o.gold) for o in outcomes]),
        "gold_top5": _mean([sum(t in o.top for t in o.gold) / len(o.gold) for o in outcomes]),
        "answer_top3": _mean([o.answer_in_top[0] for o in outcomes]),
        "answer_top5": _mean([o.answer_in_top[1] for o in outcomes]),
    }


def _rounded(metrics: dict[str, float]) -> dict[str, float]:
    return {k: round(v, 4) for k, v in metrics.items()}


def targets(pipeline: dict[str, float], base: dict[str, float]) -> list[tuple[str, float, float, bool]]:
    """(target, measured, threshold, met) for one group, usually the test half over all types."""
    checks = [("Gold articles cited ≥ BM25 top-5 share + 0.15", "gold_cited", base["gold_top5"] + CITED_MARGIN)]
    checks += [("Both gold articles retrieved", "both_retrieved", TARGETS["both_retrieved"]),
               ("Answer present", "answer_present", TARGETS["answer_present"])]
    return [(label, pipeline[key], threshold, pipeline[key] >= threshold) for label, key, threshold in checks]


def summarize(outcomes: Sequence[Outcome]) -> dict[str, Any]:
    """Per split present, pipeline and baseline figures over all questions and per type, and the targets."""
    summary: dict[str, Any] = {}
    for name in SPLITS:
        group = [o for o in outcomes if o.split == name]
        if not group:
            continue
        by_type = {"all": group} | {t: [o for o in group if o.question["type"] == t] for t in TYPES}
        summary[name] = {
            "pipeline": {k: _rounded(pipeline_metrics(v)) for k, v in by_type.items()},
            "baseline": {k: _rounded(baseline_metrics(v)) for k, v in by_type.items()},
        }
        summary[name]["targets"] = {
            label: {"measured": round(value, 3), "target": round(threshold, 3), "met": met}
            for label, value, threshold, met in targets(summary[name]["pipeline"]["all"],
                                                        summary[name]["baseline"]["all"])}
    return summary


PIPELINE_ROWS = [  # label, key, format
    ("Questions", "questions", ".0f"),
    ("… with a yes/no answer", "yes_no", ".0f"),
    ("Both gold articles retrieved", "both_retrieved", ".3f"),
    ("At least one gold article retrieved", "one_retrieved", ".3f"),
    ("Gold articles cited (share)", "gold_cited", ".3f"),
    ("Answer present", "answer_present", ".3f"),
    ("Exact match (EM)", "em", ".3f"),
    ("Token F1", "f1", ".3f"),
    ("Declined", "declined", ".3f"),
    ("Seconds per question (mean)", "seconds_mean", ".2f"),
]
BASELINE_ROWS = [
    ("Both gold articles in the top 5", "both_top5", ".3f"),
    ("At least one gold article in the top 5", "one_top5", ".3f"),
    ("Gold articles in the top 5 (share)", "gold_top5", ".3f"),
    ("Answer in the top 3 paragraphs", "answer_top3", ".3f"),
    ("Answer in the top 5 paragraphs", "answer_top5", ".3f"),
]


def _cell(value: float, fmt: str) -> str:
    return "–" if value != value else format(value, fmt)  # nan: no question in the group


def report_lines(summary: dict[str, Any], path: Path) -> list[str]:
    """The HotpotQA section of docs/EVAL.md: the test half per type, the tuning half beside it, the targets."""
    columns = [("test", t) for t in ("all", *TYPES)] + [("tune", "all")]
    header = "| metric | " + " | ".join(f"{s}: {t}" for s, t in columns) + " |"
    rule = "|---" * (len(columns) + 1) + "|"
    questions = sum(summary[s]["pipeline"]["all"]["questions"] for s in SPLITS)
    lines = [
        "## HotpotQA (public, offline mode)", "",
        f"{questions} questions of HotpotQA dev (distractor setting, `{path.name}`, CC BY-SA 4.0) over a pooled "
        f"corpus of all their {summary['pool_paragraphs']} paragraphs in {hotpot.SHARDS} collections (split by a "
        f"hash of the title), asked through the graph with `llm=None` ({summary['seconds']:.0f} s in all). The "
        "questions are split in two halves, alternating within each type in file order: tune settings on the "
        "tuning half (`python -m eval.run --hotpot-only --split tune`); the test half is what this report is judged "
        "on.", "",
        "Gold articles: the two supporting articles of a question. Retrieved: among the documents of the "
        "evidence. Cited: among the documents the answer's `[n]` point at. Answer present: the normalised gold "
        "answer occurs in the answer body (for a yes/no answer that is the word occurring anywhere in the "
        "extracted sentences, so it says little). EM and token F1 as in `hotpot_evaluate_v1.py`, with the answer body "
        "(no sources list, no `[n]`) as the prediction: an offline answer is a set of extracted sentences, so EM "
        "is about 0 and F1 low by construction. The baseline is one BM25 search of the question over the whole "
        "pool as a single collection, top 5 documents (one paragraph each).", "",
        "### Pipeline", "", header, rule,
    ]
    lines += [f"| {label} | " + " | ".join(_cell(summary[s]["pipeline"][t][key], fmt) for s, t in columns) + " |"
              for label, key, fmt in PIPELINE_ROWS]
    lines += ["", "### BM25 baseline", "", header, rule]
    lines += [f"| {label} | " + " | ".join(_cell(summary[s]["baseline"][t][key], fmt) for s, t in columns) + " |"
              for label, key, fmt in BASELINE_ROWS]
    lines += ["", "### Targets (test half, all types)", "", "| target | measured | threshold | met |",
              "|---|---|---|---|"]
    lines += [f"| {label} | {t['measured']:.3f} | ≥ {t['target']:.3f} | {'✅' if t['met'] else '❌'} |"
              for label, t in summary["test"]["targets"].items()]
    return lines


async def evaluate(path: Path, n: int | None, splits: Sequence[Split], settings: Settings) -> dict[str, Any]:
    """Run and summarise; the summary also says how many paragraphs were pooled and how long it took."""
    started = time.perf_counter()
    outcomes, pool = await run(path, n, splits, settings)
    seconds = time.perf_counter() - started
    print(f"HotpotQA: {len(outcomes)} questions, pool of {pool} paragraphs, {seconds:.0f} s", file=sys.stderr)
    return summarize(outcomes) | {"pool_paragraphs": pool, "seconds": round(seconds, 1)}
