"""Response and plan caches: in-memory and on a real redis-server (started here when installed)."""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator

import httpx
import pytest

from tests.conftest import QUESTION, TORN, chunks, content_of, sse_events
from tests.fakes.fake_llm import FakeLLM, Reply

FACTS = json.dumps({"facts": [{"fact": "De vergunning vervalt op 31 december 2033.", "sources": [1]}]})


def ask(base: str, question: str = QUESTION, key: str = "k1") -> tuple[str, str]:
    response = httpx.post(base + "/v1/chat/completions", timeout=30, headers={"Authorization": f"Bearer {key}"},
                          json={"model": "neo-nl-agent", "stream": True, "messages": [{"role": "user", "content": question}]})
    think, _, answer = content_of(chunks(sse_events(response))).partition("</think>")
    return think, answer


def script(fake: FakeLLM) -> None:
    fake.when_contains("Antwoord uitsluitend met JSON", Reply(text=FACTS))
    fake.when_contains("Je bent NEO NL", Reply(text="De vergunning vervalt op 31 december 2033 [1]."))


def test_repeated_question_is_answered_from_the_cache(service, fake_llm: FakeLLM) -> None:
    script(fake_llm)
    base = service(llm_base_url=fake_llm.base_url, response_cache=True)
    _, first = ask(base)
    assert fake_llm.calls == 1
    think, second = ask(base)
    assert fake_llm.calls == 1 and second == first  # no upstream call, same answer
    assert "antwoord uit de cache" in think and "Vraagtype" in think
    ask(base, key="another-key")
    assert fake_llm.calls == 2  # never shared across API keys
    ready = httpx.get(base + "/health/ready").json()
    assert ready["cache"]["backend"] == "memory" and ready["cache"]["hits"] >= 1


def test_degraded_answers_are_not_cached(service, fake_llm: FakeLLM) -> None:
    fake_llm.default(Reply(status=500))
    base = service(llm_base_url=fake_llm.base_url, response_cache=True, llm_max_retries=0)
    ask(base)
    calls = fake_llm.calls
    think, _ = ask(base)
    assert fake_llm.calls > calls and "cache" not in think


def test_plan_cache_skips_the_routing_call(service, fake_llm: FakeLLM) -> None:
    fake_llm.when_contains("Classificeer de vraag", Reply(text='{"query_type": "factual", "collections": ["security"]}'))
    script(fake_llm)
    base = service(llm_base_url=fake_llm.base_url, response_cache=False, model_route=True)
    ask(base, TORN)
    first = fake_llm.calls
    ask(base, TORN)
    routing = [r for r in fake_llm.requests if "Classificeer" in r["messages"][-1]["content"]]
    assert len(routing) == 1 and fake_llm.calls - first == first - 1  # the second ask: all but the routing call


@pytest.fixture(scope="module")
def redis_url() -> Iterator[str]:
    binary = shutil.which("redis-server") or shutil.which("valkey-server")
    if not binary:
        pytest.skip("redis-server / valkey-server not installed")
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    process = subprocess.Popen([binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            break
        except OSError:
            time.sleep(0.05)
    yield f"redis://127.0.0.1:{port}/0"
    process.terminate()
    process.wait(timeout=5)


def test_redis_cache_is_shared_by_workers(service, fake_llm: FakeLLM, redis_url: str) -> None:
    script(fake_llm)
    worker_a = service(llm_base_url=fake_llm.base_url, response_cache=True, redis_url=redis_url)
    worker_b = service(llm_base_url=fake_llm.base_url, response_cache=True, redis_url=redis_url)
    key = f"k{time.time_ns()}"  # a fresh cache key (the caller's) in a shared server, for the same question
    _, first = ask(worker_a, key=key)
    calls = fake_llm.calls
    think, second = ask(worker_b, key=key)
    assert fake_llm.calls == calls and second == first and "cache" in think
    assert httpx.get(worker_b + "/health/ready").json()["cache"] == {
        "backend": "redis", "reachable": True, "hits": 1, "misses": 0}


def test_redis_down_costs_a_miss_not_a_request(service) -> None:
    base = service(response_cache=True, redis_url="redis://127.0.0.1:9/0")
    _, answer = ask(base)
    assert "31 december 2033" in answer
    assert httpx.get(base + "/health/ready").json()["cache"]["reachable"] is False
