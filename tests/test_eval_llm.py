"""`python -m eval.llm` in offline-only mode on a few questions: the harness runs the real graph against the
embedded reference server (and a pooled HotpotQA corpus when ../shared is present) and writes its report."""

from __future__ import annotations

import asyncio
from collections import Counter
from pathlib import Path

import pytest

from eval import hotpot
from eval.llm import gold_questions, main

SHARE_ROWS = ("Routing accuracy (query type)", "Key facts found", "Gold articles cited", "Citation precision",
              "Answerable questions declined", "Unanswerable questions declined")


def table_rows(report: str, section: str) -> dict[str, list[float | None]]:
    """The metric table of one report section: label -> its cells as numbers (None for "–")."""
    text = report.split(f"## {section}\n", 1)[1].split("\n### ", 1)[0]
    rows = {}
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip("|").split("|")]
        if line.startswith("| ") and cells[0] != "metric":
            rows[cells[0]] = [None if c == "–" else float(c) for c in cells[1:]]
    return rows


def check_ranges(rows: dict[str, list[float | None]], questions: int) -> None:
    assert rows["Questions"][0] == questions
    for label in SHARE_ROWS:
        assert all(v is None or 0 <= v <= 1 for v in rows[label]), label
    assert rows["Upstream calls per question"][0] == 0 and rows["Answers in extractive fallback"][0] == 0
    assert 0 <= rows["Seconds per question (p50)"][0] < 30  # type: ignore[operator]


@pytest.mark.asyncio
async def test_offline_only_gold(tmp_path: Path) -> None:
    path = await main(["--offline-only", "--gold-n", "2", "--hotpot-n", "0", "--out", str(tmp_path)])
    report = path.read_text("utf-8")
    assert path == tmp_path / "EVAL-LLM.md"
    assert "## Targets" in report and "| metric | all: offline | factual: offline |" in report
    assert "### Gold set: per question" in report and "Not run (`--hotpot-n 0`)." in report
    check_ranges(table_rows(report, "Gold set"), 2)


@pytest.mark.asyncio
async def test_offline_only_hotpot(tmp_path: Path) -> None:
    if not hotpot.HOTPOT_FILE.is_file():
        pytest.skip(f"{hotpot.HOTPOT_FILE} is absent")
    path = await main(["--offline-only", "--gold-n", "2", "--hotpot-n", "2", "--out", str(tmp_path)])
    report = path.read_text("utf-8")
    assert "## HotpotQA" in report and "| metric | all: offline | bridge: offline | comparison: offline |" in report
    rows = table_rows(report, "HotpotQA")
    check_ranges(rows, 2)
    assert rows["Gold articles cited"][0] is not None


def test_subsets_are_fixed_and_stratified(tmp_path: Path) -> None:
    gold = gold_questions(30)
    assert [q.id for q in gold] == [q.id for q in gold_questions(30)] and len(gold) == 30
    kinds = Counter(q.kind for q in gold)
    assert set(kinds) == {"factual", "exploratory", "deep_dive", "comparative"} and sum(not q.answerable for q in gold) >= 4
    assert len({q.kind for q in gold_questions(4)}) >= 2  # a prefix is spread over the strata
    if hotpot.HOTPOT_FILE.is_file():
        chosen = hotpot.select_questions(hotpot.load_questions(), 4)
        assert {q["type"] for q in chosen} == {"bridge", "comparison"}
        pooled = hotpot.build_corpus(chosen, tmp_path)
        assert len(pooled.titles) == 40 and set(pooled.titles.values()) <= set(pooled.catalog.names)


def test_no_model_configured_exits_2(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # no .env
    monkeypatch.delenv("LLM_BASE_URL", raising=False)
    with pytest.raises(SystemExit) as exited:
        asyncio.run(main(["--out", str(tmp_path)]))
    assert exited.value.code == 2 and not (tmp_path / "EVAL-LLM.md").exists()
