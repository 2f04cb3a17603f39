"""`python -m bench --smoke` runs end to end and writes its report: every section, every plot; `--only` runs a
subset and writes only its sections. A run writes into build/reports/ (or --out), docs/ only with --write.

No timing assertions: this checks the harness, not the service's speed (a busy 2-core CI machine is fine).
"""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from bench.__main__ import parse_args
from bench.report import SECTIONS

ROOT = Path(__file__).resolve().parents[1]
PLOTS = ("latency.png", "overhead.png", "speedup.png", "concurrency.png", "cache.png")
TYPES = ("factual", "comparative", "exploratory", "deep_dive")
RELAY_SECTION = "## 8. Service CPU per streamed request vs a bare relay"
# the headline cell: the factual ratio, the worst type's alongside, and a verdict
RELAY_ROW = re.compile(
    r"^\| Service CPU per streamed request vs bare relay \| ≤ 1\.3× \| \d+\.\d\d× factual "
    r"\(worst: (factual|comparative|exploratory|deep_dive) \d+\.\d\d×\) \| (✅|❌) \|$", re.M
)


def tracked_report() -> dict[str, tuple[int, int]]:
    """docs/BENCHMARKS.md and docs/bench/*: modification time and size of each."""
    files = [ROOT / "docs" / "BENCHMARKS.md", *sorted((ROOT / "docs" / "bench").glob("*"))]
    return {str(f): (f.stat().st_mtime_ns, f.stat().st_size) for f in files if f.is_file()}


