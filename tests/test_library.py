"""The document library the service's Files and Vector Stores API use (docserver/library.py): files kept with their
original bytes, collections that exist before anything is in them, files attached to a collection and read in as the
CLI reads a file (the same refusal reasons), documents going with their attachment, file or collection, and a
version per collection that changes whenever what it holds changes, and only then. A running server (the real app
over streamable HTTP, the official MCP client) lists an empty collection, finds an upload within about two
seconds, says its ``file_id`` and the collection's version, and describes every collection (``list_collections``).

Every test on both engines: a real SQLite file in tmp_path and a real PostgreSQL database (pgserver,
docserver/postgres/library.py). Real files (the shared format samples where they are), worker processes for
``ingest_attached`` as the app runs it, the CLI in a subprocess for the reasons it gives.
"""

import asyncio
import hashlib
import json
import multiprocessing
import os
import secrets
import time
from collections.abc import Awaitable, Callable, Iterator
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from docserver.index import Index
from docserver.ingest import ingest_files
from docserver.library import FILE_ID, Library, StoredFile, ingest_attached
from docserver.originals import originals_dir
from docserver.postgres.library import PostgresLibrary
from docserver.postgres.search import open_library
from docserver.store import index_version, list_stored
from docserver.tools import format_collections
from tests.test_docserver import COLLECTIONS, call, connect, running, split_result, write_corpus
from tests.test_ingest_manage import docserver

ROOT = Path(__file__).resolve().parents[1]
FORMATS = Path(os.environ.get("NEO_SHARED_DIR", ROOT.parent / "shared")) / "formats"
NUREG = FORMATS / "en-nureg0800-srp-5.4.11.pdf"
WORD = "zwaluwstaartprocedure"  # in no bundled document
MEMO = f"""---
title: Memo over de {WORD}
---

# Memo

## Aanleiding

De {WORD} geldt voor elke inspectie van een kerncentrale.

## Besluit

De vergunning blijft van kracht en de inspectie gaat door.
"""


@pytest.fixture
def index_file(tmp_path: Path) -> Path:
    return tmp_path / "library" / "docserver.sqlite3"


@pytest.fixture(params=["sqlite", "postgres"])
def library(index_file: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
            request: pytest.FixtureRequest) -> Iterator[Any]:
    """The library in the SQLite file, or in a fresh PostgreSQL database (DOCSERVER_DATABASE_URL set: the servers
    and ingests of the test use it too)."""
    if request.param == "sqlite":
        yield Library(index_file)
        return
    url = request.getfixturevalue("postgres_url")
    monkeypatch.setenv("DOCSERVER_DATABASE_URL", url)
    library = PostgresLibrary(url, cache=tmp_path / "files-cache")
    yield library
    library.close()


def where(library: Any) -> Path | str:
    """What ``ingest_attached`` and a server are given: the index file, or the database's URL."""
    return library.path if isinstance(library, Library) else library.url


def stored(library: Any, collection: str) -> list[Any]:
    """The documents of ``collection`` the library holds (``list_stored`` of either engine)."""
    if isinstance(library, Library):
        return list_stored(library.path, collection)
    return library.store.list_stored(collection)


def generation(library: Any) -> int:
    return index_version(library.path).generation if isinstance(library, Library) else library.store.generation()


def served(library: Any, corpus: Path) -> Any:
    """What a server would serve: the corpus at ``corpus`` and the library."""
    if isinstance(library, Library):
        return Index.load(corpus, index_path=library.path)
    return open_library(library.url, corpus)


def upload(library: Library, filename: str, data: bytes, purpose: str = "assistants") -> StoredFile:
    """A file received as the service receives one: written in the incoming folder, then added."""
    written = library.incoming() / f"upload-{secrets.token_hex(4)}"
    written.write_bytes(data)
    return library.add_file(written, filename, purpose)


