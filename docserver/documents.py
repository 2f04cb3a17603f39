"""What the document server holds: collections of documents, each cut into chunks (the passages a search returns).

Every source gives these: the bundled Markdown corpus (``corpus.py``) and every file ingested (``ingest.py``, through
a format reader and ``chunking.py``); the index (``index.py``) searches them and the store (``store.py``) keeps them.
"""

from collections.abc import Mapping
from dataclasses import dataclass, field

__all__ = ["Chunk", "Collection", "Document", "chunk_text"]


@dataclass(frozen=True, slots=True)
class Collection:
    name: str
    display_name: str
    focus: str = ""


@dataclass(frozen=True, slots=True)
class Chunk:
    doc_id: str
    collection: str
    chunk_index: int
    title: str
    section: str
    text: str
    url: str | None = None  # a deep link (one article of a law); the document's url when None
    page: int | None = None  # the first page of a paged source (PDF) the text stands on
    page_end: int | None = None  # and the last, when it runs over a page break


@dataclass(frozen=True, slots=True)
class Document:
    doc_id: str
    collection: str
    title: str
    chunks: tuple[Chunk, ...]
    year: int | None = None
    url: str | None = None
    kind: str | None = None
    language: str | None = None
    disclaimer: str | None = None
    metadata: Mapping[str, str] = field(default_factory=dict, compare=False)


def chunk_text(chunk: Chunk) -> str:
    """Self-describing chunk text: ``[Title — Section]`` then the paragraphs (what a client reads and what is
    embedded)."""
    header = chunk.title if chunk.section == chunk.title else f"{chunk.title} — {chunk.section}"
    return f"[{header}]\n{chunk.text}"
