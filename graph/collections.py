"""Document collections are deployment configuration: loaded from a JSON file, never hard-wired.

The file is either a list of collections or an object `{"topic": {"nl": ..., "en": ...}, "collections": [...],
"glossary": [{"nl": [...], "en": [...]}, ...]}`; the topic names the field the collections cover (Open WebUI's
offline tag), the glossary the field's terms in both languages (`graph/glossary.py`).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path

from pydantic import BaseModel, Field

from graph.glossary import Glossary
from graph.models import Language


class Collection(BaseModel):
    name: str
    display_name: str
    focus: str = ""
    keywords: list[str] = []  # lower-case words that point the router at this collection
    # legal or procedural texts: answers drawing on this collection get the claim check (CLAIM_CHECK=auto)
    high_stakes: bool = False
    language: Language | None = None  # the language of its documents: queries get glossary terms in it


class _CatalogFile(BaseModel):
    topic: dict[Language, str] = Field(default_factory=dict)
    collections: list[Collection]
    glossary: list[dict[Language, list[str]]] = Field(default_factory=list)


class Catalog:
    """The configured collections, with the lookups every part of the pipeline shares."""

    def __init__(self, collections: list[Collection], topic: dict[Language, str] | None = None,
                 glossary: Glossary | None = None) -> None:
        names = [c.name for c in collections]
        if not collections:
            raise ValueError("no collections configured")
        if len(set(names)) != len(names):
            raise ValueError("duplicate collection names")
        self.collections = collections
        self.names = names
        self.topic = topic or {}
        self.glossary = glossary or Glossary([])
        self._display = {c.name: c.display_name for c in collections}
        self._written = {key: c.name for c in collections for key in (c.display_name.lower(), c.name.lower())}

    def only(self, names: Iterable[str]) -> Catalog:
        """The catalog one caller may see (README, Collections per caller): these collections in configuration
        order, with the same topic and glossary. Routing, prompts, progress lines and errors read the catalog
        they are given, so a collection left out here does not exist for them. No collection left is a ValueError."""
        keep = set(names)
        return Catalog([c for c in self.collections if c.name in keep], self.topic, self.glossary)

    def language(self, name: str) -> Language | None:
        return next((c.language for c in self.collections if c.name == name), None)

    def display(self, name: str) -> str:
        return self._display.get(name, name)

    def resolve(self, written: str) -> str | None:
        """The collection a model's reply means: its name or display name, in any case (small models write a
        source as it reads, not by its key)."""
        return self._written.get(written.strip().lower())

    def words(self) -> set[str]:
        """The collections' names, display names and keywords, lower case: words that name a source, not a
        subject (not a name worth searching for on its own)."""
        return {w.lower() for c in self.collections for w in (c.name, c.display_name, *c.keywords)}

    def display_names(self) -> dict[str, str]:
        return dict(self._display)

    def high_stakes(self, names: list[str]) -> bool:
        return any(c.high_stakes for c in self.collections if c.name in names)


def load_catalog(path: Path) -> Catalog:
    raw = json.loads(Path(path).read_text("utf-8"))
    parsed = _CatalogFile.model_validate(raw if isinstance(raw, dict) else {"collections": raw})
    try:
        return Catalog(parsed.collections, parsed.topic, Glossary(parsed.glossary))
    except ValueError as exc:
        raise ValueError(f"{path}: {exc}") from None

