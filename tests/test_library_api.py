"""The document library over HTTP with the official `openai` package (issue 58): files and vector stores, access,
answers from a document uploaded a moment before whose source opens at the page cited, answers that follow what
the library holds, and a collection made by the CLI that the service searches without a restart.

Real parts only: the service with its embedded document server on a fresh index, the `openai` client, httpx for
what a browser does with a link, and the docserver CLI in a subprocess.
"""

from __future__ import annotations

import json
import re
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import openai
import pytest

from app.main import create_app
from app.settings import Settings
from bench.scale import layout, pdf_bytes
from graph.clients.cache import tenant_of
from tests.conftest import chunks, sse_events
from tests.fakes.servers import ServerThread

ADMIN, READER = "sk-admin-0123456789", "sk-reader-0123456789"
FACT = "De fietsenstalling bij het station Zuiderwaard heeft 4.300 plaatsen en is sinds 2024 gratis."
QUESTION = "Hoeveel plaatsen heeft de fietsenstalling bij het station Zuiderwaard?"
FILLER = ("Het college wil het fietsgebruik in de binnenstad van Zuiderwaard verder stimuleren met bredere "
          "fietspaden, betere verlichting en meer groen langs de routes naar de scholen in de wijken.")


def bike_policy_pdf() -> bytes:
    """A three-page PDF whose answer to QUESTION stands on page 2 only."""
    sections = [("Inleiding", [FILLER] * 30), ("Stallen bij het station", [FACT, FILLER]),
                ("Verder", [FILLER] * 30)]
    pages = layout("Fietsbeleid Zuiderwaard 2025", sections)
    page_of_fact = next(n for n, page in enumerate(pages, start=1) if any("4.300" in line[3] for line in page))
    assert len(pages) >= 3 and page_of_fact == 2, [len(pages), page_of_fact]
    return pdf_bytes("Fietsbeleid Zuiderwaard 2025", pages)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


Start = Callable[..., str]


@pytest.fixture(params=["sqlite", "postgres"])
def index(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest) -> Path:
    """A fresh library, the embedded document server's and the uploads': the SQLite file, or a fresh PostgreSQL
    database (DOCSERVER_DATABASE_URL, which wins over the file for the service, its server and the CLI)."""
    path = tmp_path / "library" / "index.sqlite3"
    monkeypatch.setenv("DOCSERVER_INDEX", str(path))
    if request.param == "postgres":
        monkeypatch.setenv("DOCSERVER_DATABASE_URL", request.getfixturevalue("postgres_url"))
    return path


def _services() -> tuple[Start, Callable[[], None]]:
    """Start services (each with its embedded document server, on the library the environment names); and stop
    them all."""
    servers: list[ServerThread] = []

    def run(**overrides: object) -> str:
        port = free_port()
        values: dict[str, object] = {"mcp_server_url": "", "llm_base_url": "", "response_cache": False,
                                     "public_url": f"http://127.0.0.1:{port}", "library_refresh_s": 0.2}
        settings = Settings(_env_file=None, **{**values, **overrides})
        servers.append(ServerThread(create_app(settings), port=port).start())
        return servers[-1].base_url

    def stop() -> None:
        for server in servers:
            server.stop()

    return run, stop


@pytest.fixture
def start(index: Path) -> Iterator[Start]:
    run, stop = _services()
    yield run
    stop()


def client(base: str, key: str = "none") -> openai.OpenAI:
    return openai.OpenAI(base_url=base + "/v1", api_key=key, max_retries=0, timeout=120)


def upload(sdk: openai.OpenAI, store: str, name: str, data: bytes):
    return sdk.vector_stores.files.upload_and_poll(vector_store_id=store, file=(name, data), poll_interval_ms=200,
                                                   max_wait_seconds=90)


def chat(sdk: openai.OpenAI, question: str = QUESTION, **extra: object):
    return sdk.chat.completions.create(model="neo-nl-agent", messages=[{"role": "user", "content": question}],
                                       **extra)