def cli_reason(tmp_path: Path, filename: str, data: bytes) -> str:
    """The reason ``python -m docserver ingest`` gives when it refuses a file of that name and those bytes."""
    path = tmp_path / f"cli-{secrets.token_hex(4)}" / filename
    path.parent.mkdir()
    path.write_bytes(data)
    result = docserver("ingest", path, "--collection", "cli", "--index", tmp_path / "cli.sqlite3")
    assert result.returncode == 1
    (line,) = [line for line in result.stderr.splitlines() if line.startswith("refused: ")]
    return line.removeprefix(f"refused: {path}: ")


# --- files ------------------------------------------------------------------------------------------------------


def test_files_are_kept_with_their_bytes_newest_first(library: Library, tmp_path: Path) -> None:
    started = int(time.time())
    text = f"Het {WORD} geldt.\n".encode()
    first = upload(library, "Notitie.txt", text)
    second = upload(library, "rapport\n\u202e.pdf", b"%PDF-1.4 nep", purpose="user_data")
    assert FILE_ID.match(first.id) and FILE_ID.match(second.id) and first.id != second.id
    assert (first.filename, first.bytes, first.purpose, first.sha256) == (
        "Notitie.txt", len(text), "assistants", hashlib.sha256(text).hexdigest())
    assert second.filename == "rapport .pdf"  # one plain line
    assert started <= first.created_at <= int(time.time())
    assert library.files() == [second, first]
    assert library.file(first.id) == first and library.file("file-" + "0" * 24) is None
    assert library.file("../docserver.sqlite3") is None and library.file_path("../docserver.sqlite3") is None
    assert library.file_path(first.id).read_bytes() == text
    if isinstance(library, Library):  # the originals beside the file (in the database: its table, copied out)
        assert library.file_path(first.id).parent == originals_dir(library.path)
    assert list(library.incoming().iterdir()) == []  # moved into place
    assert library.file_collections(first.id) == []

    elsewhere = tmp_path / "elders.txt"
    elsewhere.write_bytes(text)
    with pytest.raises(ValueError, match="incoming"):
        library.add_file(elsewhere, "elders.txt", "assistants")
    assert elsewhere.exists() and len(library.files()) == 2


# --- collections ------------------------------------------------------------------------------------------------


def test_an_empty_collection_exists_and_invalid_or_taken_names_are_refused(library: Library, tmp_path: Path) -> None:
    created = library.create_collection("beleid", "Beleid\nen regels", {"eigenaar": "anvs"})
    assert (created.name, created.display_name, created.documents, created.chunks, created.bytes) == (
        "beleid", "Beleid en regels", 0, 0, 0)
    assert created.metadata == {"eigenaar": "anvs"} and created.version
    assert library.collections() == [created] and library.collection("beleid") == created
    assert library.collection("elders") is None

    empty_corpus = tmp_path / "corpus"
    empty_corpus.mkdir()
    index = served(library, empty_corpus)
    assert index.collection("beleid").display_name == "Beleid en regels" and index.listing("beleid", 5) == []
    assert index.search("beleid", "beleid") == []

    for name in ("../x", "", "a b", "-x"):
        with pytest.raises(ValueError, match="invalid collection name"):
            library.create_collection(name)
    with pytest.raises(FileExistsError):
        library.create_collection("beleid")
    with pytest.raises(ValueError, match="strings"):
        library.create_collection("andere", metadata={"n": 1})  # type: ignore[dict-item]

    note = tmp_path / "notitie.txt"  # a collection an ingest made exists too, and counts its originals' bytes
    note.write_text(f"Het {WORD} geldt.\n", encoding="utf-8")
    ingest_files([note], "notities", index_path=where(library))
    (made,) = [c for c in library.collections() if c.name == "notities"]
    assert (made.display_name, made.documents, made.chunks, made.bytes) == ("notities", 1, 1, note.stat().st_size)
    assert abs(made.created_at - time.time()) < 60
    with pytest.raises(FileExistsError):
        library.create_collection("notities")
    assert [c.name for c in library.collections()] == ["beleid", "notities"]


