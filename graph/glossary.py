"""A small bilingual domain glossary: a Dutch question finds English passages and the other way round, offline.

Each entry is one concept with its Dutch and English wordings (the collections file's `glossary`). Two uses:
- `expand(query, language)`: a search query gets the wordings, in the collection's language, of the concepts it
  mentions ("veiligheidscultuur eisen" -> "... safety culture requirements" for an English collection);
- `concepts(tokens)`: the concepts a text mentions, as extra "stems" (`≈3`), so that fact selection counts
  "safety culture" in a passage as the question's "veiligheidscultuur".
Matching is on the stems `textkit` gives (stop words dropped, Dutch and English stemmers), phrase by phrase.
Written by hand: a translation library or model would be heavier than a table of a few dozen domain terms.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from graph.models import Language
from textkit import analyze


@dataclass(frozen=True, slots=True)
class _Phrase:
    concept: int
    language: Language
    text: str
    stems: tuple[frozenset[str], ...]


class Glossary:
    def __init__(self, entries: Sequence[dict[str, list[str]]]) -> None:
        self.entries = list(entries)
        self._by_first: dict[str, list[_Phrase]] = {}
        for concept, entry in enumerate(self.entries):
            for language in ("nl", "en"):
                for text in entry.get(language, []):
                    stems = tuple(analyze(text))
                    if stems:
                        phrase = _Phrase(concept, language, text, stems)  # type: ignore[arg-type]
                        for stem in stems[0]:
                            self._by_first.setdefault(stem, []).append(phrase)

    @classmethod
    def load(cls, path: Path | str | None) -> Glossary:
        """The glossary in a JSON file (`{"terms": [{"nl": [...], "en": [...]}, ...]}`); empty without one."""
        if not path or not Path(path).is_file():
            return cls([])
        return cls(json.loads(Path(path).read_text("utf-8"))["terms"])

    def matches(self, tokens: Sequence[frozenset[str]]) -> list[tuple[_Phrase, int]]:
        """The phrases found in a token sequence, with the position of their first token."""
        found = []
        for i, token in enumerate(tokens):
            candidates = {id(p): p for stem in token for p in self._by_first.get(stem, [])}
            for phrase in candidates.values():
                n = len(phrase.stems)
                if i + n <= len(tokens) and all(tokens[i + k] & phrase.stems[k] for k in range(n)):
                    found.append((phrase, i))
        return found

    def concepts(self, tokens: Sequence[frozenset[str]]) -> set[str]:
        """The concepts a text mentions, as pseudo-stems."""
        return {f"≈{phrase.concept}" for phrase, _ in self.matches(tokens)}

    def term_concepts(self, tokens: Sequence[frozenset[str]]) -> list[frozenset[str]]:
        """Per token, the concepts of the phrases it is part of (what a query term may also match)."""
        out: list[set[str]] = [set() for _ in tokens]
        for phrase, start in self.matches(tokens):
            for k in range(len(phrase.stems)):
                out[start + k].add(f"≈{phrase.concept}")
        return [frozenset(s) for s in out]

    def expand(self, query: str, language: Language) -> str:
        """The query plus the `language` wordings of the concepts it mentions that it does not word that way."""
        tokens = analyze(query)
        lowered = query.lower()
        extra: dict[str, None] = {}
        for phrase, _ in self.matches(tokens):
            for text in self.entries[phrase.concept].get(language, []):
                if text.lower() not in lowered:
                    extra.setdefault(text, None)
                    break  # one wording per concept keeps the query readable
        return " ".join([query, *extra]) if extra else query
