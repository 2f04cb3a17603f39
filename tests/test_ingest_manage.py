"""Managing the persisted index from the command line (docserver/__main__.py, ingest.py, store.py): an unchanged file
is skipped on re-ingest, an edited one replaces its chunks, ``--force`` reads again; ``remove`` takes documents
out (all or nothing) and a running server's index drops them; ``list`` shows what is stored, never creating the
file; a folder ingest on a terminal draws a progress bar with the pages read; an index written before the
content hash and the ingest time still lists and takes new ingests.

Real files, the real CLI in a subprocess (on a pseudo-terminal for the progress bar), real SQLite files.
"""

import asyncio
import fcntl
import json
import os
import pty
import sqlite3
import struct
import subprocess
import sys
import termios
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from docserver.index import Index
from docserver.ingest import Skipped, ingest, ingest_files
from docserver.live import LiveIndex
from docserver.store import index_version, list_stored, load_documents
from tests.test_formats_pdf import _text_pdf

ROOT = Path(__file__).resolve().parents[1]
OLD, NEW = "zwaluwstaartprocedure", "kraanvogelprotocol"  # in no bundled document


@pytest.fixture
def index_file(tmp_path: Path) -> Path:
    return tmp_path / "index" / "docserver.sqlite3"


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    """A note (plain text), a memo (Markdown) and a three-page PDF."""
    path = tmp_path / "stukken"
    path.mkdir()
    (path / "notitie.txt").write_text(f"De {OLD} geldt voor elke inspectie.\n", encoding="utf-8")
    (path / "memo.md").write_text("# Memo\n\n## Besluit\n\nDe vergunning blijft van kracht.\n", encoding="utf-8")
    (path / "rapport.pdf").write_bytes(_text_pdf(3))
    return path


def docserver(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "docserver", *map(str, args)], cwd=ROOT, capture_output=True,
                          text=True, timeout=60, check=False)


def on_terminal(*args: str | Path) -> tuple[int, str]:
    """``python -m docserver ARGS`` with stdout and stderr on a pseudo-terminal of 100 columns: exit code, output."""
    leader, follower = pty.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 100, 0, 0))
    with subprocess.Popen([sys.executable, "-m", "docserver", *map(str, args)], cwd=ROOT, stdin=subprocess.DEVNULL,
                          stdout=follower, stderr=follower) as process:
        os.close(follower)
        output = b""
        while True:
            try:
                data = os.read(leader, 65536)
            except OSError:  # EIO: the process closed the terminal
                break
            if not data:
                break
            output += data
        returncode = process.wait(timeout=60)
    os.close(leader)
    return returncode, output.decode()


def searched(index_file: Path, tmp_path: Path, word: str, collection: str) -> list[str]:
    """The doc_ids of the chunks a fresh index over ``index_file`` finds for ``word`` in ``collection``."""
    corpus = tmp_path / "empty-corpus"
    corpus.mkdir(exist_ok=True)
    return [hit.document.doc_id for hit in Index.load(corpus, index_path=index_file).search(word, collection)]


# --- re-ingest ---------------------------------------------------------------------------------------------------


def test_an_unchanged_file_is_skipped_an_edited_one_replaced_and_force_reads_again(
    folder: Path, index_file: Path, tmp_path: Path
) -> None:
    first = docserver("ingest", folder, "--collection", "c", "--index", index_file)
    assert first.returncode == 0, first.stderr
    note = folder / "notitie.txt"
    assert f"  notitie: notitie (1 chunks) <- {note}\n" in first.stdout
    stored = {d.doc_id: d for d in list_stored(index_file)}
    assert len(stored["notitie"].sha256 or "") == 64 and stored["notitie"].source == str(note)
    generation = index_version(index_file).generation

    again = docserver("ingest", folder, "--collection", "c", "--index", index_file)
    assert again.returncode == 0, again.stderr
    assert sorted(again.stdout.splitlines()[:3]) == [f"unchanged: {folder / name}"
                                                     for name in ("memo.md", "notitie.txt", "rapport.pdf")]
    assert again.stdout.splitlines()[3].endswith("(3 unchanged)") and "3 documents, 3 chunks" in again.stdout
    assert index_version(index_file).generation == generation  # nothing written: a server has nothing to reload
    assert {d.doc_id: d for d in list_stored(index_file)} == stored

    note.write_text(f"De {NEW} vervangt de oude werkwijze.\n", encoding="utf-8")
    edited = docserver("ingest", folder, "--collection", "c", "--index", index_file)
    assert edited.returncode == 0, edited.stderr
    assert f"  notitie: notitie (1 chunks) <- {note}\n" in edited.stdout and "(2 unchanged)" in edited.stdout
    assert searched(index_file, tmp_path, OLD, "c") == [] and searched(index_file, tmp_path, NEW, "c") == ["notitie"]
    (text,) = [c.text for d in load_documents(index_file) if d.doc_id == "notitie" for c in d.chunks]
    assert NEW in text and OLD not in text
    assert index_version(index_file).generation == generation + 1

    # unchanged means not read at all: a limit the PDF is over does not refuse it, until --force reads it again
    strict = ("--collection", "c", "--index", index_file, "--max-pages", "1")
    assert docserver("ingest", folder, *strict).returncode == 0
    forced = docserver("ingest", folder, *strict, "--force")
    assert forced.returncode == 1 and "unchanged:" not in forced.stdout
    assert f"refused: {folder / 'rapport.pdf'}: the PDF has 3 pages, more than the limit of 1" in forced.stderr
    assert f"  notitie: notitie (1 chunks) <- {note}" in forced.stdout and "memo" in forced.stdout


