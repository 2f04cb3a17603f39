"""Opening an untrusted ZIP container (DOCX, ODT) without letting it cost more than the `Limits` allow.

DOCX and ODT files are ZIP archives of XML parts. A hostile archive can be a zip bomb (a few kilobytes that inflate
to gigabytes), lie about its members' sizes, hold a million members, be truncated or corrupt, or be encrypted.

Before anything parses the central directory (Python's `zipfile` turns every entry into a `ZipInfo` object as it
opens an archive: a million members cost a minute and gigabytes), `check_directory` reads the end-of-central-directory
record (and the ZIP64 one) the way `zipfile` will, and refuses an archive that declares more than `MAX_MEMBERS`
members, whose central directory holds more entry records than that (an end record that lies about its count), or
whose central directory does not fit in the file. `check_file` checks the count and the fit from the last bytes
of a file, before the file is read into memory. Every ZIP reader goes through here: `sniff` and `load` in
`docserver/formats/__init__.py`, DOCX and ODT through `read_members`.

`read_members` then reads only the parts a reader asks for, through a bounded reader that counts the bytes it
actually inflates and stops as soon as the archive's total or one member's compression ratio goes past the limit, or
the reader's time is spent; the sizes the archive declares are checked first (a cheap early refusal), but never
trusted on their own.
"""

from __future__ import annotations

import struct
import zipfile
import zlib
from collections.abc import Iterable
from dataclasses import dataclass
from io import BytesIO
from typing import BinaryIO

from .base import Deadline, Limits, Refused

__all__ = ["MAX_MEMBERS", "ZIP_MAGIC", "check_directory", "check_file", "read_members"]

ZIP_MAGIC = b"PK\x03\x04"  # a ZIP archive's first local file header
CHUNK = 64 * 1024
MAX_MEMBERS = 10_000  # an office document has tens of members; an archive of many more is not one
RATIO_FLOOR = 1024 * 1024  # a member is judged by its ratio only past this size (small XML compresses very well)

# the records at the end of an archive, as zipfile reads them (APPNOTE.TXT 4.3.14-4.3.16); the end record holds
# signature, disk, disk of the directory, entries on this disk, entries, directory size, its offset, comment length
_END = struct.Struct("<4sHHHHIIH")
_END_SIGNATURE = b"PK\x05\x06"
_LOCATOR = struct.Struct("<4sIQI")  # signature, disk of the ZIP64 end record, its offset, disks
_LOCATOR_SIGNATURE = b"PK\x06\x07"
_END64 = struct.Struct("<4sQHHIIQQQQ")  # signature, size, versions, disks, entries here, entries, size, offset
_END64_SIGNATURE = b"PK\x06\x06"
_ENTRY_SIGNATURE = b"PK\x01\x02"  # every central directory entry starts with it
_SEARCH = 1 << 16  # how far before the last 22 bytes zipfile looks for the end record (past an archive comment)
TAIL_BYTES = _END.size + _SEARCH + _LOCATOR.size + _END64.size  # how far from a file's end these records can lie

# what zipfile and zlib raise on a damaged archive or member (Refused, a ValueError, is re-raised before these)
_CORRUPT = (zipfile.BadZipFile, zlib.error, EOFError, OSError, ValueError)


@dataclass(frozen=True, slots=True)
class Directory:
    """Where an archive's central directory stands (as `zipfile` will look for it) and how many members it declares.

    `start` and `end` are offsets in the file: `zipfile` reads the `end - start` bytes before the end record (and
    the ZIP64 records) as the central directory, whatever offset the end record states."""

    members: int
    start: int
    end: int


def check_directory(data: bytes) -> None:
    """Refuse a ZIP archive in `data` whose central directory is too large to parse or does not fit in the file.

    Checked before `zipfile.ZipFile` sees the bytes: the count the end records declare, whether the central directory
    they describe fits in the file, and the entry records actually in it (counted at C speed, without parsing them).
    Bytes without an end record pass: `zipfile` then refuses them (`BadZipFile`) without parsing anything."""
    directory = _directory(data[-TAIL_BYTES:], len(data))
    if directory is None:
        return
    entries = data.count(_ENTRY_SIGNATURE, directory.start, directory.end)  # an entry's first bytes
    if entries > MAX_MEMBERS:
        raise Refused(
            f"the ZIP archive has {entries} members in its central directory, more than the {MAX_MEMBERS} "
            "allowed (its end record says fewer)"
        )


def check_file(file: BinaryIO) -> None:
    """`check_directory`'s checks of the end records, from the last bytes of an open ZIP file only: a file
    declaring a million members is refused before it is read into memory (the entry records are counted once it
    is)."""
    size = file.seek(0, 2)
    file.seek(max(0, size - TAIL_BYTES))
    _directory(file.read(), size)


def _directory(tail: bytes, size: int) -> Directory | None:
    """The central directory described by the end records in `tail`, the last bytes of a file of `size` bytes;
    Refused when it declares more than MAX_MEMBERS members or does not fit in the file, None when there is no end
    record. The end record is found, and the ZIP64 records followed, exactly as `zipfile` does it (Python 3.11)."""
    found = _end_record(tail)
    if found is None:
        return None
    position, record = found  # position: where the end record starts in `tail`
    _, _, _, here, total, directory_size, directory_offset, _ = record
    members = max(here, total)
    directory_end = size - len(tail) + position  # the central directory ends where the end record starts ...
    zip64 = _zip64_record(tail, position)
    if zip64 is not None:
        members, directory_size, directory_offset = zip64
        directory_end -= _LOCATOR.size + _END64.size  # ... or where the ZIP64 records start
    if members > MAX_MEMBERS:
        raise Refused(f"the ZIP archive has {members} members, more than the {MAX_MEMBERS} allowed")
    start = directory_end - directory_size
    if start < 0 or directory_offset > start:
        raise Refused(
            f"the ZIP archive's central directory ({directory_size} bytes at offset {directory_offset}) does not fit "
            f"in the file of {size} bytes (corrupt or forged)"
        )
    return Directory(members, start, directory_end)


