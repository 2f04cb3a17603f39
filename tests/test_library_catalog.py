"""Which collections the pipeline knows (`graph.collections.library_catalog`): those the library holds, described by
the collections file where it says more (issue 58). A table test of the one rule, and of what a server may say."""

from __future__ import annotations

import json

import pytest

from graph.clients.mcp_results import DocumentError, parse_collections
from graph.collections import FOCUS_CHARS, Catalog, Collection, Held, derived_focus, library_catalog

CONFIGURED = Catalog([
    Collection(name="anvs", display_name="ANVS", focus="toezicht", keywords=["anvs"], language="nl"),
    Collection(name="iaea", display_name="IAEA", focus="normen"),
])
NEW = Held(name="mijndocs", version="3.ab", titles=["Fietsbeleid Zuiderwaard 2025", "Parkeernota"],
           headings=["Stallen bij het station", "Tarieven"], language="nl")


@pytest.mark.parametrize(("held", "complete", "names", "versions"), [
    (None, True, ["anvs", "iaea"], {"anvs": None, "iaea": None}),  # the library could not be asked
    ([], True, ["anvs", "iaea"], {"anvs": None, "iaea": None}),  # nor said anything: the file stands
    ([Held(name="anvs", version="1.x"), Held(name="iaea", version="2.x")], True, ["anvs", "iaea"],
     {"anvs": "1.x", "iaea": "2.x"}),
    ([Held(name="iaea", version="2.x"), NEW], True, ["iaea", "mijndocs"], {"iaea": "2.x", "mijndocs": "3.ab"}),
    ([NEW], False, ["anvs", "iaea", "mijndocs"], {"anvs": None, "iaea": None, "mijndocs": "3.ab"}),
    ([Held(name="zz"), Held(name="aa")], False, ["anvs", "iaea", "aa", "zz"], None),  # new ones by name
])
def test_the_library_says_which_collections_exist(held: list[Held] | None, complete: bool, names: list[str],
                                                  versions: dict[str, str | None] | None) -> None:
    catalog = library_catalog(CONFIGURED, held, complete=complete)
    assert catalog.names == names
    if versions is not None:
        assert catalog.versions == versions


def test_a_collection_nobody_described_is_described_by_what_it_holds() -> None:
    catalog = library_catalog(CONFIGURED, [Held(name="anvs", version="1"), NEW], complete=True)
    new = catalog.collections[-1]
    assert (new.display_name, new.language, new.keywords) == ("mijndocs", "nl", [])
    assert new.focus == "Fietsbeleid Zuiderwaard 2025; Parkeernota — Stallen bij het station, Tarieven"
    assert catalog.collections[0] == CONFIGURED.collections[0]  # the file's words win where it says them
    assert catalog.holdings is not None and catalog.only(["anvs"]).holdings != catalog.holdings


def test_holdings_are_unknown_while_one_version_is() -> None:
    catalog = library_catalog(CONFIGURED, [Held(name="anvs", version="1"), Held(name="iaea")], complete=True)
    assert catalog.holdings is None and catalog.only(["anvs"]).holdings is not None


def test_a_configured_language_stays_and_a_missing_one_comes_from_the_library() -> None:
    catalog = library_catalog(CONFIGURED, [Held(name="anvs", language="en"), Held(name="iaea", language="en")],
                              complete=True)
    assert [c.language for c in catalog.collections] == ["nl", "en"]


def test_a_derived_focus_is_cut_at_a_word() -> None:
    long = Held(name="x", titles=[f"Titel nummer {n} van een bijzonder lange reeks documenten over fietsen" for n in range(12)],
                headings=["kop"] * 12)
    focus = derived_focus(long)
    assert len(focus) <= FOCUS_CHARS + 2 and focus.endswith(" …") and "  " not in focus


@pytest.mark.parametrize(("entry", "kept"), [
    ({"name": "mijn docs"}, False),  # no collection name
    ({"name": "<script>"}, False),
    ({"name": "ok", "display_name": "Mijn\nDocs\u202e", "language": "de", "titles": ["a\x1bb"] * 30}, True),
])
def test_what_a_server_says_is_checked(entry: dict, kept: bool) -> None:
    held = parse_collections(json.dumps({"collections": [entry]}))
    assert bool(held) is kept
    if kept:
        assert held[0].display_name == "Mijn Docs" and held[0].language is None
        assert len(held[0].titles) == 12 and "\x1b" not in held[0].titles[0]


@pytest.mark.parametrize("text", ["", "not json", '{"collections": 3}', "[]"])
def test_a_reply_that_is_no_collection_list_is_a_document_error(text: str) -> None:
    with pytest.raises(DocumentError):
        parse_collections(text)
