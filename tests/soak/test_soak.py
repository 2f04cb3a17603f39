"""Load and soak (opt-in: NEO_SOAK=1): 200 concurrent streams for 60 s with 5% injected upstream faults,
loopback only. No crash, no hung stream, memory flat. Writes docs/SOAK.md with what it saw.

NEO_SOAK_SECONDS and NEO_SOAK_STREAMS shorten or widen the run.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import sys
import time
from pathlib import Path

import httpx
import pytest

from bench.harness import Proc, free_port
from docserver.server import create_app as create_docserver
from tests.fakes.fake_llm import FakeLLM, Reply
from tests.fakes.servers import ServerThread

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.skipif(os.environ.get("NEO_SOAK") != "1", reason="opt-in: set NEO_SOAK=1")

SECONDS = float(os.environ.get("NEO_SOAK_SECONDS", "60"))
STREAMS = int(os.environ.get("NEO_SOAK_STREAMS", "200"))
FAULT_RATE = 0.05
FAULTS = [Reply(status=500), Reply(status=429, headers={"Retry-After": "0"}), Reply(fault="garbage"),
          Reply(fault="early_end", text="een half antwoord dat stopt"), Reply(fault="reset")]
QUESTIONS = ["Wanneer vervalt de vergunning van kerncentrale Borssele?", "Wat is IAEA GSR Part 2?",
             "Hoe verschillen IAEA en ANVS eisen voor veiligheidscultuur?", "Wat is INSAG-4?"]


def script(fake: FakeLLM, rng: random.Random) -> None:
    facts = json.dumps({"facts": [{"fact": "Een feit uit de bron.", "sources": [1]}]})

    for fault in FAULTS:  # 5% of all upstream calls fail, spread over the injected kinds
        fake.when(lambda body: rng.random() < FAULT_RATE / len(FAULTS), fault)
    fake.when_contains("Splits de vraag op in deelvragen", Reply(text=json.dumps({"sub_questions": [
        {"collection": "anvs", "query": "ANVS veiligheidscultuur"}, {"collection": "iaea", "query": "IAEA veiligheidscultuur"}]})))
    fake.when_contains("Je bent een onderzoeksagent", Reply(text=facts))
    fake.when_contains("Antwoord uitsluitend met JSON", Reply(text=facts))
    fake.default(Reply(text="Het antwoord staat in de bronnen [1]. " * 5))


async def client(base: str, stop_at: float, stats: dict, n: int) -> None:
    async with httpx.AsyncClient(timeout=httpx.Timeout(60.0)) as http:
        i = 0
        while time.monotonic() < stop_at:
            question = f"{QUESTIONS[(n + i) % len(QUESTIONS)]} (soak {n}-{i})"
            i += 1
            try:
                async with http.stream("POST", base + "/v1/chat/completions", json={
                        "model": "neo-nl-agent", "stream": True,
                        "messages": [{"role": "user", "content": question}]}) as response:
                    last = ""
                    async for line in response.aiter_lines():
                        if line.startswith("data: "):
                            last = line
                    stats["done" if last == "data: [DONE]" else "broken"] += 1
            except httpx.TimeoutException:
                stats["hung"] += 1
            except httpx.HTTPError:
                stats["errors"] += 1


def test_soak(tmp_path: Path) -> None:
    rng = random.Random(7)
    with FakeLLM(ttft_s=0.3, token_delay_s=0.01) as fake, ServerThread(create_docserver()) as docs:
        script(fake, rng)
        port = free_port()
        env = {**os.environ, "HOST": "127.0.0.1", "PORT": str(port), "LLM_BASE_URL": fake.base_url,
               "MCP_SERVER_URL": docs.base_url + "/mcp", "LLM_MAX_CONCURRENCY": "512", "LLM_TIMEOUT_S": "10",
               "LLM_MAX_RETRIES": "1", "RESPONSE_CACHE": "false", "LOG_LEVEL": "WARNING", "REQUEST_TIMEOUT_S": "45"}
        service = Proc("service", [sys.executable, "-m", "app", "serve"], env, ROOT, tmp_path)
        base = f"http://127.0.0.1:{port}"
        try:
            service.wait_http(base + "/health")  # fails at once, with the service's log, if it exits
            stats = {"done": 0, "broken": 0, "hung": 0, "errors": 0}
            samples: list[tuple[float, float]] = []

            async def run() -> None:
                start = time.monotonic()
                stop_at = start + SECONDS
                tasks = [asyncio.create_task(client(base, stop_at, stats, n)) for n in range(STREAMS)]
                while time.monotonic() < stop_at:
                    samples.append((time.monotonic() - start, service.rss_mb()))
                    await asyncio.sleep(5)
                await asyncio.gather(*tasks)
                samples.append((time.monotonic() - start, service.rss_mb()))

            asyncio.run(run())
            alive = service.popen.poll() is None
            metrics = httpx.get(base + "/metrics").text
            lag = next((float(line.split()[1]) for line in metrics.splitlines()
                        if line.startswith("neo_event_loop_lag_max_seconds ")), float("nan"))
        finally:
            service.stop()
    warm = [mb for t, mb in samples if t >= SECONDS / 4] or [mb for _, mb in samples]
    growth = warm[-1] - warm[0]
    report = [
        "# Soak run", "",
        f"`NEO_SOAK=1 pytest tests/soak -s` on {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, "
        f"{os.cpu_count()} cores: {STREAMS} concurrent streaming clients for {SECONDS:.0f} s against the fake upstream "
        f"(300 ms to first token, 10 ms per token) with {FAULT_RATE:.0%} of upstream calls failing "
        "(500, 429, invalid SSE, early end, connection reset).", "",
        "| measure | value |", "|---|---|",
        f"| streams completed with [DONE] | {stats['done']} |",
        f"| streams without [DONE] | {stats['broken']} |",
        f"| hung streams (60 s client timeout) | {stats['hung']} |",
        f"| transport errors | {stats['errors']} |",
        f"| upstream calls | {fake.calls} |",
        f"| service alive at the end | {alive} |",
        f"| max event-loop lag | {lag * 1000:.0f} ms |",
        f"| RSS after warm-up → end | {warm[0]:.0f} → {warm[-1]:.0f} MB ({growth:+.0f} MB) |", "",
        "RSS samples (s, MB): " + ", ".join(f"({t:.0f}, {mb:.0f})" for t, mb in samples),
    ]
    (ROOT / "docs" / "SOAK.md").write_text("\n".join(report) + "\n", "utf-8")
    assert alive and stats["hung"] == 0 and stats["broken"] == 0 and stats["errors"] == 0
    assert stats["done"] > STREAMS
    assert growth < 50  # flat memory: a leak of 200 streams a minute shows up well above this
