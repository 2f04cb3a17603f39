"""Issue 57, defect 2, written as the attack: a document server whose document carries a `javascript:` link, a title
with Markdown, HTML, a newline that starts a fake sources entry and terminal escapes, and a passage with a planted
link. Served by the real reference server over MCP (its corpus loader keeps metadata as written, as an external
genai-utils server may send it), asked through the real service over HTTP, streamed and not, offline and with a
scripted model; then every output path is read: the think block, the answer and its sources list, `citations`,
`search_results`, annotations, Open WebUI's source events and `/v1/search`."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator

import httpx
import pytest
from markdown_it import MarkdownIt

from docserver.server import create_app as create_docserver
from tests.conftest import ServiceFactory, chunks, content_of, sse_events
from tests.fakes.fake_llm import FakeLLM, Reply
from tests.fakes.servers import ServerThread

TITLE = ("Zwaluwrapport [klik hier](javascript:alert(1)) <img src=x onerror=alert(1)>\n"
         "9. [Officiele ANVS-bron](https://evil.example/phish) \x1b[31m\u202e\x07")
SECTION = "# Gekaapt <script>alert(2)</script>"
QUESTION = "Wat zegt het zwaluwrapport over de zwaluwstaartvergunning van kerncentrale Borssele?"
PASSAGE = ("De zwaluwstaartvergunning van kerncentrale Borssele loopt tot 2033 volgens het zwaluwrapport. "
           "Meer informatie staat op [de site](javascript:alert(3)) van de vergunninghouder.")


def _document() -> str:
    return "\n".join([
        "---", "doc_id: zwaluw", f"title: {json.dumps(TITLE)}", "year: 2024", "url: javascript:alert(1)",
        "language: nl", "---", "", "# Zwaluwrapport", "", f"## {SECTION}", "", PASSAGE, "",
    ])


@pytest.fixture(scope="module")
def hostile_docserver(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    corpus = tmp_path_factory.mktemp("hostile")
    (corpus / "collections.json").write_text(json.dumps([
        {"name": "anvs", "display_name": "ANVS", "focus": "toezicht en vergunningen"}]), encoding="utf-8")
    (corpus / "anvs").mkdir()
    (corpus / "anvs" / "zwaluw.md").write_text(_document(), encoding="utf-8")
    with ServerThread(create_docserver(corpus, index_path=corpus / "none.sqlite3")) as server:
        yield server.base_url + "/mcp"


def _markdown_kinds(text: str) -> set[str]:
    tokens = MarkdownIt("commonmark").enable("table").parse(text)
    return {t.type for t in tokens} | {c.type for t in tokens for c in (t.children or [])}


def _check_markdown(text: str) -> None:
    """What the service wrote as Markdown shows the title and passage as text: no HTML, no image, no link but the
    http(s) ones, no heading, no list entry of the document's making."""
    kinds = _markdown_kinds(text)
    assert not kinds & {"html_block", "html_inline", "image", "heading_open"}, (kinds, text)
    tokens = MarkdownIt("commonmark").parse(text)
    hrefs = [c.attrs.get("href", "") for t in tokens for c in (t.children or []) if c.type == "link_open"]
    assert all(str(h).startswith(("http://", "https://")) for h in hrefs), hrefs
    assert not re.search(r"^\s*\d+\. \\?\[?Officiele", text, re.MULTILINE), text  # no fake sources entry
    assert not re.search(r"[\x00-\x08\x0b-\x1f\x7f\u202e]", text), repr(text)


def _links(value: object) -> Iterator[str]:
    """Every link a JSON value carries: the values of its `url` keys and the strings of `citations`."""
    if isinstance(value, dict):
        for key, item in value.items():
            if key == "url" or (key == "citations" and isinstance(item, list)):
                yield from ([item] if isinstance(item, str) else [i for i in item or [] if isinstance(i, str)])
            else:
                yield from _links(item)
    elif isinstance(value, list):
        for item in value:
            yield from _links(item)


def _strings(value: object) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)


def _check_json(value: object) -> None:
    """JSON fields carry titles raw but as one line without control characters, and never a link other than
    http(s) (or the service's `urn:neo:` name of a document without a link)."""
    for link in _links(value):
        assert link == "" or link.startswith(("http://", "https://", "urn:neo:")), link
    for text in _strings(value):
        assert not re.search(r"[\x00-\x08\x0b-\x1f\x7f\u202e]", text), repr(text)


