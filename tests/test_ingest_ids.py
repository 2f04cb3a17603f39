"""Doc ids that do not collide (docserver/ingest.py, store.py): a file's id comes from its path relative to the
folder ingested ("a/source-odt"), so ``source.odt`` in two folders are two documents; a file named directly keeps
the slug of its name, as does one at the top of a folder, and front matter's ``doc_id`` stands. Ingesting a folder
again skips every file as unchanged; an id with a ``/`` works through ``python -m docserver remove`` and the MCP
tools; an index from before these ids takes the new one without keeping the old. Every stored document keeps a copy
of its file's bytes beside the index, under a file id from its sha256.

Real files (the shared format samples where they are, else written here), the real CLI in a subprocess, the real
server over streamable HTTP with the official MCP client, real SQLite files.
"""

import hashlib
import os
import sqlite3
from dataclasses import replace
from pathlib import Path

import pytest

from docserver.corpus import BUNDLED_CORPUS
from docserver.formats.markdown import split_front_matter
from docserver.index import Index
from docserver.ingest import ingest, ingest_files
from docserver.originals import originals_dir
from docserver.store import DocumentStore, index_version, list_stored
from tests.test_docserver import call, connect, running, split_result
from tests.test_ingest_manage import docserver

ROOT = Path(__file__).resolve().parents[1]
FORMATS = Path(os.environ.get("NEO_SHARED_DIR", ROOT.parent / "shared")) / "formats"
ODT, HTML = FORMATS / "nl-kst-32545-143-motie.odt", FORMATS / "nl-kst-32545-143-motie.html"
needs_formats = pytest.mark.skipif(not (ODT.is_file() and HTML.is_file()), reason="../shared/formats is absent")
WORD = "kraanvogelprotocol"  # in no bundled document


@pytest.fixture
def index_file(tmp_path: Path) -> Path:
    return tmp_path / "index" / "docserver.sqlite3"


@pytest.fixture
def twins(tmp_path: Path) -> Path:
    """A folder whose sub-folders a and b each hold a source.odt and an index.html (the same motion, read from a
    different format in each) and a note of one name."""
    folder = tmp_path / "stukken"
    for sub, (odt, html) in {"a": (ODT, HTML), "b": (ODT, HTML)}.items():
        (folder / sub).mkdir(parents=True)
        (folder / sub / "source.odt").write_bytes(odt.read_bytes())
        (folder / sub / "index.html").write_bytes(html.read_bytes())
        (folder / sub / "Bijlage 1.txt").write_text(f"Bijlage van map {sub}: het {WORD} geldt.\n", encoding="utf-8")
    return folder


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@needs_formats
def test_one_name_in_two_folders_gives_two_documents_and_a_second_ingest_skips_them_all(twins: Path,
                                                                                         index_file: Path) -> None:
    first = docserver("ingest", twins, "--collection", "moties", "--index", index_file)
    assert first.returncode == 0, first.stderr
    ids = ["a/bijlage-1-txt", "a/index-html", "a/source-odt", "b/bijlage-1-txt", "b/index-html", "b/source-odt"]
    assert [d.doc_id for d in list_stored(index_file)] == ids
    assert {d.doc_id: d.name for d in list_stored(index_file)}["b/source-odt"] == "b/source.odt"
    generation = index_version(index_file).generation

    again = docserver("ingest", twins, "--collection", "moties", "--index", index_file)
    assert again.returncode == 0, again.stderr
    assert "(6 unchanged)" in again.stdout and again.stdout.count("unchanged: ") == 6
    assert index_version(index_file).generation == generation  # nothing written

    removed = docserver("remove", "a/source-odt", "--index", index_file)
    assert removed.returncode == 0 and removed.stdout == "removed: a/source-odt from collection 'moties'\n"
    assert [d.doc_id for d in list_stored(index_file)] == [i for i in ids if i != "a/source-odt"]
    back = docserver("ingest", twins, "--collection", "moties", "--index", index_file)  # only that one is read
    assert back.returncode == 0 and "(5 unchanged)" in back.stdout
    assert "  a/source-odt: " in back.stdout and f"<- {twins / 'a' / 'source.odt'}" in back.stdout


