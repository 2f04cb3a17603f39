"""Issue 57, defects 1 and 8, written as the attacks: real files on disk, ingested through the real CLI
(``python -m docserver ingest`` in a subprocess, ``DOCSERVER_INDEX`` on a temporary index), then what the index holds,
what a search finds and what the CLI printed.

1. Symbolic links were followed out of the folder: ``links/passwd.md -> /etc/passwd`` and
   ``links/status.txt -> /proc/self/status`` were indexed, and a search for "root:x:0:0" returned the passwd text.
   Now a walk reads only regular files inside the folders given (links only with ``--follow-symlinks``, and then
   only inside them), never a FIFO, a device or a file under /proc, and names what it did not read.
8. Control characters passed: a NUL after the first 8 KB of a text file was indexed; ESC, BEL and RLO in titles and
   file names reached the terminal through ``ingest`` and ``list``; a file name with a newline printed a fake
   ``refused: passwd.pdf: ...`` line. Now a text file with a NUL or invalid UTF-8 anywhere is refused ("binary data
   at byte N"), titles, sections and metadata are stored as one plain line and links as http(s) only, and the CLI
   prints every name, title, doc_id and reason with its control characters escaped.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from docserver.documents import Chunk, Document
from docserver.formats import Refused
from docserver.store import DocumentStore, load_documents
from docserver.walk import Found, discover, opened
from tests.test_ingest_manage import searched
from textkit.untrusted import plain

ROOT = Path(__file__).resolve().parents[1]
SECRET = "kraanvogelprotocol"  # only in the file outside the folder
# What may never reach a terminal raw: C0 controls but tab and line feed, DEL, C1 controls, line and paragraph
# separators, bidi controls
RAW_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")
FAKE_LINE = re.compile(r"^refused: passwd\.pdf", re.MULTILINE)


def docserver(index: Path, *args: str | Path) -> tuple[int, str, str]:
    """``python -m docserver ARGS`` on the index ``index`` (DOCSERVER_INDEX): exit code, stdout, stderr, decoded
    without newline translation (a raw carriage return must stay visible)."""
    done = subprocess.run([sys.executable, "-m", "docserver", *map(str, args)], cwd=ROOT, capture_output=True,
                          timeout=60, check=False, env={**os.environ, "DOCSERVER_INDEX": str(index)})
    return done.returncode, done.stdout.decode("utf-8"), done.stderr.decode("utf-8")


@pytest.fixture
def index_file(tmp_path: Path) -> Path:
    return tmp_path / "index" / "docserver.sqlite3"


@pytest.fixture
def links(tmp_path: Path) -> Path:
    """The attacker's folder: a good note, links to /etc/passwd and /proc/self/status, a link to a folder outside
    it (holding SECRET) and a FIFO nobody writes to."""
    outside = tmp_path / "buiten"
    outside.mkdir()
    (outside / "geheim.md").write_text(f"# Geheim\n\nHet {SECRET} is geheim.\n", encoding="utf-8")
    folder = tmp_path / "links"
    folder.mkdir()
    (folder / "goed.txt").write_text("Een goede notitie over toezicht.\n", encoding="utf-8")
    (folder / "passwd.md").symlink_to("/etc/passwd")
    (folder / "status.txt").symlink_to("/proc/self/status")
    (folder / "buiten").symlink_to(outside, target_is_directory=True)
    os.mkfifo(folder / "pipe.txt")
    return folder


def stored_ids(index_file: Path) -> list[str]:
    return sorted(d.doc_id for d in load_documents(index_file)) if index_file.exists() else []


def stored_text(index_file: Path) -> str:
    return "\n".join(c.text for d in load_documents(index_file) for c in d.chunks) if index_file.exists() else ""


# --- defect 1: what an ingest reads -----------------------------------------------------------------------------------


@pytest.mark.skipif(not Path("/etc/passwd").is_file(), reason="needs /etc/passwd to point at")
def test_a_folder_walk_reads_no_link_no_fifo_and_nothing_from_proc(links: Path, index_file: Path,
                                                                   tmp_path: Path) -> None:
    started = time.monotonic()
    code, out, err = docserver(index_file, "ingest", links, "--collection", "anvs")
    assert time.monotonic() - started < 30  # the FIFO was never opened (opening it blocks until a writer comes)
    assert code == 1, out + err
    assert stored_ids(index_file) == ["goed"]
    assert "root:x:0:0" not in stored_text(index_file) and "VmPeak" not in stored_text(index_file)
    assert searched(index_file, tmp_path, "root", "anvs") == []
    assert searched(index_file, tmp_path, SECRET, "anvs") == []
    for name in ("passwd.md", "status.txt", "buiten"):
        assert f"refused: {links / name}: symbolic link, not followed" in err
    assert f"refused: {links / 'pipe.txt'}: not a regular file (FIFO)" in err
    assert "4 file(s) refused" in err and "1 documents" in out


@pytest.mark.skipif(not Path("/etc/passwd").is_file(), reason="needs /etc/passwd to point at")
def test_follow_symlinks_follows_links_inside_the_folder_and_never_out_of_it(links: Path, index_file: Path,
                                                                              tmp_path: Path) -> None:
    (links / "sub").mkdir()
    (links / "sub" / "echt.md").write_text("# Echt\n\nDe echte tekst over inspecties.\n", encoding="utf-8")
    (links / "alias.md").symlink_to(links / "sub" / "echt.md")  # a link to a file inside the folder
    (links / ".archief").mkdir()  # hidden: read only through the link below
    (links / ".archief" / "oud.txt").write_text("Een oude notitie over vergunningen.\n", encoding="utf-8")
    (links / "archief").symlink_to(".archief", target_is_directory=True)  # a link to a folder inside
    (links / "lus").symlink_to(".", target_is_directory=True)  # a loop: walked once, not forever
    code, out, err = docserver(index_file, "ingest", links, "--collection", "anvs", "--follow-symlinks")
    assert code == 1, out + err
    assert stored_ids(index_file) == ["alias", "archief/oud-txt", "goed", "sub/echt-md"]  # ids: paths as walked
    for name in ("passwd.md", "status.txt", "buiten"):
        assert f"refused: {links / name}: link to outside the folder" in err
    assert f"refused: {links / 'pipe.txt'}: not a regular file (FIFO)" in err
    assert "root:x:0:0" not in stored_text(index_file) and searched(index_file, tmp_path, SECRET, "anvs") == []


@pytest.mark.skipif(not Path("/etc/passwd").is_file(), reason="needs /etc/passwd to point at")
def test_a_link_named_on_the_command_line_is_read_only_when_followed_and_never_from_proc(
    links: Path, index_file: Path, tmp_path: Path
) -> None:
    code, out, err = docserver(index_file, "ingest", links / "passwd.md", "--collection", "anvs")
    assert code == 1 and f"refused: {links / 'passwd.md'}: symbolic link, not followed" in err
    assert stored_ids(index_file) == []

    copy, to_pipe = tmp_path / "kopie.txt", tmp_path / "pijp.txt"
    copy.symlink_to(links / "goed.txt")
    to_pipe.symlink_to(links / "pipe.txt")
    code, out, err = docserver(index_file, "ingest", copy, to_pipe, links / "status.txt", "/proc/self/status",
                               "--collection", "anvs", "--follow-symlinks")
    assert code == 1, out + err
    assert f"refused: {to_pipe}: not a regular file (FIFO)" in err
    assert f"refused: {links / 'status.txt'}: a system file under /proc, never read" in err
    assert "refused: /proc/self/status: a system file under /proc, never read" in err
    assert stored_ids(index_file) == ["kopie"]  # a regular file the operator named through a link: read


def test_a_fifo_named_on_the_command_line_is_refused_without_being_opened(links: Path, index_file: Path) -> None:
    started = time.monotonic()
    code, out, err = docserver(index_file, "ingest", links / "pipe.txt", "--collection", "anvs")
    assert time.monotonic() - started < 30
    assert code == 1 and f"refused: {links / 'pipe.txt'}: not a regular file (FIFO)" in err, out + err


def test_a_file_swapped_for_a_link_or_a_fifo_after_the_walk_is_not_read(tmp_path: Path) -> None:
    """The check and the read see the same file: it is opened once, without following a link, and its fstat must
    match what the walk saw."""
    note, secret = tmp_path / "notitie.txt", tmp_path / "geheim.txt"
    note.write_text("Een notitie.\n", encoding="utf-8")
    secret.write_text(f"Het {SECRET}.\n", encoding="utf-8")
    status = note.stat()
    found = Found(note, note, (status.st_dev, status.st_ino))
    with opened(found) as stream:
        assert stream.read() == b"Een notitie.\n"
    note.rename(tmp_path / "weg.txt")  # kept: its inode cannot be reused by the files swapped in below
    note.symlink_to(secret)
    with pytest.raises(Refused, match="symbolic link, not followed"), opened(found):
        pass
    note.unlink()
    os.mkfifo(note)
    with pytest.raises(Refused, match=r"not a regular file \(FIFO\)"), opened(found):
        pass
    note.unlink()
    note.write_text("Een andere notitie.\n", encoding="utf-8")
    with pytest.raises(Refused, match="replaced"), opened(found):
        pass

    # a folder on the path swapped for a link to a folder outside, after the walk checked the file in it
    (tmp_path / "map").mkdir()
    (tmp_path / "map" / "memo.md").write_text("# Memo\n\nTekst.\n", encoding="utf-8")
    (tmp_path / "buiten").mkdir()
    (tmp_path / "buiten" / "memo.md").write_text(f"# Geheim\n\nHet {SECRET}.\n", encoding="utf-8")
    (walked,), passed = discover([tmp_path / "map"], wanted=lambda path: True)
    assert passed == [] and walked.path == tmp_path / "map" / "memo.md"
    (tmp_path / "map").rename(tmp_path / "map.oud")
    (tmp_path / "map").symlink_to(tmp_path / "buiten", target_is_directory=True)
    with pytest.raises(Refused, match="replaced"), opened(walked):
        pass


# --- defect 8: binary data and control characters ---------------------------------------------------------------------


def test_binary_data_anywhere_in_a_text_file_refuses_it_by_name(tmp_path: Path, index_file: Path) -> None:
    folder = tmp_path / "map"
    folder.mkdir()
    (folder / "goed.txt").write_text("Een goede notitie over toezicht.\n", encoding="utf-8")
    late_nul = b"tekst over toezicht " * 600  # 12,000 bytes: past the 8 KB the sniffer looks at
    (folder / "nul.txt").write_bytes(late_nul + b"\x00 verborgenwoord\n")
    late_invalid = b"# Memo\n\n" + b"tekst over vergunningen " * 3000  # past the 64 KB the sniffer decodes
    (folder / "laat.md").write_bytes(late_invalid + b"\xff\xfe verborgenwoord\n")
    early = b"Een notitie " * 10
    (folder / "vroeg.txt").write_bytes(early + b"\xc3\x28 rest\n")  # invalid UTF-8 the sniffer turns down itself
    code, out, err = docserver(index_file, "ingest", folder, "--collection", "c")
    assert code == 1, out + err
    assert f"refused: {folder / 'nul.txt'}: binary data at byte {len(late_nul)}" in err.splitlines()
    assert f"refused: {folder / 'laat.md'}: binary data at byte {len(late_invalid)}" in err.splitlines()
    assert f"refused: {folder / 'vroeg.txt'}: binary data at byte {len(early)}" in err.splitlines()
    assert stored_ids(index_file) == ["goed"]
    assert "\x00" not in stored_text(index_file)
    assert searched(index_file, tmp_path, "verborgenwoord", "c") == []


def test_a_file_name_with_a_newline_escape_and_rlo_prints_no_fake_line(tmp_path: Path, index_file: Path) -> None:
    folder = tmp_path / "map"
    folder.mkdir()
    stem = "notitie\nrefused: passwd.pdf: fake\x1b[31m\u202e"
    (folder / f"{stem}.txt").write_text("Een notitie over vergunningen.\n", encoding="utf-8")
    refused = folder / "kapot\nrefused: passwd.pdf: nep\x07\u202e.txt"
    refused.write_bytes(b"tekst " * 2000 + b"\x00")
    code, out, err = docserver(index_file, "ingest", folder, "--collection", "c")
    assert code == 1, out + err
    for printed in (out, err):
        assert RAW_CONTROL.search(printed) is None, printed
        assert FAKE_LINE.search(printed) is None, printed
    assert "fake\\x1b[31m\\u202e.txt" in out  # shown, escaped
    assert f"refused: {folder}/kapot\\nrefused: passwd.pdf: nep\\x07\\u202e.txt: binary data at byte 12000" in err

    (document,) = load_documents(index_file)
    assert document.title == plain(stem) == "notitie refused: passwd.pdf: fake [31m"
    assert all(c.title == document.title and c.section == document.title for c in document.chunks)
    code, listed, err = docserver(index_file, "list")
    assert code == 0 and RAW_CONTROL.sub("", listed.replace("\t", "")) == listed.replace("\t", "")
    assert listed.count("\n") == 1 and "notitie refused: passwd.pdf: fake [31m" in listed


def test_a_markdown_title_is_stored_as_one_plain_line_and_its_links_as_http_only(tmp_path: Path,
                                                                                  index_file: Path) -> None:
    folder = tmp_path / "map"
    folder.mkdir()
    (folder / "memo.md").write_text(
        "---\n"
        'title: "Memo\\nrefused: passwd.pdf: nep\\u001b]0;pwned\\u0007\\u202e"\n'
        "url: javascript:alert(1)\n"
        'author: "Eve\\u001b[2J\\r\\nBob"\n'
        "---\n"
        "# Memo\n\n"
        "## Besluit \x07[klik](javascript:alert(1))\n\n"
        "De vergunning blijft van kracht.\n",
        encoding="utf-8",
    )
    (folder / "kop.md").write_text(
        "---\nurl: https://example.org/kop\n---\n# Kop [x](javascript:alert(1)) \x1b[2J\u202e\n\n"
        "## Inleiding\n\nDe inspectie bezoekt de installatie.\n",
        encoding="utf-8",
    )
    code, out, err = docserver(index_file, "ingest", folder, "--collection", "c")
    assert code == 0, out + err
    assert RAW_CONTROL.search(out + err) is None and FAKE_LINE.search(out + err) is None

    stored = {d.doc_id: d for d in load_documents(index_file)}
    memo, kop = stored["memo"], stored["kop"]
    assert memo.title == "Memo refused: passwd.pdf: nep ]0;pwned"
    assert memo.url is None and all(c.url is None for c in memo.chunks)
    assert [c.section for c in memo.chunks] == ["Besluit klik"]
    assert memo.metadata["author"] == "Eve [2J Bob" and memo.metadata["url"] == ""
    assert kop.title == "Kop x [2J" and kop.url == "https://example.org/kop"
    for document in (memo, kop):
        values = [document.title, document.url or "", *document.metadata.values()]
        values += [value for c in document.chunks for value in (c.title, c.section, c.url or "")]
        assert all(value == plain(value) and "javascript" not in value for value in values), values

    code, listed, _ = docserver(index_file, "list", "--json")
    assert code == 0 and RAW_CONTROL.search(listed) is None
    assert {row["title"] for row in json.loads(listed)} == {memo.title, kop.title}


def test_list_and_remove_escape_what_an_older_index_holds(index_file: Path) -> None:
    """An index written before titles were stored plain (or by another tool) still prints no control sequence."""
    doc_id, title = "raw\x1b[2J", "Titel\x1b]0;pwned\x07\u202e\nrefused: passwd.pdf: nep"
    with DocumentStore(index_file) as store:
        store.save([(Document(doc_id, "c", title, (Chunk(doc_id, "c", 0, title, title, "Tekst."),)), None)])
    code, listed, err = docserver(index_file, "list")
    assert code == 0, err
    assert RAW_CONTROL.sub("", listed.replace("\t", "")) == listed.replace("\t", "")
    assert FAKE_LINE.search(listed) is None and "raw\\x1b[2J" in listed and "\\u202e" in listed
    code, as_json, err = docserver(index_file, "list", "--json")
    assert code == 0 and RAW_CONTROL.search(as_json) is None
    assert [(row["doc_id"], row["title"]) for row in json.loads(as_json)] == [(doc_id, title)]  # a script reads them
    code, removed, err = docserver(index_file, "remove", doc_id)
    assert code == 0, err
    assert removed == "removed: raw\\x1b[2J from collection 'c'\n"