def test_files_and_vector_stores_the_openai_way(start: Start) -> None:
    sdk = client(start())
    pdf = bike_policy_pdf()
    stored = sdk.files.create(file=("fietsbeleid.pdf", pdf), purpose="assistants")
    assert stored.object == "file" and stored.bytes == len(pdf) and stored.filename == "fietsbeleid.pdf"
    assert re.fullmatch(r"file-[0-9a-f]{24}", stored.id)
    assert sdk.files.retrieve(stored.id).filename == "fietsbeleid.pdf"
    assert sdk.files.content(stored.id).content == pdf  # the original bytes
    assert stored.id in [f.id for f in sdk.files.list()]

    store = sdk.vector_stores.create(name="Gemeente Zuiderwaard")
    assert store.id == "gemeente-zuiderwaard" and store.name == "Gemeente Zuiderwaard"
    attached = sdk.vector_stores.files.create_and_poll(file_id=stored.id, vector_store_id=store.id,
                                                       poll_interval_ms=200, max_wait_seconds=90)
    assert attached.status == "completed" and attached.last_error is None, attached
    assert [f.id for f in sdk.vector_stores.files.list(vector_store_id=store.id)] == [stored.id]
    assert store.id in [s.id for s in sdk.vector_stores.list()]
    assert sdk.vector_stores.retrieve(store.id).file_counts.completed == 1

    results = sdk.vector_stores.search(vector_store_id=store.id, query=QUESTION)
    hits = list(results)
    assert hits and hits[0].file_id == stored.id and hits[0].filename == "fietsbeleid.pdf"
    assert "4.300 plaatsen" in hits[0].content[0].text
    assert hits[0].attributes["page"] == 2

    with pytest.raises(openai.ConflictError):
        sdk.vector_stores.create(name="Gemeente Zuiderwaard")

    sdk.vector_stores.files.delete(file_id=stored.id, vector_store_id=store.id)
    assert list(sdk.vector_stores.files.list(vector_store_id=store.id)) == []
    assert sdk.files.delete(stored.id).deleted
    with pytest.raises(openai.NotFoundError):
        sdk.files.retrieve(stored.id)
    assert sdk.vector_stores.delete(store.id).deleted
    with pytest.raises(openai.NotFoundError):
        sdk.vector_stores.retrieve(store.id)


def test_a_refused_upload_fails_with_the_reason_the_cli_gives(start: Start, tmp_path: Path, index: Path) -> None:
    sdk = client(start())
    sdk.vector_stores.create(name="kapot")
    data = b"Dit is tekst\x00met een NUL-byte erin\n"
    result = upload(sdk, "kapot", "kapot.txt", data)
    assert result.status == "failed" and result.last_error is not None, result
    (tmp_path / "kapot.txt").write_bytes(data)
    cli = subprocess.run([sys.executable, "-m", "docserver", "ingest", str(tmp_path / "kapot.txt"), "--collection",
                          "elders", "--index", str(tmp_path / "other.sqlite3"), "--quiet"],
                         capture_output=True, text=True, timeout=120, check=False)
    assert result.last_error.message in cli.stderr + cli.stdout, (result.last_error.message, cli.stderr)
    assert sdk.vector_stores.retrieve("kapot").file_counts.failed == 1


def test_upload_limits_and_bad_bodies_are_openai_errors(start: Start) -> None:
    base = start(max_upload_bytes=1000)
    sdk = client(base)
    with pytest.raises(openai.APIStatusError) as too_big:
        sdk.files.create(file=("groot.txt", b"a" * 5000), purpose="assistants")
    assert too_big.value.status_code == 413 and too_big.value.body["code"] == "file_too_large"
    with pytest.raises(openai.BadRequestError):
        sdk.files.create(file=("x.txt", b"tekst"), purpose="fine-tune")
    bare = httpx.post(base + "/v1/files", content=b"not a form", headers={"Content-Type": "text/plain"})
    assert bare.status_code == 400 and bare.json()["error"]["message"]
    assert list(sdk.files.list()) == []  # nothing kept of a refused upload


