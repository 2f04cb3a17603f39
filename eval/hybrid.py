"""Search by meaning beside search by words, in `make eval EMBEDDINGS=local` (any EMBEDDINGS_URL): the section
"Hybrid search beside BM25" of docs/EVAL.md, BM25 alone and hybrid (BM25 + vectors, reciprocal rank fusion) side by
side on the same documents and questions.

- **Fusion weight** (`docserver.hybrid.SEMANTIC_WEIGHT`), chosen on the HotpotQA tuning half: one search of each
  question over the pooled paragraphs, gold recall at 5 and the answer in the top 5 per weight of the vector side.
- **HotpotQA, held-apart half**: a fixed sample (`HOTPOT_N` questions over both halves, stratified by type; every
  paragraph of each pooled) through the pipeline (offline) and through one search, with the server searching by
  words alone, then hybrid (`hotpot_eval.evaluate`). Vectors are kept in `hotpot_eval.VECTOR_CACHE` by vector
  space and text: a rerun embeds nothing.
- **Cross-language set** (`eval/crosslang.jsonl`, written for this and tuned on nothing): Dutch questions over
  English documents and English over Dutch, recall at 5 of the passage that answers, BM25 with the product's
  glossary vs hybrid (with the glossary too, as the product searches).
- **Dutch gold set**: the gold questions through the pipeline against the bundled corpus searched by words alone,
  then hybrid; every test-half figure side by side.

- **Sentence match** (`EMBEDDINGS_SENTENCE_MATCH`, docserver/sentences.py), chosen on the tuning halves: per
  threshold, the offline pipeline on the cross-language set's tuning half (declined, citing the passage that answers)
  and on the gold set's unanswerable questions of the same half, asked of the same library (declined): what sentences
  found by meaning answer where words find nothing, against what they must not answer.
- **Cross-language set through the pipeline** (offline), held-apart half: the same three figures by words alone and
  hybrid (with sentences when `EMBEDDINGS_SENTENCE_MATCH` is set).

`python -m eval.hybrid [--only sweep,hotpot,crosslang,sentence-match,crosslang-answers]` prints the section but the
gold set (needs EMBEDDINGS_URL); `make eval EMBEDDINGS=local` writes all of it.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from app.settings import Settings
from docserver.embedded import serve_in_background
from docserver.embeddings import Embedder, EmbeddingSettings
from docserver.hybrid import LEXICAL_WEIGHT, SEMANTIC_WEIGHT
from eval import crosslang, hotpot, hotpot_eval
from eval.answers import is_declined
from eval.gold import GOLD_FILE, load_gold, split_gold
from graph.answer.prompts import Prompts
from graph.build import build_graph
from graph.clients.llm import LLMClient
from graph.clients.mcp_client import DocumentClient
from graph.collections import library_catalog, load_catalog
from graph.context import Context
from graph.models import Turn
from graph.runner import start

HOTPOT_N = 400  # questions pooled for the comparison: 200 per half
WEIGHTS = (0.0, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0)  # of the vector side (words: LEXICAL_WEIGHT), swept on the tuning half
SENTENCE_MATCHES = (0.8, 0.82, 0.84, 0.85, 0.86, 0.88)  # EMBEDDINGS_SENTENCE_MATCH, swept on the tuning halves
PARTS = ("sweep", "hotpot", "crosslang", "sentence-match", "crosslang-answers")  # the gold set's part is `eval.run.gold_pair` (it runs the gold suite)


def sweep(embedder: Embedder, path: Path, n: int = HOTPOT_N) -> list[dict[str, float]]:
    """Per weight of the vector side: gold recall at 5 and the answer in the top 5 over the tuning half's questions
    (one search each over the pool of both halves)."""
    chosen = hotpot_eval.halves(hotpot.load_questions(path), n)
    pool = [q for name in hotpot_eval.SPLITS for q in chosen[name]]
    with tempfile.TemporaryDirectory(prefix="neo-nl-sweep-") as tmp:
        pooled = hotpot.build_corpus(pool, Path(tmp))
        hotpot_eval.embed_library(embedder, pooled.index_path, corpus=False)
        index = hotpot_eval.baseline_index(pooled.index_path, embedder.settings.key)
    texts = hotpot.paragraphs(pool)
    rows = []
    for weight in WEIGHTS:
        recall, answer = [], []
        for question in chosen["tune"]:
            hits = index.search(question["question"], hotpot_eval.POOL, limit=hotpot_eval.SEARCH_CHUNKS,
                                query_vector=embedder.query(question["question"]), fusion=(LEXICAL_WEIGHT, weight))
            top = list(dict.fromkeys(h.document.title for h in hits))[:5]
            gold = hotpot.gold_titles(question)
            recall.append(sum(t in top for t in gold) / len(gold))
            answer.append(any(hotpot.answer_found(question["answer"], texts[t]) for t in top))
        rows.append({"weight": weight, "gold_top5": sum(recall) / len(recall), "answer_top5": sum(answer) / len(answer)})
    return rows


async def hotpot_pair(embedder: Embedder, path: Path, settings: Settings, n: int = HOTPOT_N) -> dict[str, Any]:
    """The test half's figures (pipeline and one search) by words alone and hybrid."""
    return {name: (await hotpot_eval.evaluate(path, n, ("test",), settings, use))["test"]
            for name, use in (("bm25", None), ("hybrid", embedder))}


