"""Loading the bundled Markdown corpus into documents and section chunks.

Layout::

    corpus/collections.json          [{"name", "display_name", "focus"}, ...]
    corpus/<collection>/<doc_id>.md  front matter + Markdown body

Each ``## `` section of a body becomes one chunk (``formats/markdown.py`` reads it, ``chunking.py`` cuts it).  The
part before the first ``## `` (the H1 and the "samenvatting in eigen woorden" disclaimer) is not a chunk; the
disclaimer is kept on the document.  Other sources (ingested files, see ``ingest.py``) only need to produce
``Document`` objects (``documents.py``) to be indexed as well.
"""

import hashlib
import json
from pathlib import Path

from .chunking import sections_document
from .documents import Collection, Document
from .formats.markdown import sections, split_front_matter

__all__ = ["BUNDLED_CORPUS", "fingerprint", "load_collections", "load_corpus", "parse_document"]

BUNDLED_CORPUS = Path(__file__).resolve().parent / "corpus"


def load_collections(corpus_dir: Path | str) -> list[Collection]:
    """Collections from ``collections.json``; without it, one per subdirectory."""
    root = Path(corpus_dir)
    manifest = root / "collections.json"
    if manifest.is_file():
        entries = json.loads(manifest.read_text(encoding="utf-8"))
        return [
            Collection(e["name"], e.get("display_name") or e["name"], e.get("focus", ""))
            for e in entries
        ]
    return [Collection(d.name, d.name) for d in sorted(root.iterdir()) if d.is_dir()]


def load_corpus(corpus_dir: Path | str) -> list[Document]:
    """All ``<collection>/<doc_id>.md`` documents under ``corpus_dir``, sorted."""
    root = Path(corpus_dir)
    documents: list[Document] = []
    seen: set[tuple[str, str]] = set()
    for path in sorted(root.glob("*/*.md")):
        doc = parse_document(path.read_text(encoding="utf-8"), collection=path.parent.name, default_id=path.stem)
        if (doc.collection, doc.doc_id) in seen:
            raise ValueError(f"duplicate doc_id {doc.doc_id!r} in collection {doc.collection!r} ({path})")
        seen.add((doc.collection, doc.doc_id))
        documents.append(doc)
    return documents


def parse_document(source: str, *, collection: str, default_id: str) -> Document:
    """Parse one Markdown file (front matter + body) into a chunked ``Document``; its language as its front matter
    states it (None when it does not)."""
    return sections_document(sections(*split_front_matter(source)), collection=collection, default_id=default_id)


def fingerprint(document: Document) -> str:
    """A digest of everything a corpus document says (its metadata too): what a library keeping a copy of the corpus
    compares to tell that it changed (``sqlite/words.py``, ``postgres/store.py``)."""
    return hashlib.sha256(repr((document, sorted(document.metadata.items()))).encode()).hexdigest()[:16]
