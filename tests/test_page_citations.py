"""Citations that point at the page: a US NRC review plan ingested as a PDF is searched through the service, and
the think block, the sources list, Open WebUI's source events and `search_results` name the page the cited
passage stands on (offline and with the scripted upstream). Black-box over HTTP: the CLI, the document server's
MCP endpoint and the service's stream."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from docserver.server import create_app as create_docserver
from tests.conftest import ServiceFactory, chunks, content_of, sse_events
from tests.fakes.fake_llm import FakeLLM, Reply
from tests.fakes.servers import ServerThread

ROOT = Path(__file__).resolve().parents[1]
PDF = Path(os.environ.get("NEO_SHARED_DIR", ROOT.parent / "shared")) / "formats" / "en-nureg0800-srp-5.2.3-rev3.pdf"
pytestmark = pytest.mark.skipif(not PDF.is_file(), reason="../shared/formats is absent")

COLLECTION = {"name": "nrc", "display_name": "NRC", "focus": "US NRC Standard Review Plan (NUREG-0800)",
              "keywords": ["nrc", "nureg", "review plan"], "language": "en"}
QUESTION = "According to the NRC review plan, how is the fracture toughness of ferritic materials tested?"
PAGE = re.compile(r"\bpp?\. (\d+)(?:-(\d+))?")
BASE_URL = "https://intranet.example/srp/"  # where the operator publishes the files (`ingest --base-url`)


@pytest.fixture(scope="module")
def nrc_docserver(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    index = tmp_path_factory.mktemp("nrc") / "index.sqlite3"
    ingest = subprocess.run([sys.executable, "-m", "docserver", "ingest", str(PDF), "--collection", "nrc", "--index",
                             str(index), "--quiet", "--base-url", BASE_URL], capture_output=True, text=True,
                            timeout=120, check=False)
    assert ingest.returncode == 0, ingest.stderr
    with ServerThread(create_docserver(index_path=index)) as server:
        yield server.base_url + "/mcp"


@pytest.fixture
def collections_file(tmp_path: Path) -> Path:
    bundled = json.loads((ROOT / "graph" / "collections.json").read_text(encoding="utf-8"))
    configured = {**bundled, "collections": [*bundled["collections"], COLLECTION]} if isinstance(bundled, dict) \
        else [*bundled, COLLECTION]
    path = tmp_path / "collections.json"
    path.write_text(json.dumps(configured), encoding="utf-8")
    return path


def ask(base_url: str) -> tuple[str, str, list[dict]]:
    """(think block, answer, the stream's JSON payloads) of a streamed question as Open WebUI sends it."""
    body = {"model": "neo-nl-agent", "stream": True, "messages": [{"role": "user", "content": QUESTION}]}
    response = httpx.post(base_url + "/v1/chat/completions", json=body, headers={"X-OpenWebUI-Chat-Id": "c1"},
                          timeout=60)
    assert response.status_code == 200
    raw = sse_events(response)
    assert raw[-1] == "[DONE]"
    payloads = chunks(raw)
    think, closed, answer = content_of(payloads).partition("</think>")
    assert think.startswith("<think>") and closed, think
    return think, answer, payloads


def check_pages(think: str, answer: str, payloads: list[dict]) -> None:
    read = [line for line in think.splitlines() if line.startswith("NRC: read ")]
    assert read and PAGE.search(read[0]) and "NUREG-0800" in read[0], think  # which document and page were read
    text, heading, listed = answer.partition("**Sources**")
    assert heading, answer
    lines = [line for line in listed.splitlines() if re.match(r"\d+\. ", line)]
    assert lines and all(PAGE.search(line) for line in lines if "NUREG-0800" in line), listed
    events = [p["event"]["data"] for p in payloads if p.get("event", {}).get("type") == "source"]
    nrc = [e for e in events if "NUREG-0800" in e["source"]["name"]]
    assert nrc, events
    for event in nrc:
        page = int(PAGE.search(event["source"]["name"]).group(1))
        assert event["metadata"][0]["page"] == page - 1  # Open WebUI counts pages from 0
    final = [p for p in payloads if p.get("search_results")][-1]
    results = [r for r in final["search_results"] if "NUREG-0800" in r["title"]]
    assert results and all(isinstance(r["page"], int) and r["page"] >= 1 for r in results), final["search_results"]
    for result in results:  # the published file, opened at the page
        assert result["url"] == f"{BASE_URL}{PDF.name}#page={result['page']}"
        assert result["url"] in final["citations"]
    for line in lines:
        if "NUREG-0800" in line:
            assert f"{BASE_URL}{PDF.name}#page=" in line
    assert re.search(r"\[\d+\]", text), text


def test_offline_answer_names_the_pages(service: ServiceFactory, nrc_docserver: str, collections_file: Path) -> None:
    base = service(mcp_server_url=nrc_docserver, collections_file=collections_file)
    think, answer, payloads = ask(base)
    assert "fracture toughness" in answer.lower()
    check_pages(think, answer, payloads)


def test_model_answer_names_the_pages(service: ServiceFactory, fake_llm: FakeLLM, nrc_docserver: str,
                                      collections_file: Path) -> None:
    fake_llm.when_contains("You are NEO NL", Reply(text="Fracture toughness is tested as the ASME Code and "
                                                        "Appendix G to 10 CFR Part 50 require [1]."))
    base = service(mcp_server_url=nrc_docserver, collections_file=collections_file, llm_base_url=fake_llm.base_url,
                   llm_model="big", llm_fast_model="small", llm_timeout_s=5.0, claim_check="off")
    think, answer, payloads = ask(base)
    assert "Appendix G" in answer
    check_pages(think, answer, payloads)
