"""Reading a rendered answer: its body, whether it declined, and which documents its `[n]` cite."""

from __future__ import annotations

import re
from collections.abc import Collection, Sequence

from graph.answer import messages
from graph.answer.ledger import SOURCE_LINE
from graph.models import Evidence

_SOURCES_HEADING = re.compile(r"\n\*\*(?:Bronnen|Sources)\*\*")
MARKER = re.compile(r"\[(\s*\d+\s*(?:[,;]\s*\d+\s*)*)\]")  # [3], [1, 2]
_TITLE_END = re.compile(r",| \(| —|$")  # where a title can end in a sources line: "n. Title, Section (...) — url"


def body_of(answer: str) -> str:
    """The answer without the rendered sources list."""
    return _SOURCES_HEADING.split(answer)[0]


def is_declined(answer: str) -> bool:
    """The answer opens with the "no passages found" line (either language)."""
    prefixes = [messages.line("nothing", lang, names="").split("(")[0] for lang in ("nl", "en")]
    return any(body_of(answer).lstrip().startswith(p) for p in prefixes)


def cited_numbers(body: str) -> set[int]:
    """The numbers of the `[n]` markers in an answer body."""
    return {int(n) for group in MARKER.findall(body) for n in re.findall(r"\d+", group)}


def source_titles(answer: str, known: Collection[str]) -> dict[int, str]:
    """Number -> document title, read from the rendered sources list (`n. Title, Section (...) — url`): the
    longest title in `known` that the line opens with, ending at a comma, " (", " —" or the end of the line."""
    parts = _SOURCES_HEADING.split(answer, maxsplit=1)
    if len(parts) < 2:
        return {}
    titles: dict[int, str] = {}
    for number, line in SOURCE_LINE.findall(parts[1]):
        candidates = [line[: m.start()].rstrip() for m in _TITLE_END.finditer(line)]
        matches = [c for c in candidates if c in known]
        if matches:
            titles[int(number)] = max(matches, key=len)
    return titles


def cited_titles(answer: str, ledger: Sequence[Evidence], known: Collection[str]) -> set[str]:
    """The titles of the documents the body's `[n]` cite: through the rendered sources list, or, for a number the
    list does not resolve, through entry n of the answer's ledger."""
    from_list = source_titles(answer, known)
    titles = set()
    for number in cited_numbers(body_of(answer)):
        if number in from_list:
            titles.add(from_list[number])
        elif 1 <= number <= len(ledger):
            titles.add(ledger[number - 1].title)
    return titles
