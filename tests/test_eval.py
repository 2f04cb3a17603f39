"""`make eval` on a few gold questions: the harness runs end to end and writes its report into the build folder
(build/reports/, git-ignored); the tracked report in docs/ only changes with --write."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from eval import run
from eval.run import EVAL_DIR, main


def tracked_report() -> dict[str, tuple[int, int]]:
    """docs/EVAL.md and docs/eval.png: modification time and size of each."""
    files = [run.ROOT / "docs" / "EVAL.md", run.ROOT / "docs" / "eval.png"]
    return {str(f): (f.stat().st_mtime_ns, f.stat().st_size) for f in files if f.is_file()}


@pytest.mark.asyncio
async def test_eval_smoke(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    gold = [json.loads(line) for line in (EVAL_DIR / "gold.jsonl").read_text("utf-8").splitlines() if line.strip()]
    assert len(gold) >= 60 and sum(not g["answerable"] for g in gold) >= 10
    build = tmp_path / "build" / "reports"
    monkeypatch.setattr(run, "BUILD_REPORTS", build)  # the default folder, here not the checkout's
    before = tracked_report()
    summary = await main(["--limit", "8"])  # no --out, no --write
    assert tracked_report() == before
    report = (build / "EVAL.md").read_text("utf-8")
    assert f"wrote {build / 'EVAL.md'}" in capsys.readouterr().err
    assert "| Routing accuracy (query type) |" in report and "## Retrieval per collection" in report
    assert summary["questions"] == 8 and summary["invalid_markers"] == 0


def test_reports_go_to_the_build_folder_unless_written_to_docs() -> None:
    assert run._parser().parse_args([]).out == run.ROOT / "build" / "reports"
    assert run._parser().parse_args(["--out", "elsewhere"]).out == Path("elsewhere")
    assert "build/" in (run.ROOT / ".gitignore").read_text("utf-8").splitlines()


@pytest.mark.asyncio
@pytest.mark.parametrize("refused", [["--write", "--limit", "8"], ["--write", "--hotpot-only"],
                                     ["--write", "--out", "elsewhere"]])
async def test_write_is_for_full_runs_into_docs(refused: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):  # refused before anything runs: a smoke report never replaces the tracked one
        await main(refused)
    assert "--write" in capsys.readouterr().err
