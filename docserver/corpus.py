"""Loading the bundled Markdown corpus into documents and section chunks.

Layout::

    corpus/collections.json          [{"name", "display_name", "focus"}, ...]
    corpus/<collection>/<doc_id>.md  front matter + Markdown body

Each ``## `` section of a body becomes one chunk.  The part before the first
``## `` (the H1 and the "samenvatting in eigen woorden" disclaimer) is not a
chunk; the disclaimer is kept on the document.  Other sources (ingested law
texts, see ``ingest.py``) only need to produce ``Document`` objects to be
indexed as well.
"""

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

__all__ = [
    "BUNDLED_CORPUS",
    "Chunk",
    "Collection",
    "Document",
    "chunk_text",
    "load_collections",
    "load_corpus",
    "parse_document",
    "split_front_matter",
]

BUNDLED_CORPUS = Path(__file__).resolve().parent / "corpus"


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
    """Parse one Markdown file (front matter + body) into a chunked ``Document``."""
    meta, body = split_front_matter(source)
    doc_id = meta.get("doc_id") or default_id
    heading, disclaimer, sections = _split_sections(body)
    title = meta.get("title") or heading or doc_id
    chunks = tuple(
        Chunk(doc_id, collection, i, title, section or title, text)
        for i, (section, text) in enumerate(sections)
    )
    year = meta.get("year", "")
    return Document(
        doc_id=doc_id,
        collection=collection,
        title=title,
        chunks=chunks,
        year=int(year) if year.isdigit() else None,
        url=meta.get("url") or None,
        kind=meta.get("kind") or None,
        language=meta.get("language") or None,
        disclaimer=disclaimer,
        metadata=meta,
    )


def split_front_matter(source: str) -> tuple[dict[str, str], str]:
    """(``key: value`` pairs of a leading ``---`` block, the rest of the text)."""
    lines = source.lstrip("\ufeff").splitlines()
    if not lines or lines[0].strip() != "---":
        return {}, "\n".join(lines)
    meta: dict[str, str] = {}
    for end in range(1, len(lines)):
        line = lines[end]
        if line.strip() == "---":
            return meta, "\n".join(lines[end + 1 :])
        key, sep, value = line.partition(":")
        if sep and key.strip() and not line.startswith((" ", "\t", "#")):
            meta[key.strip()] = _unquote(value.strip())
    raise ValueError("unterminated front matter")


def _unquote(value: str) -> str:
    if len(value) >= 2 and value[0] == value[-1] == '"':
        try:
            return str(json.loads(value))
        except json.JSONDecodeError:
            return value[1:-1]
    if len(value) >= 2 and value[0] == value[-1] == "'":
        return value[1:-1].replace("''", "'")
    return value


def _split_sections(body: str) -> tuple[str | None, str | None, list[tuple[str, str]]]:
    """(H1 text, disclaimer, [(section heading, section text), ...])."""
    heading: str | None = None
    quote: list[str] = []
    preamble: list[str] = []
    sections: list[tuple[str, list[str]]] = []
    for line in body.splitlines():
        if line.startswith("## "):
            sections.append((line[3:].strip(), []))
        elif sections:
            sections[-1][1].append(line)
        elif line.startswith("# ") and heading is None:
            heading = line[2:].strip()
        elif line.startswith(">"):
            quote.append(line[1:].strip())
        else:
            preamble.append(line)
    disclaimer = " ".join(q for q in quote if q) or None
    texts = [(name, "\n".join(lines).strip()) for name, lines in sections]
    chunks = [(name, text) for name, text in texts if text]
    if not sections and "\n".join(preamble).strip():
        chunks = [("", "\n".join(preamble).strip())]
    return heading, disclaimer, chunks
