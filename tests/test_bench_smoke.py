"""`python -m bench --smoke` runs end to end and writes its report: every section, every plot.

No timing assertions: this checks the harness, not the service's speed (a busy 2-core CI machine is fine).
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

from bench.report import SECTIONS

ROOT = Path(__file__).resolve().parents[1]
PLOTS = ("latency.png", "overhead.png", "speedup.png", "concurrency.png", "cache.png")


def test_bench_smoke_writes_the_report(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "bench", "--smoke", "--out", str(tmp_path)],
        cwd=ROOT, capture_output=True, text=True, timeout=600,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    report = (tmp_path / "BENCHMARKS.md").read_text("utf-8")
    for heading in SECTIONS:
        assert heading in report, heading
    for query_type in ("factual", "comparative", "exploratory", "deep_dive"):
        assert f"| {query_type} |" in report
    assert "Smoke run" in report
    # the fake upstream's own records came back from its process, one request's calls at a time
    assert "| factual | 2.00 (2–2) | summarize 1.0, answer 1.0 |" in report
    assert "### 2 workers (`WORKERS=2`)" in report  # the sweep also ran against a service with two workers
    # single requests ran with the service on a core of its own, and once more on shared cores for comparison
    if len(os.sched_getaffinity(0)) > 1:
        assert "- Cores: in sections 1–4 the service runs on CPU" in report
    assert "overhead p50, cores shared" in report and "| factual |" in report.split("cores shared", 1)[1]
    if importlib.util.find_spec("matplotlib") is None:  # `make test` does not install the eval extra
        return
    for name in PLOTS:
        plot = tmp_path / "bench" / name
        assert plot.is_file() and plot.stat().st_size > 1000, name
        assert f"(bench/{name})" in report
