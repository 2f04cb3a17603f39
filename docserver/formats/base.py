"""What every format reader returns, the reason a file is refused, and the limits that guard against hostile files.

A reader turns the bytes of one file into an `Extracted`: the document's title and metadata and its text as
`Unit`s that carry where they stand (the page of a PDF, the heading path of a DOCX, ODT or HTML document, the
article of a law). Chunking, ids and the index are the ingest's business (`docserver/chunking.py`,
`docserver/ingest.py`), not a reader's.
"""

from __future__ import annotations

import re
import time
from collections.abc import Mapping
from dataclasses import dataclass, field

__all__ = ["Deadline", "Extracted", "Limits", "Refused", "Unit", "is_placeholder_title"]

_GENERATOR_PREFIX = re.compile(r"^microsoft\s+(?:office\s+)?\w+\s*-", re.IGNORECASE)  # "Microsoft Word - x.doc"
_DEFAULT_TITLE = re.compile(
    r"(?:untitled|naamloos|no title|geen titel|title|titel|new document|nieuw document|(?:untitled |naamloos )?"
    r"document|doc|slide|dia|presentation|presentatie|book|map|blad|sheet|powerpoint[- ]presentati(?:on|e)|"
    r"word document|pdf document|insert title here|type title here|your title here|default|print)\s*\d*",
    re.IGNORECASE,
)
_FILE_SUFFIX = re.compile(
    r"\.(?:docx?|dotx?|docm|odt|ott|rtf|wpd|pages|pdf|xlsx?|ods|pptx?|odp|txt|indd|qxd|tex|dvi|e?ps|html?|xml|tmp)\b",
    re.IGNORECASE,
)
_PATH = re.compile(r"^(?:[a-z]:[\\/]|[/~\\]|file:)|\\", re.IGNORECASE)  # C:\..., /home/..., ~/..., \\server, file:


class Refused(ValueError):
    """A file that is not indexed, with the reason in words its owner understands ("scanned PDF without a text
    layer", "encrypted PDF", "ZIP members decompress to more than 200 MB")."""


@dataclass(frozen=True, slots=True)
class Unit:
    """One piece of a document's text (a paragraph, a table row group, a law article) and where it stands.

    `headings` is the path of headings above it, outermost first ("Hoofdstuk 2", "2.3 Scope"); for a law article
    it is (chapter heading, article heading) or just (article heading,), and `article` is the article's number
    ("15a"). `page` is the 1-based page of a PDF it stands on (a unit never spans two pages: readers cut there).
    """

    text: str
    page: int | None = None
    headings: tuple[str, ...] = ()
    article: str | None = None


@dataclass(frozen=True, slots=True)
class Extracted:
    """One file as read: `format` ("pdf", "docx", "odt", "html", "bwb", "op", "markdown", "law-markdown", "text"),
    the title from the document itself (metadata or first heading; None when it has none, the ingest then uses the
    file name), `metadata` as strings (author, date, identifier, source URL, ...), `pages` for paged formats,
    `disclaimer` a note the document carries about itself (the bundled corpus's "samenvatting in eigen woorden")."""

    format: str
    title: str | None
    units: tuple[Unit, ...]
    metadata: Mapping[str, str] = field(default_factory=dict)
    language: str | None = None
    pages: int | None = None
    disclaimer: str | None = None


@dataclass(frozen=True, slots=True)
class Limits:
    """How much an untrusted file may cost before it is refused (settable per ingest run)."""

    max_bytes: int = 200 * 1024 * 1024  # the file itself
    max_pages: int = 2000  # a PDF's pages
    max_seconds: float = 120.0  # wall time to read one file
    max_unzipped_bytes: int = 300 * 1024 * 1024  # the members of a ZIP-based file (DOCX, ODT) together
    max_zip_ratio: float = 200.0  # a member that decompresses to more than this multiple of its stored size


class Deadline:
    """The time a reader may spend on one file; `check()` raises `Refused` once it is spent."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self._end = time.monotonic() + seconds

    def remaining(self) -> float:
        """Seconds left (0 once spent): what a subprocess run for this file may still take."""
        return max(0.0, self._end - time.monotonic())

    def check(self, where: str = "") -> None:
        if self.remaining() == 0:
            raise Refused(f"took longer than {self.seconds:g} s to read" + (f" ({where})" if where else ""))


def is_placeholder_title(title: str) -> bool:
    """Whether a title a file states names no document: empty, a file name or a path ("Microsoft Word -
    20110301_5687928a draagmoederschap.doc", "C:\\temp\\x", "kamerbrief_2011"), a generator's or template's default
    ("Untitled", "Document1", "Presentatie1", "Slide 1"), or no word at all ("20110301"). The ingest then names
    the document another way (its first heading, its file name made readable)."""
    text = " ".join(title.split())
    if not any(char.isalpha() for char in text):
        return True
    if _GENERATOR_PREFIX.match(text) or _DEFAULT_TITLE.fullmatch(text) or _FILE_SUFFIX.search(text):
        return True
    return bool(_PATH.search(text)) or (" " not in text and "_" in text)  # one token with underscores: a file name


def too_large(size: int, max_bytes: int) -> Refused:
    """The refusal of a file of `size` bytes over the limit of `max_bytes`."""
    return Refused(f"the file is {size / 1e6:.0f} MB, more than the limit of {max_bytes / 1e6:.0f} MB")