# --- attachments ------------------------------------------------------------------------------------------------


def test_an_attached_upload_is_read_as_the_cli_reads_it_and_a_refused_one_fails_with_the_cli_reason(
    library: Library, tmp_path: Path
) -> None:
    library.create_collection("c")
    good = upload(library, "Memo.md", MEMO.encode())
    broken_bytes = b"Een notitie\x00 met een NUL-byte.\n"
    broken, empty = upload(library, "kapot.txt", broken_bytes), upload(library, "leeg.pdf", b"")
    attached = library.attach("c", good.id)
    assert (attached.status, attached.doc_id, attached.chunks, attached.bytes) == ("in_progress", None, 0, good.bytes)
    assert library.attach("c", good.id) == attached  # attaching again: the attachment there is
    with pytest.raises(KeyError):
        library.attach("elders", good.id)
    with pytest.raises(KeyError):
        library.attach("c", "file-" + "0" * 24)

    done = ingest_attached(where(library), "c", good.id)
    assert (done.status, done.doc_id, done.chunks, done.last_error) == ("completed", "memo", 2, None)
    assert library.attachment("c", good.id) == done
    (kept,) = stored(library, "c")
    assert (kept.doc_id, kept.file_id, kept.sha256, kept.title) == ("memo", good.id, good.sha256,
                                                                    f"Memo over de {WORD}")
    assert library.file_collections(good.id) == ["c"]
    info = library.collection("c")
    assert (info.documents, info.chunks, info.bytes) == (1, 2, good.bytes)

    for file, data in ((broken, broken_bytes), (empty, b"")):
        library.attach("c", file.id)
        failed = ingest_attached(where(library), "c", file.id)
        assert (failed.status, failed.doc_id, failed.chunks) == ("failed", None, 0)
        assert failed.last_error == cli_reason(tmp_path, file.filename, data)
    assert library.attachment("c", broken.id).last_error == "binary data at byte 11"
    assert library.attachment("c", empty.id).last_error == "the file is empty: no text to index"
    assert [a.status for a in library.attachments("c")] == ["completed", "failed", "failed"]
    assert [d.doc_id for d in stored(library, "c")] == ["memo"]

    never = ingest_attached(where(library), "c", upload(library, "los.txt", b"Los.").id)  # never attached
    assert never.status == "cancelled" and stored(library, "c")[0].doc_id == "memo"

    died = library.fail("c", good.id, "the file could not be read (the reader crashed)")  # as the app records it
    assert (died.status, died.doc_id, died.last_error) == ("failed", None, "the file could not be read (the reader "
                                                                             "crashed)")
    assert stored(library, "c") == [] and library.fail("c", "file-" + "0" * 24, "x") is None


def test_two_uploads_of_one_name_are_two_documents(library: Library) -> None:
    library.create_collection("c")
    first, second = (upload(library, "notitie.txt", f"Notitie {n} over de {WORD}.".encode()) for n in (1, 2))
    for file in (first, second):
        library.attach("c", file.id)
    assert ingest_attached(where(library), "c", first.id).doc_id == "notitie"
    assert ingest_attached(where(library), "c", second.id).doc_id == f"notitie-{second.id[5:13]}"
    assert ingest_attached(where(library), "c", first.id).doc_id == "notitie"  # read again: the same document
    assert [d.doc_id for d in stored(library, "c")] == ["notitie", f"notitie-{second.id[5:13]}"]