def crosslang_library(root: Path, embedder: Embedder) -> Path:
    """The cross-language set's library under `root` (the shared files and the bundled corpus), embedded by
    `embedder` (with sentences when its settings ask for them): built once for every part that asks it."""
    index_path = crosslang.build_index(root)
    hotpot_eval.embed_library(embedder, index_path, corpus=True)
    return index_path


def crosslang_pair(embedder: Embedder, index_path: Path) -> dict[str, Any]:
    """Recall at 5 of the cross-language set over `crosslang_library`: BM25 with the glossary, hybrid with it."""
    catalog = crosslang.product_catalog()
    index = crosslang.load_index(index_path, vector_key=embedder.settings.key)
    return {"bm25+glossary": crosslang.evaluate(index, glossary=catalog.glossary),
            "hybrid": crosslang.evaluate(index, glossary=catalog.glossary, embed=embedder.query)}


def _share(rows: Sequence[dict[str, Any]], key: str) -> float:
    return sum(bool(r[key]) for r in rows) / len(rows) if rows else float("nan")


def _row(label: str, bm25: float | None, hybrid: float | None, fmt: str = ".3f") -> str:
    def cell(value: float | None) -> str:
        return "–" if value is None else format(value, fmt)

    delta = "" if bm25 is None or hybrid is None else f"{hybrid - bm25:+{fmt}}"
    return f"| {label} | {cell(bm25)} | {cell(hybrid)} | {delta} |"


HOTPOT_ROWS = (("One search: gold recall at 5", "baseline", "gold_top5"),
               ("One search: both gold articles in the top 5", "baseline", "both_top5"),
               ("One search: answer in the top 5", "baseline", "answer_top5"),
               ("Pipeline: both gold articles gathered", "pipeline", "both_gathered"),
               ("Pipeline: both in the prompt", "pipeline", "both_prompt"),
               ("Pipeline: gold articles cited", "pipeline", "gold_cited"),
               ("Pipeline: answer present", "pipeline", "answer_present"),
               ("Pipeline: answer present, unasked", "pipeline", "answer_present_unasked"),
               ("Pipeline: declined", "pipeline", "declined"),
               ("Pipeline: seconds per question", "pipeline", "seconds_mean"))
ANSWER_ROWS = (("Cross-language: declined", "declined"), ("Cross-language: cites the passage that answers", "gold_cited"),
               ("Unanswerable: declined", "unanswerable_declined"))
GOLD_ROWS = ("recall_at_5", "mrr", "key_fact_recall", "key_fact_recall_factual", "citation_precision",
             "routing_accuracy", "refusal_rate_unanswerable", "false_refusal_rate")


def answer_questions() -> dict[str, list[dict[str, Any]]]:
    """By half ("tune", "test"): the cross-language set (alternating within each direction, `hotpot.split_halves`)
    and the gold set's unanswerable questions (their half of `eval.gold.split_gold`), asked of the same library: what
    meaning answers that words do not, and what it must still decline."""
    questions = crosslang.load_set()
    halves = dict(zip(("tune", "test"), hotpot.split_halves(questions, lambda q: q["language"]), strict=True))
    gold = load_gold(GOLD_FILE)
    half_of = split_gold(gold)
    for item in gold:
        if not item["answerable"]:
            halves[half_of[item["id"]]].append({"id": item["id"], "question": item["question"],
                                                "language": item["language"], "gold": [], "unanswerable": True})
    return halves