def test_a_chat_answers_from_a_document_uploaded_a_moment_before_and_its_source_opens_there(start: Start) -> None:
    base = start(api_keys=[ADMIN])
    sdk = client(base, ADMIN)
    pdf = bike_policy_pdf()
    sdk.vector_stores.create(name="zuiderwaard")
    assert upload(sdk, "zuiderwaard", "Fietsbeleid Zuiderwaard.pdf", pdf).status == "completed"

    answer = chat(sdk)  # no filters: the new collection is routed to and searched like the others
    text = answer.choices[0].message.content
    assert "4.300" in text, text
    links = re.findall(r"\((http://127\.0\.0\.1:\d+/v1/files/file-[0-9a-f]{24}/content\?[^)\s]+)\)|"
                       r"— (http://127\.0\.0\.1:\d+/v1/files/file-[0-9a-f]{24}/content\?\S+)", text)
    urls = [a or b for a, b in links]
    assert urls, text
    annotated = [a.url_citation.url for a in answer.choices[0].message.annotations or []]
    assert any("/v1/files/" in url and "#page=2" in url for url in annotated), annotated
    for url in urls:
        assert url.endswith("#page=2"), url  # the page the fact stands on, not page 1
        opened = httpx.get(url.split("#")[0])  # a browser: no API key, the signed link alone
        assert opened.status_code == 200 and opened.content == pdf
        assert opened.headers["content-type"] == "application/pdf"
        tampered = httpx.get(url.split("#")[0].replace("signature=", "signature=0"))
        assert tampered.status_code == 404
    path = urlsplit(urls[0]).path
    assert httpx.get(base + path).status_code == 401  # neither key nor signature

    # Open WebUI's source chips: the `source` events of its chat path carry the same link, opened at the page
    body = {"model": "neo-nl-agent", "stream": True, "messages": [{"role": "user", "content": QUESTION}]}
    streamed = httpx.post(base + "/v1/chat/completions", json=body, timeout=120,
                          headers={"Authorization": f"Bearer {ADMIN}", "X-OpenWebUI-Chat-Id": "c1"})
    events = [p["event"]["data"] for p in chunks(sse_events(streamed)) if p.get("event", {}).get("type") == "source"]
    chips = [e["source"]["url"] for e in events if "/v1/files/" in e["source"].get("url", "")]
    assert chips and all(url in urls for url in chips), (chips, urls)


def test_access_readers_cannot_write_nor_see_another_collections_files(start: Start, tmp_path: Path) -> None:
    access = tmp_path / "access.json"
    access.write_text(json.dumps({"restricted": ["geheim"], "grants": [
        {"key": tenant_of(ADMIN), "collections": ["*"], "write": True}]}), "utf-8")
    base = start(api_keys=[ADMIN, READER], access_file=access)
    admin, reader = client(base, ADMIN), client(base, READER)
    admin.vector_stores.create(name="geheim")
    admin.vector_stores.create(name="openbaar")
    secret = upload(admin, "geheim", "geheim.txt", b"Het geheime wachtwoord van de kluis is Zeeland.\n")
    public = upload(admin, "openbaar", "openbaar.txt", b"De kantine is open van negen tot vijf uur.\n")
    assert secret.status == public.status == "completed"

    with pytest.raises(openai.PermissionDeniedError):
        reader.files.create(file=("x.txt", b"tekst"), purpose="assistants")
    with pytest.raises(openai.PermissionDeniedError):
        reader.vector_stores.create(name="van-mij")
    with pytest.raises(openai.PermissionDeniedError):
        reader.vector_stores.files.delete(file_id=public.id, vector_store_id="openbaar")
    with pytest.raises(openai.PermissionDeniedError):
        reader.files.delete(public.id)
    assert reader.files.retrieve(public.id).filename == "openbaar.txt"
    assert [f.id for f in reader.files.list()] == [public.id]
    for call in (lambda: reader.files.retrieve(secret.id), lambda: reader.files.content(secret.id),
                 lambda: reader.files.delete(secret.id), lambda: reader.vector_stores.retrieve("geheim"),
                 lambda: reader.vector_stores.files.list(vector_store_id="geheim"),
                 lambda: reader.vector_stores.search(vector_store_id="geheim", query="wachtwoord")):
        with pytest.raises(openai.NotFoundError):
            call()
    assert "geheim" not in [s.id for s in reader.vector_stores.list()]
    assert "geheim" in [s.id for s in admin.vector_stores.list()]
    assert "Zeeland" not in chat(reader, "Wat is het geheime wachtwoord van de kluis?").choices[0].message.content
    assert "Zeeland" in chat(admin, "Wat is het geheime wachtwoord van de kluis?").choices[0].message.content