def test_detach_delete_file_and_delete_collection_take_the_documents_with_them(library: Library,
                                                                               tmp_path: Path) -> None:
    for name in ("c", "d"):
        library.create_collection(name)
    shared, other = upload(library, "Memo.md", MEMO.encode()), upload(library, "los.txt", b"Een losse notitie.")
    for name in ("c", "d"):
        library.attach(name, shared.id)
        assert ingest_attached(where(library), name, shared.id).status == "completed"
    library.attach("d", other.id)
    ingest_attached(where(library), "d", other.id)
    assert library.file_collections(shared.id) == ["c", "d"]

    assert library.detach("c", shared.id) and not library.detach("c", shared.id)
    assert stored(library, "c") == [] and library.attachments("c") == []
    assert [d.doc_id for d in stored(library, "d")] == ["los", "memo"]

    assert library.delete_file(shared.id) and not library.delete_file(shared.id)
    assert [d.doc_id for d in stored(library, "d")] == ["los"]
    assert library.file(shared.id) is None and library.file_path(shared.id) is None
    assert not isinstance(library, Library) or not (originals_dir(library.path) / shared.id).exists()
    assert [a.file_id for a in library.attachments("d")] == [other.id]

    note = tmp_path / "notitie.txt"  # a file an ingest read is a file of the library too
    note.write_text(f"Het {WORD} geldt.\n", encoding="utf-8")
    ingest_files([note], "d", index_path=where(library))
    ingested = f"file-{hashlib.sha256(note.read_bytes()).hexdigest()[:24]}"
    assert library.file(ingested).purpose == "ingest" and library.file_collections(ingested) == ["d"]

    assert library.delete_collection("d") and not library.delete_collection("d")
    assert library.collection("d") is None and stored(library, "d") == []
    assert library.attachments("d") == [] and library.file_path(other.id).is_file()  # an upload stays
    assert library.file(ingested) is None  # the original an ingest kept goes with its last document
    assert [c.name for c in library.collections()] == ["c"]


def test_versions_change_with_what_a_collection_holds_and_only_then(library: Library) -> None:
    def versions() -> tuple[str | None, str | None, int]:
        c, d = library.collection("c"), library.collection("d")
        return (c.version if c else None, d.version if d else None, generation(library))

    library.create_collection("c")
    library.create_collection("d")
    seen = [versions()]
    memo, broken = upload(library, "Memo.md", MEMO.encode()), upload(library, "kapot.txt", b"\x00")
    library.attach("c", memo.id)
    library.attach("c", broken.id)
    library.files(), library.collections(), library.attachments("c")
    assert versions() == seen[-1]  # uploading, attaching and reading change nothing a collection holds

    steps: list[Callable[[], Any]] = [
        lambda: ingest_attached(where(library), "c", memo.id),
        lambda: library.detach("c", memo.id),
        lambda: library.delete_collection("c"),
        lambda: library.create_collection("c"),
    ]
    for step in steps:
        step()
        now = versions()
        assert now[0] not in [v[0] for v in seen] and now[1] == seen[-1][1] and now[2] > seen[-1][2]
        seen.append(now)
    library.attach("c", broken.id)
    assert ingest_attached(where(library), "c", broken.id).status == "failed"
    assert versions() == seen[-1]  # a refused file adds nothing


def test_attached_files_are_read_in_worker_processes_at_once(library: Library) -> None:
    library.create_collection("c")
    files = [upload(library, f"notitie-{n}.txt", f"Notitie {n} over de {WORD}.".encode()) for n in range(4)]
    for file in files:
        library.attach("c", file.id)
    with ProcessPoolExecutor(2, mp_context=multiprocessing.get_context("spawn")) as pool:
        done = list(pool.map(ingest_attached, [where(library)] * 4, ["c"] * 4, [f.id for f in files]))
    assert [a.status for a in done] == ["completed"] * 4
    assert sorted(d.doc_id for d in stored(library, "c")) == [f"notitie-{n}" for n in range(4)]


# --- a running server -------------------------------------------------------------------------------------------


async def within(seconds: float, ask: Callable[[], Awaitable[Any]], ok: Callable[[Any], bool]) -> tuple[Any, float]:
    """Ask until the answer is ``ok`` (failing after ``seconds``): the answer, and how long it took."""
    started = time.monotonic()
    while True:
        answer = await ask()
        if ok(answer):
            return answer, time.monotonic() - started
        assert time.monotonic() - started < seconds, answer
        await asyncio.sleep(0.1)