def _end_record(tail: bytes) -> tuple[int, tuple[bytes, int, int, int, int, int, int, int]] | None:
    """Where the end-of-central-directory record stands in `tail` and its fields: the last 22 bytes when they are one
    without a comment, else the last record signature within the comment's reach (zipfile's `_EndRecData`)."""
    if len(tail) < _END.size:
        return None
    last = len(tail) - _END.size
    if tail.startswith(_END_SIGNATURE, last) and tail.endswith(b"\x00\x00"):
        return last, _END.unpack_from(tail, last)
    position = tail.rfind(_END_SIGNATURE, max(0, len(tail) - _END.size - _SEARCH))
    if position < 0 or position + _END.size > len(tail):
        return None
    return position, _END.unpack_from(tail, position)


def _zip64_record(tail: bytes, end_position: int) -> tuple[int, int, int] | None:
    """(members, central directory size, offset) of the ZIP64 end record just before the locator that precedes the
    end record, where zipfile looks for it (`_EndRecData64`); None when the archive has none."""
    locator = end_position - _LOCATOR.size
    record = locator - _END64.size
    if record < 0 or not tail.startswith(_LOCATOR_SIGNATURE, locator) or not tail.startswith(_END64_SIGNATURE, record):
        return None
    _, _, _, _, _, _, here, total, size, offset = _END64.unpack_from(tail, record)
    return max(here, total), size, offset


def read_members(
    data: bytes, limits: Limits, deadline: Deadline, required: str, optional: Iterable[str] = ()
) -> dict[str, bytes]:
    """The inflated bytes of the member `required` and of those `optional` members the archive holds, by name.

    Refused when the archive is corrupt, truncated or encrypted, when it has more than MAX_MEMBERS members, when it
    lacks `required`, when its members together inflate (or say they inflate) to more than
    `limits.max_unzipped_bytes`, when one member inflates to more than `limits.max_zip_ratio` times its stored size,
    or when the deadline passes while it inflates.
    """
    check_directory(data)
    try:
        with zipfile.ZipFile(BytesIO(data)) as archive:
            infos = archive.infolist()
            _check_declared(infos, limits)
            present = {info.filename: info for info in infos}
            if required not in present:
                raise Refused(f"the file has no {required}: it is not a complete document")
            budget = limits.max_unzipped_bytes
            members: dict[str, bytes] = {}
            for name in (required, *optional):
                if name in present and name not in members:
                    members[name] = _read_bounded(archive, present[name], budget, limits, deadline)
                    budget -= len(members[name])
            return members
    except Refused:
        raise
    except NotImplementedError as exc:  # a compression method zipfile does not know
        raise Refused(f"the ZIP archive uses an unsupported compression method ({exc})") from exc
    except _CORRUPT as exc:
        raise Refused(f"the ZIP archive is corrupt or truncated ({exc})") from exc


def _check_declared(infos: list[zipfile.ZipInfo], limits: Limits) -> None:
    """Refuse on what the archive itself declares: too many members (the end record may have said fewer),
    encrypted members, or more inflated bytes than allowed."""
    if len(infos) > MAX_MEMBERS:
        raise Refused(f"the ZIP archive has {len(infos)} members, more than the {MAX_MEMBERS} allowed")
    if any(info.flag_bits & 0x1 for info in infos):
        raise Refused("the document is encrypted (password protected)")
    declared = sum(info.file_size for info in infos)
    if declared > limits.max_unzipped_bytes:
        raise Refused(_too_large(limits))
    for info in infos:
        if info.file_size > RATIO_FLOOR and info.file_size > limits.max_zip_ratio * max(info.compress_size, 1):
            raise Refused(_too_compressed(info.filename, limits))


def _read_bounded(
    archive: zipfile.ZipFile, info: zipfile.ZipInfo, budget: int, limits: Limits, deadline: Deadline
) -> bytes:
    """One member's bytes, read in chunks and abandoned the moment it passes `budget`, the ratio limit or the
    deadline (inflating hundreds of megabytes takes seconds)."""
    allowed_by_ratio = max(RATIO_FLOOR, limits.max_zip_ratio * max(info.compress_size, 1))
    parts: list[bytes] = []
    size = 0
    with archive.open(info) as member:
        while chunk := member.read(CHUNK):
            deadline.check(f"inflating {info.filename}")
            size += len(chunk)
            if size > budget:
                raise Refused(_too_large(limits))
            if size > allowed_by_ratio:
                raise Refused(_too_compressed(info.filename, limits))
            parts.append(chunk)
    return b"".join(parts)


def _too_large(limits: Limits) -> str:
    return f"the ZIP members decompress to more than {limits.max_unzipped_bytes / 1e6:g} MB (a zip bomb?)"


def _too_compressed(name: str, limits: Limits) -> str:
    return f"the ZIP member {name} decompresses to more than {limits.max_zip_ratio:g} times its size (a zip bomb?)"
