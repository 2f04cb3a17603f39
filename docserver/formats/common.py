"""What several readers share: a safe parse of one XML part, whitespace folding, and long tables cut into units."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Protocol

from defusedxml import DefusedXmlException
from defusedxml.ElementTree import XMLParser

from .base import Deadline, Refused

__all__ = [
    "FEED_BYTES", "TABLE_UNIT_CHARS", "HeadingPath", "clean", "feed", "meaningful", "nested_too_deeply", "parse_part",
    "row_groups",
]  # fmt: skip

TABLE_UNIT_CHARS = 1500  # a long table is cut into units of about this many characters, at row boundaries
FEED_BYTES = 1 << 20  # a parser gets a file in pieces of this size, the deadline checked in between


class _Feedable(Protocol):
    def feed(self, data: bytes, /) -> None: ...


def feed(
    parser: _Feedable, data: bytes, deadline: Deadline, where: str, after: Callable[[], None] | None = None
) -> None:
    """Give a parser all of `data` in FEED_BYTES pieces, checking the deadline after each (and calling `after`, a
    reader's own check of what the parser has said so far): one call that parses hundreds of megabytes cannot be
    stopped, so the time a parse may take is bounded piece by piece."""
    for start in range(0, len(data), FEED_BYTES):
        parser.feed(data[start : start + FEED_BYTES])
        if after is not None:
            after()
        deadline.check(where)


def parse_part(xml: bytes, name: str, deadline: Deadline) -> ET.Element:
    """One XML part, refused when it declares a DTD (entity expansion, external entities), is not well-formed, or
    takes longer to parse than the deadline allows."""
    parser = XMLParser(forbid_dtd=True)
    try:
        feed(parser, xml, deadline, f"parsing {name}")
        root: ET.Element = parser.close()
        return root
    except DefusedXmlException as exc:
        raise Refused(f"{name} declares a DTD or entities, which documents never need (refused as unsafe)") from exc
    except ET.ParseError as exc:
        raise Refused(f"{name} is not well-formed XML ({exc})") from exc


@contextmanager
def nested_too_deeply(what: str) -> Iterator[None]:
    """A walk of a file's structure, a file nested beyond Python's recursion limit (a hostile one) refused."""
    try:
        yield
    except RecursionError as exc:
        raise Refused(f"the {what}'s structure is nested too deeply to read") from exc


def clean(text: str) -> str:
    """Runs of white space as one space, none at the ends."""
    return " ".join(text.split())


def meaningful(text: str) -> bool:
    """Whether text says anything: blank cells and placeholders such as "…", "___", "↑" or "§" do not."""
    return any(char.isalnum() for char in text)


def row_groups(header: list[str], body: list[str]) -> Iterator[str]:
    """A table's rows as unit texts of about TABLE_UNIT_CHARS, one row a line, the header rows atop each."""
    if not body:
        if header:
            yield "\n".join(header)
        return
    header_size = sum(len(row) + 1 for row in header)
    group: list[str] = []
    size = header_size
    for row in body:
        if group and size + len(row) > TABLE_UNIT_CHARS:
            yield "\n".join(header + group)
            group, size = [], header_size
        group.append(row)
        size += len(row) + 1
    yield "\n".join(header + group)


class HeadingPath:
    """The headings above the current point of a document, outermost first, and the first heading seen."""

    def __init__(self) -> None:
        self._path: list[tuple[int, str]] = []
        self.first: str | None = None

    def enter(self, level: int, text: str) -> None:
        """A heading of `level` (1 outermost) closes every open heading of its level or deeper."""
        while self._path and self._path[-1][0] >= level:
            self._path.pop()
        self._path.append((level, text))
        if self.first is None:
            self.first = text

    def current(self) -> tuple[str, ...]:
        return tuple(text for _, text in self._path)
