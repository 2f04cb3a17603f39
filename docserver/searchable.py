"""What the document server's tools read a library through, whichever engine keeps it: the index in memory
(``index.Index``, over the bundled corpus and the SQLite file) or the library in PostgreSQL
(``postgres.search.PostgresIndex``, searched in the database).

A search returns ``Hit``s; a hit's document carries its metadata, and its chunks only where the engine holds them
(``document`` reads one document whole).  ``outline`` is what ``list_collections`` says of a collection.
"""

from collections import Counter
from collections.abc import Hashable
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from .documents import Chunk, Collection, Document
from .sentences import Match

__all__ = ["Hit", "Outline", "Searchable"]


@dataclass(frozen=True, slots=True)
class Hit:
    document: Document
    chunk: Chunk
    score: float  # raw BM25 score (0: found by meaning alone)
    relevance: float  # score / best score of the same query (searched by meaning too: of the fused score), 0..1
    matched_terms: float = 0.0  # share of the distinct query tokens found in the chunk, 0..1, 3 decimals
    similarity: float | None = None  # cosine of the passage's vector to the query's, 4 decimals; None: not searched
    # by meaning, or the passage has no vector yet
    sentences: tuple[Match, ...] = ()  # its sentences that say what the query asks, by meaning (``sentences.py``)


@dataclass(frozen=True, slots=True)
class Outline:
    """A collection in numbers: its documents and chunks, the first titles (by doc_id), how often each (title,
    section) pair occurs among its chunks and the languages of its documents."""

    documents: int
    chunks: int
    titles: list[str]
    sections: Counter[tuple[str, str]] = field(default_factory=Counter)
    languages: Counter[str] = field(default_factory=Counter)


class Searchable(Protocol):
    """A library as the tools read it (one version of it: a reload gives another object)."""

    source_version: Hashable | None
    vector_key: str | None

    @property
    def collections(self) -> list[Collection]: ...

    def collection(self, name: str) -> Collection | None: ...

    @property
    def chunk_count(self) -> int: ...

    @property
    def document_count(self) -> int: ...

    def version(self, collection: str) -> str: ...

    def file_id(self, collection: str, doc_id: str) -> str | None: ...

    def listing(self, collection: str, limit: int) -> list[Document]: ...

    def outline(self, collection: str, titles: int) -> Outline: ...

    def document(self, collection: str, doc_id: str) -> Document | None: ...

    def match_titles(self, query: str, collection: str) -> list[Document]: ...

    def searches_by_meaning(self, collection: str) -> bool: ...

    def waiting(self) -> list[Chunk]: ...

    def search(self, query: str, collection: str, *, limit: int | None = 10, doc_id: str | None = None,
               query_vector: np.ndarray | None = None, fusion: tuple[float, float] | None = None,
               sentence_match: float | None = None) -> list[Hit]: ...