def test_a_file_named_directly_or_at_the_top_of_a_folder_keeps_the_slug_of_its_name(tmp_path: Path,
                                                                                    index_file: Path) -> None:
    folder = tmp_path / "map"
    (folder / "sub").mkdir(parents=True)
    (folder / "Notitie (2024).txt").write_text("Een notitie.\n", encoding="utf-8")
    (folder / "sub" / "Notitie (2024).txt").write_text("Een andere notitie.\n", encoding="utf-8")
    (folder / "sub" / "eigen.md").write_text("---\ndoc_id: eigen-id\n---\n\n# Eigen\n\n## Kop\n\nTekst.\n",
                                            encoding="utf-8")
    (folder / "sub" / "wet.md").write_text("---\ntitle: Wet\nidentifier: BWBR0002402\n---\n\n# Wet\n\n"
                                           "#### Artikel 1\n\nEen.\n\n#### Artikel 2\n\nTwee.\n", encoding="utf-8")
    report = ingest_files([folder], "c", index_path=index_file)
    assert report.failures == []
    assert sorted(d.doc_id for d in report.documents) == [
        "bwbr0002402", "eigen-id", "notitie-2024", "sub/notitie-2024-txt"]  # the ids documents give themselves stand
    named = ingest_files([folder / "sub" / "Notitie (2024).txt"], "d", index_path=index_file)
    assert [d.doc_id for d in named.documents] == ["notitie-2024"]  # as before folders counted
    # a folder given inside another given folder: the path from the outermost one, whatever the order
    nested = ingest_files([folder / "sub", folder], "e", index_path=index_file)
    assert "sub/notitie-2024-txt" in {d.doc_id for d in nested.documents}


def test_the_bundled_corpus_keeps_its_ids(tmp_path: Path) -> None:
    """Each bundled document is still named by its front matter's doc_id, else its file's stem."""
    expected = set()
    for path in BUNDLED_CORPUS.glob("*/*.md"):
        meta, _ = split_front_matter(path.read_text(encoding="utf-8"))
        expected.add((path.parent.name, meta.get("doc_id") or path.stem))
    served = Index.load(BUNDLED_CORPUS, index_path=tmp_path / "none.sqlite3").documents()
    assert expected and {(d.collection, d.doc_id) for d in served} == expected


def test_a_document_an_older_ingest_stored_under_its_bare_name_is_replaced_not_doubled(tmp_path: Path,
                                                                                        index_file: Path) -> None:
    note = tmp_path / "map" / "sub" / "notitie.txt"
    note.parent.mkdir(parents=True)
    note.write_text(f"Het {WORD} geldt.\n", encoding="utf-8")
    (old,) = ingest([note], "c", index_path=index_file)  # as an ingest of the folder stored it before
    with sqlite3.connect(index_file) as db:
        db.execute("UPDATE documents SET source_name = NULL, file_id = NULL")
    db.close()
    with DocumentStore(index_file) as store:  # a document saved by other means, from no file: left alone
        store.save([(replace(old, doc_id="los", chunks=()), None)])
    assert [d.doc_id for d in list_stored(index_file)] == ["los", "notitie"]

    report = ingest_files([tmp_path / "map"], "c", index_path=index_file)
    assert [d.doc_id for d in report.documents] == ["sub/notitie-txt"]
    assert [d.doc_id for d in list_stored(index_file)] == ["los", "sub/notitie-txt"]


