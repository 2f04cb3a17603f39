"""The measurements of `python -m bench`, one coroutine per section of docs/BENCHMARKS.md.

Each returns plain data (lists and dicts of floats in seconds) for `bench.report`; nothing here judges a
number against a target. Requests of the single-request sections run one at a time, so every upstream call
and every /mcp request inside a request's window belongs to that request.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import os
import re
import statistics
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from bench.harness import (
    ANSWER,
    Proc,
    Run,
    Upstream,
    UpstreamCall,
    describe_tree,
    imported_from,
    machine_busy_s,
    mcp_intervals,
    new_client,
    percentile,
    process_cpu_s,
    sample_every,
    scrape_gauge,
    set_cpus,
    start_floor,
    start_redis,
    start_relay,
    start_service,
    stream_chat,
    union_length,
)
from bench.stacks import Recorder
from tests.fakes.otlp import OtlpReceiver

QUESTIONS = {
    "factual": "Wanneer vervalt de vergunning van kerncentrale Borssele?",
    "comparative": "Hoe verschillen IAEA en ANVS eisen voor veiligheidscultuur?",
    "exploratory": "Welke documenten gaan over veiligheidscultuur?",
    "deep_dive": "Geef een gedetailleerde uitleg van de Kernenergiewet",
}
COMPARATIVE_BY_COLLECTIONS = {
    2: "Hoe verschillen IAEA en ANVS eisen voor veiligheidscultuur?",
    3: "Hoe verschillen IAEA, ANVS en de wet eisen voor veiligheidscultuur?",
    4: "Hoe verschillen ANVS, IAEA, de wet en security eisen voor veiligheidscultuur?",
}
SIDES = (2, 4)  # section 3b: comparisons over this many collections
_tenants = itertools.count(1)


def fresh_tenant() -> str:
    """A new bearer token: the per-tenant plan cache (decompositions) cannot help the next run."""
    return f"bench-{next(_tenants)}"


@dataclass
class Lab:
    """What every scenario shares: the fake upstream, the timed document server, a scratch folder."""

    upstream: Upstream
    docserver: str  # base URL; MCP endpoint at /mcp
    work: Path
    docserver_proc: Proc | None = None
    procs: list[Proc] = field(default_factory=list)
    code: str | None = None  # where the first service imported `graph` from, for the report

    @property
    def mcp_url(self) -> str:
        return self.docserver + "/mcp"

    def service(self, name: str, **settings: object) -> tuple[Proc, str]:
        proc, base = start_service(self.work, name, llm_url=self.upstream.base_url, mcp_url=self.mcp_url, **settings)
        self.procs.append(proc)
        self.code = self.code or describe_tree(imported_from(proc))
        return proc, base

    def relay(self) -> tuple[Proc, str]:
        proc, base = start_relay(self.work, self.upstream.base_url)
        self.procs.append(proc)
        return proc, base

    def floor(self) -> tuple[Proc, str]:
        proc, base = start_floor(self.work, self.upstream.base_url, self.mcp_url)
        self.procs.append(proc)
        return proc, base

    def stop(self, proc: Proc) -> None:
        proc.stop()
        if proc in self.procs:
            self.procs.remove(proc)

    @contextlib.contextmanager
    def isolated(self, *measured: Proc) -> Iterator[dict[str, list[int]] | None]:
        """For the single-request sections: the service (or whatever is `measured`, one request at a time) on a core
        of its own, this process (the client) and both fakes on the others; afterwards everything may use every
        core again. Yields the split, or None on a machine with one core.

        On two shared cores every chunk the service sends wakes the client, and the scheduler often runs the
        woken client on the service's core: the service then waits its turn in the middle of a request, and the
        report would count the client's time as the service's overhead. A single request needs no more than
        the one core (one event loop); the concurrency sweep, which needs both, is never pinned."""
        cpus = sorted(os.sched_getaffinity(0))
        if len(cpus) < 2:
            yield None
            return
        harness = [os.getpid(), self.upstream.proc.pid] + ([self.docserver_proc.pid] if self.docserver_proc else [])
        split = {"service": cpus[-1:], "harness": cpus[:-1]}
        pids = [pid for proc in measured for pid in proc.pids()]
        set_cpus(pids, set(split["service"]))
        set_cpus(harness, set(split["harness"]))
        try:
            yield split
        finally:
            set_cpus([pid for proc in measured for pid in proc.pids()] + harness, set(cpus))


# ------------------------------------------------------------------------------ per-request analysis


@dataclass
class Measured:
    """One single-request run with its waits laid next to it (seconds, relative to the request start)."""

    kind: str
    ok: bool
    degraded: bool
    ttfb: float
    first_think: float
    first_answer: float
    total: float
    waits: float  # union of upstream and MCP wait intervals inside the request window
    head: float  # request start -> first wait
    tail: float  # last wait -> end of the stream
    answer_excess: float  # first answer token - (answer call start + upstream TTFT)
    research: float  # comparative: first document search -> first answer call start (the parallel research phase)
    calls: list[str]
    usage: dict[str, Any]
    mcp_calls: int
    peak_agents: int  # most condense calls in flight at once
    answer_time: float = float("nan")  # first answer token -> end of the stream: the answer as it is written
    answer_call: float = float("nan")  # one answer call at the upstream, median (start -> end)
    peak_answers: int = 0  # most answer calls in flight at once (a comparison's sides)

    @property
    def overhead(self) -> float:
        return self.total - self.waits


def _peak(intervals: list[tuple[float, float]]) -> int:
    edges = sorted([(a, 1) for a, _ in intervals] + [(b, -1) for _, b in intervals])
    level = peak = 0
    for _, step in edges:
        level += step
        peak = max(peak, level)
    return peak


def analyse(kind: str, run: Run, calls: list[UpstreamCall], mcp: list[tuple[float, float]], ttft_s: float) -> Measured:
    lo, hi = run.start, run.end
    mine = sorted((c for c in calls if c.start < hi and c.end > lo), key=lambda c: c.start)
    mcp_mine = [(a, b) for a, b in mcp if b > lo and a < hi]
    waits = [(c.start, c.end) for c in mine] + mcp_mine
    answer = [c for c in mine if c.kind == "answer"]
    nan = float("nan")
    return Measured(
        kind=kind,
        ok=run.ok,
        degraded=run.degraded,
        ttfb=run.since_start(run.first_byte),
        first_think=run.since_start(run.first_think),
        first_answer=run.since_start(run.first_answer),
        total=run.total,
        waits=union_length(waits, lo, hi),
        head=(min(a for a, _ in waits) - lo) if waits else nan,
        tail=(hi - max(b for _, b in waits)) if waits else nan,
        # the first answer token comes from the first answer call (a comparison makes one per side, then a contrast)
        answer_excess=(run.first_answer - answer[0].start - ttft_s) if answer and run.first_answer else nan,
        # research starts with the first search (a model decomposition, when one runs, ends before it)
        research=(answer[0].start - min(a for a, _ in mcp_mine)) if answer and mcp_mine else nan,
        calls=[c.kind for c in mine],
        usage=run.usage,
        mcp_calls=len(mcp_mine),
        peak_agents=_peak([(c.start, c.end) for c in mine if c.kind == "condense"]),
        answer_time=(hi - run.first_answer) if run.first_answer else nan,
        answer_call=statistics.median(c.end - c.start for c in answer) if answer else nan,
        peak_answers=_peak([(c.start, c.end) for c in answer]),
    )


async def measure_one(lab: Lab, client: httpx.AsyncClient, base: str, kind: str, question: str) -> Measured:
    await mcp_intervals(client, lab.docserver)  # forget waits from before this request
    seen = await lab.upstream.count(client)
    run = await stream_chat(client, base, question, tenant=fresh_tenant())
    await asyncio.sleep(0.02)  # let the fake and the doc server close their books on this request
    mcp = await mcp_intervals(client, lab.docserver)
    return analyse(kind, run, await lab.upstream.calls(client, seen), mcp, lab.upstream.ttft_s)


# ------------------------------------------------------------------------------------------ sections


async def latency_by_type(lab: Lab, base: str, runs: int, warm_up: bool = True,
                          kinds: Iterable[str] = tuple(QUESTIONS)) -> list[Measured]:
    """Sections 1, 2 and 4: `runs` requests per query type, round-robin so that drift hits every type alike."""
    results: list[Measured] = []
    asked = {kind: QUESTIONS[kind] for kind in kinds}
    async with new_client() as client:
        for kind, question in asked.items() if warm_up else ():  # MCP session, imports, first-call paths
            await measure_one(lab, client, base, kind, question)
        for i in range(runs):
            for kind, question in asked.items():
                results.append(await measure_one(lab, client, base, kind, question))
            print(f"  latency: round {i + 1}/{runs}", flush=True)
    return results


async def comparative_runs(lab: Lab, base: str, runs: int, label: str, warm_up: bool = True,
                           sizes: Iterable[int] = tuple(COMPARATIVE_BY_COLLECTIONS)) -> dict[int, list[Measured]]:
    """Sections 3 and 3b, one configuration: the comparative question over 2, 3 and 4 collections (`sizes`)."""
    out: dict[int, list[Measured]] = {n: [] for n in sizes}
    async with new_client() as client:
        if warm_up:
            await measure_one(lab, client, base, "comparative", COMPARATIVE_BY_COLLECTIONS[max(out)])
        for i in range(runs):
            for n in out:
                out[n].append(await measure_one(lab, client, base, "comparative", COMPARATIVE_BY_COLLECTIONS[n]))
            print(f"  comparative ({label}): round {i + 1}/{runs}", flush=True)
    return out


# ------------------------------------------------------------------------ section 8: CPU vs the bare relay

RELAY = "relay"  # the relay's key next to the query types
RELAY_STREAMS = 10  # concurrent streams in part (b)
SETTLE_S = 0.05  # after [DONE] a process still closes the stream: CPU of the request that just ended


@dataclass
class CpuTally:
    """The CPU one process tree spent on some streamed requests (seconds), how many there were, how many failed."""

    requests: int = 0
    failed: int = 0
    cpu_s: float = 0.0

    def add(self, cpu_s: float, oks: list[bool]) -> None:
        self.requests += len(oks)
        self.failed += oks.count(False)
        self.cpu_s += cpu_s

    @property
    def per_request(self) -> float:
        return self.cpu_s / self.requests if self.requests else float("nan")


@dataclass(frozen=True)
class Streamer:
    """A process that streams chat completions, and what counts as a good answer from it."""

    proc: Proc
    base: str
    ok: Callable[[Run], bool]


def relay_ok(run: Run) -> bool:
    """The relay's stream ended with [DONE] and carried the scripted answer, every token of it."""
    return run.status == 200 and run.done and run.error is None and run.content == ANSWER


