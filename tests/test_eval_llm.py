"""`python -m eval.llm` in offline-only mode on a few questions: the harness runs the real graph against the
embedded reference server (and a pooled HotpotQA corpus when ../shared is present) and writes its report."""

from __future__ import annotations

import asyncio
from collections import Counter
from pathlib import Path

import pytest

from eval import hotpot
from eval.llm import NAIVE_SYSTEM, Question, Run, cost_targets, gold_questions, main

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


@pytest.mark.asyncio
async def test_llm_mode_beside_the_naive_rag(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fake_llm) -> None:
    """With a model configured, every question also goes through the naive RAG (one search of every collection,
    the five best passages, one call): same questions, same model, its own columns and cost per step."""
    from tests.fakes.fake_llm import Reply

    fake_llm.default(Reply(text="Het antwoord staat in de bron [1]."))
    monkeypatch.setenv("LLM_BASE_URL", fake_llm.base_url)
    monkeypatch.setenv("LLM_MODEL", "big")
    path = await main(["--skip-offline", "--gold-n", "2", "--hotpot-n", "0", "--out", str(tmp_path)])
    report = path.read_text("utf-8")
    assert "| metric | all: llm | all: naive |" in report
    rows = table_rows(report, "Gold set")
    assert rows["Questions"][:2] == [2, 2] and rows["Upstream calls per question"][1] == 1  # naive: one call each
    assert rows["Routing accuracy (query type)"][1] is None  # the naive RAG does not route
    naive = [r for r in fake_llm.requests if r["messages"][0]["content"] == NAIVE_SYSTEM]
    assert len(naive) == 2 and all("[5] " in r["messages"][-1]["content"] and "[6] " not in r["messages"][-1]["content"]
                                   for r in naive)
    assert rows["Prompt tokens per question"][1] > 0  # type: ignore[operator]


def _run(qid: str, mode: str, present: float, cited: float, tokens: int, seconds: float, rounds: int = 1) -> Run:
    question = Question(qid, "q?", "bridge", True, ("a",), gold_titles=("A", "B"), hotpot=True)
    return Run(question, mode, key_facts=present, titles_cited=cited, prompt_tokens=tokens, seconds=seconds,
               rounds=rounds)


def test_cost_targets_compare_the_same_questions() -> None:
    hotpot_runs = [_run("1", "llm", 1.0, 1.0, 900, 9.0), _run("1", "naive", 0.0, 0.5, 800, 4.0),
                   _run("2", "llm", 1.0, 1.0, 3000, 30.0, rounds=2), _run("2", "naive", 1.0, 0.5, 1000, 5.0),
                   _run("3", "llm", 0.0, 0.0, 99999, 99.0)]  # no naive run of question 3: left out
    gold = [Run(Question("g", "v?", "factual", True, ("x",), "factual"), "llm", key_facts=0.6,
                supported_markers=3, markers=4)]
    measured = {label.split(" ≤")[0].split(" ≥")[0].split(" −")[0]: (value, ok)
                for label, value, ok in cost_targets(gold, hotpot_runs)}
    assert measured["HotpotQA answer present"] == (0.5, True)
    assert measured["HotpotQA gold articles cited"] == (0.5, True)
    assert measured["HotpotQA prompt tokens ÷ naive"] == (pytest.approx(3900 / 1800), False)
    assert measured["HotpotQA prompt tokens ÷ naive, first search answers (1 q)"] == (pytest.approx(900 / 800), True)
    assert measured["HotpotQA median seconds ÷ naive"] == (pytest.approx(19.5 / 4.5), False)
    assert measured["Gold key facts"] == (0.6, True) and measured["Gold citation precision"] == (0.75, True)


def test_a_dump_renders_the_same_report_again(tmp_path: Path) -> None:
    """`--dump` then `--from-dump`: the report comes back without a model, HotpotQA split by what the data allows."""
    from eval.llm import dump, load_dump, write_report

    pooled = Question("p", "q?", "bridge", True, ("a",), gold_titles=("A", "B"), hotpot=True, gold_pooled=True)
    missing = Question("m", "q?", "comparison", True, ("b",), gold_titles=("C", "D"), hotpot=True, gold_pooled=False)
    runs = [Run(pooled, "llm", key_facts=1.0, titles_cited=1.0, prompt_tokens=900, fallbacks=[("judge", "invalid")]),
            Run(pooled, "naive", key_facts=0.0, titles_cited=0.5, prompt_tokens=700),
            Run(missing, "llm", answer="I found no passages in the consulted collections (X) that answer this question",
                key_facts=0.0, titles_cited=0.0),
            Run(missing, "naive", key_facts=1.0, titles_cited=0.0)]
    gold = [Run(Question("g", "v?", "factual", True, ("x",), "factual"), "llm", key_facts=0.5)]
    first = write_report(tmp_path / "first", ["header"], gold, runs, "note", ["llm", "naive"])
    dump(tmp_path / "runs.jsonl", gold + runs, ["header"], "note", ["llm", "naive"])
    header, note, modes, gold_again, runs_again = load_dump(tmp_path / "runs.jsonl")
    again = write_report(tmp_path / "again", header, gold_again, runs_again, note, modes)
    assert again.read_text("utf-8") == first.read_text("utf-8")
    report = first.read_text("utf-8")
    assert "all supporting articles pooled (1 q): llm" in report
    rows = table_rows(report, "HotpotQA: what the data allows")
    assert rows["Answer present"] == [1.0, 0.0, 0.0, 1.0] and rows["Answerable questions declined"] == [0, 0, 1, 0]
