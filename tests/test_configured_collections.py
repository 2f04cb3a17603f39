"""A fifth collection through configuration alone, end to end over HTTP.

An operator ingests a document into a new collection of the reference document server
(`python -m docserver ingest ... --collection euratom`) and lists that collection in the service's
COLLECTIONS_FILE. With no code change, a question naming it must be routed there, search it and cite the
document. Black-box: only the CLI, the servers' HTTP endpoints and the streamed answer's structure are used.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import openai
import pytest

from docserver.server import create_app as create_docserver
from tests.conftest import ServiceFactory
from tests.fakes.servers import ServerThread

ROOT = Path(__file__).resolve().parents[1]

COLLECTION = {
    "name": "euratom",
    "display_name": "Euratom",
    "focus": "Euratom-richtlijnen: basisnormen voor stralingsbescherming",
    "keywords": ["euratom", "bss", "basisnormen"],
}
TITLE = "Euratom Basic Safety Standards Directive 2013/59/Euratom (test summary)"
DOCUMENT = f"""\
---
doc_id: euratom-bss-2013-59
title: "{TITLE}"
year: 2013
language: en
kind: summary
---

# {TITLE}

## Adoption and transposition

Council Directive 2013/59/Euratom lays down the basic safety standards for protection against the dangers
arising from exposure to ionising radiation. It was adopted on 5 December 2013 under the Euratom Treaty, and
the Member States had to transpose it into national law by 6 February 2018.

## Dose limits

The directive sets an effective dose limit for occupational exposure of 20 millisievert in a single year.
For members of the public the effective dose limit is 1 millisievert per year.

## Radon

Member States must establish national reference levels for indoor radon concentrations. The reference
level for the annual average activity concentration in air shall not be higher than 300 becquerel per
cubic metre, both in workplaces and in dwellings.
"""

_SOURCES_HEADING = re.compile(r"^\*\*(?:Sources|Bronnen)\*\*$", re.MULTILINE)
_COLLECTIONS_LINE = re.compile(r"(?:Collections|Collecties): (.*)")


@pytest.fixture(scope="module")
def euratom_docserver(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The reference document server: the bundled corpus plus one document ingested into `euratom`."""
    folder = tmp_path_factory.mktemp("euratom")
    document, index = folder / "bss-directive.md", folder / "index.sqlite3"
    document.write_text(DOCUMENT, encoding="utf-8")
    ingest = subprocess.run(
        [sys.executable, "-m", "docserver", "ingest", str(document), "--collection", COLLECTION["name"],
         "--index", str(index), "--quiet"],
        capture_output=True, text=True, timeout=120, check=False,
    )
    assert ingest.returncode == 0, ingest.stderr
    with ServerThread(create_docserver(index_path=index)) as server:
        yield server.base_url + "/mcp"


@pytest.fixture
def base_url(service: ServiceFactory, euratom_docserver: str, tmp_path: Path) -> str:
    """The service in offline mode with the four bundled collections plus `euratom` configured."""
    bundled = json.loads((ROOT / "graph" / "collections.json").read_text(encoding="utf-8"))
    # The file is a list of collections or an object holding one under "collections"; extend either form.
    if isinstance(bundled, dict):
        configured: object = {**bundled, "collections": [*bundled["collections"], COLLECTION]}
    else:
        configured = [*bundled, COLLECTION]
    collections_file = tmp_path / "collections.json"
    collections_file.write_text(json.dumps(configured), encoding="utf-8")
    return service(mcp_server_url=euratom_docserver, collections_file=collections_file)


def ask(base_url: str, question: str) -> tuple[list[str], str]:
    """(the think block's lines, the sources list or "" when the answer has none) of a streamed answer."""
    client = openai.OpenAI(base_url=base_url + "/v1", api_key="none", max_retries=0, timeout=60)
    stream = client.chat.completions.create(
        model="neo-nl-agent", messages=[{"role": "user", "content": question}], stream=True
    )
    text = "".join(chunk.choices[0].delta.content or "" for chunk in stream if chunk.choices)
    think, _, answer = text.partition("</think>")
    assert think.startswith("<think>") and answer, text
    _, *sources = _SOURCES_HEADING.split(answer, maxsplit=1)
    return think.removeprefix("<think>").strip().splitlines(), "".join(sources)


def routed_collections(think: list[str]) -> str:
    (line,) = [m.group(1) for m in map(_COLLECTIONS_LINE.match, think) if m]
    return line


def test_a_question_naming_the_new_collection_searches_and_cites_it(base_url: str) -> None:
    think, sources = ask(base_url, "What does the Euratom directive set as the reference level for radon?")
    assert "Euratom" in routed_collections(think), think
    found = [int(m.group(1)) for m in (re.match(r"Euratom: (\d+) passage", line) for line in think) if m]
    assert found and found[0] > 0, think
    assert TITLE in sources and "(Euratom" in sources, sources  # cited under the configured display name


def test_a_question_not_naming_it_is_answered_from_the_bundled_collections(base_url: str) -> None:
    think, sources = ask(base_url, "Wat is IAEA GSR Part 2?")
    assert routed_collections(think).startswith("IAEA"), think  # searched everywhere, the named one first
    assert "(IAEA" in sources and TITLE not in sources, sources  # and the evidence decides what is cited
