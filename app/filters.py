"""The request's `filters` (docs/API.md, "Filters and search"): the collections and language narrow what the caller may
see, never widen it; `kind` travels to research (`graph.context.SearchFilters`)."""

from __future__ import annotations

from app.errors import APIError
from app.protocol import RequestFilters
from graph.collections import Catalog
from graph.context import SearchFilters


def invalid(param: str, message: str) -> APIError:
    return APIError(400, f"{param}: {message}", param=param, code="invalid_request")


def narrowed(visible: tuple[str, ...], filters: RequestFilters | None, catalog: Catalog) -> tuple[str, ...]:
    """The collections a request searches: those the caller may see, cut to `filters.collections` (names or display
    names) and to the collections whose documents are in `filters.language`. A collection the caller may not see is
    refused like one that does not exist, and neither is named back."""
    if filters is None:
        return visible
    keep = visible
    if filters.collections is not None:
        asked = [catalog.resolve(written) for written in filters.collections]
        if any(name is None or name not in visible for name in asked):
            raise invalid("filters.collections", "names a collection that does not exist or is not open to this caller")
        keep = tuple(name for name in keep if name in asked)
    if filters.language is not None:
        keep = tuple(name for name in keep if catalog.language(name) == filters.language)
        if not keep:
            raise invalid("filters.language", f"no collection to search holds documents in '{filters.language}'")
    return keep


def search_filters(filters: RequestFilters | None) -> SearchFilters:
    if filters is None:
        return SearchFilters()
    return SearchFilters(tuple(filters.collections or ()), filters.kind, filters.language)
