"""What the genai-utils tools answer, read into typed values: search results into `Evidence` (stable ids, pages,
the sentences a server found by meaning), `list_documents` Markdown into `DocumentRef`s, `list_collections` JSON
into `Held` collections. Whatever a server sends is somebody else's text: malformed entries are left out."""

from __future__ import annotations

import hashlib
import json
import logging
import math
import re
from dataclasses import dataclass
from typing import Any

from graph.collections import Held
from graph.models import Evidence

log = logging.getLogger(__name__)

SOURCES_URI = "neo-nl://sources"


class DocumentError(Exception):
    """A document server call failed (unreachable, timed out, or returned an error result)."""


@dataclass(frozen=True, slots=True)
class DocumentRef:
    collection: str
    doc_id: str
    title: str
    year: int | None = None


@dataclass(frozen=True, slots=True)
class ToolOutput:
    texts: list[str]
    sources: list[dict[str, Any]]


def _content_type(item: Any) -> str:
    return getattr(item, "type", "")


def parse_tool_output(content: list[Any]) -> ToolOutput:
    """Split MCP content into text items and the `neo-nl://sources` JSON (genai-utils format)."""
    texts: list[str] = []
    sources: list[dict[str, Any]] = []
    for item in content:
        kind = _content_type(item)
        if kind == "text":
            texts.append(item.text)
        elif kind == "resource":
            resource = item.resource
            if str(resource.uri) == SOURCES_URI and getattr(resource, "text", None):
                try:
                    sources = list(json.loads(resource.text).get("sources") or [])
                except (ValueError, AttributeError):
                    log.warning("document server sent unparseable sources JSON")
    return ToolOutput(texts, sources)


def _chunk_key(source: dict[str, Any], text: str) -> str:
    meta = source.get("metadata") or {}
    for key in ("chunk_index", "chunk_id", "chunk"):
        if meta.get(key) is not None:
            return str(meta[key])
    return hashlib.sha1(text.encode("utf-8")).hexdigest()[:8]


def _year(value: Any) -> int | None:
    try:
        return int(str(value)[:4])
    except (TypeError, ValueError):
        return None


def _page(value: Any) -> int | None:
    """A 1-based page number from a result's metadata (absent, or not a positive whole number: None)."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


MAX_MATCHING = 5  # matching sentences read per passage


def _matching(value: Any) -> list[tuple[str, float]]:
    """``metadata.matching_sentences`` ([{"text", "similarity"}, ...]): the well-formed ones, at most
    ``MAX_MATCHING`` (``Evidence`` keeps those its passage holds)."""
    if not isinstance(value, list):
        return []
    found = []
    for item in value[:MAX_MATCHING]:
        text = item.get("text") if isinstance(item, dict) else None
        cosine = item.get("similarity") if isinstance(item, dict) else None
        if isinstance(text, str) and isinstance(cosine, int | float) and not isinstance(cosine, bool) \
                and math.isfinite(cosine):
            found.append((text, float(cosine)))
    return found


def to_evidence(collection: str, output: ToolOutput) -> list[Evidence]:
    """Typed evidence with stable ids `collection/doc_id#n`; chunk i belongs to source i."""
    evidence: list[Evidence] = []
    count = max(len(output.sources), len(output.texts))
    for i in range(count):
        source = output.sources[i] if i < len(output.sources) else {}
        meta = source.get("metadata") or {}
        text = str(source.get("chunk_content") or (output.texts[i] if i < len(output.texts) else "")).strip()
        if not text:
            continue
        doc_id = str(source.get("fileId") or meta.get("doc_id") or "unknown")
        coll = str(meta.get("collection") or collection)
        evidence.append(
            Evidence(
                id=f"{coll}/{doc_id}#{_chunk_key(source, text)}",
                collection=coll,
                doc_id=doc_id,
                title=str(source.get("fileName") or meta.get("title") or doc_id),
                text=text,
                url=str(meta.get("url") or ""),
                year=_year(meta.get("year")),
                section=str(meta.get("section") or ""),
                page=_page(meta.get("page")),
                page_end=_page(meta.get("page_end")),
                relevance=float(source.get("relevance") or 0.0),
                summary=str(meta.get("kind") or "").lower() == "summary",
                file_id=str(meta.get("file_id") or ""),
                matching_sentences=_matching(meta.get("matching_sentences")),
            )
        )
    return evidence


_HEADER = re.compile(r"^##\s+(?P<display>.+?)\s+\(\d+\s+\w+\)\s*$")
_ITEM = re.compile(r"^\s*\d+\.\s+\*\*(?P<title>.+?)\*\*\s*$")
_DOC_ID = re.compile(r"^\s*-\s*Doc ID:\s*(?P<id>\S+)")
_YEAR = re.compile(r"^\s*-\s*Year:\s*(?P<year>\d{4})")


def parse_document_list(markdown: str, display_to_name: dict[str, str]) -> list[DocumentRef]:
    """Parse `list_documents` Markdown (`## <display name> (3 results)`, `1. **Title**`, `- Doc ID: x`)."""
    refs: list[DocumentRef] = []
    collection, title, doc_id, year = "", "", "", None

    def flush() -> None:
        if collection and doc_id:
            refs.append(DocumentRef(collection, doc_id, title or doc_id, year))

    for line in markdown.splitlines():
        if m := _HEADER.match(line):
            flush()
            display = m["display"].strip()
            collection = display_to_name.get(display.lower(), display.lower())
            title, doc_id, year = "", "", None
        elif m := _ITEM.match(line):
            flush()
            title, doc_id, year = m["title"], "", None
        elif m := _DOC_ID.match(line):
            doc_id = m["id"]
        elif m := _YEAR.match(line):
            year = int(m["year"])
    flush()
    return refs


def parse_collections(text: str) -> list[Held]:
    """`list_collections` JSON (`{"collections": [{"name", "display_name", "version", "titles", ...}]}`); an entry
    that is not a valid collection is left out (named in the log), a reply that is not that JSON is a
    DocumentError."""
    try:
        entries = json.loads(text)["collections"]
        if not isinstance(entries, list):
            raise TypeError("collections is not a list")
    except (ValueError, KeyError, TypeError) as exc:
        raise DocumentError(f"list_collections: not a collection list ({type(exc).__name__})") from None
    held = []
    for entry in entries:
        try:
            held.append(Held.model_validate(entry))
        except ValueError:
            log.warning("list_collections: an entry that is no valid collection was left out")
    return held


def as_held(name: str, titles: list[str]) -> Held | None:
    try:
        return Held(name=name, titles=titles)
    except ValueError:
        return None
