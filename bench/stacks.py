"""Where a process's CPU goes: py-spy's sampled stacks (`py-spy record --format raw`) sorted into the parts of a
streamed request (section 8b).

A raw file holds one line per distinct stack: `frame;frame;...;frame count`, root first, each frame
`function (file:line)`; `category` says which part of the request a sample belongs to."""

from __future__ import annotations

import re
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

# (name in the report, what it holds, the files of its frames). py-spy writes a frame as `function (file:line)`,
# here with the file's full path (`--full-filenames`): shortened, LangGraph's "graph/state.py" is this service's.
OURS = r"(?<!langgraph)/graph/"  # the service's graph package, not LangGraph's own graph/ folder

CATEGORIES: list[tuple[str, str, re.Pattern[str]]] = [
    ("document server client", "the MCP SDK, the direct tool calls and their HTTP, tool output parsed into evidence",
     re.compile(rf"/mcp/|{OURS}clients/mcp_(?:client|direct)\.py")),
    ("upstream client", "HTTP to the model, SSE parsing of its stream (aiohttp, httpx, httpx-sse)",
     re.compile(rf"{OURS}clients/llm\.py|/httpx_sse/")),
    ("answer stream", "the answer's filters and books: citations, support check, address scrub, echo, leak and "
     "loop guards, ledger, events (graph/answer)",
     re.compile(rf"{OURS}answer/(?:answer_stream|contacts|sanitize|sentences|ledger|events)\.py|{OURS}text/claims\.py")),
    ("text analysis", "key facts, linked pairs, ranking, language, routing and query text (graph/text)",
     re.compile(rf"{OURS}text/|/textkit/")),
    ("pipeline nodes", "the nodes' own code, prompts and messages, state (graph/)", re.compile(OURS)),
    ("LangGraph", "graph execution: tasks, channels, the state between nodes, callbacks",
     re.compile(r"/langgraph/|/langchain_core/|/uuid_utils/")),
    ("HTTP and SSE out", "uvicorn, Starlette/FastAPI, sse-starlette, request parsing, chunks rendered (app/)",
     re.compile(r"/uvicorn/|/starlette/|/fastapi/|/sse_starlette/|/app/|/bench/relay\.py")),
    ("validation", "pydantic models (request, settings, MCP messages)", re.compile(r"/pydantic(?:_core)?/")),
    ("HTTP client", "aiohttp, httpx and anyio outside the two clients above (socket reads, connection pool)",
     re.compile(r"/aiohttp/|/httpx/|/httpcore/|/httpx_aiohttp/|/anyio/|/yarl/|/multidict/")),
    ("event loop", "uvloop's C loop (sockets, timers, task switches) and asyncio's Python parts",
     re.compile(r"/asyncio/|uvloop")),
]
CLIENTS = 2  # the first categories: a stack with a frame of theirs is theirs
LOOP = CATEGORIES[-1][0]
# the frame that runs the event loop: the frames above it (the server's start-up) belong to every sample
_LOOP_FRAME = re.compile(r"^Runner\.run \(|^run_until_complete \(|^run_forever \(")
OTHER = "other"
ATTACH_S = 1.0


def category(frames: list[str]) -> str:
    """The category of one sampled stack (root first), from below the event loop's frame: a client's, when a
    frame of the document server's or the upstream's client is in it (their HTTP leaves are generic); else
    the category of the innermost frame that has one, asyncio's own frames left to their caller; the event
    loop's when nothing else is (uvloop's C code, asyncio alone); else `OTHER`."""
    loop = next((i for i, frame in enumerate(frames) if _LOOP_FRAME.match(frame)), None)
    if loop is not None:
        frames = frames[loop + 1:]
    stack = ";".join(frames)
    for name, _, pattern in CATEGORIES[:CLIENTS]:
        if pattern.search(stack):
            return name
    for frame in reversed(frames):
        for name, _, pattern in CATEGORIES[CLIENTS:-1]:
            if pattern.search(frame):
                return name
    return LOOP if not frames or CATEGORIES[-1][2].search(stack) else OTHER


def categorise(raw: str) -> Counter[str]:
    """Samples per category of one raw py-spy file's text."""
    counts: Counter[str] = Counter()
    for line in raw.splitlines():
        stack, _, n = line.rstrip().rpartition(" ")
        if n.isdigit() and stack:
            counts[category(stack.split(";"))] += int(n)
    return counts


def per_request(counts: Counter[str], cpu_s: float, requests: int) -> dict[str, float]:
    """Each category's share of the samples applied to the measured CPU: seconds per request."""
    total = sum(counts.values())
    if not total or not requests:
        return {}
    return {name: cpu_s / requests * n / total for name, n in counts.items()}


def py_spy() -> str | None:
    """The py-spy executable (the eval extra installs it beside this interpreter), or None."""
    beside = Path(sys.executable).parent / "py-spy"
    return str(beside) if beside.is_file() else shutil.which("py-spy")


class Recorder:
    """`py-spy record` on one process while a block runs: `with Recorder(pid, out): ...`; `.error` says why
    nothing was recorded (py-spy missing, or not allowed to read the process: ptrace)."""

    def __init__(self, pid: int, out: Path, rate: int = 500) -> None:
        self.out, self.error = out, ""
        exe = py_spy()
        self.popen: subprocess.Popen[bytes] | None = None
        if exe is None:
            self.error = "py-spy is not installed (the eval extra installs it)"
            return
        self.log = out.with_suffix(".log")
        with self.log.open("wb") as log:  # the child keeps its own copy of the handle
            self.popen = subprocess.Popen(
                [exe, "record", "--pid", str(pid), "--rate", str(rate), "--format", "raw", "--nonblocking",
                 "--full-filenames", "--output", str(out)], stdout=subprocess.DEVNULL, stderr=log)

    def __enter__(self) -> Recorder:
        if self.popen is not None:
            time.sleep(ATTACH_S)  # py-spy reads the process's symbols before its first sample
        return self

    def __exit__(self, *exc: object) -> None:
        if self.popen is None:
            return
        if self.popen.poll() is None:
            self.popen.send_signal(signal.SIGINT)  # py-spy writes its file when interrupted
        try:
            self.popen.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.popen.kill()
            self.popen.wait()
        if not self.out.is_file() or not self.out.stat().st_size:
            tail = self.log.read_text("utf-8", "replace").strip().splitlines()[-1:] if self.log.is_file() else []
            self.error = "py-spy recorded nothing" + (f": {tail[0][:200]}" if tail else "")

    def counts(self) -> Counter[str]:
        return categorise(self.out.read_text("utf-8", "replace")) if not self.error else Counter()
