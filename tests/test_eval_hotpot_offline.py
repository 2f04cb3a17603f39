"""HotpotQA in `make eval`: the offline run on a few questions (when ../shared has the file), and the pure parts
(HotpotQA's EM/F1 normalisation, the tuning/test splits, cited titles, the data's ceilings, the raw and attainable
metrics and the report section). The developer loop (--hotpot-only) writes no report, in docs/ or elsewhere."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from eval import hotpot, hotpot_eval, run
from eval.answers import cited_titles, source_titles
from eval.run import EVAL_DIR, load_gold, main, split_gold
from graph.models import Evidence
from tests.test_eval import tracked_report


def test_exact_match_and_f1_follow_hotpot_evaluate_v1() -> None:
    assert hotpot.exact_match("The Beatles!", "beatles") == 1.0
    assert hotpot.exact_match("the Beatles were a band", "Beatles") == 0.0
    assert hotpot.f1_score("Barack Obama", "Obama") == pytest.approx(2 / 3, abs=1e-3)
    assert hotpot.f1_score("An apple, a pear", "pear apple") == 1.0  # articles and punctuation go
    assert hotpot.f1_score("yes it is", "yes") == 0.0  # a yes/no gold answer must be matched exactly
    assert hotpot.f1_score("no", "yes") == 0.0 and hotpot.f1_score("Yes.", "yes") == 1.0
    assert hotpot.f1_score("", "Paris") == 0.0


def test_split_halves_alternates_within_each_stratum_in_order() -> None:
    items = [("a", 1), ("b", 2), ("a", 3), ("a", 4), ("b", 5), ("a", 6), ("c", 7)]
    tune, test = hotpot.split_halves(items, lambda x: x[0])
    assert tune == [("a", 1), ("b", 2), ("a", 4), ("c", 7)]
    assert test == [("a", 3), ("b", 5), ("a", 6)]


def test_gold_split_is_stratified_and_deterministic() -> None:
    gold = load_gold(EVAL_DIR / "gold.jsonl")
    split = split_gold(gold)
    assert split == split_gold(gold) and set(split) == {g["id"] for g in gold}
    counts = Counter((g["type"], g["answerable"], split[g["id"]]) for g in gold)
    for kind, answerable in {(g["type"], g["answerable"]) for g in gold}:
        assert 0 <= counts[kind, answerable, "tune"] - counts[kind, answerable, "test"] <= 1


def test_hotpot_halves_cut_to_n_stratified_by_type() -> None:
    questions = [{"id": str(i), "type": "comparison" if i % 4 == 0 else "bridge"} for i in range(40)]
    every = hotpot_eval.halves(questions)
    assert [len(every["tune"]), len(every["test"])] == [20, 20]
    assert not {q["id"] for q in every["tune"]} & {q["id"] for q in every["test"]}
    cut = hotpot_eval.halves(questions, 8)
    assert [len(cut["tune"]), len(cut["test"])] == [4, 4]
    assert all({q["type"] for q in cut[name]} == {"bridge", "comparison"} for name in hotpot_eval.SPLITS)
    assert all(q in every[name] for name in hotpot_eval.SPLITS for q in cut[name])


def _evidence(n: int, title: str) -> Evidence:
    return Evidence(id=f"wiki_1/d{n}#0", collection="wiki_1", doc_id=f"d{n}", title=title, text="...")


def test_cited_titles_read_the_sources_list_then_the_ledger() -> None:
    known = {"Paris", "Paris, Texas", "Gimme Shelter", "Gimme Shelter (1970 film)", "Lee Pace"}
    answer = ("It is a film [2]. He acted [1][3].\n\n**Sources**\n\n"
              "1. Paris, Texas, Paris, Texas (Wikipedia 1/4) — https://en.wikipedia.org/wiki/Paris,_Texas\n"
              "2. Gimme Shelter (1970 film), Gimme Shelter (1970 film) (Wikipedia 2/4)")
    assert source_titles(answer, known) == {1: "Paris, Texas", 2: "Gimme Shelter (1970 film)"}
    ledger = [_evidence(1, "Paris"), _evidence(2, "Paris"), _evidence(3, "Lee Pace")]
    assert cited_titles(answer, ledger, known) == {"Paris, Texas", "Gimme Shelter (1970 film)", "Lee Pace"}
    assert cited_titles("Only a body [2].", ledger, known) == {"Paris"}


def _outcome(split: hotpot_eval.Split, kind: str, retrieved: set[str], cited: set[str], body: str,
             top: tuple[str, ...]) -> hotpot_eval.Outcome:
    question = {"id": body, "question": "?", "answer": "Lee Pace", "type": kind,
                "supporting_facts": [["A", 0], ["B", 1]], "context": [["A", ["Lee Pace."]], ["B", ["A film."]]]}
    return hotpot_eval.Outcome(question, split, frozenset(retrieved), frozenset(cited), body, False, 0.1, top,
                               (True, True), frozenset({"A", "B"}), True)


def test_metrics_and_report_section() -> None:
    outcomes = [_outcome(name, kind, {"A", "B"}, {"A"}, "Lee Pace", ("A", "C")) for name in hotpot_eval.SPLITS
                for kind in hotpot_eval.TYPES]
    outcomes.append(_outcome("test", "bridge", {"A"}, set(), "Someone else.", ("C",)))
    summary = hotpot_eval.summarize(outcomes) | {"pool_paragraphs": 10, "seconds": 1.0}
    test = summary["test"]["pipeline"]["all"]
    assert test["questions"] == 3 and test["both_retrieved"] == pytest.approx(2 / 3, abs=1e-3)
    assert test["one_retrieved"] == 1.0 and test["gold_cited"] == pytest.approx(1 / 3, abs=1e-3)
    assert test["em"] == pytest.approx(2 / 3, abs=1e-3) and test["answer_present"] == pytest.approx(2 / 3, abs=1e-3)
    assert summary["test"]["baseline"]["all"]["gold_top5"] == pytest.approx(1 / 3, abs=1e-3)
    cited_target = summary["test"]["targets"]["Gold articles cited ≥ BM25 top-5 share + 0.15"]
    assert cited_target["target"] == pytest.approx(1 / 3 + 0.15, abs=1e-3) and cited_target["met"] is False
    report = "\n".join(hotpot_eval.report_lines(summary, Path("dev.jsonl")))
    assert "| Both gold articles retrieved | 0.667 | 0.500 | 1.000 | 1.000 |" in report
    assert "| Answer present | 0.667 | ≥ 0.650 | ✅ |" in report


def _question(qid: str, gold: tuple[str, str], context: dict[str, str], answer: str) -> dict[str, Any]:
    return {"id": qid, "question": "?", "answer": answer, "type": "bridge",
            "supporting_facts": [[title, 0] for title in gold], "context": [[t, [x]] for t, x in context.items()]}


# q1 has both gold paragraphs; q2 one, its answer only as part of a word; q3 one, through q1's context; q4 none
QUESTIONS = [
    _question("q1", ("A", "B"), {"A": "Lee Pace acted.", "B": "A film."}, "Lee Pace"),
    _question("q2", ("C", "D"), {"C": "Gold C.", "X": "Paris, Texas."}, "Par"),
    _question("q3", ("E", "A"), {"Y": "Nothing here."}, "Lee Pace"),
    _question("q4", ("F", "G"), {"Z": "Nothing either."}, "Oslo"),
]


def test_gold_and_answer_in_the_pool_come_from_the_data_alone() -> None:
    pool = hotpot.paragraphs(QUESTIONS)
    assert [hotpot.pooled_gold(q, pool) for q in QUESTIONS] == [{"A", "B"}, {"C"}, {"A"}, set()]
    assert [hotpot.answer_in_pool(q, pool) for q in QUESTIONS] == [True, False, True, False]
    assert not hotpot.answer_in_pool(QUESTIONS[0], {"B": "A film."})  # only what is pooled counts


def _asked(split: hotpot_eval.Split, question: dict[str, Any], retrieved: set[str], cited: set[str],
           prediction: str, top: tuple[str, ...], answer_in_top: tuple[bool, bool]) -> hotpot_eval.Outcome:
    pool = hotpot.paragraphs(QUESTIONS)
    return hotpot_eval.Outcome(question, split, frozenset(retrieved), frozenset(cited), prediction, False, 0.1, top,
                               answer_in_top, hotpot.pooled_gold(question, pool), hotpot.answer_in_pool(question, pool))


def test_ceilings_attainable_metrics_and_targets() -> None:
    q1, q2, q3, q4 = QUESTIONS
    outcomes = [o for split in hotpot_eval.SPLITS for o in (
        _asked(split, q1, {"A", "B"}, {"A"}, "Lee Pace acted.", ("A", "X"), (True, True)),
        _asked(split, q2, {"C"}, {"C"}, "Gold C.", ("C",), (False, False)),
        _asked(split, q3, {"A"}, {"A"}, "Lee Pace", ("Y", "Z", "C", "A"), (False, True)),
        _asked(split, q4, set(), set(), "", (), (False, False)))]
    summary = hotpot_eval.summarize(outcomes) | {"pool_paragraphs": 7, "seconds": 1.0}
    test = summary["test"]
    assert test["ceilings"]["all"] == {
        "questions": 4, "both_in_pool": 0.25, "one_in_pool": 0.75, "gold_share_in_pool": 0.5, "answer_in_pool": 0.5,
        "n_both_in_pool": 1, "n_one_in_pool_only": 2, "n_none_in_pool": 1, "n_answer_in_pool": 2,
        "n_gold_from_other_contexts": 1}
    pipeline, base = test["pipeline"]["all"], test["baseline"]["all"]
    assert (pipeline["both_retrieved"], pipeline["both_retrieved_attainable"]) == (0.25, 1.0)
    assert pipeline["gold_cited"] == 0.375 and pipeline["gold_cited_attainable"] == pytest.approx(2.5 / 3, abs=1e-4)
    assert (pipeline["answer_present"], pipeline["answer_present_attainable"]) == (0.5, 1.0)
    assert (base["both_top5"], base["both_top5_attainable"]) == (0.0, 0.0)
    assert base["gold_top5"] == 0.375 and base["gold_top5_attainable"] == pytest.approx(2.5 / 3, abs=1e-4)
    assert (base["answer_top3"], base["answer_top3_attainable"]) == (0.25, 0.5)
    assert (pipeline["answer_present_unasked"], base["answer_top3_unasked"]) == (0.5, 0.25)  # no answer is asked
    assert (base["answer_top5"], base["answer_top5_attainable"]) == (0.5, 1.0)
    assert test["pipeline"]["comparison"]["both_retrieved_attainable"] is None  # no question: JSON null, not NaN
    json.dumps(summary, allow_nan=False)
    cited = test["targets"]["Gold articles cited ≥ BM25 top-5 share + 0.15"]
    assert cited == {"measured": 0.375, "target": 0.525, "met": False, "attainable": 0.833,
                     "attainable_target": 0.983, "attainable_met": False, "ceiling": 0.5, "reachable": False}
    assert test["targets"]["Both gold articles retrieved"]["attainable_met"] is True
    report = "\n".join(hotpot_eval.report_lines(summary, Path("dev.jsonl")))
    assert "lacks a gold paragraph for 6 of the 8 questions (75%: 4 have one, 2 none, only 2 both;" in report
    assert "adds 2 gold articles" in report and "occurs in the pool text of only 4 (50%)" in report
    assert "so the targets both gold retrieved ≥ 0.90 and answer present ≥ 0.65 cannot be met" in report
    assert "| Questions with both gold articles in the pool | 0.250 | 0.250 | – | 0.250 |" in report
    assert ("| Both gold articles retrieved | 0.250 | ≥ 0.900 | ❌ | 1.000 | ≥ 0.900 | ✅ | 0.250 (below the target) |"
            in report)


@pytest.fixture
def writes_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """The run under test leaves the tracked report and the (default) build folder alone."""
    build = tmp_path / "build" / "reports"
    monkeypatch.setattr(run, "BUILD_REPORTS", build)
    before = tracked_report()
    yield
    assert tracked_report() == before and not build.exists()


@pytest.mark.asyncio
async def test_absent_hotpot_file_is_skipped(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                             writes_nothing: None) -> None:
    assert await main(["--hotpot-only", "--hotpot", str(tmp_path / "absent.jsonl")]) == {}
    assert "HotpotQA skipped" in capsys.readouterr().err


@pytest.mark.skipif(not hotpot.HOTPOT_FILE.is_file(), reason=f"{hotpot.HOTPOT_FILE} absent")
@pytest.mark.asyncio
async def test_offline_hotpot_on_a_few_questions(capsys: pytest.CaptureFixture[str], writes_nothing: None) -> None:
    summary = await main(["--hotpot-only", "--split", "tune", "--hotpot-n", "12"])
    assert json.loads(capsys.readouterr().out) == summary
    assert set(summary) == {"tune", "pool_paragraphs", "seconds"} and 60 < summary["pool_paragraphs"] <= 120
    pipeline, base, ceilings = (summary["tune"][part] for part in ("pipeline", "baseline", "ceilings"))
    assert pipeline["all"]["questions"] == 6 == base["all"]["questions"] == ceilings["all"]["questions"]
    assert pipeline["bridge"]["questions"] + pipeline["comparison"]["questions"] == 6
    for group in (*pipeline.values(), *base.values(), *ceilings.values()):
        assert all(v is None or 0 <= v <= 1 for k, v in group.items()  # None: an attainable measure over none
                   if k not in ("questions", "yes_no", "seconds_mean") and not k.startswith("n_"))
    everything = ceilings["all"]
    assert everything["n_both_in_pool"] + everything["n_one_in_pool_only"] + everything["n_none_in_pool"] == 6
    assert pipeline["all"]["both_retrieved"] <= everything["both_in_pool"]  # nothing beyond the data's ceiling
    assert base["all"]["gold_top5"] <= everything["gold_share_in_pool"]
    assert base["all"]["one_top5"] >= 0.5  # plain BM25 finds a gold article for most questions
    assert pipeline["all"]["em"] <= pipeline["all"]["f1"] <= 1
    assert all(isinstance(t["met"], bool) for t in summary["tune"]["targets"].values())


def test_an_answer_the_question_names_is_counted_apart() -> None:
    """"Who is older, Lee Pace or Ann Ray?" is answered "Lee Pace": any text naming him contains the answer."""
    named = {**QUESTIONS[0], "id": "q5", "question": "Who is older, Lee Pace or Ann Ray?"}
    yes = {**QUESTIONS[1], "id": "q6", "question": "Are both from Texas?", "answer": "yes"}
    outcomes = [_asked("test", q, set(), set(), text, (), (True, True))
                for q, text in ((named, "Lee Pace acted."), (yes, "yes"), (QUESTIONS[3], "Oslo"), (QUESTIONS[2], ""))]
    pipeline = hotpot_eval.pipeline_metrics(outcomes)
    assert pipeline["answer_present"] == 0.75 and pipeline["answer_present_unasked"] == 0.5