def test_the_report_lists_skipped_files_and_one_run_never_stores_two_files_under_one_doc_id(tmp_path: Path,
                                                                                              index_file: Path) -> None:
    first, second = tmp_path / "a" / "notitie.txt", tmp_path / "b" / "notitie.txt"
    for path, word in ((first, OLD), (second, NEW)):
        path.parent.mkdir()
        path.write_text(f"De {word} geldt.\n", encoding="utf-8")
    ingest_files([first], "c", index_path=index_file)
    report = ingest_files([first, second], "c", index_path=index_file)
    assert report.skipped == [Skipped(first, "notitie", 1)] and report.documents == []
    assert [(f.path, f.reason) for f in report.failures] == [
        (second, f"doc_id 'notitie' also comes from {first.resolve()}")]
    (stored,) = load_documents(index_file)
    assert OLD in stored.chunks[0].text
    assert ingest([first], "c", index_path=index_file) == [stored]  # the strict form always reads

    # the name that counts is the one the doc_id comes from: a followed symlink's, not its target's
    link = tmp_path / "kopie.txt"
    link.symlink_to(first)
    assert [d.doc_id for d in ingest_files([link], "d", index_path=index_file, follow_symlinks=True).documents] == [
        "kopie"]
    target = ingest_files([first], "d", index_path=index_file)
    assert [d.doc_id for d in target.documents] == ["notitie"] and target.skipped == []


# --- remove -----------------------------------------------------------------------------------------------------


def test_remove_is_all_or_nothing_and_names_what_it_cannot_remove(folder: Path, index_file: Path) -> None:
    for collection in ("anvs", "wetten"):
        assert docserver("ingest", folder, "--collection", collection, "--index", index_file, "-q").returncode == 0
    everything = {(d.collection, d.doc_id) for d in load_documents(index_file)}
    generation = index_version(index_file).generation

    ambiguous = docserver("remove", "notitie", "--index", index_file)
    assert ambiguous.returncode == 1 and "'notitie' is in collections anvs, wetten" in ambiguous.stderr
    unknown = docserver("remove", "notitie", "onbekend", "--collection", "anvs", "--index", index_file)
    assert unknown.returncode == 1 and "no document 'onbekend' in collection 'anvs'" in unknown.stderr
    assert docserver("remove", "rapport-pdf", "--collection", "elders", "--index", index_file).returncode == 1
    assert {(d.collection, d.doc_id) for d in load_documents(index_file)} == everything
    assert index_version(index_file).generation == generation

    removed = docserver("remove", "notitie", "rapport-pdf", "--collection", "anvs", "--index", index_file)
    assert removed.returncode == 0, removed.stderr
    assert removed.stdout.splitlines() == ["removed: notitie from collection 'anvs'",
                                           "removed: rapport-pdf from collection 'anvs'"]
    left = everything - {("anvs", "notitie"), ("anvs", "rapport-pdf")}
    assert {(d.collection, d.doc_id) for d in load_documents(index_file)} == left
    with sqlite3.connect(index_file) as db:
        assert {row for row in db.execute("SELECT DISTINCT collection, doc_id FROM chunks")} == left
    db.close()
    assert index_version(index_file).generation == generation + 1

    only = docserver("remove", "notitie", "--index", index_file)  # now in one collection only: no need to name it
    assert only.returncode == 0 and only.stdout == "removed: notitie from collection 'wetten'\n"

    missing = index_file.with_name("missing.sqlite3")
    nothing = docserver("remove", "notitie", "--index", missing)
    assert nothing.returncode == 1 and "'notitie'" in nothing.stderr and not missing.exists()


def test_a_running_server_drops_a_removed_document(folder: Path, index_file: Path, tmp_path: Path) -> None:
    """The index a server answers from (``LiveIndex``, here checking the file at every call) no longer holds a
    document once ``remove`` has run in another process."""
    ingest([folder], "anvs", index_path=index_file)
    corpus = tmp_path / "empty-corpus"
    corpus.mkdir()
    live = LiveIndex.load(corpus, index_path=index_file, check_interval_s=0)

    def served() -> set[str]:
        return {d.doc_id for d in asyncio.run(live.current()).listing("anvs", 100)}

    assert served() == {"memo", "notitie", "rapport-pdf"}
    assert docserver("remove", "notitie", "--index", index_file).returncode == 0
    assert served() == {"memo", "rapport-pdf"}


# --- list -------------------------------------------------------------------------------------------------------