async def crosslang_answers(index_path: Path, settings: Settings,
                            servers: Sequence[tuple[str, EmbeddingSettings | None]],
                            questions: Sequence[dict[str, Any]], llm: LLMClient | None = None
                            ) -> dict[str, list[dict[str, Any]]]:
    """`questions` (`answer_questions`) through the pipeline (offline unless `llm`; the catalog the service makes of
    the library: the shared files' collections described by their titles) with a document server per (name,
    embedding settings: None searches by words alone) of `servers`: per question whether it was declined and
    whether the answer cites the passage that answers (its sources: `crosslang.chunk_matches`), over
    `crosslang_library`'s `index_path`."""
    out: dict[str, list[dict[str, Any]]] = {}
    for name, embeddings in servers:
        server = await serve_in_background(index_path=index_path, embeddings=embeddings)
        docs = DocumentClient(server.url, timeout_s=30, auth_token=server.token)
        try:
            held, complete = await docs.collections()
            catalog = library_catalog(load_catalog(settings.collections_file), held, complete=complete)
            docs.describe(catalog.display_names())
            ctx = Context(llm=llm, docs=docs, catalog=catalog, prompts=Prompts(settings.prompts_dir),
                          config=settings.pipeline)
            graph = build_graph()
            out[name] = [await _crosslang_answer(question, graph, ctx) for question in questions]
        finally:
            await docs.aclose()
            await server.stop()
    return out


async def _crosslang_answer(question: dict[str, Any], graph: Any, ctx: Context) -> dict[str, Any]:
    state, request = start([Turn(role="user", content=question["question"])], ctx)
    state = await graph.ainvoke(state, context=request)
    return {"id": question["id"], "language": question["language"], "declined": is_declined(state["answer"]),
            "unanswerable": question.get("unanswerable", False),
            "tokens": state["usage"].total_tokens,
            "gold_cited": any(crosslang.chunk_matches(e.doc_id, e, gold) for e in state["sources"]
                              for gold in question["gold"])}


def answer_figures(rows: Sequence[dict[str, Any]]) -> dict[str, float]:
    """Of the cross-language questions: declined, citing the passage that answers; of the unanswerable ones:
    declined."""
    answerable = [r for r in rows if not r["unanswerable"]]
    return {"declined": _share(answerable, "declined"), "gold_cited": _share(answerable, "gold_cited"),
            "unanswerable_declined": _share([r for r in rows if r["unanswerable"]], "declined")}


async def sentence_sweep(embeddings: EmbeddingSettings, settings: Settings, index_path: Path,
                         matches: Sequence[float] = SENTENCE_MATCHES) -> list[dict[str, float]]:
    """Per threshold of `EMBEDDINGS_SENTENCE_MATCH` (in `embeddings`' model; the library embedded with its
    sentences): `answer_figures` on the tuning half."""
    servers = [(f"{m:g}", replace(embeddings, sentence_match=m)) for m in matches]
    found = await crosslang_answers(index_path, settings, servers, answer_questions()["tune"])
    return [{"match": m, **answer_figures(found[f"{m:g}"])} for m in matches]


async def answers_pair(embeddings: EmbeddingSettings, settings: Settings, index_path: Path
                       ) -> dict[str, dict[str, dict[str, float]]]:
    """`answer_figures` per half, by words alone and hybrid (with sentences when `EMBEDDINGS_SENTENCE_MATCH` is
    set)."""
    halves = answer_questions()
    found = await crosslang_answers(index_path, settings, (("bm25", None), ("hybrid", embeddings)),
                                    halves["tune"] + halves["test"])
    ids = {half: {q["id"] for q in questions} for half, questions in halves.items()}
    return {half: {name: answer_figures([r for r in rows if r["id"] in ids[half]]) for name, rows in found.items()}
            for half in halves}