def test_every_stored_document_keeps_its_original_once_and_an_edited_file_drops_the_old(tmp_path: Path,
                                                                                         index_file: Path) -> None:
    folder = tmp_path / "map"
    (folder / "a").mkdir(parents=True)
    note, copy = folder / "a" / "notitie.txt", folder / "kopie.txt"
    note.write_text(f"Het {WORD} geldt.\n", encoding="utf-8")
    copy.write_bytes(note.read_bytes())  # the same bytes under another name: two documents, one original
    ingest_files([folder], "c", index_path=index_file)
    file_id = f"file-{sha256(note)[:24]}"
    assert {(d.doc_id, d.file_id) for d in list_stored(index_file)} == {("a/notitie-txt", file_id), ("kopie", file_id)}
    assert (originals_dir(index_file) / file_id).read_bytes() == note.read_bytes()
    kept = sorted(p.name for p in originals_dir(index_file).iterdir() if p.is_file())
    assert kept == [file_id]
    assert list((originals_dir(index_file) / "incoming").iterdir()) == []  # no copy left behind

    assert len(ingest([folder], "c", index_path=index_file)) == 2  # read again (the strict form): still one copy
    assert sorted(p.name for p in originals_dir(index_file).iterdir() if p.is_file()) == [file_id]
    note.write_text("Een nieuwe tekst.\n", encoding="utf-8")
    copy.unlink()
    assert docserver("remove", "kopie", "--index", index_file).returncode == 0
    ingest_files([folder], "c", index_path=index_file)
    edited = f"file-{sha256(note)[:24]}"
    assert sorted(p.name for p in originals_dir(index_file).iterdir() if p.is_file()) == [edited]
    with sqlite3.connect(index_file) as db:
        assert db.execute("SELECT id, purpose FROM files").fetchall() == [(edited, "ingest")]
    db.close()


def test_a_base_url_links_a_file_at_its_path_under_the_folder(tmp_path: Path, index_file: Path) -> None:
    note = tmp_path / "map" / "2023" / "Bijlage 1.txt"
    note.parent.mkdir(parents=True)
    note.write_text("Een bijlage.\n", encoding="utf-8")
    (doc,) = ingest_files([tmp_path / "map"], "c", index_path=index_file,
                          base_url="https://intranet.example/stukken/").documents
    assert (doc.doc_id, doc.url) == ("2023/bijlage-1-txt", "https://intranet.example/stukken/2023/Bijlage%201.txt")


@needs_formats
@pytest.mark.asyncio
async def test_an_id_with_a_slash_works_through_every_mcp_tool(twins: Path, index_file: Path, tmp_path: Path) -> None:
    empty_corpus = tmp_path / "corpus"
    empty_corpus.mkdir()
    assert docserver("ingest", twins, "--collection", "moties", "--index", index_file, "-q").returncode == 0
    file_ids = {d.doc_id: d.file_id for d in list_stored(index_file)}
    async with running(empty_corpus, index_path=index_file) as server, connect(server.url, server.token) as client:
        listed = await call(client, "list_documents", {"query": "*"})
        searched = await call(client, "search_collection", {"query": WORD, "collection": "moties"})
        read = await call(client, "read_document", {"doc_id": "b/bijlage-1-txt", "collection": "moties"})
        focused = await call(client, "read_document", {"doc_id": "b/source-odt", "collection": "moties",
                                                       "query": "motie"})
    assert "Doc ID: a/bijlage-1-txt" in listed["content"][0]["text"]
    texts, sources = split_result(searched)
    assert {s["metadata"]["doc_id"] for s in sources} == {"a/bijlage-1-txt", "b/bijlage-1-txt"}
    assert all(s["fileId"] == s["metadata"]["doc_id"] for s in sources)
    assert all(s["metadata"]["file_id"] == file_ids[s["metadata"]["doc_id"]] for s in sources)
    assert not read["isError"] and "Bijlage van map b" in read["content"][0]["text"]
    _, focused_sources = split_result(focused)
    assert {s["metadata"]["doc_id"] for s in focused_sources} == {"b/source-odt"}
    assert focused_sources[0]["metadata"]["file_id"] == f"file-{sha256(ODT)[:24]}"
