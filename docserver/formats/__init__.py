"""One reader per file format, chosen by content (magic bytes, ZIP members, XML root element), not only by suffix.

`load(file, suffix, limits)` names an open file's format (or refuses it), `extract(kind, data, limits)` returns it as an `Extracted`
(title, metadata, text units that carry their page, heading path or article) or raises `Refused` with a reason its
owner understands. Every reader module has one function, `read(data: bytes, limits: Limits, deadline: Deadline)
-> Extracted`: pdf, docx, odt, html, bwb (law XML), op (official-publication XML), markdown (the corpus format and
law texts in Markdown) and text.
"""

from __future__ import annotations

import importlib
import os
import re
import zipfile
from io import BytesIO
from typing import BinaryIO

from . import zipguard
from .base import Deadline, Extracted, Limits, Refused, Unit, too_large

__all__ = ["READERS", "SUFFIXES", "Deadline", "Extracted", "Limits", "Refused", "Unit", "extract", "load", "sniff"]

# format -> the module under docserver.formats that reads it
READERS = {"pdf": "pdf", "docx": "docx", "odt": "odt", "html": "html", "bwb": "bwb", "op": "op", "markdown": "markdown",
           "text": "text"}
# what a folder walk picks up (a named file is always tried, whatever its suffix)
SUFFIXES = (".pdf", ".docx", ".odt", ".html", ".htm", ".xhtml", ".xml", ".md", ".markdown", ".txt", ".text")
MARKDOWN_SUFFIXES = (".md", ".markdown")
_HTML_SUFFIXES = (".html", ".htm", ".xhtml")

_XML_ROOT = re.compile(rb"<([A-Za-z_][\w.:-]*)[\s/>]")
_XML_SKIP = re.compile(rb"\s*(?:<\?.*?\?>|<!--.*?-->|<!DOCTYPE[^>\[]*(?:\[.*?\])?\s*>)", re.DOTALL | re.IGNORECASE)
_ODT_MIME = b"application/vnd.oasis.opendocument.text"


def _root_element(data: bytes) -> str | None:
    """The local name of an XML document's root element, lower-cased (None when it is not markup)."""
    head = data[:65536].lstrip(b"\xef\xbb\xbf")
    position = 0
    while match := _XML_SKIP.match(head, position):
        if match.end() == position:
            break
        position = match.end()
    rest = head[position:].lstrip()
    root = _XML_ROOT.match(rest)
    return root.group(1).decode("ascii", "replace").split(":")[-1].lower() if root else None


def sniff(data: bytes, suffix: str = "") -> str | None:
    """The format of a file's bytes, or None when no reader takes it; `Refused` for a ZIP archive whose central
    directory is too large to open (`zipguard.check_directory`: told before `zipfile` parses it)."""
    if b"%PDF-" in data[:1024]:
        return "pdf"
    if data[:4] == zipguard.ZIP_MAGIC:
        return _zip_format(data)
    head = data[:4096].lstrip(b"\xef\xbb\xbf").lstrip()
    if head[:1] == b"<":
        return _markup_format(data, head, suffix)
    if b"\x00" in data[:8192]:
        return None
    try:
        data[:65536].decode("utf-8")
    except UnicodeDecodeError as exc:
        if exc.start < 65536 - 4:  # not a character cut at the window's end
            return None
    return "markdown" if suffix.lower() in MARKDOWN_SUFFIXES else "text"


def _zip_format(data: bytes) -> str | None:
    """"docx" or "odt" by the members of a ZIP archive, else None."""
    zipguard.check_directory(data)
    try:
        with zipfile.ZipFile(BytesIO(data)) as archive:
            names = set(archive.namelist())
            if "word/document.xml" in names:
                return "docx"
            if "content.xml" in names and "mimetype" in names:
                with archive.open("mimetype") as member:  # a few bytes: never the whole of a hostile member
                    if member.read(len(_ODT_MIME) + 8).strip() == _ODT_MIME:
                        return "odt"
    except (zipfile.BadZipFile, KeyError, OSError):
        return None
    return None


def _markup_format(data: bytes, head: bytes, suffix: str) -> str | None:
    """"bwb", "op" or "html" by the root element of a file that starts with markup (`head`: its start)."""
    root = _root_element(data)
    if root == "toestand":
        return "bwb"
    if root == "officiele-publicatie":
        return "op"
    if root == "html" or head[:15].lower().startswith(b"<!doctype html"):
        return "html"
    return "html" if suffix.lower() in _HTML_SUFFIXES else None  # a page saved without its <html> element


def load(file: BinaryIO, suffix: str, limits: Limits) -> tuple[str, bytes]:
    """An open file's format and bytes, read from its start; `Refused` when it is too large (a file that grows
    while it is read is cut off by the bound, not read on), empty or of no format a reader takes. A ZIP file is
    refused on the member count its end records declare before it is read into memory."""
    file.seek(0)
    if file.read(len(zipguard.ZIP_MAGIC)) == zipguard.ZIP_MAGIC:
        zipguard.check_file(file)
    file.seek(0)
    data = file.read(limits.max_bytes + 1)
    if len(data) > limits.max_bytes:
        raise too_large(max(os.fstat(file.fileno()).st_size, len(data)), limits.max_bytes)
    if not data.strip():
        raise Refused("the file is empty: no text to index")
    kind = sniff(data, suffix)
    if kind is None:
        raise Refused("unknown format: not PDF, DOCX, ODT, HTML, BWB or official-publication XML, Markdown or text")
    return kind, data


def extract(kind: str, data: bytes, limits: Limits) -> Extracted:
    """The bytes of a file of format `kind` (one of READERS) as read by its reader."""
    module = importlib.import_module(f"{__name__}.{READERS[kind]}")
    extracted: Extracted = module.read(data, limits, Deadline(limits.max_seconds))
    if not any(unit.text.strip() for unit in extracted.units):
        raise Refused("no text in the document")
    return extracted
