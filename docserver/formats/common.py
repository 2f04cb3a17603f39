"""What several readers share: a safe parse of one XML part, whitespace folding, and long tables cut into units."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Iterator
from contextlib import contextmanager

from defusedxml import DefusedXmlException
from defusedxml.ElementTree import fromstring

from .base import Refused

__all__ = ["TABLE_UNIT_CHARS", "HeadingPath", "clean", "meaningful", "nested_too_deeply", "parse_part", "row_groups"]

TABLE_UNIT_CHARS = 1500  # a long table is cut into units of about this many characters, at row boundaries


def parse_part(xml: bytes, name: str) -> ET.Element:
    """One XML part, refused when it declares a DTD (entity expansion, external entities) or is not well-formed."""
    try:
        return fromstring(xml, forbid_dtd=True)
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