def test_list_shows_every_stored_document(folder: Path, index_file: Path) -> None:
    assert docserver("ingest", folder, "--collection", "anvs", "--index", index_file, "-q").returncode == 0
    assert docserver("ingest", folder / "notitie.txt", "--collection", "wetten", "--index", index_file,
                     "-q").returncode == 0
    chunks = {(d.collection, d.doc_id): len(d.chunks) for d in load_documents(index_file)}

    listed = docserver("list", "--index", index_file)
    assert listed.returncode == 0 and listed.stderr == ""
    rows = [line.split("\t") for line in listed.stdout.splitlines()]
    assert [row[:6] for row in rows] == [
        ["anvs", "memo", "Memo", "-", "-", str(chunks["anvs", "memo"])],
        ["anvs", "notitie", "notitie", "-", "-", "1"],
        ["anvs", "rapport-pdf", "rapport", "-", "3", str(chunks["anvs", "rapport-pdf"])],
        ["wetten", "notitie", "notitie", "-", "-", "1"],
    ]
    for *_, ingested_at in rows:  # UTC, ISO 8601, just now
        assert timedelta(0) <= datetime.now(UTC) - datetime.fromisoformat(ingested_at) < timedelta(minutes=1)

    as_json = docserver("list", "--index", index_file, "--json", "--collection", "anvs")
    objects = json.loads(as_json.stdout)
    assert [(o["doc_id"], o["pages"], o["kind"]) for o in objects] == [("memo", None, None), ("notitie", None, None),
                                                                       ("rapport-pdf", 3, None)]
    assert objects[2] == {"collection": "anvs", "doc_id": "rapport-pdf", "title": "rapport", "kind": None,
                          "pages": 3, "chunks": chunks["anvs", "rapport-pdf"], "ingested_at": rows[2][6]}
    assert docserver("list", "--index", index_file, "--collection", "elders").stdout == ""


def test_list_of_a_missing_or_empty_index_prints_nothing_and_creates_nothing(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere" / "index.sqlite3"
    text, as_json = docserver("list", "--index", missing), docserver("list", "--index", missing, "--json")
    assert (text.returncode, text.stdout, text.stderr) == (0, "", "")
    assert (as_json.returncode, json.loads(as_json.stdout)) == (0, [])  # still JSON for a script
    assert not missing.parent.exists()

    note = tmp_path / "notitie.txt"
    note.write_text("Een notitie.\n", encoding="utf-8")
    index_file = tmp_path / "index.sqlite3"
    ingest([note], "c", index_path=index_file)
    assert docserver("remove", "notitie", "--index", index_file).returncode == 0
    emptied = docserver("list", "--index", index_file)
    assert (emptied.returncode, emptied.stdout) == (0, "")


# --- progress on a terminal ---------------------------------------------------------------------------------------


def test_a_folder_ingest_on_a_terminal_draws_a_bar_with_the_pages_read(folder: Path, index_file: Path) -> None:
    (folder / "kapot.pdf").write_bytes(b"%PDF-1.4\nnot really a PDF")
    returncode, output = on_terminal("ingest", folder, "--collection", "c", "--index", index_file)
    assert returncode == 1
    assert "ingest c: 100%" in output and "4/4" in output and "pages=3]" in output
    assert f"refused: {folder / 'kapot.pdf'}: " in output
    assert "<- " not in output  # no line per document: the bar says it
    assert "3 documents, " in output and "1 file(s) refused" in output

    quiet_code, quiet = on_terminal("ingest", folder / "memo.md", "--collection", "d", "--index", index_file, "-q")
    assert (quiet_code, quiet) == (0, "")


# --- an index from before the content hash ------------------------------------------------------------------------


def test_an_index_from_before_the_hash_and_time_lists_and_takes_new_ingests(folder: Path, index_file: Path) -> None:
    ingest([folder / "notitie.txt"], "c", index_path=index_file)
    with sqlite3.connect(index_file) as db:  # as an index written before documents had these columns
        db.execute("ALTER TABLE documents DROP COLUMN sha256")
        db.execute("ALTER TABLE documents DROP COLUMN ingested_at")
    db.close()

    listed = docserver("list", "--index", index_file)
    assert listed.returncode == 0 and listed.stdout == "c\tnotitie\tnotitie\t-\t-\t1\t-\n"
    assert json.loads(docserver("list", "--index", index_file, "--json").stdout)[0]["ingested_at"] is None
    with sqlite3.connect(index_file) as db:  # listing only reads
        assert "sha256" not in {row[1] for row in db.execute("PRAGMA table_info(documents)")}
    db.close()

    again = docserver("ingest", folder, "--collection", "c", "--index", index_file)
    assert again.returncode == 0, again.stderr
    assert "unchanged:" not in again.stdout  # no hash was stored: read again, now with one
    stored = list_stored(index_file)
    assert [d.doc_id for d in stored] == ["memo", "notitie", "rapport-pdf"]
    assert all(d.sha256 and d.ingested_at for d in stored)
    assert "(3 unchanged)" in docserver("ingest", folder, "--collection", "c", "--index", index_file).stdout
