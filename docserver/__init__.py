"""Reference MCP document server for NEO NL: the genai-utils tool contract over a bundled corpus
plus documents ingested into a persisted index (``python -m docserver ingest``)."""

from .corpus import BUNDLED_CORPUS, load_collections, load_corpus
from .documents import Chunk, Collection, Document
from .index import Hit, Index
from .live import LiveIndex
from .store import DocumentStore, default_index_path, load_documents, resolve_index_path

__all__ = [
    "BUNDLED_CORPUS",
    "Chunk",
    "Collection",
    "Document",
    "DocumentStore",
    "Hit",
    "Index",
    "LiveIndex",
    "default_index_path",
    "load_collections",
    "load_corpus",
    "load_documents",
    "resolve_index_path",
]
