"""The tuned numbers in one place (graph/tuning.py) and their sweep (`python -m eval.tune`)."""

from __future__ import annotations

import asyncio
import json
from dataclasses import fields
from pathlib import Path

import pytest

from eval import tune
from graph.text import pairs, selection
from graph.tuning import Tuning, describe, tuned, tuning

ROOT = Path(__file__).resolve().parents[1]


def test_every_tuned_number_says_what_it_trades_and_its_grid_holds_its_default() -> None:
    assert [name for name, *_ in describe()] == [f.name for f in fields(Tuning)]
    for name, default, trades, grid in describe():
        assert len(trades) > 40 and ":" in trades, name  # what moving it buys and costs
        assert default in grid and len(grid) >= 2, name
        assert type(default) in (int, float) and all(type(v) is type(default) for v in grid), name


def test_no_tuned_number_is_still_a_module_constant() -> None:
    """Each lives in `Tuning` alone (one copy of each rule): no module of graph/ defines it again."""
    names = {f.name.upper() for f in fields(Tuning)}
    for path in (ROOT / "graph").rglob("*.py"):
        for line in path.read_text("utf-8").splitlines():
            assert not any(line.startswith(f"{name} =") or line.startswith(f"{name},") for name in names), (path, line)


def test_tuned_puts_other_numbers_in_force_for_the_block_only() -> None:
    assert tuning() == Tuning()
    # a collection whose best passage covers 0.7 of the best one counts in an overview (keep_ratio 0.8: no)
    assert not selection.counts(0.7, 1.0, named=False, spread=True)
    with tuned(keep_ratio=0.6) as inside:
        assert inside.keep_ratio == 0.6 and tuning() is inside
        assert selection.counts(0.7, 1.0, named=False, spread=True)
    assert tuning() == Tuning() and not selection.counts(0.7, 1.0, named=False, spread=True)
    with pytest.raises(TypeError):
        with tuned(no_such_number=1.0):
            pass


def test_a_block_in_force_reaches_the_tasks_it_starts() -> None:
    async def read() -> float:
        return pairs.pair_score(0.5, 1.0, 0)

    async def both() -> tuple[float, float]:
        plain = await asyncio.create_task(read())
        with tuned(link_weight=0.0):
            off = await asyncio.create_task(read())
        return plain, off

    plain, off = asyncio.run(both())
    assert plain == pytest.approx(0.5 + Tuning().link_weight) and off == 0.5


def test_the_sweep_writes_a_table_with_the_value_in_force_marked(tmp_path: Path) -> None:
    gold = [json.loads(line) for line in (ROOT / "eval" / "gold.jsonl").read_text("utf-8").splitlines()[:8]]
    questions = tmp_path / "gold.jsonl"
    questions.write_text("\n".join(json.dumps(g) for g in gold), "utf-8")
    path = asyncio.run(tune.main(["focus_words", "--values", "2,3", "--gold", str(questions),
                                  "--hotpot", str(tmp_path / "absent.jsonl"), "--out", str(tmp_path)]))
    text = path.read_text("utf-8")
    assert path.name == "focus_words.md" and "| **3** |" in text and "| 2 |" in text
    assert "HotpotQA absent" in text and "key facts" in text


def test_the_sweep_names_the_numbers_when_asked_for_one_that_is_not(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        asyncio.run(tune.main(["keep_raito"]))
    assert "keep_ratio" in capsys.readouterr().err