def run_bench(out: Path, *args: str) -> str:
    before = tracked_report()
    result = subprocess.run(
        [sys.executable, "-m", "bench", "--smoke", "--out", str(out), *args],
        cwd=ROOT, capture_output=True, text=True, timeout=600,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert f"wrote {out} in " in result.stdout
    assert tracked_report() == before  # the tracked report only changes with --write
    return out.read_text("utf-8")


def test_reports_go_to_the_build_folder_unless_written_to_docs(capsys: pytest.CaptureFixture[str]) -> None:
    assert parse_args([]).out == ROOT / "build" / "reports" / "BENCHMARKS.md"
    assert parse_args(["--smoke"]).out == ROOT / "build" / "reports" / "BENCHMARKS.md"
    assert parse_args(["--out", "x.md"]).out == Path("x.md")
    assert parse_args(["--write", "--runs", "10"]).out == ROOT / "docs" / "BENCHMARKS.md"
    assert "build/" in (ROOT / ".gitignore").read_text("utf-8").splitlines()
    for refused in (["--write", "--smoke"], ["--write", "--only", "relay"], ["--write", "--out", "x.md"]):
        with pytest.raises(SystemExit):  # a smoke or partial report never replaces the tracked one
            parse_args(refused)
    assert "--write" in capsys.readouterr().err


def assert_relay_section(report: str, runs: int = 2, streams_requests: int = 10) -> None:
    assert RELAY_SECTION in report
    assert RELAY_ROW.search(report), report.split("## Headline", 1)[1][:1500]
    # the bare relay streamed the scripted answer every time (anything else counts as failed): the fake upstream
    # answered its one call like the service's answer call
    cpu, ratio = r"\d+\.\d\d", r"\d+\.\d\d×"
    paired = runs * len(TYPES)  # one at a time, every service request is followed by one through the relay
    relay_row = rf"^\| bare relay \| {paired} \| {cpu} \| 1\.00× \| {streams_requests} \| {cpu} \| 1\.00× \| 0 / 0 \|"
    assert re.search(relay_row, report, re.M)
    for query_type in TYPES:
        row = rf"^\| {query_type} \| {runs} \| {cpu} \| {ratio} \| {streams_requests} \| {cpu} \| {ratio} \|"
        assert re.search(row, report, re.M), query_type


def assert_profile_section(report: str) -> None:
    """Section 8b: a row per category the samples fell in and the totals, or why nothing was sampled (py-spy comes
    with the eval extra, and needs leave to read another process's memory)."""
    profile = report.split("## 8b. Where the service's CPU goes", 1)[1].split("\n## ", 1)[0]
    cpu = r"\d+\.\d"
    assert re.search(rf"^\| \*\*CPU per request\*\* \|  \|( \*\*{cpu}\*\* \|){{5}}$", profile, re.M), profile
    if "Not profiled: " not in profile:
        assert re.search(rf"^\| event loop \| [^|]+ \|( {cpu} \|){{4}} -?{cpu} \|$", profile, re.M), profile
        assert re.search(rf"^\| upstream client \| [^|]+ \|( {cpu} \|){{4}}", profile, re.M), profile


def test_bench_smoke_writes_the_report(tmp_path: Path) -> None:
    report = run_bench(tmp_path / "BENCHMARKS.md")
    assert SECTIONS[-7] == RELAY_SECTION
    for heading in SECTIONS:
        assert heading in report, heading
    for query_type in TYPES:
        assert f"| {query_type} |" in report
    assert "Smoke run" in report
    # the fake upstream's own records came back from its process, one request's calls at a time
    # a factual question the first search answers: one call (the answer), its prompt tokens under its step
    assert re.search(r"^\| factual \| 1\.00 \(1–1\) \| answer 1\.0 \| \d+ \| synthesize \d+ \|", report, re.M)
    assert "### 2 workers (`WORKERS=2`)" in report  # the sweep also ran against a service with two workers
    # single requests ran with the service on a core of its own, and once more on shared cores for comparison
    if len(os.sched_getaffinity(0)) > 1:
        assert "- Cores: in sections 1–4 and in the sequential part of section 8 the service" in report
    assert "overhead p50, cores shared" in report and "| factual |" in report.split("cores shared", 1)[1]
    # the stack's floor ran as well: the factual path without the pipeline's logic, and what the logic adds
    floor = re.search(r"\*\*The stack's floor\*\*.*?Overhead p50 ([\d.]+) ms.*?own work adds to it.*?: (-?[\d.]+) ms p50",
                      report, re.S)
    assert floor and float(floor.group(1)) > 0, report.split("## 2.", 1)[-1][:3000]
    assert_relay_section(report)
    assert_profile_section(report)
    # tracing on and off, both query types it takes, each with its ratio
    for kind in ("factual", "comparative"):
        assert re.search(rf"^\| {kind} \| 1 \| \d+\.\d\d \| \d+\.\d\d \| \d\.\d\d× \| 0 / 0 \|", report, re.M), kind
    assert "not answered from the cache" not in report  # every repeated question was a cache hit
    # the parallel research phase has the sub-agents' model calls to run at once (MODEL_CONDENSE)
    assert re.search(r"^\| 4 \| “[^”]+” \| 1 \| \d+ \| \d+ \| [\d.]+x \| \d+ \| \d+ \| [\d.]+x \| 4 / 1 \|", report, re.M)
    # a comparison's sides: every side's call in flight at once, or one at a time with LLM_MAX_CONCURRENCY=1
    side_row = r"^\| {} \| {} \| 1 \| \d+ \| \d+ \| \d\.\d\d \| \d\.\d\d \| {} \| \d+ \|$"
    assert re.search(side_row.format("at once", 2, 2), report, re.M)
    assert re.search(side_row.format("at once", 4, 4), report, re.M)
    assert re.search(side_row.format("one by one", 4, 1), report, re.M)
    # the sweep's p95 keeps its numbers but has no target any more, and the report says why
    assert "The p95 latency has no target any more" in report
    assert not re.search(r"^\|[^|\n]*p95 latency \|", report, re.M)
    assert "Orchestration overhead, p50 (every query type) | ≤ 15 ms |" in report
    assert "- Code under test: " in report and f"{ROOT / 'graph'}" in report
    if importlib.util.find_spec("matplotlib") is None:  # `make test` does not install the eval extra
        return
    for name in PLOTS:
        plot = tmp_path / "bench" / name
        assert plot.is_file() and plot.stat().st_size > 1000, name
        assert f"(bench/{name})" in report


def test_bench_only_runs_the_parts_asked_for(tmp_path: Path) -> None:
    report = run_bench(tmp_path / "relay.md", "--only", "relay")
    assert "Only some parts ran (`--only relay`)" in report
    assert_relay_section(report)
    for heading in SECTIONS[2:-7]:  # sections 1-7
        assert heading not in report, heading
    assert "## Headline" in report and "## What the numbers show" in report


def test_bench_scale_section_runs_on_a_small_corpus(tmp_path: Path) -> None:
    report = run_bench(tmp_path / "scale.md", "--only", "scale")
    assert "## 10. Past a sample corpus" in report and "## 9. Access check" not in report
    for row in ("| PDF ingest on one core | ≥ 20 pages/s |", "index up to date | ≤ 1 s |", "| Search p95, ",
                "| Resident memory of a server holding the "):
        assert row in report, row
    assert re.search(r"^\| server start-up \(`LiveIndex.load`\) \| \d+ documents, [\d,]+ chunks", report, re.M)


def test_bench_upload_section_measures_chats_beside_an_upload(tmp_path: Path) -> None:
    report = run_bench(tmp_path / "upload.md", "--only", "upload")
    assert "## 11. Chat while a file is read" in report and "## 10. Past a sample corpus" not in report
    for setup in ("embedded", "standalone"):  # the service's own document server, and one of its own (docker-compose)
        for phase in ("without", "during"):
            assert re.search(rf"^\| {setup} \| {phase} \| \d+ \| 0 \|", report, re.M), (setup, phase)
        # every upload was read and searchable; the reloads counted from the logs (a library searched on disk
        # finds a document before any reload: there may be none)
        assert re.search(rf"^\| {setup} \| 1 × \d+ pages \([\d.]+ MB\) \| \d+ \| [\d.]+ s \([\d.]+ s\) \| \d+ \| "
                         r"[\d.]+ s \| \d+ in .* for the \d+ that brought a document, ", report, re.M), setup
        assert re.search(rf"^\| Chat p95 while a \d+-page PDF is read vs without \({setup} .*\| ≤ 1\.5× \| "
                         r"\d+\.\d\d× total, \d+\.\d\d× first answer token \| (✅|❌) \|$", report, re.M), setup
    assert "- **Chat while a file is read:** embedded " in report