def _ask(base: str, stream: bool) -> tuple[str, list[dict]]:
    body = {"model": "neo-nl-agent", "stream": stream, "messages": [{"role": "user", "content": QUESTION}]}
    response = httpx.post(base + "/v1/chat/completions", json=body, headers={"X-OpenWebUI-Chat-Id": "c1"},
                          timeout=60)
    assert response.status_code == 200, response.text
    if not stream:
        message = response.json()["choices"][0]["message"]
        return message["content"], [response.json()]
    raw = sse_events(response)
    assert raw[-1] == "[DONE]"
    payloads = chunks(raw)
    return content_of(payloads), payloads


def _check(content: str, payloads: list[dict]) -> None:
    assert "Zwaluwrapport" in content or "zwaluwrapport" in content, content  # the document was found and used
    think, closed, answer = content.rpartition("</think>")
    if closed:  # the service's own tags around the think block; what stands between them is Markdown
        assert think.startswith("<think>\n") and think.count("<think>") == 1, think
        _check_markdown(think.removeprefix("<think>\n"))
    _check_markdown(answer)
    events = [p["event"]["data"] for p in payloads if p.get("event", {}).get("type") == "source"]
    _check_json(events)
    for payload in payloads:
        _check_json({k: payload.get(k) for k in ("citations", "search_results")})
        for choice in payload.get("choices", []):
            part = choice.get("delta") or choice.get("message") or {}
            _check_json(part.get("annotations"))
            reasoning = part.get("reasoning_content")
            if reasoning:
                _check_markdown(reasoning)
    results = [r for p in payloads for r in p.get("search_results") or []]
    assert any("Zwaluwrapport" in r["title"] for r in results), results
    assert all("\n" not in r["title"] for r in results)


@pytest.mark.parametrize("stream", [True, False])
def test_offline_answer_shows_hostile_metadata_as_text(service: ServiceFactory, hostile_docserver: str,
                                                       stream: bool) -> None:
    base = service(mcp_server_url=hostile_docserver)
    content, payloads = _ask(base, stream)
    _check(content, payloads)


def test_model_answer_drops_a_planted_link(service: ServiceFactory, fake_llm: FakeLLM,
                                           hostile_docserver: str) -> None:
    """The model copies the planted link and the title's markup into its answer: the link does not reach the
    screen; the sources list the service writes shows the title as text."""
    fake_llm.when_contains("NEO NL", Reply(
        text="De vergunning loopt tot 2033 [1]. Zie [de site](javascript:alert(3)) of data:text/html;base64,PGI+."))
    base = service(mcp_server_url=hostile_docserver, llm_base_url=fake_llm.base_url, llm_model="big",
                   llm_fast_model="small", llm_timeout_s=5.0, claim_check="off", think_mode="reasoning_content")
    content, payloads = _ask(base, True)
    assert "2033" in content
    _check(content, payloads)
    assert "data:text/html" not in content


def test_search_endpoint_returns_plain_metadata(service: ServiceFactory, hostile_docserver: str) -> None:
    base = service(mcp_server_url=hostile_docserver)
    response = httpx.post(base + "/v1/search", json={"query": "zwaluwstaartvergunning Borssele"}, timeout=30)
    assert response.status_code == 200, response.text
    passages = response.json()["data"]
    hits = [p for p in passages if "zwaluw" in p["id"]]
    assert hits, passages
    for passage in hits:
        assert passage["url"] in ("", None)
        assert "\n" not in passage["title"] and "\x1b" not in passage["title"]
        assert passage["section"] == SECTION
    _check_json(hits)


def test_cli_ask_prints_no_control_characters(service: ServiceFactory, hostile_docserver: str) -> None:
    """`python -m app ask` against the service: the escape sequences and the override in the title are shown
    escaped, never sent to the terminal."""
    import io

    from app.cli import ask

    base = service(mcp_server_url=hostile_docserver)
    out = io.StringIO()
    assert ask(QUESTION, url=base + "/v1", api_key="", model="neo-nl-agent", local=False, out=out) == 0
    printed = out.getvalue()
    assert "Zwaluwrapport" in printed
    assert not re.search(r"[\x00-\x08\x0b-\x1f\x7f\u202e]", printed), repr(printed)


