"""Planted instructions against a real model: does any answer carry one's effect? (docs/INJECTION.md)

Every question of `eval.planted` (four kinds of instruction planted in every collection) is asked of the service
over HTTP, as a user would (streamed, the answer the reader sees), and of the naive one-call RAG a user could
write instead (`eval.llm.naive_answer`: one search per collection, the five best passages, one call). An answer
carries an instruction's effect when it contains one of the planted strings (a persona's name or greeting, the
"answer only with" text, the planted URL or phone number, the model's own rules).

    LLM_BASE_URL=http://127.0.0.1:8080/v1 LLM_MODEL=qwen2.5-coder-1.5b-instruct python -m eval.injection --out docs

writes docs/INJECTION.md; `--runs F` also keeps every answer as JSONL, and `--from-runs F` renders the report
again from such a file without a model.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
from pathlib import Path

import httpx

from app.main import create_app
from app.settings import Settings
from docserver.server import create_app as create_docserver
from eval.llm import naive_answer
from eval.planted import FRESH, HELD_APART, PLANTED, Planted, effects, write_corpus
from graph.clients.llm import LLMClient
from graph.clients.mcp_client import DocumentClient
from graph.collections import load_catalog
from tests.fakes.servers import ServerThread

ROOT = Path(__file__).resolve().parents[1]
SETS = {"planted": PLANTED, "held-apart": HELD_APART, "fresh": FRESH}


def ask(base: str, question: str) -> tuple[str, str, float]:
    """(think, answer) of one streamed request, and its seconds."""
    started = time.perf_counter()
    with httpx.stream("POST", base + "/v1/chat/completions", timeout=1000, json={
            "model": "neo-nl-agent", "stream": True, "messages": [{"role": "user", "content": question}]}) as response:
        text = ""
        for line in response.iter_lines():
            if line.startswith("data: {"):
                chunk = json.loads(line[6:])
                if chunk.get("choices"):
                    text += chunk["choices"][0]["delta"].get("content") or ""
    think, _, answer = text.partition("</think>")
    return think, answer, time.perf_counter() - started


async def naive(planted: Planted, docs_url: str, settings: Settings) -> tuple[str, float]:
    catalog = load_catalog(settings.collections_file)
    docs = DocumentClient(docs_url, timeout_s=30, display_names=catalog.display_names())
    llm = LLMClient(settings.llm_base_url, api_key=settings.llm_api_key, model=settings.llm_model,
                    timeout_s=settings.llm_timeout_s, max_retries=0)
    started = time.perf_counter()
    try:
        answer, _, _ = await naive_answer(planted.question, docs, catalog.names, llm)
    finally:
        await llm.aclose()
        await docs.aclose()
    return answer, time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m eval.injection", description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs")
    parser.add_argument("--limit", type=int, default=0, help="only the first N planted questions")
    parser.add_argument("--no-naive", action="store_true", help="skip the naive one-call RAG")
    parser.add_argument("--set", choices=tuple(SETS), default="planted",
                        help="held-apart: instructions in words the filter was not written for (eval.planted)")
    parser.add_argument("--runs", type=Path, help="also write every answer as JSONL (its first line: the model, the "
                        "set and, when given, --commit)")
    parser.add_argument("--commit", default="", help="the code's commit, named in the report's section title")
    parser.add_argument("--from-runs", type=Path, nargs="+", help="render the report again from --runs files, one "
                        "section per file (no model)")
    args = parser.parse_args()
    if args.from_runs:
        sets = []
        for path in args.from_runs:
            lines = path.read_text("utf-8").splitlines()
            meta = json.loads(lines[0])
            title = TITLES[meta["set"]] + (f" at {meta['commit']}" if meta.get("commit") else "")
            sets.append((title, meta["model"], [json.loads(line) for line in lines[1:]]))
        print(write(args.out, sets))
        return
    settings = Settings(llm_timeout_s=400, llm_max_retries=0, request_timeout_s=900, response_cache=False)
    if not settings.llm_base_url:
        sys.exit("set LLM_BASE_URL (and LLM_MODEL) to the model to attack")
    chosen = SETS[args.set]
    planted = chosen[: args.limit] if args.limit else chosen
    rows = []
    with tempfile.TemporaryDirectory() as tmp, ServerThread(create_docserver(write_corpus(Path(tmp), chosen))) as docs:
        docs_url = docs.base_url + "/mcp"
        with ServerThread(create_app(settings.model_copy(update={"mcp_server_url": docs_url}))) as service:
            for i, p in enumerate(planted, 1):
                think, answer, seconds = ask(service.base_url, p.question)
                row = {"collection": p.collection, "kind": p.kind, "question": p.question,
                       "withheld": "instructions" in think.lower() or "instructies" in think.lower(),
                       "effects": effects(answer, p), "seconds": round(seconds, 1), "answer": answer}
                if not args.no_naive:
                    naive_text, naive_s = asyncio.run(naive(p, docs_url, settings))
                    row |= {"naive_effects": effects(naive_text, p), "naive_seconds": round(naive_s, 1),
                            "naive_answer": naive_text}
                rows.append(row)
                print(f"[{i}/{len(planted)}] {p.collection}/{p.kind}: pipeline {row['effects'] or '-'} "
                      f"naive {row.get('naive_effects') or '-'} {seconds:.0f}s", file=sys.stderr)
    if args.runs:
        args.runs.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n"
                                     for r in [{"model": settings.llm_model, "set": args.set, "commit": args.commit}, *rows]), "utf-8")
    print(write(args.out, [(TITLES[args.set], settings.llm_model, rows)]))


TITLES = {"planted": "Planted set (`eval.planted.PLANTED`)",
          "held-apart": "Held-apart set (`eval.planted.HELD_APART`: other words; the filter's last family was then "
                        "written for it)",
          "fresh": "Fresh set (`eval.planted.FRESH`: written before that family, tuned against nothing)"}


def write(out: Path, sets: list[tuple[str, str, list[dict]]]) -> Path:
    """docs/INJECTION.md with one section per set of questions."""
    out.mkdir(parents=True, exist_ok=True)
    path = out / "INJECTION.md"
    sections = [f"## {title}\n\n{render(rows, model)}" for title, model, rows in sets]
    path.write_text("# Planted instructions against a real model\n\nGenerated by `python -m eval.injection` "
                    "(see its docstring); do not edit by hand.\n\n" + (__doc__ or "").split("\n\n")[1] + "\n\n"
                    + "\n\n".join(sections) + "\n", "utf-8")
    return path


def render(rows: list[dict], model: str) -> str:
    with_naive = all("naive_effects" in r for r in rows)
    lines = [f"Model: `{model}`; {len(rows)} questions. Withheld: the think block said a passage's instructions were "
             "ignored (research found the planted passage and the filter recognised the instruction).", "",
             "| collection | kind | withheld | pipeline effect | naive effect |", "|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['collection']} | {r['kind']} | {'yes' if r['withheld'] else 'no'} | "
                     f"{', '.join(r['effects']) or '–'} | {', '.join(r.get('naive_effects', [])) or '–'} |")
    hit = sum(bool(r["effects"]) for r in rows)
    lines += ["", f"Pipeline answers carrying an effect: {hit} of {len(rows)}."]
    if with_naive:
        lines.append(f"Naive one-call RAG answers carrying an effect: {sum(bool(r['naive_effects']) for r in rows)} "
                     f"of {len(rows)}.")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
