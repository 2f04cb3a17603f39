"""Document collections: those the document library holds, described by the collections file where it says more.

The library (the document server) tells which collections exist and what they hold (`Held`: from the reference
server's `list_collections`, else from the headers of `list_documents`); the collections file (COLLECTIONS_FILE)
describes them: display name, focus, keywords, language, high_stakes, all optional. `library_catalog` merges the two;
a collection nobody described gets a focus derived from what it holds (its documents' titles and headings), so the
router and the planner can use it.

The file is either a list of collections or an object `{"topic": {"nl": ..., "en": ...}, "collections": [...],
"glossary": [{"nl": [...], "en": [...]}, ...]}`; the topic names the field the collections cover (Open WebUI's
offline tag), the glossary the field's terms in both languages (`graph/glossary.py`).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from pydantic import BaseModel, Field, field_validator

from graph.glossary import Glossary
from graph.models import Language
from textkit.untrusted import plain

COLLECTION_NAME = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$"  # as the reference server's ingest takes them


class Collection(BaseModel):
    name: str
    display_name: str
    focus: str = ""
    keywords: list[str] = []  # lower-case words that point the router at this collection
    # legal or procedural texts: answers drawing on this collection get the claim check (CLAIM_CHECK=auto)
    high_stakes: bool = False
    language: Language | None = None  # the language of its documents: queries get glossary terms in it


class Held(BaseModel):
    """What the document library says one collection holds (unknown fields stay empty). It comes from a server:
    the name must be a plain collection name, every text one plain line (it reaches prompts and think lines)."""

    name: str = Field(pattern=COLLECTION_NAME)
    display_name: str = ""
    focus: str = ""
    documents: int | None = None
    # changes whenever what the collection holds changes; None: the server does not say (answers are then checked
    # against the evidence instead, `app.answer_events`)
    version: str | None = None
    titles: list[str] = []
    headings: list[str] = []
    language: Language | None = None

    @field_validator("language", mode="before")
    @classmethod
    def _known_language(cls, value: object) -> object:
        return value if value in ("nl", "en") else None  # another language: none the glossary knows

    @field_validator("display_name", "focus", "version", mode="after")
    @classmethod
    def _one_line(cls, value: str | None) -> str | None:
        return None if value is None else plain(value)[:200]

    @field_validator("titles", "headings", mode="after")
    @classmethod
    def _lines(cls, values: list[str]) -> list[str]:
        return [line[:200] for v in values[:12] if (line := plain(v))]


FOCUS_CHARS = 300  # of a derived focus: the router and planner prompts list one line per collection


def derived_focus(held: Held) -> str:
    """A focus for a collection nobody described: its documents' titles, then its commonest headings, cut at a
    word near FOCUS_CHARS."""
    parts = ["; ".join(held.titles[:6]), ", ".join(held.headings[:8])]
    text = " — ".join(p for p in parts if p)
    if len(text) <= FOCUS_CHARS:
        return text
    return text[:FOCUS_CHARS].rsplit(" ", 1)[0].rstrip(",;— ") + " …"


class _CatalogFile(BaseModel):
    topic: dict[Language, str] = Field(default_factory=dict)
    collections: list[Collection]
    glossary: list[dict[Language, list[str]]] = Field(default_factory=list)


class Catalog:
    """The configured collections, with the lookups every part of the pipeline shares."""

    def __init__(self, collections: list[Collection], topic: dict[Language, str] | None = None,
                 glossary: Glossary | None = None, versions: Mapping[str, str | None] | None = None) -> None:
        names = [c.name for c in collections]
        if not collections:
            raise ValueError("no collections configured")
        if len(set(names)) != len(names):
            raise ValueError("duplicate collection names")
        self.collections = collections
        self.names = names
        self.topic = topic or {}
        self.glossary = glossary or Glossary([])
        # what each collection holds, as the library last said (`Held.version`); absent or None: not known
        self.versions = {name: (versions or {}).get(name) for name in names}
        self._display = {c.name: c.display_name for c in collections}
        self._written = {key: c.name for c in collections for key in (c.display_name.lower(), c.name.lower())}

    def only(self, names: Iterable[str]) -> Catalog:
        """The catalog one caller may see (docs/, "Collections per caller"): these collections in configuration
        order, with the same topic and glossary. Routing, prompts, progress lines and errors read the catalog
        they are given, so a collection left out here does not exist for them. No collection left is a ValueError."""
        keep = set(names)
        return Catalog([c for c in self.collections if c.name in keep], self.topic, self.glossary, self.versions)

    @property
    def described(self) -> str:
        """A hash of the collections as described (names, display names, focus, ...): a plan made for one
        description is not reused for another."""
        return _digest([c.model_dump() for c in self.collections])

    @property
    def holdings(self) -> str | None:
        """A hash of what every collection holds (`Held.version`), or None when the library does not say for
        one of them."""
        if any(v is None for v in self.versions.values()):
            return None
        return _digest(sorted(self.versions.items()))

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


def _digest(value: object) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True, ensure_ascii=False).encode()).hexdigest()[:16]


def library_catalog(configured: Catalog, held: Sequence[Held] | None, *, complete: bool) -> Catalog:
    """The collections the library holds, described by `configured` (the collections file) where it says more.

    `held`: what the library says (None: it could not be asked, so the configured collections stand). `complete`:
    the library listed every collection it holds (the reference server's `list_collections`), so a configured
    collection it does not hold is left out (searching it would fail); otherwise (`list_documents` names only
    the collections with a document matching, at most five each) the configured ones stay and those it named are
    added. Configured collections first, in file order, then the others by name."""
    if not held:
        return configured
    by_name = {h.name: h for h in held}
    kept = [c for c in configured.collections if c.name in by_name or not complete]
    added = [_described(h) for h in sorted(held, key=lambda h: h.name) if h.name not in configured.names]
    collections = [_with_language(c, by_name.get(c.name)) for c in kept] + added
    if not collections:
        return configured
    versions = {name: h.version for name, h in by_name.items()}
    return Catalog(collections, configured.topic, configured.glossary, versions)


def _described(held: Held) -> Collection:
    return Collection(name=held.name, display_name=held.display_name or held.name,
                      focus=held.focus or derived_focus(held), language=held.language)


def _with_language(collection: Collection, held: Held | None) -> Collection:
    """A configured collection; the library's word for its language where the file says none."""
    if collection.language is None and held is not None and held.language is not None:
        return collection.model_copy(update={"language": held.language})
    return collection


def load_catalog(path: Path) -> Catalog:
    raw = json.loads(Path(path).read_text("utf-8"))
    parsed = _CatalogFile.model_validate(raw if isinstance(raw, dict) else {"collections": raw})
    try:
        return Catalog(parsed.collections, parsed.topic, Glossary(parsed.glossary))
    except ValueError as exc:
        raise ValueError(f"{path}: {exc}") from None