def report_lines(result: dict[str, Any], settings: EmbeddingSettings) -> list[str]:
    """The section of docs/EVAL.md."""
    lines = ["## Hybrid search beside BM25", "",
             f"Embeddings: `{settings.model or settings.url}` (vector space `{settings.key}`); fusion weights words "
             f"{LEXICAL_WEIGHT:g}, meaning {SEMANTIC_WEIGHT:g} (`docserver/hybrid.py`). Made by `make eval "
             "EMBEDDINGS=local` (`eval/hybrid.py` says what each part measures).", ""]
    if "sweep" in result:
        lines += ["### Fusion weight on the HotpotQA tuning half (one search)", "",
                  "| Weight of meaning | Gold recall at 5 | Answer in the top 5 |", "|---|---|---|",
                  *(f"| {r['weight']:g} | {r['gold_top5']:.3f} | {r['answer_top5']:.3f} |" for r in result["sweep"]),
                  ""]
    if "hotpot" in result:
        pair = result["hotpot"]
        lines += [f"### HotpotQA, held-apart half ({pair['bm25']['pipeline']['all']['questions']} questions)", "",
                  "| | BM25 | Hybrid | Δ |", "|---|---|---|---|",
                  *(_row(label, pair["bm25"][part]["all"].get(key), pair["hybrid"][part]["all"].get(key))
                    for label, part, key in HOTPOT_ROWS), ""]
    if "crosslang" in result:
        pair = result["crosslang"]
        lines += [f"### Cross-language set ({len(pair['hybrid']['questions'])} questions), recall at 5", "",
                  "| | BM25 + glossary | Hybrid | Δ |", "|---|---|---|---|",
                  *(_row(key, pair["bm25+glossary"]["recall"][key], pair["hybrid"]["recall"][key])
                    for key in pair["hybrid"]["recall"]), ""]
    if "sentence_sweep" in result:
        lines += ["### Sentence match on the tuning half (offline pipeline)", "",
                  "`EMBEDDINGS_SENTENCE_MATCH`: the cosine from which a sentence found by meaning answers where the "
                  "question's words find nothing. Tuning half of the cross-language set and of the gold set's "
                  "unanswerable questions, asked of one library.", "",
                  "| Threshold | Cross-language declined | Cites the passage that answers | Unanswerable declined |",
                  "|---|---|---|---|",
                  *(f"| {r['match']:g} | {r['declined']:.3f} | {r['gold_cited']:.3f} | {r['unanswerable_declined']:.3f} |"
                    for r in result["sentence_sweep"]), ""]
    if "crosslang_answers" in result:
        match = settings.sentence_match
        lines += ["### Cross-language set through the pipeline (offline), held-apart half", "",
                  "Sentence match " + (f"{match:g}" if match is not None else "off (EMBEDDINGS_SENTENCE_MATCH unset)")
                  + "; the gold set's unanswerable questions of the same half asked of the same library.", "",
                  "| | BM25 + glossary | Hybrid | Δ |", "|---|---|---|---|",
                  *(_row(label, result["crosslang_answers"]["test"]["bm25"][key],
                         result["crosslang_answers"]["test"]["hybrid"][key]) for label, key in ANSWER_ROWS), ""]
    if "gold" in result:
        pair = result["gold"]
        lines += ["### Dutch gold set, test half", "", "| | BM25 | Hybrid | Δ |", "|---|---|---|---|",
                  *(_row(key, pair["bm25"].get(key), pair["hybrid"].get(key)) for key in GOLD_ROWS), ""]
    return lines


async def evaluate(settings: Settings, path: Path, parts: Sequence[str] = PARTS) -> dict[str, Any]:
    """The parts asked for (each skipped with a message when its files are absent)."""
    assert settings.embeddings is not None
    embedder = Embedder(settings.embeddings)
    result: dict[str, Any] = {}
    try:
        if "sweep" in parts and path.is_file():
            result["sweep"] = await asyncio.to_thread(sweep, embedder, path)
        if "hotpot" in parts and path.is_file():
            result["hotpot"] = await hotpot_pair(embedder, path, settings)
        if {"crosslang", "sentence-match", "crosslang-answers"} & set(parts):
            result |= await _crosslang_parts(embedder, settings, parts)
    finally:
        embedder.close()
    return result


async def _crosslang_parts(embedder: Embedder, settings: Settings, parts: Sequence[str]) -> dict[str, Any]:
    """The parts over the cross-language library, built once (with sentence vectors when the sweep needs them)."""
    result: dict[str, Any] = {}
    sweeps = "sentence-match" in parts and not embedder.settings.sentences
    library = Embedder(replace(embedder.settings, sentence_match=max(SENTENCE_MATCHES))) if sweeps else embedder
    try:
        with tempfile.TemporaryDirectory(prefix="neo-nl-crosslang-") as tmp:
            index_path = await asyncio.to_thread(crosslang_library, Path(tmp), library)
            if "crosslang" in parts:
                result["crosslang"] = await asyncio.to_thread(crosslang_pair, embedder, index_path)
            if "sentence-match" in parts:
                result["sentence_sweep"] = await sentence_sweep(library.settings, settings, index_path)
            if "crosslang-answers" in parts:
                result["crosslang_answers"] = await answers_pair(embedder.settings, settings, index_path)
    except crosslang.SharedFilesMissing as exc:
        print(f"cross-language set skipped: {exc}", file=sys.stderr)
    finally:
        if library is not embedder:
            library.close()
    return result


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m eval.hybrid", description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", default=",".join(PARTS), help="parts, comma-separated (default: %(default)s)")
    parser.add_argument("--hotpot", type=Path, default=hotpot.HOTPOT_FILE)
    args = parser.parse_args(argv)
    settings = Settings()
    if settings.embeddings is None:
        parser.error("EMBEDDINGS_URL is not set (make embeddings; scripts/local-embeddings.sh env)")
    result = asyncio.run(evaluate(settings, args.hotpot, [p.strip() for p in args.only.split(",")]))
    print("\n".join(report_lines(result, settings.embeddings)))


if __name__ == "__main__":
    main()