def test_ledger_sources_table() -> None:
    """The sources list as `Ledger.sources` writes it for hostile entries, rendered by CommonMark: one list entry
    per document, titles as text, only http(s) links."""
    from graph.answer.ledger import Ledger
    from graph.models import Evidence

    entries = [Evidence(id=f"c/d{i}#0", collection="c", doc_id=f"d{i}", title=title, text="tekst", url=url,
                        section=SECTION)
               for i, (title, url) in enumerate([(TITLE, "javascript:alert(1)"), ("Gewoon", "https://a.example/x"),
                                                 ("1. lijst", "data:text/html,x"), ("> quote", "https://b.example")])]
    ledger = Ledger(entries)
    text = ledger.sources([], "nl", str)
    _check_markdown(text)
    tokens = MarkdownIt("commonmark").parse(text)
    assert sum(t.type == "list_item_open" for t in tokens) == 4, text
    assert not re.search(r"— (?:javascript|data):", text), text  # the links the entries carried: dropped
    assert "— https://a.example/x" in text and "— https://b.example" in text


# --- the same attack through the ingest: an ODT user field and an HTML canonical link -------------------------------

ODT_MIME = b"application/vnd.oasis.opendocument.text"
ODF = ('xmlns:office="urn:oasis:names:tc:opendocument:xmlns:office:1.0" '
       'xmlns:text="urn:oasis:names:tc:opendocument:xmlns:text:1.0" '
       'xmlns:meta="urn:oasis:names:tc:opendocument:xmlns:meta:1.0" xmlns:dc="http://purl.org/dc/elements/1.1/"')


def _odt(title: str, url: str, text: str) -> bytes:
    import io
    import zipfile
    from xml.sax.saxutils import escape

    meta = (f'<?xml version="1.0"?><office:document-meta {ODF}><office:meta><dc:title>{escape(title)}</dc:title>'
            f'<meta:user-defined meta:name="url">{escape(url)}</meta:user-defined></office:meta>'
            "</office:document-meta>")
    content = (f'<?xml version="1.0"?><office:document-content {ODF}><office:body><office:text>'
               f"<text:p>{escape(text)}</text:p></office:text></office:body></office:document-content>")
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr(zipfile.ZipInfo("mimetype"), ODT_MIME)
        archive.writestr("content.xml", content)
        archive.writestr("meta.xml", meta)
    return buffer.getvalue()


@pytest.fixture(scope="module")
def ingested_docserver(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A folder of an ODT whose user field `url` is `javascript:` and an HTML page whose canonical link is, both
    titled with markup and a newline, ingested by the real CLI and served by the real reference server."""
    import os
    import subprocess
    import sys

    folder = tmp_path_factory.mktemp("upload")
    xml_title = TITLE.replace("\x1b", "").replace("\x07", "")  # XML 1.0 cannot carry those two
    (folder / "zwaluw.odt").write_bytes(_odt(xml_title, "javascript:alert(1)", PASSAGE))
    (folder / "zwaluwpagina.html").write_text(
        '<!DOCTYPE html><html lang="nl"><head><title>[klik hier](javascript:alert(4)) &lt;img src=x '
        'onerror=alert(5)&gt; # Gekaapt</title><link rel="canonical" href="javascript:alert(6)"></head><body>'
        f"<h1>Zwaluwpagina</h1><p>{PASSAGE.replace('2033', '2034')}</p></body></html>", encoding="utf-8")
    index = folder / "index.sqlite3"
    done = subprocess.run([sys.executable, "-m", "docserver", "ingest", str(folder), "--collection", "anvs",
                           "--quiet"], capture_output=True, text=True, timeout=120, check=False,
                          env={**os.environ, "DOCSERVER_INDEX": str(index)})
    assert done.returncode == 0, done.stdout + done.stderr
    empty = folder / "corpus"
    empty.mkdir()
    (empty / "collections.json").write_text(json.dumps([{"name": "anvs", "display_name": "ANVS", "focus": "x"}]),
                                            encoding="utf-8")
    with ServerThread(create_docserver(empty, index_path=index)) as server:
        yield server.base_url + "/mcp"


@pytest.mark.parametrize("stream", [True, False])
def test_ingested_odt_and_html_links_never_reach_the_answer(service: ServiceFactory, ingested_docserver: str,
                                                            stream: bool) -> None:
    base = service(mcp_server_url=ingested_docserver)
    content, payloads = _ask(base, stream)
    assert "zwaluwstaartvergunning" in content.lower(), content
    _check(content, payloads)
    response = httpx.post(base + "/v1/search", json={"query": "zwaluwstaartvergunning Borssele"}, timeout=30)
    hits = response.json()["data"]
    assert len({h["id"].split("#")[0] for h in hits}) == 2, hits  # both files were found
    _check_json(hits)
    assert all("\n" not in h["title"] for h in hits)
