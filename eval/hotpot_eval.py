"""HotpotQA in `make eval`: public multi-hop questions through the real graph in offline mode, beside plain BM25
over the same pool.

The chosen questions (by default all 1,000 of `dev_distractor_1000.jsonl`; both gold paragraphs of every question
are in its context) are split into a tuning and a test half (`hotpot.split_halves`: alternating within each type
in file order). Every paragraph of every chosen question is pooled in the reference server over four collections
(`hotpot.build_corpus`), whichever half is asked, so that the search is equally hard in a run of one half. Each
question then runs through the graph as the service runs it (`graph.runner.start`, `llm=None`), and through the
baseline: one BM25 search (`docserver.index.Index`) of the question over the whole pool as a single collection,
documents ranked by their best chunk (a document is one paragraph).

Gold articles: the two supporting articles of a question. Measured per question, then averaged per type
(`bridge`, `comparison`) and over all. The pipeline, stage by stage:

- gathered: both / at least one gold article among the documents of the evidence research gathered
  (`state["evidence"]`);
- in the prompt: both gold articles among the documents of the passages a model's answer prompt would read,
  computed on the final state as synthesis computes it for a model (`evidence_policy.answer_ledger` with
  `model=True` and the linked pair, then `evidence_policy.prompt_passages`), although the run itself is offline;
- cited: both gold articles among the documents the answer body cites (`[n]` mapped to a title through the
  rendered sources list, else through the answer's ledger), and the share of the gold articles cited;
- documents in the prompt / cited: the number of distinct documents there (a higher share cited is not to be
  bought by citing more);
- answer present: the normalised gold answer occurs as whole words in the answer body (`hotpot.answer_found`);
  unasked: the same over the questions whose answer is neither yes/no nor words of the question
  (`hotpot.unasked`), the only ones where an occurrence says much;
- EM and F1: `hotpot_evaluate_v1.py` exact match and token F1 of the answer body (without sources list and
  `[n]` markers) against the gold answer; an offline answer is a set of extracted sentences, so EM is about 0
  and F1 low by construction;
- declined: the answer opens with the "no passages found" line; seconds: wall time per question.

The baseline, for the top k = 5, 10 and 20 documents of its ranking: gold recall (the share of the gold articles
among them), both gold articles among them, and the gold answer in the text of one of their paragraphs; the
answer also in the top 3, and that over the unasked questions (the comparator of answer present, unasked).
"""

from __future__ import annotations

import math
import statistics
import sys
import tempfile
import time
from collections.abc import Collection, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Literal

from app.settings import Settings
from docserver.corpus import BUNDLED_CORPUS
from docserver.embeddings import Embedder
from docserver.index import Index
from docserver.store import load_documents
from docserver.vectors import embed_chunks, file_vectors, library_passages
from eval import hotpot
from eval.answers import MARKER, body_of, cited_titles, is_declined
from graph.answer.evidence_policy import answer_ledger, prompt_passages
from graph.answer.prompts import Prompts
from graph.build import build_graph
from graph.clients.mcp_client import DocumentClient
from graph.context import Context
from graph.models import Turn
from graph.runner import start
from graph.text.pairs import linked_pair

Split = Literal["tune", "test"]
SPLITS: tuple[Split, ...] = ("tune", "test")
TYPES = ("bridge", "comparison")
POOL = "pool"  # the baseline's single collection
CUTS = (5, 10, 20)  # the baseline's top k
RANKING = max(CUTS)  # the documents of the baseline's ranking an outcome keeps
SEARCH_CHUNKS = 100  # chunks the baseline's search returns, enough for RANKING distinct documents
BOTH_GATHERED = 0.90  # targets: both gold articles gathered, in the prompt
BOTH_IN_PROMPT = 0.80
CITED_MARGIN = 0.15  # gold articles cited must beat the baseline's top-5 gold recall by this much
ANSWER_MARGIN = 0.10  # answer present (unasked) must beat the baseline's answer in the top 3 (unasked) by this
# passage vectors kept between runs, by vector space and text (a rerun's fresh pool embeds nothing it had before)
VECTOR_CACHE = Path(__file__).resolve().parents[1] / "build" / "cache" / "vectors.sqlite3"


