"""Benchmark plumbing: the processes under test, the scripted fake upstream, a raw SSE client, and the
interval arithmetic behind the overhead numbers.

Topology (one machine, loopback HTTP everywhere):

* the service: a subprocess (`python -m app serve`), so its resident memory (/proc) and CPU time (its CPU clock)
  can be read on their own and nothing of the benchmark runs on its event loop;
* the reference document server: a subprocess too (`python -m bench.docserver`), with a timer around /mcp;
* the fake upstream LLM (`tests/fakes/fake_llm.py`): a subprocess too (`python -m bench.upstream`), which hands
  over its per-call timings over HTTP, so that it does not share an interpreter lock with the client;
* the bare relay (`python -m bench.relay`, section 8 only): a subprocess too, the service's anchor for CPU;
* the client: the benchmark's own process, one asyncio loop (httpx, raw SSE parsing).

Every timestamp is `time.perf_counter()`, which on Linux is CLOCK_MONOTONIC and therefore comparable
across the processes.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import socket
import subprocess
import sys
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from tests.fakes.fake_llm import FakeLLM, Reply, split_tokens

ROOT = Path(__file__).resolve().parents[1]
TTFT_S = 0.300  # the fake upstream's time to first token
TOKEN_DELAY_S = 0.010  # and between tokens
CALLS_PATH = "/_bench/upstream-calls"  # the fake upstream's record of its calls (`bench/upstream.py`)
MODEL = "neo-nl-agent"
LLM_MAX_CONCURRENCY = 512  # the service's upstream cap and pool size in the benchmark, and the relay's

# ---------------------------------------------------------------------------------------------- numbers


def percentile(values: Iterable[float], q: float) -> float:
    """q-th percentile with linear interpolation between closest ranks (numpy's default); NaN when empty."""
    data = sorted(values)
    if not data:
        return float("nan")
    rank = (len(data) - 1) * q / 100
    low = int(rank)
    high = min(low + 1, len(data) - 1)
    return data[low] + (data[high] - data[low]) * (rank - low)


def union_length(intervals: Iterable[tuple[float, float]], lo: float, hi: float) -> float:
    """Length of the union of `intervals` clipped to [lo, hi]: time in which at least one wait was open."""
    clipped = sorted((max(a, lo), min(b, hi)) for a, b in intervals if b > lo and a < hi)
    total, cur_a, cur_b = 0.0, None, None
    for a, b in clipped:
        if cur_b is None or a > cur_b:
            if cur_b is not None:
                total += cur_b - cur_a
            cur_a, cur_b = a, b
        else:
            cur_b = max(cur_b, b)
    if cur_b is not None:
        total += cur_b - cur_a
    return total


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


# ------------------------------------------------------------------------------------ the fake upstream

# Marker phrases of the prompt templates (prompts/nl/*.md), most specific first: decompose, condense, judge
# and route prompts also contain the summarize marker "Antwoord uitsluitend met JSON".
ANSWER_MARKER = "Je bent NEO NL"  # the answer's system prompt; the bare relay sends it as its system message
CALL_KINDS = (
    ("decompose", "Splits de vraag op in deelvragen"),
    ("condense", "Je bent een onderzoeksagent"),
    ("judge", "Beoordeel of de kernfeiten"),
    ("route", "Classificeer de vraag"),
    ("answer", ANSWER_MARKER),
    ("summarize", "Antwoord uitsluitend met JSON"),
)

FACTS = json.dumps({"facts": [
    {"fact": "De vergunning en de eisen staan in de gevonden passages.", "sources": [1, 2]},
    {"fact": "Veiligheidscultuur is een verantwoordelijkheid van de vergunninghouder.", "sources": [2]},
    {"fact": "De toezichthouder beoordeelt de naleving periodiek.", "sources": [3]},
]}, ensure_ascii=False)
AGENT_FACTS = json.dumps({"facts": [
    {"fact": "Deze bron stelt eisen aan veiligheidscultuur en leiderschap.", "sources": [1]},
    {"fact": "De eisen worden periodiek geëvalueerd.", "sources": [2]},
]}, ensure_ascii=False)
# About 200 tokens (the answer size the relay target of issue 36 names): two paragraphs stream for about two
# seconds at 10 ms per token.
ANSWER = (
    "Op basis van de gevonden passages is het antwoord als volgt samen te vatten [1]. "
    "De geraadpleegde documenten beschrijven de eisen, de termijnen en de verantwoordelijkheden van de "
    "vergunninghouder en van de toezichthouder [2]. "
    "De vergunninghouder draagt de eerste verantwoordelijkheid voor de veiligheid en moet aantonen dat de "
    "installatie aan de geldende eisen voldoet [1]. "
    "De toezichthouder beoordeelt dit periodiek en kan aanvullende maatregelen opleggen wanneer dat nodig is [3]. "
    "Internationale normen vormen daarbij het referentiekader, terwijl de Nederlandse wetgeving de juridisch "
    "bindende regels bevat [2]. "
    "Waar de bronnen geen uitsluitsel geven, wordt dat hieronder vermeld.\n\n"
    "Voor de praktijk betekent dit dat een aanvraag pas volledig is wanneer de veiligheidsanalyse, de "
    "beschrijving van de organisatie en het plan voor de ontmanteling samen zijn ingediend [1]. "
    "De toezichthouder toetst die stukken aan de algemene regels en aan de voorschriften die voor de installatie "
    "gelden, en legt de uitkomst vast in een besluit dat openbaar wordt gemaakt [3]. "
    "Tegen dat besluit staan bezwaar en beroep open voor belanghebbenden, binnen de termijnen die de wet "
    "daarvoor stelt [2]. "
    "Bij een wijziging van de installatie of van de organisatie moet de vergunninghouder opnieuw aantonen dat de "
    "veiligheid gewaarborgd blijft, en soms is daarvoor een nieuwe vergunning nodig [1]."
)


def _decomposition(body: dict[str, Any]) -> str:
    """One sub-question per collection listed in the decomposition prompt (`- name: Display — focus`)."""
    prompt = body["messages"][-1]["content"]
    names = re.findall(r"^- (\w+):", prompt.split("Vraag:")[0], re.M)
    return json.dumps({"sub_questions": [{"collection": n, "query": f"{n} eisen veiligheidscultuur"} for n in names]})


def reply_sizes() -> dict[str, int]:
    """Tokens (the fake's whitespace pieces) of the scripted replies, for the report."""
    return {"answer_tokens": len(split_tokens(ANSWER)), "facts_tokens": len(split_tokens(FACTS)),
            "agent_tokens": len(split_tokens(AGENT_FACTS))}


def call_kind(body: dict[str, Any]) -> str:
    text = "\n".join(str(m.get("content") or "") for m in body.get("messages", []) if isinstance(m, dict))
    return next((kind for kind, marker in CALL_KINDS if marker in text), "other")


def script_fake(fake: FakeLLM) -> FakeLLM:
    """A valid reply for every prompt of the pipeline."""
    fake.when_contains("Splits de vraag op in deelvragen", Reply(text=_decomposition))
    fake.when_contains("Je bent een onderzoeksagent", Reply(text=AGENT_FACTS))
    fake.when_contains("Beoordeel of de kernfeiten", Reply(text='{"status": "sufficient", "missing": []}'))
    fake.when_contains("Classificeer de vraag", Reply(text='{"query_type": "factual", "collections": ["anvs"]}'))
    fake.when_contains(ANSWER_MARKER, Reply(text=ANSWER))
    fake.when_contains("Antwoord uitsluitend met JSON", Reply(text=FACTS))
    return fake


@dataclass(frozen=True, slots=True)
class UpstreamCall:
    kind: str
    start: float
    first_token: float | None
    end: float | None  # None while the call is in flight


def upstream_calls(fake: FakeLLM, since: int = 0) -> list[UpstreamCall]:
    """The fake's calls from the `since`-th on, in arrival order, finished or not (`Upstream.calls` keeps the
    finished ones); `requests` and `timings` are appended together, in step."""
    requests, timings = fake.requests[since:], fake.timings[since:]
    return [
        UpstreamCall(call_kind(body), t["start"], t["first_token"], t["end"])
        # strict=False: a call that began between the two reads is cut off, the pairs stay aligned
        for body, t in zip(requests, timings, strict=False)
    ]


# ------------------------------------------------------------------------------------------- processes


def _settings_keys() -> set[str]:
    from app.settings import Settings

    return {name.upper() for name in Settings.model_fields}


class Proc:
    """A child process we started (and only that one: stopped by its own pid)."""

    started: list[Proc] = []  # every child of this run, for the CPU bookkeeping of `own_cpu_s`

    def __init__(self, name: str, cmd: list[str], env: dict[str, str], cwd: Path, log_dir: Path) -> None:
        self.name = name
        self._cpu = 0.0  # last CPU time read; what is left once the process is gone
        Proc.started.append(self)
        self.log_path = log_dir / f"{name}.log"
        self._log = open(self.log_path, "wb")  # noqa: SIM115 - closed in stop()
        self.popen = subprocess.Popen(cmd, env=env, cwd=cwd, stdout=self._log, stderr=subprocess.STDOUT)

    @property
    def pid(self) -> int:
        return self.popen.pid

    def wait_http(self, url: str, timeout_s: float = 60.0, ok: tuple[int, ...] = (200,)) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.popen.poll() is not None:
                break
            try:
                if httpx.get(url, timeout=2.0).status_code in ok:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
        self.stop()
        tail = self.log_path.read_text("utf-8", "replace")[-3000:]
        raise RuntimeError(f"{self.name} did not become ready at {url}:\n{tail}")

    def pids(self) -> list[int]:
        """This process and its descendants (uvicorn's worker processes when WORKERS > 1)."""
        return process_tree(self.pid)

    def rss_mb(self) -> float:
        """Resident memory (VmRSS) in MiB, summed over the process and its descendants."""
        total = 0
        for pid in self.pids():
            try:
                lines = Path(f"/proc/{pid}/status").read_text().splitlines()
            except (FileNotFoundError, ProcessLookupError):
                continue
            total += next((int(line.split()[1]) for line in lines if line.startswith("VmRSS:")), 0)
        return total / 1024 if total else float("nan")

    def cpu_s(self) -> float:
        """CPU seconds of the process and its live descendants (never less than the last reading)."""
        total = 0.0
        for pid in self.pids():
            try:
                total += process_cpu_s(pid)
            except ProcessLookupError:
                pass  # exited
        self._cpu = max(self._cpu, total)
        return self._cpu

    def stop(self) -> None:
        self.cpu_s()
        if self.popen.poll() is None:
            self.popen.terminate()  # uvicorn shuts down gracefully on SIGTERM
            try:
                self.popen.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.popen.kill()
                self.popen.wait(timeout=5)
        self._log.close()


def process_tree(pid: int) -> list[int]:
    """`pid` and every descendant, from /proc/<pid>/task/*/children (Linux)."""
    out, todo = [], [pid]
    while todo:
        current = todo.pop()
        out.append(current)
        for task in Path(f"/proc/{current}/task").glob("*/children"):
            try:
                todo += [int(child) for child in task.read_text().split()]
            except (FileNotFoundError, ProcessLookupError):
                pass
    return out


def set_cpus(pids: Iterable[int], cpus: set[int]) -> None:
    """Let every thread of these processes run only on `cpus` (on Linux each thread carries its own affinity;
    threads and processes started later inherit their parent's). A process that has exited is skipped."""
    for pid in pids:
        try:
            threads = [int(task.name) for task in Path(f"/proc/{pid}/task").iterdir()]
        except (FileNotFoundError, ProcessLookupError):
            continue
        for tid in threads:
            try:
                os.sched_setaffinity(tid, cpus)
            except ProcessLookupError:
                pass  # the thread ended in between


def process_cpu_s(pid: int | str = "self") -> float:
    """User + system CPU seconds of a process, every thread included (ended ones too), to the nanosecond: the
    kernel's CPU clock of the process. /proc/<pid>/stat counts in clock ticks (10 ms), too coarse for the CPU of
    one request. Raises ProcessLookupError once the process is gone."""
    if pid == "self":
        return time.process_time()
    try:
        return time.clock_gettime(_process_cpu_clock(int(pid)))
    except OSError as exc:  # EINVAL: no such process (any more)
        raise ProcessLookupError(pid) from exc


def _process_cpu_clock(pid: int) -> int:
    """clock_getcpuclockid(3) as glibc computes it (Linux): CPUCLOCK_SCHED (2) of the whole process."""
    return (~pid << 3) | 2


def own_cpu_s() -> float:
    """CPU seconds of this benchmark: its own process and every child it started."""
    return process_cpu_s() + sum(proc.cpu_s() for proc in Proc.started)


def machine_busy_s() -> float:
    """CPU seconds the whole machine was busy (all cores, /proc/stat), steal time included: with the three
    processes' own CPU subtracted, what is left shows other load on the machine."""
    user, nice, system, _idle, _iowait, irq, softirq, steal = (int(x) for x in Path("/proc/stat").read_text().split()[1:9])
    return (user + nice + system + irq + softirq + steal) / os.sysconf("SC_CLK_TCK")


def child_env(extra: dict[str, str]) -> dict[str, str]:
    """The environment of a benchmark child process: this one's, without the service's settings, plus `extra`."""
    # Settings a developer exported in this shell must not leak into the measured configuration.
    keys = _settings_keys()
    env = {k: v for k, v in os.environ.items() if k.upper() not in keys}
    env["PYTHONPATH"] = str(ROOT) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env["PYTHONUNBUFFERED"] = "1"
    env.update(extra)
    return env


def start_docserver(work: Path) -> tuple[Proc, str]:
    """The reference document server (bundled corpus only) with the /mcp timer; returns (proc, base URL)."""
    port = free_port()
    cmd = [sys.executable, "-m", "bench.docserver", "--port", str(port), "--index", str(work / "no-index.sqlite3")]
    proc = Proc("docserver", cmd, child_env({}), ROOT, work)
    base = f"http://127.0.0.1:{port}"
    proc.wait_http(base + "/health")
    return proc, base


@dataclass
class Upstream:
    """The fake upstream's process (`python -m bench.upstream`), as the benchmark sees it."""

    proc: Proc
    base: str
    ttft_s: float
    token_delay_s: float

    @property
    def base_url(self) -> str:
        return self.base + "/v1"

    async def _fetch(self, client: httpx.AsyncClient, since: int) -> dict[str, Any]:
        response = await client.get(self.base + CALLS_PATH, params={"since": since})
        response.raise_for_status()
        return response.json()

    async def count(self, client: httpx.AsyncClient) -> int:
        """How many calls have reached the fake so far (finished or not)."""
        return int((await self._fetch(client, sys.maxsize))["count"])  # past the end: no rows, just the count

    async def calls(self, client: httpx.AsyncClient, since: int = 0) -> list[UpstreamCall]:
        """The finished calls from the `since`-th on (a `count()` taken earlier), in arrival order."""
        return [UpstreamCall(*row) for row in (await self._fetch(client, since))["calls"] if row[3] is not None]

    def stop(self) -> None:
        self.proc.stop()


def start_upstream(work: Path, ttft_s: float = TTFT_S, token_delay_s: float = TOKEN_DELAY_S) -> Upstream:
    """The scripted fake upstream (by default with the issue's fixed latency) as a subprocess."""
    port = free_port()
    cmd = [sys.executable, "-m", "bench.upstream", "--port", str(port), "--ttft", repr(ttft_s),
           "--token-delay", repr(token_delay_s)]
    proc = Proc("upstream", cmd, child_env({}), ROOT, work)
    base = f"http://127.0.0.1:{port}"
    proc.wait_http(base + "/v1/models")
    return Upstream(proc, base, ttft_s, token_delay_s)


def start_relay(work: Path, llm_url: str) -> tuple[Proc, str]:
    """The bare relay (`python -m bench.relay`) in front of the fake upstream; returns (proc, base URL)."""
    port = free_port()
    cmd = [sys.executable, "-m", "bench.relay", "--port", str(port), "--llm-url", llm_url,
           "--max-concurrency", str(LLM_MAX_CONCURRENCY)]
    proc = Proc("relay", cmd, child_env({}), ROOT, work)
    base = f"http://127.0.0.1:{port}"
    proc.wait_http(base + "/v1/chat/completions", ok=(405,))  # its only route, which is POST: up and routing
    return proc, base


def start_floor(work: Path, llm_url: str, mcp_url: str) -> tuple[Proc, str]:
    """The stack's floor (`python -m bench.floor`) in front of the fake upstream and the document server."""
    port = free_port()
    cmd = [sys.executable, "-m", "bench.floor", "--port", str(port), "--llm-url", llm_url, "--mcp-url", mcp_url,
           "--max-concurrency", str(LLM_MAX_CONCURRENCY)]
    proc = Proc("floor", cmd, child_env({}), ROOT, work)
    base = f"http://127.0.0.1:{port}"
    proc.wait_http(base + "/v1/chat/completions", ok=(405,))
    return proc, base


def start_service(work: Path, name: str, *, llm_url: str, mcp_url: str, **settings: object) -> tuple[Proc, str]:
    """`python -m app serve` with explicit settings (env vars), started in an empty folder so that no
    `.env` file changes them. Returns (proc, base URL) once /health/ready says the LLM and MCP answer."""
    port = free_port()
    values: dict[str, object] = {
        "HOST": "127.0.0.1", "PORT": port, "LLM_BASE_URL": llm_url, "LLM_MODEL": "big", "LLM_FAST_MODEL": "small",
        "MCP_SERVER_URL": mcp_url, "LLM_MAX_CONCURRENCY": LLM_MAX_CONCURRENCY, "RESEARCH_CONCURRENCY": 4,
        "RESPONSE_CACHE": "false", "REDIS_URL": "", "LOG_LEVEL": "WARNING",
    }
    values.update({k.upper(): v for k, v in settings.items()})
    cwd = work / f"cwd-{name}"
    cwd.mkdir(exist_ok=True)
    env = child_env({k: str(v).lower() if isinstance(v, bool) else str(v) for k, v in values.items()})
    proc = Proc(name, [sys.executable, "-m", "app", "serve"], env, cwd, work)
    base = f"http://127.0.0.1:{port}"
    proc.wait_http(base + "/health/ready")
    return proc, base


def imported_from(proc: Proc, package: str = "graph") -> Path:
    """The folder `import <package>` resolves to in `proc` (which does not log it): a fresh interpreter started
    with the process's own executable, environment and working directory, read from /proc."""
    root = Path(f"/proc/{proc.pid}")
    executable = (root / "cmdline").read_bytes().split(b"\0")[0].decode()
    env = dict(item.split("=", 1) for item in (root / "environ").read_bytes().decode().split("\0") if "=" in item)
    out = subprocess.run([executable, "-c", f"import {package}; print({package}.__file__)"], env=env,
                         cwd=os.readlink(root / "cwd"), capture_output=True, text=True, check=True)
    return Path(out.stdout.strip()).parent


def describe_tree(package_dir: Path) -> str:
    """`<folder> (commit <sha>[, with uncommitted changes])`: which code a report measured. The benchmark's own
    files, its tests and docs do not count as changes."""
    git = ["git", "--no-optional-locks", "-C", str(package_dir.parent)]  # read only: no index refresh
    commit = subprocess.run([*git, "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    if not commit:
        return str(package_dir)
    status = [*git, "status", "--porcelain", "--", ".", ":(exclude)bench", ":(exclude)docs", ":(exclude)tests"]
    dirty = subprocess.run(status, capture_output=True, text=True).stdout.strip()
    return f"{package_dir} (commit {commit}{', with uncommitted changes' if dirty else ''})"


def start_redis(work: Path) -> tuple[Proc, str]:
    port = free_port()
    cmd = ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"]
    proc = Proc("redis", cmd, dict(os.environ), work, work)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        with socket.socket() as sock:
            if sock.connect_ex(("127.0.0.1", port)) == 0:
                return proc, f"redis://127.0.0.1:{port}/0"
        time.sleep(0.05)
    proc.stop()
    raise RuntimeError("redis-server did not start")


async def mcp_intervals(client: httpx.AsyncClient, docserver_base: str) -> list[tuple[float, float]]:
    """The (start, end) of every POST /mcp since the last call (and forget them)."""
    from bench.docserver import INTERVALS_PATH

    response = await client.get(docserver_base + INTERVALS_PATH, params={"clear": 1})
    return [tuple(pair) for pair in response.json()]


async def scrape_gauge(client: httpx.AsyncClient, base: str, name: str) -> float | None:
    """One sample of a Prometheus gauge from the service's /metrics (None when unreachable)."""
    try:
        text = (await client.get(base + "/metrics", timeout=10.0)).text
    except httpx.HTTPError:
        return None
    match = re.search(rf"^{re.escape(name)} (\S+)$", text, re.M)
    return float(match.group(1)) if match else None


# ---------------------------------------------------------------------------------------------- client


@dataclass
class Run:
    """One streamed chat completion as the client saw it (absolute perf_counter() times)."""

    question: str
    start: float
    first_byte: float | None = None
    first_think: float | None = None
    first_answer: float | None = None
    end: float = 0.0  # `data: [DONE]` arrived (without it: the stream closed)
    status: int | None = None
    done: bool = False  # `data: [DONE]` arrived
    error: str | None = None
    usage: dict[str, Any] = field(default_factory=dict)
    content: str = ""

    @property
    def ok(self) -> bool:
        return self.status == 200 and self.done and self.error is None and self.first_answer is not None

    @property
    def think(self) -> str:
        return self.content.partition("</think>")[0]

    @property
    def answer(self) -> str:
        return self.content.partition("</think>")[2]

    @property
    def degraded(self) -> bool:
        """The service fell back (upstream or document server failed) instead of answering normally."""
        return "niet beschikbaar" in self.think or ": niet doorzocht (" in self.think

    @property
    def cached(self) -> bool:
        return "antwoord uit de cache" in self.think

    def since_start(self, t: float | None) -> float:
        return float("nan") if t is None else t - self.start

    @property
    def total(self) -> float:
        return self.end - self.start

    def _feed(self, line: bytes, now: float) -> None:
        line = line.rstrip(b"\r")
        if not line.startswith(b"data: "):
            return  # blank separators and `: ping` comments
        payload = line[6:]
        if payload == b"[DONE]":
            self.done, self.end = True, now  # the answer is complete here for an OpenAI client
            return
        obj = json.loads(payload)
        if obj.get("error"):
            self.error = str(obj["error"].get("message") or obj["error"])
        if obj.get("usage"):
            self.usage = obj["usage"]
        for choice in obj.get("choices") or []:
            piece = (choice.get("delta") or {}).get("content")
            if piece:
                self._content(piece, now)

    def _content(self, piece: str, now: float) -> None:
        self.content += piece
        if self.first_answer is not None:
            return
        if self.first_think is None:
            i = self.content.find("<think>")
            if i >= 0 and self.content[i + len("<think>"):].partition("</think>")[0].strip():
                self.first_think = now
        j = self.content.find("</think>")
        if j >= 0 and self.content[j + len("</think>"):].strip():
            self.first_answer = now


def new_client(connections: int = 16) -> httpx.AsyncClient:
    limits = httpx.Limits(max_connections=connections, max_keepalive_connections=connections)
    return httpx.AsyncClient(timeout=httpx.Timeout(300.0, connect=30.0), limits=limits)


async def stream_chat(client: httpx.AsyncClient, base: str, question: str, *, tenant: str | None = None) -> Run:
    """POST one streaming chat completion and time its first byte, first think line, first answer token and end.

    `tenant`: a bearer token (the service runs without API keys, so any token passes). Cached plans are kept
    per token, so a fresh token per run makes every run decompose its question again."""
    body = {
        "model": MODEL, "stream": True, "stream_options": {"include_usage": True},
        "messages": [{"role": "user", "content": question}],
    }
    headers = {"Authorization": f"Bearer {tenant}"} if tenant else {}
    run = Run(question=question, start=time.perf_counter())
    try:
        async with client.stream("POST", base + "/v1/chat/completions", json=body, headers=headers) as response:
            run.status = response.status_code
            buffer = b""
            async for data in response.aiter_raw():
                now = time.perf_counter()
                if run.first_byte is None:
                    run.first_byte = now
                buffer += data
                *lines, buffer = buffer.split(b"\n")
                for line in lines:
                    run._feed(line, now)
    except (httpx.HTTPError, ValueError) as exc:  # transport failure or a malformed event
        run.error = f"{type(exc).__name__}: {exc}"[:200]
    if not run.done:
        run.end = time.perf_counter()
    return run


async def sample_every(interval_s: float, sample, stop: asyncio.Event) -> list[Any]:
    """Call `await sample()` every `interval_s` until `stop` is set; the samples, in order."""
    samples = []
    while not stop.is_set():
        samples.append(await sample())
        try:
            await asyncio.wait_for(stop.wait(), interval_s)
        except TimeoutError:
            pass
    return samples
