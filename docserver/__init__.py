"""Reference MCP document server for NEO NL: the genai-utils tool contract over a bundled corpus."""

from .corpus import BUNDLED_CORPUS, Chunk, Collection, Document, load_collections, load_corpus
from .index import Hit, Index

__all__ = [
    "BUNDLED_CORPUS",
    "Chunk",
    "Collection",
    "Document",
    "Hit",
    "Index",
    "load_collections",
    "load_corpus",
]