@dataclass(frozen=True)
class Outcome:
    """One question through the pipeline and through the BM25 baseline."""

    question: dict[str, Any]
    split: Split
    gathered: frozenset[str]  # titles of the documents of the evidence research gathered
    prompt: frozenset[str]  # titles of the documents a model's answer prompt would read
    cited: frozenset[str]  # titles of the documents the answer cites
    prediction: str  # the answer body without sources list and markers
    declined: bool
    seconds: float
    ranking: tuple[str, ...]  # baseline: the titles of its best RANKING documents, best first
    answer_rank: int | None  # baseline: the rank (1-based) in `ranking` of the first paragraph holding the answer

    @property
    def gold(self) -> list[str]:
        return hotpot.gold_titles(self.question)

    @property
    def unasked(self) -> bool:
        """The answer is neither yes/no nor words of the question (`hotpot.unasked`)."""
        return hotpot.unasked(self.question["question"], self.question["answer"])

    @property
    def answer_present(self) -> bool:
        return hotpot.answer_found(self.question["answer"], self.prediction)

    def both(self, titles: Collection[str]) -> bool:
        """Both gold articles are among `titles`."""
        return all(t in titles for t in self.gold)

    def recall(self, titles: Collection[str]) -> float:
        """The share of the gold articles among `titles`."""
        return sum(t in titles for t in self.gold) / len(self.gold)

    def answer_in_top(self, k: int) -> bool:
        """The baseline's top k paragraphs hold the gold answer."""
        return self.answer_rank is not None and self.answer_rank <= k


@dataclass(frozen=True)
class Answered:
    """What the graph did with one question: the documents per stage (titles), the answer and its wall time."""

    gathered: frozenset[str]
    prompt: frozenset[str]
    cited: frozenset[str]
    answer: str
    seconds: float


def halves(questions: Sequence[dict[str, Any]], n: int | None = None) -> dict[Split, list[dict[str, Any]]]:
    """The tuning and test halves of the file (all of it, or `n` questions: each half its share, stratified by
    type)."""
    split = dict(zip(SPLITS, hotpot.split_halves(questions, lambda q: q["type"]), strict=True))
    if n is None:
        return split
    return {name: hotpot.select_questions(half, round(n * len(half) / len(questions))) for name, half in split.items()}


def embed_library(embedder: Embedder, index_path: Path, *, corpus: bool) -> None:
    """Every passage of the index file (and of the bundled corpus) given its vector, from `VECTOR_CACHE` where it
    has one; a passage left waiting fails the run (a comparison on partly embedded documents says nothing)."""
    outcome = embed_chunks(index_path, embedder, library_passages(index_path, BUNDLED_CORPUS if corpus else None),
                           cache=VECTOR_CACHE)
    if outcome.waiting:
        raise RuntimeError(f"{outcome.waiting} texts not embedded: {outcome.error}")


def baseline_index(index_path: Path, vector_key: str | None = None) -> Index:
    """An in-process BM25 index of every pooled paragraph in one collection (with ``vector_key``: and their vectors
    in the index file, for a search by meaning too)."""
    return Index((replace(d, collection=POOL) for d in load_documents(index_path)), vector_key=vector_key,
                 vectors=lambda digests: file_vectors(index_path, vector_key, digests) if vector_key else {})


def baseline(question: dict[str, Any], index: Index, texts: dict[str, str],
             embedder: Embedder | None = None) -> tuple[tuple[str, ...], int | None]:
    """One search of the question (BM25; with ``embedder`` hybrid): the titles of the RANKING documents it ranks
    best (by their best chunk), and the rank (1-based) of the first of them whose paragraph holds the gold answer
    (None: none of them)."""
    vector = embedder.query(question["question"]) if embedder is not None else None
    hits = index.search(question["question"], POOL, limit=SEARCH_CHUNKS, query_vector=vector)
    ranking = tuple(dict.fromkeys(h.document.title for h in hits))[:RANKING]
    ranks = (r for r, title in enumerate(ranking, 1) if hotpot.answer_found(question["answer"], texts[title]))
    return ranking, next(ranks, None)


