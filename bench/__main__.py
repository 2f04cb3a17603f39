"""`python -m bench [--runs 30] [--levels 1,10,50,100,200] [--workers 2] [--smoke] [--only relay,latency]
[--write | --out PATH]`

Runs the service against the fake upstream (300 ms to the first token, 10 ms per token) and the reference
document server, then writes the report and its plots (bench/*.png next to it): into build/reports/ (git-ignored)
by default, into docs/BENCHMARKS.md, the tracked report, only with --write. A benchmark, not a test: nothing here
fails on a slow number; the report marks each target ✅ or ❌.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime as dt
import os
import platform
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench import library, ondisk, scale, scenarios, upload
from bench.harness import (
    LLM_MAX_CONCURRENCY,
    ROOT,
    TOKEN_DELAY_S,
    TTFT_S,
    machine_busy_s,
    own_cpu_s,
    reply_sizes,
    start_docserver,
    start_upstream,
)
from bench.report import write_report

BUILD_REPORT = ROOT / "build" / "reports" / "BENCHMARKS.md"  # git-ignored: what a run writes unless asked
DOCS_REPORT = ROOT / "docs" / "BENCHMARKS.md"  # the tracked report: only with --write


def _parts(value: str) -> list[str]:
    names = [name.strip() for name in value.split(",") if name.strip()]
    unknown = sorted(set(names) - set(PARTS))
    if unknown or not names:
        raise argparse.ArgumentTypeError(
            f"unknown part(s) {', '.join(unknown) or '(none)'}; choose from {', '.join(PARTS)}"
        )
    return [name for name in PARTS if name in names]


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__.split("\n\n")[1],
                                     formatter_class=argparse.RawDescriptionHelpFormatter,
                                     epilog="parts for --only, in the order a run takes them:\n"
                                     + "\n".join(f"  {name:8} {part.__doc__}" for name, part in PARTS.items()))
    parser.add_argument("--runs", type=int, default=30,
                        help="runs per query type, one at a time (sections 1, 2, 4, 8) (default: %(default)s)")
    parser.add_argument("--levels", default="1,10,50,100,200", help="concurrency levels (default: %(default)s)")
    parser.add_argument("--smoke", action="store_true",
                        help="tiny run (2 runs per type, levels 1,5, no Redis) to check the harness end to end")
    parser.add_argument("--workers", type=int, default=2,
                        help="also sweep a service with this many worker processes; 1 = skip (default: %(default)s)")
    parser.add_argument("--only", type=_parts, default=list(PARTS), metavar="PART[,PART...]",
                        help="run only these parts (below), e.g. relay,latency for a quick before/after pair")
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--write", action="store_true",
                       help=f"refresh the tracked report, {DOCS_REPORT.relative_to(ROOT)} (a full run: not with "
                       "--smoke or --only)")
    where.add_argument("--out", type=Path, default=BUILD_REPORT,
                       help="the report; its plots go to bench/ in the same folder "
                       f"(default: {BUILD_REPORT.relative_to(ROOT)}, git-ignored)")
    args = parser.parse_args(argv)
    if args.write:
        if args.smoke or args.only != list(PARTS):
            parser.error(f"--write refreshes {DOCS_REPORT.relative_to(ROOT)} with a full run: drop --smoke / --only")
        args.out = DOCS_REPORT
    args.levels = [int(x) for x in args.levels.split(",") if x.strip()]
    if args.smoke:
        args.runs, args.levels = min(args.runs, 2), [1, 5]
    return args


def _machine() -> dict[str, str]:
    cpu = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")), platform.processor() or "unknown CPU")
    mem_kb = next((int(line.split()[1]) for line in Path("/proc/meminfo").read_text().splitlines()
                   if line.startswith("MemTotal:")), 0)
    return {"nproc": str(os.cpu_count()), "cpu": cpu, "memory": f"{mem_kb / 1024 ** 2:.0f} GiB RAM",
            "platform": platform.platform(), "python": platform.python_version()}


@contextlib.contextmanager
def section(data: dict[str, Any], title: str):
    """Prints the title; records the section's duration and how much CPU other processes on the machine used
    meanwhile (busy CPU minus this benchmark's processes), so a disturbed section can be recognised."""
    print(title, flush=True)
    t0, machine0, own0 = time.perf_counter(), machine_busy_s(), own_cpu_s()
    yield
    wall = time.perf_counter() - t0
    other = max(0.0, (machine_busy_s() - machine0) - (own_cpu_s() - own0)) / wall
    data["meta"].setdefault("sections", []).append({"title": title, "wall_s": wall, "other_cpu_util": other})


async def run(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    smoke = args.smoke
    sizes = {
        "speedup_runs": 1 if smoke else max(3, args.runs // 3),
        "shared_runs": 1 if smoke else max(3, args.runs // 3),
        "sweep_rounds": 1 if smoke else 3,
        "sweep_min": 2 if smoke else 20,
        "mcp_calls": 5 if smoke else 50,
        "security_requests": 20 if smoke else 500,
        "cache_hits": 3 if smoke else 30,
        "tracing_runs": 1 if smoke else args.runs,
        "cache_misses": 1 if smoke else 10,
        "relay_streams": scenarios.RELAY_STREAMS,
        "relay_rounds": 1 if smoke else max(1, args.runs // 3),
    }
    partial = args.only if args.only != list(PARTS) else None
    meta = {**sizes, "runs": args.runs, "levels": args.levels, "smoke": smoke, "only": partial}
    data: dict[str, Any] = {"meta": meta}
    # The smoke run checks the plumbing, not the numbers: a 10x faster fake upstream keeps it short.
    upstream = start_upstream(work, TTFT_S / 10, TOKEN_DELAY_S / 10) if smoke else start_upstream(work)
    data["meta"].update(ttft_s=upstream.ttft_s, token_delay_s=upstream.token_delay_s, **reply_sizes())
    docserver, docserver_base = start_docserver(work)
    lab = scenarios.Lab(upstream, docserver_base, work, docserver_proc=docserver)
    try:
        for part in args.only:  # each part starts (and stops) the services it measures: any subset runs alone
            await PARTS[part](lab, data, args, sizes)
    finally:
        for proc in list(lab.procs):
            lab.stop(proc)
        docserver.stop()
        upstream.stop()
    data["meta"]["code"] = lab.code
    return data


async def _latency(lab: scenarios.Lab, data: dict[str, Any], args: argparse.Namespace, sizes: dict[str, int]) -> None:
    """sections 1, 2, 4: latency, overhead and upstream calls per query type"""
    warm_up = not args.smoke
    # shared cores first: a service's overhead grows a little with its age, so this order does not flatter
    # the pinned figures the targets are judged on
    with section(data, "Latency per query type, cores shared with the client (section 2)"):
        proc, base = lab.service("service-latency")
        data["latency_shared"] = await scenarios.latency_by_type(lab, base, sizes["shared_runs"], warm_up)
    with section(data, "Latency per query type (sections 1, 2, 4)"), lab.isolated(proc) as split:
        data["meta"]["cpu_split"] = split
        data["latency"] = await scenarios.latency_by_type(lab, base, args.runs, warm_up=False)
    lab.stop(proc)
    with section(data, "The stack's floor, factual (section 2)"):
        proc, base = lab.floor()
        with lab.isolated(proc):
            data["floor"] = await scenarios.latency_by_type(lab, base, args.runs, warm_up, kinds=("factual",))
        lab.stop(proc)


async def _speedup(lab: scenarios.Lab, data: dict[str, Any], args: argparse.Namespace, sizes: dict[str, int]) -> None:
    """section 3: parallel speedup of comparative questions"""
    data["speedup"] = {}
    for label, concurrency in (("parallel", 4), ("sequential", 1)):
        with section(data, f"Comparative, {label} (section 3)"):
            proc, base = lab.service(f"service-{label}", RESEARCH_CONCURRENCY=concurrency, MODEL_CONDENSE=True)
            with lab.isolated(proc):
                data["speedup"][label] = await scenarios.comparative_runs(
                    lab, base, sizes["speedup_runs"], label, not args.smoke
                )
            lab.stop(proc)


async def _sides(lab: scenarios.Lab, data: dict[str, Any], args: argparse.Namespace, sizes: dict[str, int]) -> None:
    """section 3b: a comparison's sides written at once (LLM_MAX_CONCURRENCY 512) and one by one (1)"""
    data["sides"] = {}
    for label, slots in (("at once", LLM_MAX_CONCURRENCY), ("one by one", 1)):
        with section(data, f"Comparison sides, {label} (section 3b)"):
            proc, base = lab.service(f"service-sides-{slots}", LLM_MAX_CONCURRENCY=slots)
            with lab.isolated(proc):
                data["sides"][label] = await scenarios.comparative_runs(
                    lab, base, sizes["speedup_runs"], f"sides {label}", not args.smoke, sizes=scenarios.SIDES)
            lab.stop(proc)


async def _relay(lab: scenarios.Lab, data: dict[str, Any], args: argparse.Namespace, sizes: dict[str, int]) -> None:
    """section 8: service CPU per streamed request vs the bare relay"""
    with section(data, "Service CPU per streamed request vs the bare relay (section 8)"):
        data["relay"] = await scenarios.cpu_vs_relay(lab, args.runs, sizes["relay_streams"], sizes["relay_rounds"])
    data["meta"]["cpu_split"] = data["relay"].pop("cpu_split")  # the same split as the latency part's


async def _tracing(lab: scenarios.Lab, data: dict[str, Any], args: argparse.Namespace, sizes: dict[str, int]) -> None:
    """section 8c: service CPU per streamed request with OpenTelemetry tracing on and off"""
    with section(data, "Tracing on and off (section 8c)"):
        data["tracing"] = await scenarios.tracing_cpu(lab, sizes["tracing_runs"], 0.5 if args.smoke else
                                                      scenarios.EXPORT_WAIT_S)


async def _profile(lab: scenarios.Lab, data: dict[str, Any], args: argparse.Namespace, sizes: dict[str, int]) -> None:
    """section 8b: where the CPU of a streamed answer goes (py-spy), service and bare relay"""
    with section(data, "Where the CPU goes, py-spy (section 8b)"):
        data["profile"] = await scenarios.cpu_profile(lab, args.runs, sizes["relay_streams"],
                                                      sizes["relay_streams"] * sizes["relay_rounds"] * 2)


async def _mcp(lab: scenarios.Lab, data: dict[str, Any], args: argparse.Namespace, sizes: dict[str, int]) -> None:
    """section 6: MCP session reuse"""
    with section(data, "MCP session reuse (section 6)"):
        data["mcp"] = await scenarios.mcp_sessions(lab, sizes["mcp_calls"])


async def _cache(lab: scenarios.Lab, data: dict[str, Any], args: argparse.Namespace, sizes: dict[str, int]) -> None:
    """section 7: response cache (in memory and in Redis)"""
    redis = not args.smoke and shutil.which("redis-server") is not None
    if not redis:
        data["meta"]["redis_note"] = ("Redis: skipped (smoke run)." if args.smoke
                                      else "Redis: skipped, `redis-server` is not installed.")
    with section(data, "Response cache (section 7)"):
        data["cache"] = await scenarios.response_cache(lab, sizes["cache_hits"], sizes["cache_misses"], redis)


async def _sweep(lab: scenarios.Lab, data: dict[str, Any], args: argparse.Namespace, sizes: dict[str, int]) -> None:
    """section 5: concurrency sweep (and again with --workers worker processes)"""
    sweeps = [("sweep", "Concurrency sweep, fresh service (section 5)", 1)]
    if args.workers > 1:
        sweeps.append(("sweep_workers", f"Concurrency sweep, {args.workers} workers (section 5)", args.workers))
    for key, title, workers in sweeps:
        with section(data, title):
            proc, base = lab.service(f"service-{key}", WORKERS=workers)
            data[key] = await scenarios.concurrency_sweep(
                lab, base, proc, args.levels, sizes["sweep_rounds"], sizes["sweep_min"], 0.5 if args.smoke else 1.5
            )
            data[key]["workers"] = workers
            lab.stop(proc)


async def _security(lab: scenarios.Lab, data: dict[str, Any], args: argparse.Namespace, sizes: dict[str, int]) -> None:
    """section 9: access check and instruction filter per request"""
    with section(data, "Access check and instruction filter (section 9)"):
        data["security"] = await scenarios.security_overhead(lab, sizes["security_requests"])


async def _scale(lab: scenarios.Lab, data: dict[str, Any], args: argparse.Namespace, sizes: dict[str, int]) -> None:
    """section 10: ingest, index update, search and memory on a generated corpus of 2,000 PDF pages"""
    size = scale.SMOKE if args.smoke else scale.FULL
    with section(data, f"Scale: {size.pages} PDF pages, {size.chunks} chunks (section 10)"):
        data["scale"] = await asyncio.to_thread(scale.measure, lab.work, size)


async def _upload(lab: scenarios.Lab, data: dict[str, Any], args: argparse.Namespace, sizes: dict[str, int]) -> None:
    """section 11: chat latency while a 200-page PDF is uploaded and read, beside chat latency without"""
    size = upload.SMOKE if args.smoke else upload.FULL
    with section(data, f"Chat while a {size.pages}-page PDF is read (section 11)"):
        data["upload"] = await upload.measure(lab, size)


async def _library(lab: scenarios.Lab, data: dict[str, Any], args: argparse.Namespace,
                   sizes: dict[str, int]) -> None:
    """section 12: the library in PostgreSQL: search at 200,000 chunks, two servers sharing it"""
    size = library.SMOKE if args.smoke else library.FULL
    with section(data, f"The library in PostgreSQL: {size.chunks:,} chunks (section 12)"):
        data["library"] = await asyncio.to_thread(library.measure, lab.work, size)


async def _ondisk(lab: scenarios.Lab, data: dict[str, Any], args: argparse.Namespace,
                  sizes: dict[str, int]) -> None:
    """section 13: the embedded library on disk: start-up, memory and search at 200,000 chunks"""
    size = ondisk.SMOKE if args.smoke else ondisk.FULL
    with section(data, f"The embedded library on disk: {size.chunks:,} chunks (section 13)"):
        data["ondisk"] = await asyncio.to_thread(ondisk.measure, lab.work, size)


# --only's names, in the order a run takes them
PARTS = {"latency": _latency, "speedup": _speedup, "sides": _sides, "relay": _relay, "profile": _profile,
         "tracing": _tracing, "mcp": _mcp,
         "cache": _cache, "sweep": _sweep, "security": _security, "scale": _scale, "upload": _upload,
         "library": _library, "ondisk": _ondisk}


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    started = time.perf_counter()
    date = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    with tempfile.TemporaryDirectory(prefix="neo-bench-") as tmp:
        data = asyncio.run(run(args, Path(tmp)))
    command = "python -m bench" + ("".join(f" {a}" for a in (argv if argv is not None else sys.argv[1:])))
    data["meta"].update(_machine(), command=command.strip(), date=date, duration_s=time.perf_counter() - started)
    print("report", flush=True)
    path = write_report(data, args.out)
    print(f"wrote {path} in {data['meta']['duration_s']:.0f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
