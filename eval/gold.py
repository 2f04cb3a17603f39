"""The Dutch gold set (`eval/gold.jsonl`, and the law questions of `eval/gold_laws.jsonl`): reading it, and its two
halves, one to tune on and one to report (`split_gold`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from eval import hotpot

EVAL_DIR = Path(__file__).resolve().parent
GOLD_FILE = EVAL_DIR / "gold.jsonl"


def load_gold(*paths: Path) -> list[dict[str, Any]]:
    """The questions of the files that exist, in file order."""
    items = []
    for path in paths:
        if path.exists():
            items += [json.loads(line) for line in path.read_text("utf-8").splitlines() if line.strip()]
    return items


def split_gold(items: list[dict[str, Any]]) -> dict[str, str]:
    """Question id -> "tune" or "test": alternating within each (type, answerable) stratum in file order."""
    tune, test = hotpot.split_halves(items, lambda g: (g["type"], g["answerable"]))
    return {g["id"]: "tune" for g in tune} | {g["id"]: "test" for g in test}