async def ask(question: dict[str, Any], graph: Any, ctx: Context, known: set[str]) -> Answered:
    """The graph's answer to one question, with the documents of its evidence, of what a model's answer prompt
    would read (`answer_ledger` with `model=True` on the final state) and of its citations."""
    started = time.perf_counter()
    state, request = start([Turn(role="user", content=question["question"])], ctx)
    state = await graph.ainvoke(state, context=request)
    seconds = time.perf_counter() - started
    pair = linked_pair(state["question"], state["evidence"], ctx.catalog.glossary)
    ledger, sides = answer_ledger(state["facts"], state["evidence"], state["route"], ctx.config, model=True, pair=pair)
    cited = cited_titles(state["answer"], state["sources"], known)  # sources: what the answer's [n] point at
    return Answered(frozenset(e.title for e in state["evidence"]),
                    frozenset(e.title for e in prompt_passages(ledger, sides)), frozenset(cited), state["answer"],
                    seconds)


async def run(path: Path, n: int | None, splits: Sequence[Split], settings: Settings,
              embedder: Embedder | None = None) -> tuple[list[Outcome], int]:
    """Every chosen question of `splits` through the pipeline and the baseline; also the pool size (paragraphs).
    With `embedder`: the pool embedded first (vectors from `VECTOR_CACHE` when it has them), searched by meaning
    too, by the pipeline's server and by the baseline."""
    chosen = halves(hotpot.load_questions(path), n)
    pool = [q for name in SPLITS for q in chosen[name]]
    outcomes: list[Outcome] = []
    with tempfile.TemporaryDirectory(prefix="neo-nl-hotpot-") as tmp:
        pooled = hotpot.build_corpus(pool, Path(tmp))
        if embedder is not None:
            embed_library(embedder, pooled.index_path, corpus=False)
        key = embedder.settings.key if embedder is not None else None
        texts, index = hotpot.paragraphs(pool), baseline_index(pooled.index_path, key)
        known = set(texts)
        server = await pooled.serve(embedder.settings if embedder is not None else None)
        docs = DocumentClient(server.url, timeout_s=30, display_names=pooled.catalog.display_names(),
                              auth_token=server.token)
        ctx = Context(llm=None, docs=docs, catalog=pooled.catalog, prompts=Prompts(settings.prompts_dir),
                      config=settings.pipeline)
        graph = build_graph()
        try:
            for name in splits:
                for question in chosen[name]:
                    answered = await ask(question, graph, ctx, known)
                    outcomes.append(Outcome(question, name, answered.gathered, answered.prompt, answered.cited,
                                            MARKER.sub("", body_of(answered.answer)), is_declined(answered.answer),
                                            answered.seconds, *baseline(question, index, texts, embedder)))
        finally:
            await docs.aclose()
            await server.stop()
    return outcomes, len(texts)


def _mean(values: Sequence[float]) -> float:
    return statistics.fmean(values) if values else math.nan


def pipeline_metrics(outcomes: Sequence[Outcome]) -> dict[str, float]:
    """The pipeline's figures for a group of questions (see the module docstring); counts of questions, of
    yes/no answers and of unasked answers, the rest means per question."""
    unasked = [o for o in outcomes if o.unasked]
    return {
        "questions": len(outcomes),
        "yes_no": sum(hotpot.normalize_answer(o.question["answer"]) in ("yes", "no") for o in outcomes),
        "unasked": len(unasked),
        "both_gathered": _mean([o.both(o.gathered) for o in outcomes]),
        "one_gathered": _mean([o.recall(o.gathered) > 0 for o in outcomes]),
        "both_prompt": _mean([o.both(o.prompt) for o in outcomes]),
        "both_cited": _mean([o.both(o.cited) for o in outcomes]),
        "gold_cited": _mean([o.recall(o.cited) for o in outcomes]),
        "documents_prompt": _mean([len(o.prompt) for o in outcomes]),
        "documents_cited": _mean([len(o.cited) for o in outcomes]),
        "answer_present": _mean([o.answer_present for o in outcomes]),
        "answer_present_unasked": _mean([o.answer_present for o in unasked]),
        "em": _mean([hotpot.exact_match(o.prediction, o.question["answer"]) for o in outcomes]),
        "f1": _mean([hotpot.f1_score(o.prediction, o.question["answer"]) for o in outcomes]),
        "declined": _mean([o.declined for o in outcomes]),
        "seconds_mean": _mean([o.seconds for o in outcomes]),
    }