def test_cached_answers_follow_the_library(start: Start) -> None:
    sdk = client(start(response_cache=True))
    sdk.vector_stores.create(name="zuiderwaard")
    unanswered = chat(sdk).choices[0].message.content
    assert "4.300" not in unanswered

    stored = upload(sdk, "zuiderwaard", "fietsbeleid.pdf", bike_policy_pdf())
    answered = chat(sdk).choices[0].message.content
    assert "4.300" in answered, answered  # the cached "not found" was not served

    sdk.files.delete(stored.id)  # the cited document leaves the library
    again = chat(sdk).choices[0].message.content
    assert "4.300" not in again and "Fietsbeleid" not in again and "/v1/files/" not in again, again


def test_a_collection_made_by_the_cli_is_searched_without_a_restart(start: Start, tmp_path: Path, index: Path
                                                                     ) -> None:
    base = start()
    folder = tmp_path / "mijndocs"
    (folder / "2023").mkdir(parents=True)
    (folder / "2024").mkdir()
    (folder / "2023" / "notitie.txt").write_text("De jaarlijkse kwallenmeting in de Waddenzee telde 812 kwallen.\n")
    (folder / "2024" / "notitie.txt").write_text("De jaarlijkse kwallenmeting in de Waddenzee telde 455 kwallen.\n")
    cli = subprocess.run([sys.executable, "-m", "docserver", "ingest", str(folder), "--collection", "mijndocs",
                          "--index", str(index), "--quiet"], capture_output=True, text=True, timeout=120, check=False)
    assert cli.returncode == 0, cli.stderr
    deadline = time.monotonic() + 10
    while True:  # the library is asked at most every LIBRARY_REFRESH_S and the server reloads within a second
        found = httpx.post(base + "/v1/search", json={"query": "kwallenmeting Waddenzee",
                                                      "filters": {"collections": ["mijndocs"]}}, timeout=30)
        if found.status_code == 200 or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert found.status_code == 200, found.text
    ids = {p["id"].split("#")[0] for p in found.json()["data"]}
    assert ids == {"mijndocs/2023/notitie-txt", "mijndocs/2024/notitie-txt"}, ids
    store = client(base).vector_stores.retrieve("mijndocs")
    assert store.name == "mijndocs"


def test_an_uploaded_page_is_downloaded_never_shown_from_the_services_origin(start: Start) -> None:
    """A file's content is the uploader's: HTML (or SVG, ...) would run its scripts in the service's origin if a
    browser showed it, so only PDFs and plain text open in place."""
    base = start()
    sdk = client(base)
    page = b"<html><body><script>alert(document.domain)</script>Hallo</body></html>"
    stored = sdk.files.create(file=("pagina.html", page), purpose="assistants")
    response = httpx.get(f"{base}/v1/files/{stored.id}/content")
    assert response.status_code == 200 and response.content == page
    assert response.headers["content-type"] == "application/octet-stream"
    assert response.headers["content-disposition"].startswith("attachment")
    assert response.headers["x-content-type-options"] == "nosniff" and "sandbox" in response.headers[
        "content-security-policy"]
    named = sdk.files.create(file=("../../etc/C:\\evil\\na\u202eme\n.txt", b"tekst"), purpose="user_data")
    # no folder and no bidi control; the newline the client itself sent percent-encoded (httpx's multipart)
    assert named.filename == "na me%0A.txt"


def run_cli(*args: str) -> None:
    done = subprocess.run([sys.executable, "-m", "docserver", *args], capture_output=True, text=True, timeout=120,
                          check=False)
    assert done.returncode == 0, done.stderr