def service_ok(run: Run) -> bool:
    return run.ok and not run.degraded


async def _cpu_one(client: httpx.AsyncClient, streamer: Streamer, question: str) -> tuple[float, bool]:
    before = streamer.proc.cpu_s()
    run = await stream_chat(client, streamer.base, question, tenant=fresh_tenant())
    await asyncio.sleep(SETTLE_S)
    return streamer.proc.cpu_s() - before, streamer.ok(run)


async def _warm_up(client: httpx.AsyncClient, streamer: Streamer, questions: Iterable[str]) -> None:
    """Pooled connections and first-call paths are set up before anything is counted."""
    for question in questions:
        await _cpu_one(client, streamer, question)


async def cpu_sequential(service: Streamer, relay: Streamer, runs: int) -> dict[str, CpuTally]:
    """Section 8 (a): one request at a time, `runs` per query type (round-robin) through the service, each followed
    by the same question through the relay. Paired like this both meet the same conditions (one at a time, CPU per
    request is mostly wake-ups, which other load on the machine makes dearer), and no pooled connection idles long
    enough to be closed (the upstream client's expire after 4 s), which would add a reconnect to the next request."""
    tallies = {RELAY: CpuTally(), **{kind: CpuTally() for kind in QUESTIONS}}
    async with new_client() as client:
        await _warm_up(client, service, QUESTIONS.values())
        await _warm_up(client, relay, QUESTIONS.values())
        for i in range(runs):
            for kind, question in QUESTIONS.items():
                for key, streamer in ((kind, service), (RELAY, relay)):
                    cpu, ok = await _cpu_one(client, streamer, question)
                    tallies[key].add(cpu, [ok])
            print(f"  cpu vs relay, sequential: round {i + 1}/{runs}", flush=True)
    return tallies


