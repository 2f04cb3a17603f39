"""Evidence ledger and grounded citations.

The ledger numbers the evidence shown to the model (1-based). While the answer streams, `CitationFilter`
drops every `[n]` that does not point at a ledger entry, so no answer ever cites something that was not
retrieved; the sources list is rendered from the ledger, never written by the model.
"""

from __future__ import annotations

import re

from graph import messages
from graph.state import Evidence, Language

_GROUP = re.compile(r"\[(\s*\d+\s*(?:[,;–-]\s*\d+\s*)*)\]")
_PARTIAL = re.compile(r"\[[\d\s,;–-]{0,16}$")


class CitationFilter:
    """Streaming filter: keeps `[n]` markers with 1 <= n <= size, drops the rest; records what was cited."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.cited: list[int] = []
        self._pending = ""

    def _fix(self, match: re.Match[str]) -> str:
        numbers = [int(n) for n in re.findall(r"\d+", match.group(1))]
        if re.search(r"[–-]", match.group(1)) and len(numbers) == 2 and numbers[0] <= numbers[1]:
            numbers = list(range(numbers[0], numbers[1] + 1))
        valid = [n for n in numbers if 1 <= n <= self.size]
        for n in valid:
            if n not in self.cited:
                self.cited.append(n)
        return "".join(f"[{n}]" for n in dict.fromkeys(valid))

    def feed(self, delta: str) -> str:
        text = self._pending + delta
        partial = _PARTIAL.search(text)
        self._pending = text[partial.start():] if partial else ""
        text = text[: partial.start()] if partial else text
        return _GROUP.sub(self._fix, text)

    def flush(self) -> str:
        rest, self._pending = self._pending, ""
        return _GROUP.sub(self._fix, rest)


def clean_citations(text: str, size: int) -> tuple[str, list[int]]:
    f = CitationFilter(size)
    out = f.feed(text) + f.flush()
    return re.sub(r"[ \t]+([.,;:])", r"\1", out), f.cited


def order_evidence(evidence: list[Evidence], collections: list[str]) -> list[Evidence]:
    """Stable ledger order: by the route's collection order, then relevance, then id."""
    rank = {name: i for i, name in enumerate(collections)}
    return sorted(evidence, key=lambda e: (rank.get(e.collection, len(rank)), -e.relevance, e.id))


def render_ledger(ledger: list[Evidence], max_chars: int = 1200) -> str:
    """Numbered evidence for a prompt."""
    blocks = []
    for n, e in enumerate(ledger, 1):
        head = f"[{n}] {e.title}" + (f" — {e.section}" if e.section else "") + f" ({e.collection})"
        blocks.append(f"{head}\n{e.text[:max_chars]}")
    return "\n\n".join(blocks)


def render_sources(ledger: list[Evidence], cited: list[int], language: Language, display: dict[str, str]) -> str:
    """Markdown sources list; cited entries keep their ledger numbers (all entries when none was cited)."""
    numbers = sorted(cited) if cited else list(range(1, len(ledger) + 1))
    if not numbers:
        return ""
    lines = [f"**{messages.line('sources', language)}**", ""]
    seen_docs: set[str] = set()
    for n in numbers:
        e = ledger[n - 1]
        label = f"{e.title}" + (f", {e.section}" if e.section else "")
        meta = [display.get(e.collection, e.collection)]
        if e.year:
            meta.append(str(e.year))
        if e.summary:
            meta.append(messages.line("summary_mark", language))
        link = f" — {e.url}" if e.url and e.doc_id not in seen_docs else ""
        seen_docs.add(e.doc_id)
        lines.append(f"[{n}] {label} ({', '.join(meta)}){link}")
    return "\n".join(lines)
