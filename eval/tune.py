"""Sweep one tuned number of offline selection or research on the tuning halves, and write its table to docs/tuning/.

    .venv/bin/python -m eval.tune keep_ratio                 # the field's own grid (graph/tuning.py)
    .venv/bin/python -m eval.tune pair_coverage --values 0.5,0.6,0.7 --hotpot-n 100
    .venv/bin/python -m eval.tune --list                     # every tuned number, its default and what it trades

Per value, inside `graph.tuning.tuned(NAME=value)`: the Dutch gold set's tuning half (`eval.gold.split_gold`) through
the offline pipeline against the bundled corpus (key facts, citation precision, unanswerable declined, answerable
declined), and HotpotQA's tuning half (`hotpot_eval`, `--hotpot-n` questions over both halves, so the tuning half
has half of them; skipped without ../shared) through the pipeline over the pooled paragraphs (both gold articles
gathered, gold cited, answer present, declined, and what that costs: documents cited per answer, seconds per
question). The table marks the value in force. Choose on these figures; the
test halves are `make eval`'s. With your own questions: `--gold FILE` (the gold set's format) and `--hotpot FILE`.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from pathlib import Path
from typing import Any

from app.settings import ROOT, Settings
from eval import hotpot, hotpot_eval
from eval.gold import GOLD_FILE, load_gold, split_gold
from eval.run import _documents_by_collection, run_suite, summarize
from graph.tuning import Tuning, describe, tuned

OUT = ROOT / "docs" / "tuning"
HOTPOT_N = 200  # questions over both halves: the tuning half gets 100 (a sweep of four values takes minutes)
GOLD_ROWS = (("key facts", "key_fact_recall"), ("citation precision", "citation_precision"),
             ("unanswerable declined", "refusal_rate_unanswerable"), ("answerable declined", "false_refusal_rate"))
HOTPOT_ROWS = (("both gold gathered", "both_gathered"), ("gold cited", "gold_cited"),
               ("answer present", "answer_present"), ("declined", "declined"),
               ("documents cited", "documents_cited"), ("seconds per question", "seconds_mean"))  # what it costs


def grid(name: str) -> tuple[float, ...]:
    """The values the field `name` is swept over; a KeyError naming the fields when there is none of that name."""
    found = {field: values for field, _, _, values in describe()}
    if name not in found:
        raise KeyError(f"no tuned number {name!r}; one of: {', '.join(found)}")
    return found[name]


async def measure(name: str, value: float, gold: list[dict[str, Any]], hotpot_file: Path | None, hotpot_n: int,
                  settings: Settings) -> dict[str, float]:
    """The tuning halves' figures with `name` = `value` in force."""
    with tuned(**{name: value}):
        half = split_gold(gold)
        results = await run_suite([g for g in gold if half[g["id"]] == "tune"], settings, None)
        figures = {key: summarize(results, _documents_by_collection(None))[key] for _, key in GOLD_ROWS}
        if hotpot_file is not None:
            pipeline = (await hotpot_eval.evaluate(hotpot_file, hotpot_n, ("tune",), settings))["tune"]["pipeline"]
            figures |= {f"hotpot_{key}": pipeline["all"][key] for _, key in HOTPOT_ROWS}
    return figures


def report(name: str, rows: list[tuple[float, dict[str, float]]], questions: str) -> str:
    """docs/tuning/NAME.md."""
    default, trades = next((d, t) for field, d, t, _ in describe() if field == name)
    hotpot_cols = [label for label, key in HOTPOT_ROWS if f"hotpot_{key}" in rows[0][1]]
    head = ["value", *(f"gold: {label}" for label, _ in GOLD_ROWS), *(f"HotpotQA: {label}" for label in hotpot_cols)]
    lines = [f"# Tuning `{name}`", "", f"Made by `.venv/bin/python -m eval.tune {name}` on "
             f"{time.strftime('%Y-%m-%d', time.gmtime())}; do not edit by hand. What it trades: {trades}. In force: "
             f"{default:g} (`graph/tuning.py`). Offline pipeline, tuning halves only ({questions}); the test halves "
             "are reported by `make eval` (docs/EVAL.md).", "",
             "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for value, figures in rows:
        cells = [f"**{value:g}**" if value == default else f"{value:g}",
                 *(f"{figures[key]:.3f}" for _, key in GOLD_ROWS),
                 *(f"{figures[f'hotpot_{key}']:.3f}" for label, key in HOTPOT_ROWS if label in hotpot_cols)]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m eval.tune", description=__doc__.split("\n\n")[0])
    parser.add_argument("name", nargs="?", help="a field of graph.tuning.Tuning")
    parser.add_argument("--values", help="comma-separated values (default: the field's grid)")
    parser.add_argument("--list", action="store_true", help="every tuned number, its default and what it trades")
    parser.add_argument("--gold", type=Path, default=GOLD_FILE, help="gold questions (default: %(default)s)")
    parser.add_argument("--hotpot", type=Path, default=hotpot.HOTPOT_FILE, help="HotpotQA file (skipped if absent)")
    parser.add_argument("--hotpot-n", type=int, default=HOTPOT_N, help="HotpotQA questions over both halves")
    parser.add_argument("--out", type=Path, default=OUT, help="folder of the tables (default: docs/tuning)")
    return parser


async def main(argv: list[str] | None = None) -> Path | None:
    args = _parser().parse_args(argv)
    if args.list or not args.name:
        for field, default, trades, values in describe():
            print(f"{field} = {default:g}  (sweeps {', '.join(f'{v:g}' for v in values)})\n    {trades}")
        return None
    try:
        values = [type(getattr(Tuning(), args.name))(float(v)) for v in args.values.split(",")] if args.values \
            else list(grid(args.name))
    except (KeyError, ValueError) as exc:
        _parser().error(str(exc))
    settings = Settings(llm_base_url="")  # offline: the selection rules alone decide
    gold = load_gold(args.gold)
    hotpot_file = args.hotpot if args.hotpot.is_file() else None
    rows = [(value, await measure(args.name, value, gold, hotpot_file, args.hotpot_n, settings)) for value in values]
    questions = f"{sum(1 for h in split_gold(gold).values() if h == 'tune')} gold questions" + (
        f", {args.hotpot_n // 2} HotpotQA questions" if hotpot_file else ", HotpotQA absent")
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / f"{args.name}.md"
    path.write_text(report(args.name, rows, questions), "utf-8")
    print(path, file=sys.stderr)
    return path


if __name__ == "__main__":
    asyncio.run(main())