async def _cpu_block(streamer: Streamer, question: str, requests: int, streams: int, tally: CpuTally) -> None:
    """`streams` clients in a closed loop until `requests` are done, after one uncounted wave of `streams`."""
    todo = iter(range(requests))
    runs: list[Run] = []

    async def worker(client: httpx.AsyncClient) -> None:
        for _ in todo:
            runs.append(await stream_chat(client, streamer.base, question, tenant=fresh_tenant()))

    async with new_client(streams) as client:
        await asyncio.gather(*(stream_chat(client, streamer.base, question, tenant=fresh_tenant())
                               for _ in range(streams)))
        await asyncio.sleep(SETTLE_S)
        before = streamer.proc.cpu_s()
        await asyncio.gather(*(worker(client) for _ in range(streams)))
        await asyncio.sleep(SETTLE_S)
        tally.add(streamer.proc.cpu_s() - before, [streamer.ok(r) for r in runs])


async def cpu_concurrent(service: Streamer, relay: Streamer, streams: int, requests: int) -> dict[str, CpuTally]:
    """Section 8 (b): `streams` concurrent streams on shared cores, `requests` per query type (one type after the
    other) through the service and `requests` through the relay, half before the service's and half after."""
    tallies = {RELAY: CpuTally(), **{kind: CpuTally() for kind in QUESTIONS}}
    blocks = [(RELAY, relay, QUESTIONS["factual"], requests // 2)]
    blocks += [(kind, service, question, requests) for kind, question in QUESTIONS.items()]
    blocks += [(RELAY, relay, QUESTIONS["factual"], requests - requests // 2)]
    for key, streamer, question, count in blocks:
        await _cpu_block(streamer, question, count, streams, tallies[key])
        print(f"  cpu vs relay, {streams} streams: {key} {tallies[key].per_request * 1000:.1f} ms/request", flush=True)
    return tallies


async def cpu_vs_relay(lab: Lab, runs: int, streams: int, rounds: int) -> dict[str, Any]:
    """Section 8: CPU per streamed request of a fresh service (per query type) and of the bare relay, each read
    from its own process tree (never the benchmark's own CPU): one request at a time with the measured process on
    a core of its own, then at `streams` concurrent streams (`streams * rounds` requests each) on shared cores."""
    proc, base = lab.service("service-cpu")
    relay_proc, relay_base = lab.relay()
    service, relay = Streamer(proc, base, service_ok), Streamer(relay_proc, relay_base, relay_ok)
    try:
        with lab.isolated(proc, relay_proc) as split:
            sequential = await cpu_sequential(service, relay, runs)
        concurrent = await cpu_concurrent(service, relay, streams, streams * rounds)
    finally:
        lab.stop(relay_proc)
        lab.stop(proc)
    return {"cpu_split": split, "streams": streams, "sequential": sequential, "concurrent": concurrent}


async def cpu_profile(lab: Lab, runs: int, streams: int, requests: int) -> dict[str, Any]:
    """Section 8b: where the CPU of a streamed factual answer goes, in the service and in the bare relay: each
    sampled by py-spy (`bench.stacks.Recorder`) while it answers `runs` requests one at a time (alone on a core,
    as in section 8) and then `requests` at `streams` concurrent streams; the samples' shares per category applied
    to the CPU the process spent meanwhile. A fresh service and relay, warmed up."""
    proc, base = lab.service("service-profile")
    relay_proc, relay_base = lab.relay()
    streamers = {"service": Streamer(proc, base, service_ok), RELAY: Streamer(relay_proc, relay_base, relay_ok)}
    question = QUESTIONS["factual"]
    out: dict[str, Any] = {"streams": streams, "errors": []}
    try:
        for key, streamer in streamers.items():
            async with new_client() as client:
                await _warm_up(client, streamer, [question] * 3)
            for part in ("sequential", "concurrent"):
                tally = CpuTally()
                raw = lab.work / f"profile-{key}-{part}.raw"
                with contextlib.ExitStack() as stack:
                    if part == "sequential":
                        stack.enter_context(lab.isolated(streamer.proc))
                    recorder = stack.enter_context(Recorder(streamer.proc.pid, raw))
                    if part == "sequential":
                        async with new_client() as client:
                            for _ in range(runs):
                                cpu, ok = await _cpu_one(client, streamer, question)
                                tally.add(cpu, [ok])
                    else:
                        await _cpu_block(streamer, question, requests, streams, tally)
                if recorder.error:
                    out["errors"].append(recorder.error)
                samples = recorder.counts()
                out.setdefault(key, {})[part] = {"tally": tally, "samples": samples}
                print(f"  profile: {key}, {part}: {tally.per_request * 1000:.1f} ms/request, "
                      f"{sum(samples.values())} samples", flush=True)
    finally:
        lab.stop(relay_proc)
        lab.stop(proc)
    return out


TRACED_TYPES = ("factual", "comparative")  # the fewest spans and the most
EXPORT_WAIT_S = 6.0  # the SDK's batch processor exports every 5 s: the last batch lands inside the measured window


async def tracing_cpu(lab: Lab, runs: int, export_wait_s: float = EXPORT_WAIT_S) -> dict[str, Any]:
    """Section 8c: CPU per streamed request of a service with tracing on (OTLP/HTTP to a receiver in a thread of
    this process, which exports reach every few seconds) and of one
    with tracing off, both alone on the service core, `runs` per type one at a time, each request through one
    followed by the same through the other. The exports run in the traced service's own thread every few seconds:
    after the last request both services are given `export_wait_s` more, counted, so the last batch is paid for."""
    sink = OtlpReceiver(decode=False)  # a collector that takes every export and keeps only counts
    off_proc, off_base = lab.service("service-trace-off")
    on_proc, on_base = lab.service("service-trace-on", OTEL_EXPORTER_OTLP_ENDPOINT=sink.url)
    streamers = {"off": Streamer(off_proc, off_base, service_ok), "on": Streamer(on_proc, on_base, service_ok)}
    tallies = {(kind, key): CpuTally() for kind in TRACED_TYPES for key in streamers}
    try:
        with lab.isolated(off_proc, on_proc):
            async with new_client() as client:
                for streamer in streamers.values():
                    await _warm_up(client, streamer, [QUESTIONS[k] for k in TRACED_TYPES])
                await asyncio.sleep(export_wait_s)  # the warm-up's spans are exported before anything counts
                for i in range(runs):
                    for kind in TRACED_TYPES:
                        for key, streamer in streamers.items():
                            cpu, ok = await _cpu_one(client, streamer, QUESTIONS[kind])
                            tallies[kind, key].add(cpu, [ok])
                    print(f"  tracing on/off: round {i + 1}/{runs}", flush=True)
                before = {key: s.proc.cpu_s() for key, s in streamers.items()}
                await asyncio.sleep(export_wait_s)
                for key, streamer in streamers.items():  # spread over the requests, by type
                    tail = streamer.proc.cpu_s() - before[key]
                    for kind in TRACED_TYPES:
                        tallies[kind, key].cpu_s += tail / len(TRACED_TYPES)
    finally:
        lab.stop(on_proc)
        lab.stop(off_proc)
        sink.stop()
    return {"tallies": tallies, "exports": sink.exports, "export_bytes": sink.bytes, "export_wait_s": export_wait_s}


def failure(run: Run) -> str:
    if run.error:
        return run.error[:80]
    if run.status != 200:
        return f"HTTP {run.status}"
    return "stream ended without [DONE]" if not run.done else "no answer text"


SWEEP_QUESTION = "Wanneer vervalt de vergunning van kerncentrale Borssele? (vraag {})"


async def concurrency_sweep(lab: Lab, base: str, proc: Proc, levels: list[int], rounds: int,
                            min_requests: int, settle_s: float = 1.5) -> dict[str, Any]:
    """Section 5: for each level N, a closed loop with N clients, each sending its next request as soon as the
    previous one ends, until max(N * rounds, min_requests) requests are done. Every question is distinct."""
    numbers = itertools.count(1)
    out: dict[str, Any] = {"levels": []}
    async with new_client(8) as probe:
        async with new_client(8) as client:  # warm-up, then the memory baseline
            for _ in range(3):
                await stream_chat(client, base, SWEEP_QUESTION.format(f"warm-{next(numbers)}"))
        out["baseline_rss_mb"] = proc.rss_mb()
        for level in levels:
            await asyncio.sleep(settle_s)  # the lag gauge covers the last second: let the previous level age out
            row = await _sweep_level(lab, base, proc, probe, level, max(level * rounds, min_requests), numbers)
            out["levels"].append(row)
            print(f"  sweep: {level} concurrent, {row['requests']} requests, {row['errors']} errors "
                  f"{row['error_kinds'][:3]}, p95 {row['p95']:.2f}s, {row['throughput']:.1f} req/s", flush=True)
            if proc.popen.poll() is not None:  # the service died: later levels would only measure that
                out["service_exit"] = {"level": level, "code": proc.popen.returncode,
                                       "log_tail": proc.log_path.read_text("utf-8", "replace")[-1500:]}
                print(f"  the service exited with code {proc.popen.returncode}:\n{out['service_exit']['log_tail']}",
                      flush=True)
                break
        out["lag_max_since_start"] = await scrape_gauge(probe, base, "neo_event_loop_lag_max_seconds") \
            if proc.popen.poll() is None else None
    out["service_warnings"] = log_warnings(proc)
    return out


def log_warnings(proc: Proc, limit: int = 6) -> list[tuple[str, int]]:
    """The service's most frequent WARNING/ERROR log messages (ids and numbers blurred), with counts."""
    counts: Counter[str] = Counter()
    for line in proc.log_path.read_text("utf-8", "replace").splitlines():
        match = re.search(r"\b(WARNING|ERROR|CRITICAL)\b.*", line)
        if match:
            text = re.sub(r"\[[0-9a-f]{32}\]|\d+(\.\d+)?", "#", match.group(0))
            counts[text[:160]] += 1
    return counts.most_common(limit)


async def _sweep_level(lab: Lab, base: str, proc: Proc, probe: httpx.AsyncClient, level: int, total: int,
                       numbers: Iterator[int]) -> dict[str, Any]:
    todo = iter(range(total))  # shared by the workers: each takes the next request until none are left
    runs: list[Run] = []
    lags: list[float] = []
    rss: list[float] = []

    async def one_sample() -> None:
        rss.append(proc.rss_mb())
        lag = await scrape_gauge(probe, base, "neo_event_loop_lag_seconds")
        if lag is not None:
            lags.append(lag)

    async def worker(client: httpx.AsyncClient) -> None:
        for _ in todo:
            runs.append(await stream_chat(client, base, SWEEP_QUESTION.format(next(numbers))))

    def cpu_now() -> tuple[float, float, float, float, float]:
        docs = lab.docserver_proc.cpu_s() if lab.docserver_proc else 0.0
        return proc.cpu_s(), process_cpu_s(), lab.upstream.proc.cpu_s(), docs, machine_busy_s()

    seen = await lab.upstream.count(probe)
    before, t0 = cpu_now(), time.perf_counter()
    stop = asyncio.Event()
    async with new_client(level + 4) as client:
        sampler = asyncio.create_task(sample_every(0.5, one_sample, stop))
        await asyncio.gather(*(worker(client) for _ in range(level)))
        stop.set()
        await sampler
    wall = time.perf_counter() - t0
    cpu, client_cpu, fake_cpu, docs_cpu, machine = (b - a for a, b in zip(before, cpu_now(), strict=True))
    fake_ttft = [c.first_token - c.start for c in await lab.upstream.calls(probe, seen) if c.first_token]
    ok = [r for r in runs if r.ok]
    return {
        "level": level,
        "requests": len(runs),
        "errors": sum(not r.ok for r in runs),
        "error_kinds": sorted({failure(r) for r in runs if not r.ok}),
        "degraded": sum(r.degraded for r in ok),
        "degraded_kinds": sorted({line.strip()[:100] for r in ok if r.degraded for line in r.think.splitlines()
                                  if "niet beschikbaar" in line or "niet doorzocht" in line})[:5],
        "wall_s": wall,
        "throughput": len(ok) / wall,
        "p50": percentile((r.total for r in ok), 50),
        "p95": percentile((r.total for r in ok), 95),
        "ttfb_p95": percentile((r.since_start(r.first_byte) for r in ok), 95),
        "lag_max": max(lags, default=float("nan")),
        "lag_samples": len(lags),
        "rss_peak_mb": max(rss, default=proc.rss_mb()),
        "service_cpu_per_request_ms": 1000 * cpu / max(1, len(runs)),
        "service_cpu_util": cpu / wall,  # 1.0 = one core busy the whole level
        "bench_cpu_util": (client_cpu + fake_cpu) / wall,  # the load generator: client and fake upstream
        "client_cpu_util": client_cpu / wall,
        "upstream_cpu_util": fake_cpu / wall,
        "docserver_cpu_util": docs_cpu / wall,
        # machine-wide busy CPU minus our four processes: other load (and hypervisor steal) during the level
        "other_cpu_util": max(0.0, machine - cpu - client_cpu - fake_cpu - docs_cpu) / wall,
        "fake_ttft_p95": percentile(fake_ttft, 95),  # the fake's real first-token delay: is the harness keeping up?
    }


MCP_QUERIES = [
    ("iaea", "veiligheidscultuur leiderschap"),
    ("anvs", "vergunning Borssele"),
    ("wetten_overheid", "Kernenergiewet artikel 15a"),
    ("security", "beveiliging kernmateriaal"),
]


async def mcp_sessions(lab: Lab, calls: int) -> dict[str, dict[str, list[float]]]:
    """Section 6: `search_collection` over one long-lived session vs. a new session (client) per call."""
    from graph.clients.mcp_client import DocumentClient

    out: dict[str, dict[str, list[float]]] = {}
    queries = itertools.cycle(MCP_QUERIES)
    for mode in ("legacy", "auto"):
        reused: list[float] = []
        client = DocumentClient(lab.mcp_url, mode=mode)
        try:
            await client.search(*next(queries))  # opening the session is not a per-call cost here
            for _ in range(calls):
                t0 = time.perf_counter()
                await client.search(*next(queries))
                reused.append(time.perf_counter() - t0)
        finally:
            await client.aclose()
        fresh: list[float] = []
        for _ in range(calls):
            t0 = time.perf_counter()
            client = DocumentClient(lab.mcp_url, mode=mode)
            try:
                await client.search(*next(queries))
            finally:
                await client.aclose()  # a session per call also has to be closed: part of its cost
            fresh.append(time.perf_counter() - t0)
        out[mode] = {"reused": reused, "new": fresh}
        print(f"  mcp ({mode}): reused p50 {statistics.median(reused) * 1000:.1f} ms, "
              f"new session p50 {statistics.median(fresh) * 1000:.1f} ms", flush=True)
    async with new_client() as client:
        await mcp_intervals(client, lab.docserver)  # not needed later: drop them
    return out


async def security_overhead(lab: Lab, requests: int) -> dict[str, list[float]]:
    """Section 9: what the access check and the instruction filter add to one request, timed in this process
    (a pinned core's worth of work, no network): who the caller is (a signed Open WebUI user token, verified)
    and which collections it may see, and the screening of the passages research keeps for each question of
    the latency part (every collection's top hits), with the screening memo cleared so every passage is read.
    Per request, so that the target (≤ 2 ms p50) reads directly."""
    import jwt

    from app.access import Access
    from app.settings import Settings
    from graph.clients.mcp_client import DocumentClient
    from graph.collections import load_catalog
    from graph.text.injection import screen, screen_text

    settings = Settings(_env_file=None)
    catalog = load_catalog(settings.collections_file)
    access_file = lab.work / "access.json"
    access_file.write_text(json.dumps({"restricted": catalog.names[-1:], "grants": [
        {"role": "admin", "collections": catalog.names[-1:]}]}), "utf-8")
    secret = "bench-secret-of-32-bytes-or-more!!"
    access = Access(settings.model_copy(update={"access_file": access_file, "user_jwt_secret": secret}), catalog.names)
    passages: list[list] = []
    client = DocumentClient(lab.mcp_url)
    try:
        for question in QUESTIONS.values():
            found = [await client.search(name, question) for name in catalog.names]
            passages.append([e for hits in found for e in hits[: settings.pipeline.top_k]])
    finally:
        await client.aclose()
    out: dict[str, list[float]] = {"access": [], "screen": [], "passages": []}
    for i in range(requests):
        token = jwt.encode({"sub": f"u{i}", "email": f"u{i}@example.nl", "role": "admin" if i % 2 else "user",
                            "exp": int(time.time()) + 300}, secret, algorithm="HS256")
        headers = {"x-openwebui-user-jwt": token}
        t0 = time.perf_counter()
        access.visible(access.identify(headers, "0123456789abcdef"), catalog.names)
        out["access"].append(time.perf_counter() - t0)
        evidence = passages[i % len(passages)]
        screen_text.cache_clear()
        t0 = time.perf_counter()
        screen(evidence)
        out["screen"].append(time.perf_counter() - t0)
        out["passages"].append(len(evidence))
    print(f"  security: access p50 {statistics.median(out['access']) * 1000:.3f} ms, screening "
          f"p50 {statistics.median(out['screen']) * 1000:.3f} ms per request", flush=True)
    return out


def cache_question(backend: str, i: int) -> str:
    """Section 7's i-th distinct question: the factual one with a tag of letters. Not a number: a number the
    question names and no passage holds makes the pipeline decline it, and a declined answer is never cached."""
    tag = "".join(chr(ord("a") + int(d)) for d in str(i))
    return f"{QUESTIONS['factual']} (cache {backend} {tag})"


async def response_cache(lab: Lab, hits: int, misses: int, redis: bool) -> dict[str, dict[str, Any]]:
    """Section 7: cache misses (distinct questions) vs. hits (the first question again), in memory and,
    when asked for, in a real redis-server."""
    out: dict[str, dict[str, Any]] = {}
    backends = ["memory"] + (["redis"] if redis else [])
    for backend in backends:
        redis_proc = None
        settings: dict[str, object] = {"RESPONSE_CACHE": "true"}
        if backend == "redis":
            redis_proc, url = start_redis(lab.work)
            settings["REDIS_URL"] = url
        proc, base = lab.service(f"service-cache-{backend}", **settings)
        try:
            async with new_client() as client:
                await stream_chat(client, base, QUESTIONS["factual"] + " (opwarmen)")
                miss_runs = [
                    await stream_chat(client, base, cache_question(backend, i)) for i in range(misses)
                ]
                hit_runs = [await stream_chat(client, base, cache_question(backend, 0)) for _ in range(hits)]
            out[backend] = {
                "miss": [r.total for r in miss_runs if r.ok],
                "hit": [r.total for r in hit_runs if r.ok and r.cached],
                "hit_ttfb": [r.since_start(r.first_byte) for r in hit_runs if r.ok and r.cached],
                "not_served_from_cache": sum(not (r.ok and r.cached) for r in hit_runs),
                "hit_upstream_calls": max((r.usage.get("upstream_calls", 0) for r in hit_runs), default=0),
            }
            print(f"  cache ({backend}): hit p50 {percentile(out[backend]['hit'], 50) * 1000:.1f} ms, "
                  f"miss p50 {percentile(out[backend]['miss'], 50) * 1000:.0f} ms", flush=True)
        finally:
            lab.stop(proc)
            if redis_proc is not None:
                redis_proc.stop()
    return out
