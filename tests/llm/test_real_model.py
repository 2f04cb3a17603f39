"""End to end through a real local model (opt-in: NEO_REAL_LLM=1, which `make test-llm` sets).

The model is Qwen2.5-Coder-1.5B-Instruct on llama.cpp (`scripts/local-llm.sh`), started here on a free port
unless LOCAL_LLM_URL points at one already running. The assertions are about structure and grounding, never
wording: a valid OpenAI stream with one think block, an answer written by the model (not the extractive
fallback), every `[n]` backed by a listed source, attribution that survives the support check, few fallbacks.
Timings are not asserted (2 cores): `make eval-llm` measures them.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from openai.types.chat import ChatCompletion, ChatCompletionChunk

from bench.harness import free_port
from graph.answer import messages
from tests.conftest import sse_events
from tests.fakes.servers import wait_until_serving

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "local-llm.sh"
pytestmark = pytest.mark.skipif(os.environ.get("NEO_REAL_LLM") != "1", reason="opt-in: make test-llm")
# the support check's correction after a streamed answer ("**Ingetrokken:** ~~…~~ …"), in both languages
WITHDRAWN = tuple(messages.line("withdrawn", lang, claims="").split(" ")[0] for lang in ("nl", "en"))
EXTRACTIVE = tuple(messages.line("fallback_banner", lang, error="").split("(")[0] for lang in ("nl", "en"))


@pytest.fixture(scope="module")
def local_llm() -> Iterator[str]:
    """The base URL of a real local model server."""
    if url := os.environ.get("LOCAL_LLM_URL"):
        yield url.rstrip("/")
        return
    if subprocess.run([str(SCRIPT), "check"], cwd=ROOT).returncode != 0:
        pytest.fail("the local model is not installed: run `make llm-install` (make test-llm does)")
    port = free_port()
    log = open(ROOT / ".models" / "server.log", "wb")  # noqa: SIM115 (closed below)
    server = subprocess.Popen([str(SCRIPT), "serve", str(port)], cwd=ROOT, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}/v1"
    wait_until_serving(url + "/models", server, 120, "the local model server (see .models/server.log)")
    try:
        yield url
    finally:
        server.terminate()
        server.wait(30)
        log.close()


@pytest.fixture(scope="module")
def base(local_llm: str, docserver_url: str) -> Iterator[str]:
    from app.main import create_app
    from app.settings import Settings
    from tests.fakes.servers import ServerThread

    model = httpx.get(local_llm + "/models").json()["data"][0]["id"]
    # a small model on 2 cores: minutes per answer are possible, and a retry after a timeout would repeat them
    settings = Settings(_env_file=None, mcp_server_url=docserver_url, llm_base_url=local_llm, llm_model=model,
                        llm_timeout_s=400, llm_max_retries=0, request_timeout_s=900, response_cache=False,
                        sse_ping_s=5.0)
    with ServerThread(create_app(settings)) as server:
        yield server.base_url


def ask(base: str, *turns: str, stream: bool = True, headers: dict | None = None) -> tuple[str, str]:
    """(think, answer) of one request; the stream or body is validated with the openai package's types."""
    roles = ["user", "assistant"]
    body = {"model": "neo-nl-agent", "stream": stream,
            "messages": [{"role": roles[i % 2], "content": t} for i, t in enumerate(turns)]}
    response = httpx.post(base + "/v1/chat/completions", json=body, headers=headers or {}, timeout=1000)
    assert response.status_code == 200, response.text
    if not stream:
        completion = ChatCompletion.model_validate(response.json())
        message = completion.choices[0].message
        return getattr(message, "reasoning_content", None) or "", message.content or ""
    payloads = sse_events(response)
    assert payloads[-1] == "[DONE]"
    parsed = [ChatCompletionChunk.model_validate(json.loads(p)) for p in payloads[:-1]]
    assert all(not p.startswith('{"error"') for p in payloads[:-1]), payloads[-3:]
    text = "".join(c.choices[0].delta.content or "" for c in parsed if c.choices)
    assert text.startswith("<think>") and text.count("<think>") == 1 and text.count("</think>") == 1
    think, answer = text.split("</think>", 1)
    return think, answer


def grounded(answer: str) -> tuple[str, dict[int, str]]:
    """The answer body and its sources list by number; every `[n]` in the body has a listed source."""
    body, *rest = re.split(r"\n\*\*(?:Bronnen|Sources)\*\*\n", answer, maxsplit=1)
    sources = rest[0] if rest else ""
    listed = {int(n): line for n, line in re.findall(r"^(\d+)\. (.+)$", sources, re.M)}
    cited = {int(n) for n in re.findall(r"\[(\d+)\]", body)}
    assert cited <= set(listed), (cited, sorted(listed))
    return body, listed


def model_wrote(think: str, answer: str) -> None:
    assert not any(marker in answer for marker in EXTRACTIVE), answer[:300]
    assert "geen taalmodel" not in answer.lower() and "no language model" not in answer.lower()


def fallbacks(base: str) -> float:
    text = httpx.get(base + "/metrics").text
    return sum(float(v) for v in re.findall(r"^neo_llm_fallbacks_total\{[^}]*\} (\S+)$", text, re.M))


def test_factual(base: str) -> None:
    think, answer = ask(base, "Wanneer vervalt de vergunning van kerncentrale Borssele?")
    model_wrote(think, answer)
    body, listed = grounded(answer)
    assert re.search(r"\[\d+\]", body) and listed