def baseline_metrics(outcomes: Sequence[Outcome]) -> dict[str, float]:
    """The BM25 baseline's figures for a group of questions (see the module docstring): per top k, gold recall,
    both gold articles and the answer among the top k; the answer in the top 3, over all and unasked."""
    metrics: dict[str, float] = {
        "questions": len(outcomes),
        "answer_top3": _mean([o.answer_in_top(3) for o in outcomes]),
        "answer_top3_unasked": _mean([o.answer_in_top(3) for o in outcomes if o.unasked]),
    }
    for k in CUTS:
        metrics[f"gold_top{k}"] = _mean([o.recall(o.ranking[:k]) for o in outcomes])
        metrics[f"both_top{k}"] = _mean([o.both(o.ranking[:k]) for o in outcomes])
        metrics[f"answer_top{k}"] = _mean([o.answer_in_top(k) for o in outcomes])
    return metrics


def _round(value: float, digits: int) -> float | None:
    """Rounded; None (JSON null) for nan, a measure over no question (a type missing from a small run)."""
    return None if math.isnan(value) else round(value, digits)


def _rounded(metrics: dict[str, float]) -> dict[str, float | None]:
    return {k: _round(v, 4) for k, v in metrics.items()}


def targets(pipeline: dict[str, float], base: dict[str, float]) -> dict[str, dict[str, float | bool | None]]:
    """The targets for one group (the report: the test half over all types), each as the measured value, its
    threshold and whether it is met (None when either is a measure over no question)."""
    checks = [  # label, measured, threshold
        (f"Both gold articles gathered ≥ {BOTH_GATHERED:.2f}", pipeline["both_gathered"], BOTH_GATHERED),
        (f"Both gold articles in the prompt ≥ {BOTH_IN_PROMPT:.2f}", pipeline["both_prompt"], BOTH_IN_PROMPT),
        (f"Gold articles cited ≥ BM25 top-5 gold recall + {CITED_MARGIN:.2f}", pipeline["gold_cited"],
         base["gold_top5"] + CITED_MARGIN),
        (f"Answer present, unasked ≥ BM25 answer in the top 3, unasked + {ANSWER_MARGIN:.2f}",
         pipeline["answer_present_unasked"], base["answer_top3_unasked"] + ANSWER_MARGIN),
    ]
    return {label: {"measured": _round(measured, 3), "target": _round(threshold, 3),
                    "met": None if math.isnan(measured) or math.isnan(threshold) else measured >= threshold}
            for label, measured, threshold in checks}


def summarize(outcomes: Sequence[Outcome]) -> dict[str, Any]:
    """Per split present, the pipeline's and the baseline's figures over all questions and per type, and the
    targets over all."""
    summary: dict[str, Any] = {}
    for name in SPLITS:
        group = [o for o in outcomes if o.split == name]
        if not group:
            continue
        by_type = {"all": group} | {t: [o for o in group if o.question["type"] == t] for t in TYPES}
        pipeline = {k: pipeline_metrics(v) for k, v in by_type.items()}
        base = {k: baseline_metrics(v) for k, v in by_type.items()}
        summary[name] = {"pipeline": {k: _rounded(m) for k, m in pipeline.items()},
                         "baseline": {k: _rounded(m) for k, m in base.items()},
                         "targets": targets(pipeline["all"], base["all"])}
    return summary


PIPELINE_ROWS = [  # label, key, format
    ("Questions", "questions", ".0f"),
    ("… with a yes/no answer", "yes_no", ".0f"),
    ("… unasked (answer neither yes/no nor in the question)", "unasked", ".0f"),
    ("Both gold articles gathered", "both_gathered", ".3f"),
    ("At least one gold article gathered", "one_gathered", ".3f"),
    ("Both gold articles in the prompt", "both_prompt", ".3f"),
    ("Both gold articles cited", "both_cited", ".3f"),
    ("Gold articles cited (share)", "gold_cited", ".3f"),
    ("Documents in the prompt (mean)", "documents_prompt", ".2f"),
    ("Documents cited (mean)", "documents_cited", ".2f"),
    ("Answer present", "answer_present", ".3f"),
    ("Answer present, unasked", "answer_present_unasked", ".3f"),
    ("Exact match (EM)", "em", ".3f"),
    ("Token F1", "f1", ".3f"),
    ("Declined", "declined", ".3f"),
    ("Seconds per question (mean)", "seconds_mean", ".2f"),
]
BASELINE_ROWS = [
    ("Questions", "questions", ".0f"),
    *[(f"Gold recall, top {k}", f"gold_top{k}", ".3f") for k in CUTS],
    *[(f"Both gold articles in the top {k}", f"both_top{k}", ".3f") for k in CUTS],
    ("Answer in the top 3 paragraphs", "answer_top3", ".3f"),
    ("Answer in the top 3 paragraphs, unasked", "answer_top3_unasked", ".3f"),
    *[(f"Answer in the top {k} paragraphs", f"answer_top{k}", ".3f") for k in CUTS],
]


