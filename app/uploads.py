"""Receiving a file upload (`POST /v1/files`, multipart/form-data) straight to disk, the size limit enforced while
reading.

Starlette's own form parser would spool a file part of any size to a temporary file before the route sees it, and
the service's body limit (`app.limits`) would hold the whole body in memory; so this route reads the body as it
arrives (python-multipart's streaming parser, the one Starlette uses) and writes the `file` part to a file in the
library's incoming folder, stopping with a 413 at the first byte over MAX_UPLOAD_BYTES. Other fields (`purpose`)
are small and capped; a body with anything else (a second file, an unknown field, no file) is a 400.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath, PureWindowsPath
from typing import BinaryIO

from python_multipart.multipart import MultipartParser, parse_options_header
from starlette.requests import Request

from app.errors import APIError
from textkit.untrusted import plain

FIELD_BYTES = 1024  # a form field other than the file (`purpose`, `expires_after[...]`)
FIELDS = 8
FILENAME_CHARS = 255


@dataclass
class Upload:
    """An upload received: its file written to `path` (the caller moves or deletes it), its form fields."""

    path: Path
    filename: str
    size: int
    fields: dict[str, str] = field(default_factory=dict)


def filename_of(raw: bytes | None) -> str:
    """The uploaded file's name as one plain line, without any folder a client put in front of it."""
    name = (raw or b"").decode("utf-8", "replace")
    name = PureWindowsPath(PurePosixPath(name).name).name  # "C:\\Users\\x\\a.pdf" and "../a.pdf" alike
    return plain(name)[:FILENAME_CHARS] or "upload"


class _Receiver:
    """python-multipart callbacks: headers of each part, the file part's bytes to `out`, fields to memory."""

    def __init__(self, out: BinaryIO, max_bytes: int) -> None:
        self.out, self.max_bytes = out, max_bytes
        self.fields: dict[str, str] = {}
        self.filename: str | None = None
        self.size = 0
        self._header, self._value = b"", b""
        self._headers: dict[bytes, bytes] = {}
        self._name, self._is_file, self._data = "", False, bytearray()

    def callbacks(self) -> dict:
        return {"on_part_begin": self._begin, "on_header_field": self._header_field,
                "on_header_value": self._header_value, "on_header_end": self._header_end,
                "on_headers_finished": self._headers_finished, "on_part_data": self._part_data,
                "on_part_end": self._part_end}

    def _begin(self) -> None:
        self._headers, self._data = {}, bytearray()

    def _header_field(self, data: bytes, start: int, end: int) -> None:
        self._header += data[start:end]

    def _header_value(self, data: bytes, start: int, end: int) -> None:
        self._value += data[start:end]

    def _header_end(self) -> None:
        self._headers[self._header.lower()] = self._value
        self._header, self._value = b"", b""

    def _headers_finished(self) -> None:
        _, options = parse_options_header(self._headers.get(b"content-disposition", b""))
        self._name = options.get(b"name", b"").decode("utf-8", "replace")
        self._is_file = b"filename" in options
        if self._is_file:
            if self._name != "file" or self.filename is not None:
                raise APIError(400, "the upload takes one file, in the form field 'file'", param="file")
            self.filename = filename_of(options.get(b"filename"))
        elif len(self.fields) >= FIELDS:
            raise APIError(400, f"at most {FIELDS} form fields are accepted")

    def _part_data(self, data: bytes, start: int, end: int) -> None:
        if not self._is_file:
            self._data += data[start:end]
            if len(self._data) > FIELD_BYTES:
                raise APIError(400, f"form field '{plain(self._name)[:40]}' is longer than {FIELD_BYTES} bytes")
            return
        self.size += end - start
        if self.size > self.max_bytes:
            raise APIError(413, f"the file is larger than the upload limit of {self.max_bytes} bytes",
                           param="file", code="file_too_large")
        self.out.write(data[start:end])

    def _part_end(self) -> None:
        if not self._is_file:
            self.fields[plain(self._name)[:40]] = plain(self._data.decode("utf-8", "replace"))


async def receive_upload(request: Request, folder: Path, max_bytes: int) -> Upload:
    """The multipart body of `request` read as it arrives: its `file` part written to a new file in `folder`.
    400 for a body that is not such a form, 413 past `max_bytes`; the file is removed on any failure."""
    kind, options = parse_options_header(request.headers.get("content-type", ""))
    boundary = options.get(b"boundary")
    if kind != b"multipart/form-data" or not boundary:
        raise APIError(400, "an upload is multipart/form-data with a 'file' field and a 'purpose' field")
    folder.mkdir(parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(prefix="upload-", dir=folder)
    path = Path(name)
    try:
        with os.fdopen(fd, "wb") as out:
            receiver = _Receiver(out, max_bytes)
            parser = MultipartParser(boundary, receiver.callbacks())
            async for chunk in request.stream():
                parser.write(chunk)
            parser.finalize()
        if receiver.filename is None:
            raise APIError(400, "the upload has no file: send it in the form field 'file'", param="file")
    except BaseException as exc:
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
        if isinstance(exc, ValueError) and not isinstance(exc, APIError):  # python-multipart: a malformed body
            raise APIError(400, f"malformed multipart body ({type(exc).__name__})") from None
        raise
    return Upload(path, receiver.filename, receiver.size, receiver.fields)