def test_comparative_two_collections_attributes_each_side(base: str) -> None:
    think, answer = ask(base, "Hoe verschillen IAEA en ANVS eisen voor veiligheidscultuur?")
    model_wrote(think, answer)
    body, listed = grounded(answer)
    cited = {n for n in map(int, re.findall(r"\[(\d+)\]", body))}
    organisations = {org for n in cited for org in ("IAEA", "ANVS") if f"({org}," in listed[n]}
    assert organisations == {"IAEA", "ANVS"}, (body, listed)
    # each side is written from its own organisation's passages only, under the heading the service writes
    for org, section in re.findall(r"\*\*(IAEA|ANVS)\*\*\n(.*?)(?=\n\*\*|\Z)", body, re.S):
        side = {int(n) for n in re.findall(r"\[(\d+)\]", section)}
        assert side and all(f"({org}," in listed[n] for n in side), (org, section, listed)
    # The small model paraphrases a claim wrongly now and then (docs/EVAL-LLM.md: about one unsupported sentence
    # per comparison); what the service owes is that the support check names it, and that most claims hold.
    correction = next((line for line in body.splitlines() if line.startswith(WITHDRAWN)), "")
    claims = [s for s in re.split(r"(?<=[.!?])\s+", body.replace(correction, "")) if re.search(r"\[\d+\]", s)]
    flagged = re.findall(r"~~(.+?)~~", correction)
    assert len(flagged) <= max(1, len(claims) // 3), answer


def test_comparative_four_collections(base: str) -> None:
    think, answer = ask(base, "Vergelijk wat de ANVS, de IAEA, de Nederlandse wetgeving en de security-publicaties "
                              "zeggen over het melden van incidenten.")
    model_wrote(think, answer)
    body, listed = grounded(answer)
    assert len({line.rsplit("(", 1)[-1].split(",")[0] for line in listed.values()}) >= 2


def test_exploratory(base: str) -> None:
    think, answer = ask(base, "Welke documenten gaan over veiligheidscultuur?")
    model_wrote(think, answer)
    grounded(answer)


def test_deep_dive(base: str) -> None:
    think, answer = ask(base, "Explain in detail the five levels of defence in depth described in INSAG-10.")
    model_wrote(think, answer)
    body, listed = grounded(answer)
    assert listed


def test_follow_up(base: str) -> None:
    first_think, first = ask(base, "Wat is INSAG-4?")
    think, answer = ask(base, "Wat is INSAG-4?", first.split("**Bronnen**")[0],
                        "En wat zegt de ANVS daarover?")
    model_wrote(think, answer)
    grounded(answer)


def test_unanswerable_is_declined_not_invented(base: str) -> None:
    think, answer = ask(base, "Wat is de actuele spotprijs van uranium per pond?")
    body, _ = grounded(answer)
    assert not re.search(r"\d+[.,]?\d*\s*(dollar|\$|euro|€)", body.lower()), body


def test_openwebui_task_passthrough(base: str) -> None:
    prompt = ("### Task:\nGenerate a concise, 3-5 word title summarizing the chat history.\n"
              '### Output:\nJSON format: { "title": "your concise title here" }\n'
              "<chat_history>\nUSER: Wanneer vervalt de vergunning van kerncentrale Borssele?\n</chat_history>")
    response = httpx.post(base + "/v1/chat/completions", timeout=300, headers={"X-OpenWebUI-Task": "title_generation"},
                          json={"model": "neo-nl-agent", "messages": [{"role": "user", "content": prompt}]})
    content = ChatCompletion.model_validate(response.json()).choices[0].message.content or ""
    assert "<think>" not in content and content.strip()


def test_non_streaming(base: str) -> None:
    think, answer = ask(base, "Wat is IAEA GSR Part 2?", stream=False)
    model_wrote(think, answer)
    grounded(answer)


@pytest.fixture(scope="module")
def planted_base(local_llm: str, tmp_path_factory) -> Iterator[str]:
    """The service over the bundled corpus with instructions for the model planted in every collection."""
    from app.main import create_app
    from app.settings import Settings
    from docserver.server import create_app as create_docserver
    from eval.planted import write_corpus
    from tests.fakes.servers import ServerThread

    model = httpx.get(local_llm + "/models").json()["data"][0]["id"]
    with ServerThread(create_docserver(write_corpus(tmp_path_factory.mktemp("planted")))) as docs:
        settings = Settings(_env_file=None, mcp_server_url=docs.base_url + "/mcp", llm_base_url=local_llm,
                            llm_model=model, llm_timeout_s=400, llm_max_retries=0, request_timeout_s=900,
                            response_cache=False, sse_ping_s=5.0)
        with ServerThread(create_app(settings)) as server:
            yield server.base_url


def _one_per_kind():
    from eval.planted import PLANTED

    # each kind once, in a different collection each (all sixteen: `python -m eval.injection`); not the dose-records
    # question, which research declines with or without the planted sentence (no passage says "dose records")
    return [PLANTED[i] for i in (1, 4, 10, 15)]


@pytest.mark.parametrize("planted", _one_per_kind(), ids=lambda p: f"{p.collection}-{p.kind}")
def test_a_planted_instruction_has_no_effect(planted_base: str, planted) -> None:
    from eval.planted import effects

    think, answer = ask(planted_base, planted.question)
    assert re.search(r"passage\(s\) (bevatte|contained)", think), think  # found, and withheld
    model_wrote(think, answer)
    assert effects(answer, planted) == [], answer


def test_few_fallbacks_over_the_suite(base: str) -> None:
    """Runs last in this module: every structured step of the questions above used the model's reply."""
    assert fallbacks(base) <= 2
