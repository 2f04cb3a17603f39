"""`python -m eval.llm` on a few questions: the harness runs the real graph against the embedded reference server
(and a pooled HotpotQA corpus when ../shared is present) offline or against a fake model, beside the naive RAG and
the oracle (its call on the gold paragraphs), and writes its report; columns run apart merge in one dump."""

from __future__ import annotations

import asyncio
from collections import Counter
from pathlib import Path

import pytest

from eval import hotpot, hotpot_eval
from eval.llm import (
    NAIVE_SYSTEM,
    Question,
    Run,
    cost_targets,
    dump,
    echo_table,
    gold_questions,
    load_dump,
    main,
    merge,
    oracle_passages,
    step_time,
    write_report,
)

SHARE_ROWS = ("Routing accuracy (query type)", "Key facts found (HotpotQA: answer present)", "Gold articles cited", "Citation precision",
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
    path = await main(["--modes", "offline", "--gold-n", "2", "--hotpot-n", "0", "--out", str(tmp_path)])
    report = path.read_text("utf-8")
    assert path == tmp_path / "EVAL-LLM.md"
    assert "## Targets" in report and "| metric | all: offline | factual: offline |" in report
    assert "### Gold set: per question" in report and "Not run (`--hotpot-n 0`)." in report
    check_ranges(table_rows(report, "Gold set"), 2)


@pytest.mark.asyncio
async def test_offline_only_hotpot(tmp_path: Path) -> None:
    if not hotpot.HOTPOT_FILE.is_file():
        pytest.skip(f"{hotpot.HOTPOT_FILE} is absent")
    path = await main(["--modes", "offline", "--gold-n", "2", "--hotpot-n", "2", "--out", str(tmp_path)])
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
    path = await main(["--modes", "llm,naive", "--gold-n", "2", "--hotpot-n", "0", "--out", str(tmp_path)])
    report = path.read_text("utf-8")
    assert "| metric | all: llm | all: naive |" in report
    rows = table_rows(report, "Gold set")
    assert rows["Questions"][:2] == [2, 2] and rows["Upstream calls per question"][1] == 1  # naive: one call each
    assert rows["Routing accuracy (query type)"][1] is None  # the naive RAG does not route
    naive = [r for r in fake_llm.requests if r["messages"][0]["content"] == NAIVE_SYSTEM]
    assert len(naive) == 2 and all("[5] " in r["messages"][-1]["content"] and "[6] " not in r["messages"][-1]["content"]
                                   for r in naive)
    assert rows["Prompt tokens per question"][1] > 0  # type: ignore[operator]


def _question(qid: str, kind: str = "bridge", text: str = "q?", answer: str = "Oslo") -> Question:
    return Question(qid, text, kind, True, (answer,), gold_titles=("A", "B"), hotpot=True)


def _run(qid: str, mode: str, present: float, cited: float, tokens: int, seconds: float) -> Run:
    return Run(_question(qid), mode, key_facts=present, titles_cited=cited, prompt_tokens=tokens, seconds=seconds)


def _measured(targets: list[tuple[str, float, bool | None]]) -> dict[str, tuple[float, bool | None]]:
    return {label: (value, ok) for label, value, ok in targets}


def test_cost_targets_compare_the_same_questions() -> None:
    hotpot_runs = [_run("1", "llm", 1.0, 1.0, 900, 9.0), _run("1", "naive", 0.0, 0.5, 800, 8.0),
                   _run("1", "oracle", 1.0, 1.0, 300, 2.0),
                   _run("2", "llm", 1.0, 1.0, 1200, 10.0), _run("2", "naive", 1.0, 0.5, 1000, 8.0),
                   _run("2", "oracle", 0.0, 1.0, 300, 2.0),
                   _run("3", "llm", 0.0, 0.0, 99999, 99.0)]  # no naive run of question 3: left out
    gold = [Run(Question("g", "v?", "factual", True, ("x",), "factual"), "llm", key_facts=0.6,
                supported_markers=3, markers=4)]
    measured = _measured(cost_targets(gold, hotpot_runs))
    assert measured["HotpotQA answer present − max(naive, oracle) ≥ 0"] == (0.5, True)  # 1.0 against 0.5 and 0.5
    assert measured["HotpotQA gold articles cited − naive ≥ +0.25"] == (0.5, True)
    assert measured["HotpotQA prompt tokens ÷ naive ≤ 1.2"] == (pytest.approx(2100 / 1800), True)
    assert measured["HotpotQA median seconds ÷ naive ≤ 1.3"] == (pytest.approx(9.5 / 8.0), True)
    assert measured["Gold key facts ≥ 0.59 (before)"] == (0.6, True)
    assert measured["Gold citation precision ≥ 0.73 (before)"] == (0.75, True)
    better_oracle = [*hotpot_runs[:2], _run("1", "oracle", 1.0, 1.0, 300, 2.0), *hotpot_runs[3:5],
                     _run("2", "oracle", 1.0, 1.0, 300, 2.0)]
    assert _measured(cost_targets(gold, better_oracle))["HotpotQA answer present − max(naive, oracle) ≥ 0"] == (
        0.0, True)
    no_oracle = _measured(cost_targets(gold, [r for r in hotpot_runs if r.mode != "oracle"]))
    assert no_oracle["HotpotQA answer present − max(naive) ≥ 0"] == (0.5, True)
    slow = _measured(cost_targets(gold, [*hotpot_runs[:3], _run("2", "llm", 0.0, 0.5, 3000, 30.0),
                                         *hotpot_runs[4:6]]))
    assert slow["HotpotQA prompt tokens ÷ naive ≤ 1.2"] == (pytest.approx(3900 / 1800), False)
    assert slow["HotpotQA median seconds ÷ naive ≤ 1.3"] == (pytest.approx(19.5 / 8.0), False)
    assert slow["HotpotQA answer present − max(naive, oracle) ≥ 0"] == (0.0, True)
    assert slow["HotpotQA gold articles cited − naive ≥ +0.25"] == (0.25, True)


def test_oracle_reads_exactly_the_gold_paragraphs() -> None:
    """The oracle's passages are the question's two gold paragraphs from its own context, titled, placed and
    worded as the pooled corpus holds them; no distractor."""
    item = {"id": "q", "question": "Who?", "answer": "Lee Pace", "type": "bridge",
            "supporting_facts": [["Gimme Shelter", 0], ["Lee Pace", 1], ["Lee Pace", 2]],
            "context": [["Distractor", ["Not this."]], ["Lee Pace", ["Lee Pace is an actor.", " He was born in Texas."]],
                        ["Gimme Shelter", ["Gimme Shelter is a film. "]], ["Other", ["Nor this."]]]}
    passages = oracle_passages(item)
    pool = hotpot.paragraphs([item])
    assert [(e.title, e.text) for e in passages] == [("Lee Pace", pool["Lee Pace"]),
                                                     ("Gimme Shelter", pool["Gimme Shelter"])]
    assert passages[0].text == "Lee Pace is an actor. He was born in Texas."
    assert all(e.collection == hotpot.collection_of(e.title) and e.doc_id == hotpot.doc_id_of(e.title)
               and e.id == f"{e.collection}/{e.doc_id}#0" for e in passages)


def test_llm_mode_as_a_share_of_the_oracle() -> None:
    from eval.llm import oracle_share

    asked = _question("3", "comparison", "Is Lee older than Ann?", "Lee")  # the question names the answer
    runs = [_run("1", "llm", 1.0, 1.0, 0, 1.0), _run("1", "oracle", 1.0, 1.0, 0, 1.0),
            _run("2", "llm", 0.0, 1.0, 0, 1.0), _run("2", "oracle", 1.0, 1.0, 0, 1.0),
            *[Run(asked, mode, key_facts=1.0) for mode in ("llm", "oracle")],
            _run("4", "llm", 1.0, 1.0, 0, 1.0)]  # no oracle run: left out
    lines = oracle_share(runs)
    assert lines[0] == "| LLM mode ÷ oracle | all (3 q) | bridge (2 q) | comparison (1 q) |"
    assert lines[2:] == ["| Answer present | 0.67 | 0.50 | 1.00 |", "| Answer present, unasked | 0.50 | 0.50 | – |"]
    assert oracle_share([r for r in runs if r.mode == "llm"]) == []


def _gold_run(mode: str) -> Run:
    return Run(Question("g", "v?", "factual", True, ("x",), "factual"), mode, key_facts=0.5)


def test_a_dump_renders_the_same_report_again(tmp_path: Path) -> None:
    """`--dump` then `--from-dump`: the report comes back without a model."""
    runs = [Run(_question("p"), "llm", key_facts=1.0, titles_cited=1.0, prompt_tokens=900,
                fallbacks=[("judge", "invalid")]),
            Run(_question("p"), "naive", key_facts=0.0, titles_cited=0.5, prompt_tokens=700),
            Run(_question("p"), "oracle", key_facts=1.0, titles_cited=1.0, prompt_tokens=300),
            Run(_question("m", "comparison"), "llm", key_facts=0.0, titles_cited=0.0,
                answer="I found no passages in the consulted collections (X) that answer this question"),
            Run(_question("m", "comparison"), "naive", key_facts=1.0, titles_cited=0.0),
            Run(_question("m", "comparison"), "oracle", key_facts=1.0, titles_cited=1.0)]
    gold = [_gold_run("llm")]
    produced = {"gold set: llm": "`run 1`", "HotpotQA: llm": "`run 1`", "HotpotQA: naive": "`run 2`",
                "HotpotQA: oracle": "`run 2`"}
    first = write_report(tmp_path / "first", produced, gold, runs, "note")
    dump(tmp_path / "runs.jsonl", gold + runs, produced, "note")
    produced_again, note, gold_again, runs_again = load_dump(tmp_path / "runs.jsonl")
    again = write_report(tmp_path / "again", produced_again, gold_again, runs_again, note)
    assert again.read_text("utf-8") == first.read_text("utf-8")
    report = first.read_text("utf-8")
    assert "- gold set: llm, HotpotQA: llm: `run 1`" in report and "- HotpotQA: naive, HotpotQA: oracle: `run 2`" in report
    assert "| metric | all: llm | all: naive | all: oracle | bridge: llm |" in report
    rows = table_rows(report, "HotpotQA")
    assert rows["Key facts found (HotpotQA: answer present)"][:3] == [0.5, 0.5, 1.0]
    assert "| Answer present | 0.50 | 1.00 | 0.00 |" in report  # LLM mode ÷ oracle: all, bridge, comparison
    assert "| HotpotQA answer present − max(naive, oracle) ≥ 0 | -0.50 | ❌ |" in report


def test_modes_run_apart_merge_in_one_dump() -> None:
    """A later run of some columns replaces those columns (per question set) and keeps the others."""
    from eval.llm import differing_sets

    kept = [_gold_run("llm"), _gold_run("naive"), _run("1", "llm", 1.0, 1.0, 0, 1.0),
            _run("1", "naive", 0.0, 0.5, 0, 1.0)]
    oracle = [_run("1", "oracle", 1.0, 1.0, 0, 1.0)]
    assert merge(kept, oracle) == kept + oracle
    rerun = [_run("1", "llm", 0.0, 0.0, 0, 2.0)]  # HotpotQA's llm column again; the gold set's stays
    merged = merge(kept, rerun)
    assert merged == [kept[0], kept[1], kept[3], rerun[0]]
    assert [(r.question.set_name, r.mode) for r in merged] == [("gold set", "llm"), ("gold set", "naive"),
                                                               ("HotpotQA", "naive"), ("HotpotQA", "llm")]
    assert differing_sets(kept, {"HotpotQA": {"1"}}) == []
    assert differing_sets(kept, {"HotpotQA": {"1", "2"}, "gold set": {"g"}}) == ["HotpotQA"]
    assert differing_sets([], {"HotpotQA": {"9"}}) == []


@pytest.mark.asyncio
async def test_oracle_and_naive_columns_run_apart(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fake_llm) -> None:
    """`--modes oracle` then `--modes naive` into the same dump: the oracle's one call reads exactly the question's
    two gold paragraphs, the naive RAG's the five best passages, and the report shows both columns."""
    if not hotpot.HOTPOT_FILE.is_file():
        pytest.skip(f"{hotpot.HOTPOT_FILE} is absent")
    from tests.fakes.fake_llm import Reply

    fake_llm.default(Reply(text="The answer is in the source [1]."))
    monkeypatch.setenv("LLM_BASE_URL", fake_llm.base_url)
    monkeypatch.setenv("LLM_MODEL", "big")
    runs = tmp_path / "runs.jsonl"
    common = ["--gold-n", "0", "--hotpot-n", "2", "--dump", str(runs), "--out", str(tmp_path)]
    await main(["--modes", "oracle", *common])
    prompts = [r["messages"][-1]["content"] for r in fake_llm.requests if r["messages"][0]["content"] == NAIVE_SYSTEM]
    items = {q["id"]: q for q in hotpot_eval.halves(hotpot.load_questions())["test"]}
    _, _, _, oracle_runs = load_dump(runs)
    assert len(prompts) == 2 == len(oracle_runs) and {r.question.id for r in oracle_runs} <= set(items)  # test half
    for run, prompt in zip(oracle_runs, prompts, strict=True):
        item = items[run.question.id]
        assert run.question.text in prompt and "[2] " in prompt and "[3] " not in prompt
        for title, text in hotpot.gold_paragraphs(item).items():
            assert f"{title}\n{text}" in prompt
    path = await main(["--modes", "naive", *common])
    report = path.read_text("utf-8")
    assert "| metric | all: naive | all: oracle |" in report
    _, _, _, both = load_dump(runs)
    assert sorted(r.mode for r in both) == ["naive", "naive", "oracle", "oracle"]
    assert [r.mode for r in both[:2]] == ["oracle", "oracle"]  # the oracle's runs kept as they were
    assert "2 questions of the HotpotQA dev test half" in report and "of the file's 1000 questions (both halves" in report
    assert "## Gold set\n\nNot run (`--gold-n 0`" in report


def test_where_the_time_goes_and_the_echo_guard_per_step(tmp_path: Path) -> None:
    """Per step: calls and model seconds per question, tokens per call, the rest outside model calls; the echo
    guard's verdicts and the answers of which nothing was kept. Both survive a dump."""
    runs = [Run(_question("p"), "llm", seconds=30.0, by_step={"route": [1, 200, 20, 6.0], "synthesize": [1, 800, 60, 20.0]},
                echo={"synthesize copy": 1, "synthesize answer": 3}),
            Run(_question("m", "comparison"), "llm", seconds=20.0, by_step={"synthesize": [1, 600, 40, 16.0]},
                echo={"synthesize copy": 2}, fallbacks=[("synthesize", "invalid")]),
            Run(_question("p"), "naive", seconds=10.0, prompt_tokens=700)]
    assert step_time(runs) == [
        "| step | calls per question | prompt tokens per call | completion tokens per call | model seconds per "
        "question | share of the time |", "|---|---|---|---|---|---|",
        "| route | 0.50 | 200 | 20 | 3.0 | 0.12 |",
        "| synthesize | 1.00 | 700 | 50 | 18.0 | 0.72 |",
        "| outside model calls | – | – | – | 4.0 | 0.16 |"]
    assert echo_table("HotpotQA", runs)[-1] == "| synthesize | 3 | 0 | 3 | 1 |"
    assert echo_table("HotpotQA", [])[-1] == "Not run (no LLM column)."
    dump(tmp_path / "runs.jsonl", runs, {"HotpotQA: llm": "`run`"}, "note")
    _, _, _, again = load_dump(tmp_path / "runs.jsonl")
    assert step_time(again) == step_time(runs) and echo_table("HotpotQA", again) == echo_table("HotpotQA", runs)


def test_structured_replies_valid_counts_only_structured_steps() -> None:
    """An answer the echo guard or the support check left empty is the answer step's own fallback ("synthesize",
    "invalid"), not an invalid structured reply: it must not push the share below zero (-2.000 in a real run)."""
    from eval.llm import metrics

    runs = [Run(_question("a"), "llm", structured=1, fallbacks=[("synthesize", "invalid"), ("synthesize", "invalid")]),
            Run(_question("b"), "llm", structured=1, fallbacks=[("judge", "invalid")])]
    assert metrics(runs)["structured_valid"] == 0.5