def test_a_server_without_list_collections_is_followed_too(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An external server as genai-utils is (no `list_collections`, no versions): its collections come from
    `list_documents`, and a cached answer is replayed only while the first research round finds what it found."""
    from docserver.server import create_app as create_docserver

    monkeypatch.delenv("DOCSERVER_INDEX")  # the service cannot write this library: no uploads
    index, note = tmp_path / "extern.sqlite3", tmp_path / "kwallen.txt"
    note.write_text("De jaarlijkse kwallenmeting in de Waddenzee telde in 2023 precies 812 kwallen.\n")
    run_cli("ingest", str(note), "--collection", "mijndocs", "--index", str(index), "--quiet")
    with ServerThread(create_docserver(index_path=index, list_collections=False, token="")) as docs, \
            ServerThread(create_app(Settings(_env_file=None, mcp_server_url=docs.base_url + "/mcp", llm_base_url="",
                                             response_cache=True, library_refresh_s=0.2))) as service:
        base = service.base_url
        found = httpx.post(base + "/v1/search", json={"query": "kwallenmeting", "filters": {
            "collections": ["mijndocs"]}}, timeout=30)
        assert found.status_code == 200 and found.json()["data"], found.text
        sdk = client(base)
        question = "Hoeveel kwallen telde de kwallenmeting in de Waddenzee in 2023?"
        assert "812" in chat(sdk, question).choices[0].message.content
        hits = httpx.get(base + "/health/ready").json()["cache"]["hits"]
        assert "812" in chat(sdk, question).choices[0].message.content
        assert httpx.get(base + "/health/ready").json()["cache"]["hits"] == hits + 1  # the first round found the same
        assert sdk.vector_stores.retrieve("mijndocs").id == "mijndocs"
        with pytest.raises(openai.APIStatusError) as refused:
            sdk.files.create(file=("x.txt", b"tekst"), purpose="assistants")
        assert refused.value.status_code == 501

        run_cli("remove", "kwallen", "--collection", "mijndocs", "--index", str(index))
        deadline = time.monotonic() + 10
        while True:  # the server reloads within a second; the cached answer must not outlive the document
            answer = chat(sdk, question).choices[0].message.content
            if "812" not in answer or time.monotonic() > deadline:
                break
            time.sleep(0.3)
        assert "812" not in answer, answer


def _within(seconds: float, check: Callable[[], bool]) -> float:
    """Seconds until `check()` holds (polled every 50 ms); AssertionError after `seconds`."""
    started = time.monotonic()
    while not check():
        assert time.monotonic() - started < seconds, "not within the time allowed"
        time.sleep(0.05)
    return time.monotonic() - started


def test_two_replicas_on_one_database_share_uploads(postgres_url: str, tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """Two services (each with its embedded document server) on one PostgreSQL library: a file uploaded to one is
    searchable on the other within 2 s, its bytes served by both, its deletion seen by both."""
    monkeypatch.setenv("DOCSERVER_DATABASE_URL", postgres_url)
    monkeypatch.setenv("DOCSERVER_INDEX", str(tmp_path / "unused" / "index.sqlite3"))
    start, stop = _services()
    try:
        _share_uploads(client(start()), client(start()))
    finally:
        stop()


def _share_uploads(one: openai.OpenAI, other: openai.OpenAI) -> None:
    pdf = bike_policy_pdf()
    store = one.vector_stores.create(name="Gemeente Zuiderwaard")
    attached = upload(one, store.id, "fietsbeleid.pdf", pdf)
    assert attached.status == "completed", attached

    def found() -> bool:
        return any("4.300 plaatsen" in hit.content[0].text
                   for hit in other.vector_stores.search(vector_store_id=store.id, query=QUESTION))

    assert _within(2.0, found) < 2.0
    assert other.files.content(attached.id).content == pdf
    assert other.vector_stores.retrieve(store.id).file_counts.completed == 1
    assert one.files.delete(attached.id).deleted
    assert _within(2.0, lambda: not found()) < 2.0
    with pytest.raises(openai.NotFoundError):
        other.files.retrieve(attached.id)