def _cell(value: float | None, fmt: str) -> str:
    return "–" if value is None else format(value, fmt)  # None: no question in the group


def _mark(met: bool | None) -> str:
    return "n/a" if met is None else "✅" if met else "❌"


def report_lines(summary: dict[str, Any], path: Path) -> list[str]:
    """The HotpotQA section of docs/EVAL.md: the pipeline stage by stage and BM25 over the same pool, the test
    half per type with the tuning half beside it, and the targets on the test half."""
    columns = [("test", t) for t in ("all", *TYPES)] + [("tune", "all")]
    header = "| metric | " + " | ".join(f"{s}: {t}" for s, t in columns) + " |"
    rule = "|---" * (len(columns) + 1) + "|"
    questions = sum(summary[s]["pipeline"]["all"]["questions"] for s in SPLITS)

    def table(part: str, rows: list[tuple[str, str, str]]) -> list[str]:
        return [header, rule] + [f"| {label} | " + " | ".join(_cell(summary[s][part][t][key], fmt)
                                                              for s, t in columns) + " |" for label, key, fmt in rows]

    lines = [
        "## HotpotQA (public, offline mode)", "",
        f"{questions} questions of HotpotQA dev (distractor setting, `{path.name}`, CC BY-SA 4.0; both gold "
        f"paragraphs of every question are in its context) over a pooled corpus of all their "
        f"{summary['pool_paragraphs']} paragraphs in {hotpot.SHARDS} collections (split by a hash of the title), "
        f"asked through the graph with `llm=None` ({summary['seconds']:.0f} s in all). The questions are split in "
        "two halves, alternating within each type in file order: tune settings on the tuning half "
        "(`python -m eval.run --hotpot-only --split tune`); the test half is what this report is judged on.", "",
        "Gold articles: the two supporting articles of a question. Per question, then the mean over the column:",
        "",
        "- gathered: among the documents of the evidence research gathered;",
        "- in the prompt: among the documents of the passages a model's answer prompt would read (synthesis's "
        "ledger for a model, computed on the final state of this offline run);",
        "- cited: among the documents the answer's `[n]` point at; documents in the prompt / cited: how many "
        "distinct documents (a higher share cited is not to be bought by citing more);",
        "- answer present: the normalised gold answer occurs as whole words in the answer body; unasked: over "
        "the questions whose answer is neither yes/no nor words of the question (elsewhere any sentence naming "
        "it holds it);",
        "- EM, token F1: as in `hotpot_evaluate_v1.py`, the answer body (no sources list, no `[n]`) as the "
        "prediction: an offline answer is a set of extracted sentences, so EM is about 0 and F1 low by "
        "construction;",
        "- BM25 over the same pool: one search of the question over all pooled paragraphs as one collection, "
        "documents ranked by their best chunk; gold recall, top k: the share of the gold articles among the best "
        "k documents; answer in the top k: the gold answer occurs in one of their paragraphs.", "",
        "### Pipeline", "", *table("pipeline", PIPELINE_ROWS), "",
        "### BM25 over the same pool", "", *table("baseline", BASELINE_ROWS), "",
        "### Targets (test half, all types)", "",
        "| target | measured | threshold | met |", "|---|---|---|---|",
    ]
    lines += [f"| {label} | {_cell(t['measured'], '.3f')} | ≥ {_cell(t['target'], '.3f')} | {_mark(t['met'])} |"
              for label, t in summary["test"]["targets"].items()]
    return lines


async def evaluate(path: Path, n: int | None, splits: Sequence[Split], settings: Settings,
                   embedder: Embedder | None = None) -> dict[str, Any]:
    """Run and summarise (with `embedder`: searched by meaning too); the summary also says how many paragraphs were
    pooled and how long it took."""
    started = time.perf_counter()
    outcomes, pool = await run(path, n, splits, settings, embedder)
    seconds = time.perf_counter() - started
    print(f"HotpotQA: {len(outcomes)} questions, pool of {pool} paragraphs, {seconds:.0f} s", file=sys.stderr)
    return summarize(outcomes) | {"pool_paragraphs": pool, "seconds": round(seconds, 1)}
