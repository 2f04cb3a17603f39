"""Section 11: a chat while a file is read (`python -m bench --only upload`; issue 58: "a chat stays responsive
while a 200-page PDF ingests").

Two ways the service is deployed with uploads on, each measured in one run on the same machine:

* `embedded` (what `make run` starts): no MCP_SERVER_URL, so the reference document server runs on the service's
  own event loop and reloads its index (`docserver.live`) in a thread of the service's process;
* `standalone` (what docker-compose starts): the reference server is a process of its own and the service writes
  the index it serves (DOCSERVER_INDEX names the same file).

Both in LLM mode against the benchmark's fake upstream. In each: a vector store, a small warm-up upload (it
starts the process that reads files, and the factual question then searches the new collection in both phases),
then rounds of a block of chats without an upload followed by a block of chats while a generated PDF
(`bench/scale.py`'s writer) is uploaded and read: the requests `client.vector_stores.files.upload_and_poll` makes
(`POST /v1/files`, `POST /v1/vector_stores/{id}/files`, then `GET` until the file is no longer `in_progress`), sent
with httpx, as `make bench` does not install the `openai` package. Alternating the blocks spreads a collection that
grows by one PDF a round evenly over both phases.

Where the time goes is read cheaply: the CPU clock of every process (the service's main thread, which runs its
event loop, apart from its other threads through /proc/<pid>/task/<pid>/schedstat), the service's event-loop lag
gauge, and the log lines that time a file's reading (`app.library`) and the document server's index reload
(`docserver.live`); hence LOG_LEVEL=INFO in this part.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import random
import re
import statistics
import sys
import time
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

import httpx

from bench import scale
from bench.harness import (
    ROOT,
    Proc,
    Run,
    child_env,
    describe_tree,
    free_port,
    imported_from,
    machine_busy_s,
    new_client,
    percentile,
    process_cpu_s,
    process_tree,
    sample_every,
    scrape_gauge,
    start_service,
    stream_chat,
)
from bench.scenarios import QUESTIONS, Lab, failure, fresh_tenant

STORE = "bench-upload"  # the vector store (collection) the files go to
QUESTION = QUESTIONS["factual"]
POLL_S = 0.25  # between two looks at the attachment (the openai package waits 1 s): the upload's time to this
LAG_SAMPLE_S = 0.5  # the service's lag gauge holds the worst lag of the last second
SETUPS = ("embedded", "standalone")
# the log lines timed (`docserver.live`, `app.library`), behind the logging module's default asctime
STAMP = r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) .*"
RELOADED = re.compile(STAMP + r"changed: reloaded (\d+) documents, (\d+) chunks in ([\d.]+) s", re.M)
READ = re.compile(STAMP + r"read into \S+: (\w+) \(([\d.]+) s\)", re.M)


@dataclass(frozen=True)
class UploadSize:
    """How much is measured per setup."""

    pages: int  # of each measured PDF
    rounds: int  # blocks without an upload, each followed by one with an upload
    streams: int  # chat clients at once, each sending its next question when its answer ended
    quiet_chats: int  # chats per client in a block without an upload
    warm_pages: int  # the warm-up upload
    stagger_s: float  # between the clients' first requests, so their answers do not stream in lockstep


FULL = UploadSize(pages=200, rounds=8, streams=4, quiet_chats=2, warm_pages=10, stagger_s=0.6)
SMOKE = UploadSize(pages=12, rounds=1, streams=2, quiet_chats=1, warm_pages=2, stagger_s=0.06)


# ------------------------------------------------------------------------------------------ the files


def make_pdf(pages: int, number: int) -> tuple[bytes, int]:
    """A report of about ``pages`` pages (seeded by ``number``) as the scale section writes them; (bytes, pages)."""
    title, laid_out, _ = scale._pdf_document(random.Random(scale.SEED + number), scale.read_pool(), number, pages)
    return scale.pdf_bytes(title, laid_out), len(laid_out)


# ------------------------------------------------------------------------------------------ the processes


def start_docserver(work: Path, index: Path) -> tuple[Proc, str]:
    """A standalone reference server on ``index`` (`python -m bench.upload docserver`), which logs its reloads."""
    port = free_port()
    cmd = [sys.executable, "-m", "bench.upload", "docserver", "--port", str(port), "--index", str(index)]
    proc = Proc("upload-docserver", cmd, child_env({}), ROOT, work)
    base = f"http://127.0.0.1:{port}"
    proc.wait_http(base + "/health")
    return proc, base


def start(lab: Lab, setup: str) -> tuple[Proc, str, Proc | None]:
    """The service for ``setup`` with uploads on, writing a fresh index in the scratch folder; (service, base URL,
    the standalone document server or None). Registered with the lab, which stops whatever is left."""
    folder = lab.work / f"upload-{setup}"
    folder.mkdir(exist_ok=True)
    index = folder / "index.sqlite3"
    docserver, mcp_url = None, ""  # empty: the embedded server, on DOCSERVER_INDEX
    if setup == "standalone":
        docserver, docserver_base = start_docserver(lab.work, index)
        lab.procs.append(docserver)
        mcp_url = docserver_base + "/mcp"
    proc, base = start_service(lab.work, f"service-upload-{setup}", llm_url=lab.upstream.base_url, mcp_url=mcp_url,
                               DOCSERVER_INDEX=index, LOG_LEVEL="INFO")
    lab.procs.append(proc)
    lab.code = lab.code or describe_tree(imported_from(proc))
    return proc, base, docserver


# ------------------------------------------------------------------------------------------ CPU clocks


@dataclass(frozen=True)
class Clocks:
    """CPU seconds of every process in play, and the wall clock, at one moment."""

    wall: float
    loop: float  # the service's main thread: its event loop, and the embedded document server's
    service: float  # the service's process, every thread
    readers: float  # its child processes: the pool that reads files (INGEST_WORKERS)
    docserver: float  # the standalone document server
    client: float  # this process
    upstream: float
    machine: float  # the whole machine's busy time


def _thread_cpu_s(pid: int, tid: int) -> float:
    """A thread's CPU time to the nanosecond (schedstat's first field); NaN once it is gone."""
    try:
        return int(Path(f"/proc/{pid}/task/{tid}/schedstat").read_text().split()[0]) / 1e9
    except (FileNotFoundError, ProcessLookupError, IndexError, ValueError):
        return float("nan")


def _cpu(pid: int) -> float:
    try:
        return process_cpu_s(pid)
    except ProcessLookupError:
        return 0.0


def clocks(service: Proc, docserver: Proc | None, upstream: Proc) -> Clocks:
    children = process_tree(service.pid)[1:]
    return Clocks(time.perf_counter(), _thread_cpu_s(service.pid, service.pid), _cpu(service.pid),
                  sum(_cpu(pid) for pid in children), docserver.cpu_s() if docserver else 0.0, process_cpu_s(),
                  upstream.cpu_s(), machine_busy_s())


def spent(before: Clocks, after: Clocks) -> dict[str, float]:
    return {f.name: getattr(after, f.name) - getattr(before, f.name) for f in fields(Clocks)}


# ------------------------------------------------------------------------------------------ a block


@dataclass
class Phase:
    """Everything measured in the blocks of one phase (without an upload, or during one)."""

    chats: list[list[float]]  # per answered chat: [start (perf_counter), first byte, first answer token, total]
    errors: int
    error_kinds: list[str]
    lags: list[float]
    cpu: dict[str, float]  # CPU seconds per Clocks field, summed over the blocks (`wall` too)

    @classmethod
    def empty(cls) -> Phase:
        return cls([], 0, [], [], {f.name: 0.0 for f in fields(Clocks)})

    def add(self, runs: list[Run], lags: list[float], cpu: dict[str, float]) -> None:
        for run in runs:
            if run.ok:
                self.chats.append([run.start, run.since_start(run.first_byte), run.since_start(run.first_answer),
                                   run.total])
            else:
                self.errors += 1
                self.error_kinds = sorted({*self.error_kinds, failure(run)})
        self.lags += lags
        for name, value in cpu.items():
            self.cpu[name] += value


async def chats(client: httpx.AsyncClient, base: str, size: UploadSize, *, count: int | None = None,
                until: asyncio.Event | None = None) -> list[Run]:
    """``size.streams`` clients asking the factual question, one after the other each (a fresh bearer token every
    time: no plan cache), ``count`` times each or until ``until`` is set; every run, in the order they ended."""
    runs: list[Run] = []

    async def one(i: int) -> None:
        await asyncio.sleep(i * size.stagger_s)
        n = 0
        while (count is None or n < count) and not (until is not None and until.is_set()):
            runs.append(await stream_chat(client, base, QUESTION, tenant=fresh_tenant()))
            n += 1

    await asyncio.gather(*(one(i) for i in range(size.streams)))
    return runs


async def upload(client: httpx.AsyncClient, base: str, name: str, data: bytes) -> dict[str, Any]:
    """What `upload_and_poll` does: the file, its attachment to the store, then a look every POLL_S until it is no
    longer `in_progress`. Times in seconds from the start."""
    t0 = time.perf_counter()
    response = await client.post(base + "/v1/files", files={"file": (name, data, "application/pdf")},
                                 data={"purpose": "assistants"})
    response.raise_for_status()
    file_id, sent = response.json()["id"], time.perf_counter() - t0
    response = await client.post(f"{base}/v1/vector_stores/{STORE}/files", json={"file_id": file_id})
    response.raise_for_status()
    state = response.json()
    while state["status"] == "in_progress":
        await asyncio.sleep(POLL_S)
        response = await client.get(f"{base}/v1/vector_stores/{STORE}/files/{file_id}")
        response.raise_for_status()
        state = response.json()
    return {"file_id": file_id, "sent_s": sent, "completed_s": time.perf_counter() - t0, "status": state["status"],
            "error": (state.get("last_error") or {}).get("message")}


async def block(lab: Lab, base: str, service: Proc, docserver: Proc | None, size: UploadSize,
                pdf: tuple[str, bytes] | None) -> tuple[list[Run], list[float], dict[str, float], dict | None]:
    """One block: chats alone (``pdf`` None: ``size.quiet_chats`` per client), or chats from the upload's first byte
    until its file is searchable (every chat started before that counts). (runs, lag samples, CPU, upload)."""
    lags: list[float] = []
    stop, done = asyncio.Event(), asyncio.Event()

    async def lag() -> None:
        value = await scrape_gauge(probe, base, "neo_event_loop_lag_seconds")
        if value is not None:
            lags.append(value)

    async def send() -> dict[str, Any]:
        try:
            return await upload(probe, base, *pdf)
        finally:
            done.set()

    async with new_client(4) as probe, new_client(size.streams + 2) as client:
        before = clocks(service, docserver, lab.upstream.proc)
        sampler = asyncio.create_task(sample_every(LAG_SAMPLE_S, lag, stop))
        sending = asyncio.create_task(send()) if pdf else None
        runs = await chats(client, base, size, count=None if pdf else size.quiet_chats, until=done if pdf else None)
        sent = await sending if sending else None
        after = clocks(service, docserver, lab.upstream.proc)
        stop.set()
        await sampler
    return runs, lags, spent(before, after), sent


# ------------------------------------------------------------------------------------------ a setup


def _perf(stamp: str) -> float:
    """A log line's local time (`2026-11-29 09:47:00,752`) on the perf_counter() clock, to lay it beside the chats
    (the child processes run in this process's time zone)."""
    logged = dt.datetime.strptime(stamp, "%Y-%m-%d %H:%M:%S,%f").timestamp()
    return logged - (time.time() - time.perf_counter())


def log_figures(log: Path, offset: int) -> dict[str, list]:
    """Logged after byte ``offset``: the reads (`app.library`: status, seconds) and the index reloads
    (`docserver.live`: documents, chunks, seconds, and the perf_counter() time the reload ended)."""
    text = log.read_bytes()[offset:].decode("utf-8", "replace")
    return {"reads": [[status, float(s)] for _, status, s in READ.findall(text)],
            "reloads": [[int(d), int(c), float(s), _perf(stamp)] for stamp, d, c, s in RELOADED.findall(text)]}


async def measure_setup(lab: Lab, setup: str, size: UploadSize) -> dict[str, Any]:
    """One setup on a fresh service and index: the warm-up, then ``size.rounds`` pairs of blocks, without an upload
    and during one, so that both phases see the collection at every size it grows through."""
    service, base, docserver = start(lab, setup)
    # the process that reloads the index, whose log says how long it took
    reloader = service if docserver is None else docserver
    try:
        async with httpx.AsyncClient(timeout=120.0) as client:
            created = await client.post(base + "/v1/vector_stores", json={"name": STORE})
            created.raise_for_status()
            warm_pdf, warm_pages = make_pdf(size.warm_pages, 0)
            warm = {**await upload(client, base, "warm-up.pdf", warm_pdf), "pages": warm_pages}
            async with new_client(2) as one:  # the first chat that searches the new collection
                await stream_chat(one, base, QUESTION, tenant=fresh_tenant())
        offsets = (service.log_path.stat().st_size, reloader.log_path.stat().st_size)
        # the index as the warm-up left it: its last reload (settled before `completed`, so logged by now)
        chunks_before = ([0, 0, 0, 0] + log_figures(reloader.log_path, 0)["reloads"])[-1][1]
        without, during, uploads = Phase.empty(), Phase.empty(), []
        for n in range(1, size.rounds + 1):
            runs, lags, cpu, _ = await block(lab, base, service, docserver, size, None)
            without.add(runs, lags, cpu)
            data, pages = make_pdf(size.pages, n)
            runs, lags, cpu, sent = await block(lab, base, service, docserver, size, (f"rapport-{n}.pdf", data))
            during.add(runs, lags, cpu)
            uploads.append({**sent, "pages": pages, "bytes": len(data), "chats": len(runs)})
            print(f"  upload {setup} {n}/{size.rounds}: {pages} pages {sent['status']} in {sent['completed_s']:.1f} s, "
                  f"{len(runs)} chats meanwhile", flush=True)
        logged = {"reads": log_figures(service.log_path, offsets[0])["reads"],
                  "reloads": log_figures(reloader.log_path, offsets[1])["reloads"]}
        lag_max = await _lag_max(base)
    finally:
        for proc in (service, docserver):
            if proc is not None:
                lab.stop(proc)
    return {"setup": setup, "warm": warm, "uploads": uploads, "without": asdict(without), "during": asdict(during),
            **logged, "chunks_before": chunks_before, "lag_max_since_start": lag_max}


async def _lag_max(base: str) -> float | None:
    async with new_client(2) as probe:
        return await scrape_gauge(probe, base, "neo_event_loop_lag_max_seconds")


async def measure(lab: Lab, size: UploadSize) -> dict[str, Any]:
    """Every setup, one after the other, each with a fresh service and index."""
    out = {"size": asdict(size), "poll_s": POLL_S, "question": QUESTION, "setups": {}}
    for setup in SETUPS:
        out["setups"][setup] = await measure_setup(lab, setup, size)
    return out


# ------------------------------------------------------------------------------------------ the figures


def _waited_on_reload(chat: list[float], reloads: list[list]) -> bool:
    """Whether a chat's wait for its first answer token overlapped an index reload (tool calls, the service's look
    at the library included, wait for a reload under way: `docserver.live`)."""
    start, _, first_answer, _ = chat
    return any(end - seconds < start + first_answer and end > start for _, _, seconds, end in reloads)


def _reload_kinds(reloads: list[list], chunks: int) -> dict[str, list[float]]:
    """The reloads' seconds split into those that brought a stored document (more chunks than the index had before,
    ``chunks`` at first) and the others (the index file was written to: a file added, attached)."""
    stored, other = [], []
    for _, now, seconds, _ in reloads:
        (stored if now > chunks else other).append(seconds)
        chunks = max(chunks, now)
    return {"stored_s": stored, "other_s": other}


def _latency(chats: list[list[float]]) -> dict[str, tuple[float, float]]:
    """p50 and p95 of first byte, first answer token and total (seconds)."""
    return {name: (percentile([c[i] for c in chats], 50), percentile([c[i] for c in chats], 95))
            for i, name in ((1, "ttfb"), (2, "first_answer"), (3, "total"))}


def _utilisation(cpu: dict[str, float]) -> dict[str, float]:
    """Share of one core per process (the service without its main thread as `threads`), and the rest of the
    machine's busy time as `other`."""
    wall = cpu["wall"] or float("nan")
    ours = cpu["service"] + cpu["readers"] + cpu["docserver"] + cpu["client"] + cpu["upstream"]
    shares = {name: cpu[name] / wall for name in ("loop", "readers", "docserver", "client", "upstream")}
    return {**shares, "threads": (cpu["service"] - cpu["loop"]) / wall, "other": max(0.0, cpu["machine"] - ours) / wall}


def summary(setup: dict[str, Any]) -> dict[str, Any]:
    """One setup's figures for the report: latency per phase, the ratios during / without of the p95s, the upload's
    times, the reloads, and the chats during uploads split by whether they waited on a reload."""
    phases = {}
    for name in ("without", "during"):
        phase = setup[name]
        phases[name] = {"chats": len(phase["chats"]), "errors": phase["errors"], "error_kinds": phase["error_kinds"],
                        "lag_max": max(phase["lags"], default=float("nan")), "cpu": _utilisation(phase["cpu"]),
                        "wall_s": phase["cpu"]["wall"], **_latency(phase["chats"])}
    uploads = setup["uploads"]
    reloads = setup["reloads"]
    waited = [c for c in setup["during"]["chats"] if _waited_on_reload(c, reloads)]
    clear = [c for c in setup["during"]["chats"] if not _waited_on_reload(c, reloads)]
    return {
        **phases,
        "ratio": {key: phases["during"][key][1] / phases["without"][key][1] for key in ("ttfb", "first_answer", "total")},
        "uploads": len(uploads),
        "failed": sum(u["status"] != "completed" for u in uploads),
        "pages": statistics.median(u["pages"] for u in uploads),
        "mb": statistics.median(u["bytes"] for u in uploads) / 2**20,
        "completed_s": statistics.median(u["completed_s"] for u in uploads),
        "completed_max_s": max(u["completed_s"] for u in uploads),
        "pages_per_s": sum(u["pages"] for u in uploads) / sum(u["completed_s"] for u in uploads),
        "sent_s": statistics.median(u["sent_s"] for u in uploads),
        "read_s": statistics.median(s for _, s in setup["reads"]) if setup["reads"] else float("nan"),
        "reloads": len(reloads),
        "reload_max_s": max((r[2] for r in reloads), default=float("nan")),
        **_reload_kinds(reloads, setup["chunks_before"]),
        "chunks": max((r[1] for r in reloads), default=0),
        "waited": {"chats": len(waited), **_latency(waited)},
        "clear": {"chats": len(clear), **_latency(clear)},
    }


# ------------------------------------------------------------------------------------------ the docserver


def docserver_main(argv: list[str]) -> int:
    """`python -m bench.upload docserver --port N --index FILE`: the benchmark's timed reference server
    (`bench.docserver`) on a writable index, its own log at INFO so each index reload is logged with its duration."""
    import logging

    import uvicorn

    from bench.docserver import MCPTimer
    from docserver.server import KEEPALIVE_S, create_app

    parser = argparse.ArgumentParser(prog="python -m bench.upload docserver")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--index", required=True)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    logging.getLogger("docserver").setLevel(logging.INFO)
    uvicorn.run(MCPTimer(create_app(index_path=args.index)), host="127.0.0.1", port=args.port, log_level="warning",
                access_log=False, timeout_keep_alive=KEEPALIVE_S)
    return 0


if __name__ == "__main__":
    if sys.argv[1:2] != ["docserver"]:
        sys.exit("usage: python -m bench.upload docserver --port N --index FILE (the section: python -m bench --only "
                 "upload)")
    sys.exit(docserver_main(sys.argv[2:]))
