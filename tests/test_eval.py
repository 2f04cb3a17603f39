"""`make eval` on a few gold questions: the harness runs end to end and writes its report."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from eval.run import EVAL_DIR, main


@pytest.mark.asyncio
async def test_eval_smoke(tmp_path: Path) -> None:
    gold = [json.loads(line) for line in (EVAL_DIR / "gold.jsonl").read_text("utf-8").splitlines() if line.strip()]
    assert len(gold) >= 60 and sum(not g["answerable"] for g in gold) >= 10
    summary = await main(["--limit", "8", "--out", str(tmp_path)])
    report = (tmp_path / "EVAL.md").read_text("utf-8")
    assert "| Routing accuracy (query type) |" in report and "## Retrieval per collection" in report
    assert summary["questions"] == 8 and summary["invalid_markers"] == 0