def listed_collections(result: dict[str, Any]) -> dict[str, dict[str, Any]]:
    (content,) = result["content"]
    return {entry["name"]: entry for entry in json.loads(content["text"])["collections"]}


@pytest.mark.asyncio
async def test_a_running_server_lists_an_empty_collection_and_finds_an_upload_within_two_seconds(
    library: Library, tmp_path: Path
) -> None:
    corpus = write_corpus(tmp_path / "corpus")
    async with running(corpus, index_path=where(library)) as server, connect(server.url, server.token) as client:

        async def collections() -> dict[str, dict[str, Any]]:
            return listed_collections(await call(client, "list_collections", {}))

        async def search() -> dict[str, Any]:
            return await call(client, "search_collection", {"query": WORD, "collection": "beleid"})

        before = await collections()
        assert [name for name in before] == [c["name"] for c in COLLECTIONS]
        assert before["iaea"]["focus"] == "normen" and before["iaea"]["documents"] == 2
        assert before["iaea"]["titles"] and before["iaea"]["language"] == "nl"

        library.create_collection("beleid", "Beleid")
        listed, _ = await within(3, collections, lambda found: "beleid" in found)
        assert listed["beleid"] | {"version": "-"} == {
            "name": "beleid", "display_name": "Beleid", "focus": "", "documents": 0, "chunks": 0, "version": "-",
            "titles": [], "headings": [], "language": None}
        assert listed["beleid"]["version"] == library.collection("beleid").version
        assert (await search())["isError"] is False  # an empty collection is searched, not unknown

        memo = upload(library, "Memo.md", MEMO.encode())
        library.attach("beleid", memo.id)
        assert ingest_attached(where(library), "beleid", memo.id).status == "completed"
        found, took = await within(3, search, lambda result: len(result["content"]) > 1)
        assert took < 2.5
        texts, sources = split_result(found)
        assert {s["metadata"]["doc_id"] for s in sources} == {"memo"}
        assert all(s["metadata"]["file_id"] == memo.id for s in sources)
        payload = json.loads(found["content"][-1]["resource"]["text"])
        assert payload["collection_version"] == library.collection("beleid").version
        assert payload["collection_version"] != listed["beleid"]["version"]
        after = await collections()
        assert after["beleid"]["titles"] == [f"Memo over de {WORD}"] and after["beleid"]["documents"] == 1
        assert after["beleid"]["headings"] == ["Aanleiding", "Besluit"] and after["beleid"]["language"] == "nl"
        assert {n: after[n]["version"] for n in before} == {n: before[n]["version"] for n in before}

        library.detach("beleid", memo.id)
        await within(3, search, lambda result: len(result["content"]) == 1)  # the sources resource alone
        # the database's searches see the removal at once, its outline with the next look (within a second)
        await within(3, collections, lambda found: found["beleid"]["documents"] == 0)


@pytest.mark.skipif(not NUREG.is_file(), reason="../shared/formats is absent")
def test_list_collections_names_a_pdf_upload_by_its_headings_without_page_labels(library: Library,
                                                                                 tmp_path: Path) -> None:
    library.create_collection("nrc", "NRC")
    report = upload(library, NUREG.name, NUREG.read_bytes())
    library.attach("nrc", report.id)
    assert ingest_attached(where(library), "nrc", report.id).status == "completed"
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (entry,) = json.loads(format_collections(served(library, corpus)))["collections"]
    assert entry["name"] == "nrc" and entry["language"] == "en" and entry["titles"][0].startswith("NUREG-0800")
    assert "II. ACCEPTANCE CRITERIA" in entry["headings"] and len(entry["headings"]) <= 12
    assert not any("p." in heading for heading in entry["headings"])
