"""`python -m eval.prefix_cache`: what an upstream's prompt cache saves on the pipeline's prompts.

The prompts put their fixed instructions first and the question and evidence last, so that a server that keeps
the computed prefix of earlier prompts (vLLM's automatic prefix caching, llama.cpp's prompt cache) reads only
the new part. This runs the same gold questions in LLM mode, one at a time, against the configured upstream and
adds one row (seconds per question, prompt tokens per question as the upstream counts them) to
build/reports/PREFIX-CACHE.md (git-ignored), or with --write to docs/PREFIX-CACHE.md. Run it once against a
server without a prompt cache and once with one (for the local model: `scripts/local-llm.sh serve` and the same
with `LOCAL_LLM_CACHE=1`), labelled with `--label`;
llama.cpp's log line "prefix-match hit, remaining N prompt tokens to eval" shows what each call really read.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from pathlib import Path

from app.settings import ROOT, Settings
from docserver.embedded import serve_in_background
from eval.llm import gold_questions, run_set
from graph.collections import load_catalog

BUILD_REPORT = ROOT / "build" / "reports" / "PREFIX-CACHE.md"  # git-ignored: where a row goes unless asked
DOCS_REPORT = ROOT / "docs" / "PREFIX-CACHE.md"  # the tracked table: only with --write


async def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m eval.prefix_cache", description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=8, help="answerable gold questions (default 8)")
    parser.add_argument("--label", required=True, help="what the upstream was, e.g. \"llama.cpp, no RAM cache\"")
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--write", action="store_true",
                       help=f"add the row to the tracked table, {DOCS_REPORT.relative_to(ROOT)}")
    where.add_argument("--out", type=Path, default=BUILD_REPORT,
                       help=f"the table to add the row to (default: {BUILD_REPORT.relative_to(ROOT)}, git-ignored)")
    args = parser.parse_args(argv)
    if args.write:
        args.out = DOCS_REPORT
    settings = Settings()
    if settings.offline:
        raise SystemExit("set LLM_BASE_URL (and LLM_MODEL) to the upstream to measure")
    catalog = load_catalog(settings.collections_file)
    questions = [q for q in gold_questions(40) if q.answerable][: args.n]
    with tempfile.TemporaryDirectory(prefix="neo-nl-prefix-") as tmp:
        server = await serve_in_background(index_path=Path(tmp) / "none.sqlite3")  # the bundled corpus only
        try:
            runs = await run_set("prefix", questions, catalog, server, settings, ["llm"])
        finally:
            await server.stop()
    seconds, tokens = [r.seconds for r in runs], [r.prompt_tokens for r in runs]
    row = (f"| {args.label} | {len(seconds)} | {statistics.median(seconds):.1f} | {sum(seconds):.1f} | "
           f"{statistics.fmean(tokens):.0f} | {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} |")
    if not args.out.is_file():
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text("# Prefix caching of the pipeline's prompts\n\n" + (__doc__ or "").strip() + "\n\n"
                            "| upstream | questions | median s / question | total s | prompt tokens / question | when |\n"
                            "|---|---|---|---|---|---|\n", "utf-8")
    with args.out.open("a", encoding="utf-8") as out:
        out.write(row + "\n")
    print(row)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    asyncio.run(main())
