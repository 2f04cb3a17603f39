"""Opening an untrusted ZIP container (DOCX, ODT) without letting it cost more than the `Limits` allow.

DOCX and ODT files are ZIP archives of XML parts. A hostile archive can be a zip bomb (a few kilobytes that inflate
to gigabytes), lie about its members' sizes, be truncated or corrupt, or be encrypted. `read_members` reads only the
parts a reader asks for, through a bounded reader that counts the bytes it actually inflates and stops as soon as the
archive's total or one member's compression ratio goes past the limit; the sizes the archive declares are checked
first (a cheap early refusal), but never trusted on their own.
"""

from __future__ import annotations

import zipfile
import zlib
from collections.abc import Iterable
from io import BytesIO

from .base import Limits, Refused

__all__ = ["read_members"]

CHUNK = 64 * 1024
MAX_MEMBERS = 10_000  # an office document has tens of members; an archive of many more is not one
RATIO_FLOOR = 1024 * 1024  # a member is judged by its ratio only past this size (small XML compresses very well)

# what zipfile and zlib raise on a damaged archive or member (Refused, a ValueError, is re-raised before these)
_CORRUPT = (zipfile.BadZipFile, zlib.error, EOFError, OSError, ValueError)


def read_members(data: bytes, limits: Limits, required: str, optional: Iterable[str] = ()) -> dict[str, bytes]:
    """The inflated bytes of the member `required` and of those `optional` members the archive holds, by name.

    Refused when the archive is corrupt, truncated or encrypted, when it lacks `required`, when its members together
    inflate (or say they inflate) to more than `limits.max_unzipped_bytes`, or when one member inflates to more than
    `limits.max_zip_ratio` times its stored size.
    """
    try:
        with zipfile.ZipFile(BytesIO(data)) as archive:
            infos = archive.infolist()
            if len(infos) > MAX_MEMBERS:
                raise Refused(f"the ZIP archive has {len(infos)} members, more than the {MAX_MEMBERS} allowed")
            _check_declared(infos, limits)
            present = {info.filename: info for info in infos}
            if required not in present:
                raise Refused(f"the file has no {required}: it is not a complete document")
            budget = limits.max_unzipped_bytes
            members: dict[str, bytes] = {}
            for name in (required, *optional):
                if name in present and name not in members:
                    members[name] = _read_bounded(archive, present[name], budget, limits)
                    budget -= len(members[name])
            return members
    except Refused:
        raise
    except NotImplementedError as exc:  # a compression method zipfile does not know
        raise Refused(f"the ZIP archive uses an unsupported compression method ({exc})") from exc
    except _CORRUPT as exc:
        raise Refused(f"the ZIP archive is corrupt or truncated ({exc})") from exc


def _check_declared(infos: list[zipfile.ZipInfo], limits: Limits) -> None:
    """Refuse on what the archive itself declares: encrypted members, or more inflated bytes than allowed."""
    if any(info.flag_bits & 0x1 for info in infos):
        raise Refused("the document is encrypted (password protected)")
    declared = sum(info.file_size for info in infos)
    if declared > limits.max_unzipped_bytes:
        raise Refused(_too_large(limits))
    for info in infos:
        if info.file_size > RATIO_FLOOR and info.file_size > limits.max_zip_ratio * max(info.compress_size, 1):
            raise Refused(_too_compressed(info.filename, limits))


def _read_bounded(archive: zipfile.ZipFile, info: zipfile.ZipInfo, budget: int, limits: Limits) -> bytes:
    """One member's bytes, read in chunks and abandoned the moment it passes `budget` or the ratio limit."""
    allowed_by_ratio = max(RATIO_FLOOR, limits.max_zip_ratio * max(info.compress_size, 1))
    parts: list[bytes] = []
    size = 0
    with archive.open(info) as member:
        while chunk := member.read(CHUNK):
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
