"""One language rule for the agent and the document server (textkit/language.py), and the article patterns they share
(textkit/articles.py): pinned to the patterns each call site used before they moved there."""

from __future__ import annotations

import pytest

from docserver.formats import Deadline, Limits
from docserver.formats import markdown as markdown_reader
from docserver.formats import text as text_reader
from graph.text.language import detect_language as graph_detect
from textkit.articles import (
    ARTICLE_HEADING,
    ARTICLE_REF,
    ARTICLE_REF_ONE_LETTER,
    SECTION_ARTICLE,
    SECTION_ARTICLE_LOOSE,
)
from textkit.language import DOCUMENT_WINDOW, detect_language

ENGLISH = "The licence holder shall report to the authority and keep the records of the plant. "
DUTCH = "De vergunninghouder meldt het aan de autoriteit en bewaart de gegevens van de installatie. "


@pytest.mark.parametrize(
    ("text", "default", "expected"),
    [
        ("Wat zijn de eisen voor een vergunning?", "nl", "nl"),
        ("What does the licence require?", "nl", "en"),
        ("Borssele 2033", "nl", "nl"),  # no function word: the default
        ("Borssele 2033", "en", "en"),
        ("de the", "en", "en"),  # as many of each: the default
    ],
)
def test_the_agent_and_the_server_share_one_rule(text: str, default: str, expected: str) -> None:
    assert detect_language(text, default) == expected  # type: ignore[arg-type]
    assert graph_detect(text, default) == expected  # type: ignore[arg-type]


def test_the_server_reads_a_documents_language_from_its_start() -> None:
    """A bilingual treaty, English first and Dutch after (as ../shared/corpus/security/cppnm.md): recorded English."""
    treaty = ENGLISH * (DOCUMENT_WINDOW // len(ENGLISH) + 1) + DUTCH * (3 * DOCUMENT_WINDOW // len(DUTCH))
    assert detect_language(treaty) == "nl"
    assert detect_language(treaty, window=DOCUMENT_WINDOW) == "en"
    read = text_reader.read(treaty.encode(), Limits(), Deadline(10))
    assert read.language == "en"
    notes = markdown_reader.read(f"# Notes\n\n## One\n\n{treaty}".encode(), Limits(), Deadline(10))
    assert notes.language == "en"
    stated = markdown_reader.read(f"---\nlanguage: nl\n---\n## One\n\n{ENGLISH}".encode(), Limits(), Deadline(10))
    assert stated.language == "nl"  # front matter says so


def test_article_patterns_are_those_the_call_sites_used() -> None:
    """Moved verbatim (docserver/index.py, docserver/ingest.py, graph/text/extractive.py, eval/run.py)."""
    assert ARTICLE_REF.pattern == r"\b(?:artikel|art\.|article)\s+(\d+[a-z]*(?:\.\d+[a-z]*)*)"
    assert ARTICLE_REF_ONE_LETTER.pattern == r"\b(?:artikel|art\.|article)\s+(\d+[a-z]?(?:\.\d+[a-z]?)*)"
    assert SECTION_ARTICLE.pattern == r"\s*(?:artikel|article)\s+(\d+[a-z]?(?:\.\d+[a-z]?)*)\b"
    assert ARTICLE_HEADING.pattern == (
        r"^(?P<word>artikel|article)\s+(?P<number>\d+[a-z]*(?:\.\d+[a-z]*)*|[IVXLC]+[a-z]?)\b\.?\s*(?P<caption>.*)$"
    )
    assert SECTION_ARTICLE_LOOSE.pattern == r"(?:artikel|article)\s+([\w.]+)"


@pytest.mark.parametrize(
    ("text", "reference", "one_letter"),
    [
        ("Wat regelt artikel 15aa van de Kernenergiewet?", "15aa", "15a"),
        ("art. 3.1 lid 2", "3.1", "3.1"),
        ("Article 7 of the Convention", "7", "7"),
        ("het artikel over vergunningen", None, None),
    ],
)
def test_an_article_named_in_a_text(text: str, reference: str | None, one_letter: str | None) -> None:
    found = ARTICLE_REF.search(text)
    assert (found.group(1) if found else None) == reference
    found = ARTICLE_REF_ONE_LETTER.search(text)
    assert (found.group(1) if found else None) == one_letter


def test_the_article_of_a_section_and_of_a_heading() -> None:
    assert SECTION_ARTICLE.match("Artikel 15a (deel 2) — Hoofdstuk 3").group(1) == "15a"  # type: ignore[union-attr]
    assert SECTION_ARTICLE.match("Artikel 15aa") is None  # no word boundary after one letter
    assert SECTION_ARTICLE.match("Zie artikel 3") is None  # only at the start
    heading = ARTICLE_HEADING.match("Artikel 2a. Begrippen")
    assert heading is not None and heading.group("word", "number", "caption") == ("Artikel", "2a", "Begrippen")
    assert ARTICLE_HEADING.match("Artikel IV").group("number") == "IV"  # type: ignore[union-attr]
    assert SECTION_ARTICLE_LOOSE.search("Aanhef, artikel 12a.").group(1) == "12a."  # type: ignore[union-attr]
