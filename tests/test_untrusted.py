"""textkit.untrusted: a table of hostile values from documents, file names and upstreams, and what each becomes."""

from __future__ import annotations

import pytest
from markdown_it import MarkdownIt

from textkit.untrusted import body, markdown_text, plain, safe_url, terminal

HOSTILE_TITLES = [
    "[klik hier](javascript:alert(1))",
    "<img src=x onerror=alert(1)>",
    "# Gekaapt",
    "Rapport\n9. [Officiele ANVS-bron](https://evil.example/phish)",
    "![x](https://evil.example/track.png)",
    "<script>alert(1)</script>",
    "**vet** _schuin_ `code` ~~weg~~",
    "- lijst",
    "1. lijst",
    "> citaat",
    "| a | b |",
    "<https://evil.example>",
    "a\\](javascript:x)",
    "Borssele\u202egnp.exe",
    "naam\x1b[31mrood\x07",
]


@pytest.mark.parametrize(("value", "expected"), [
    ("Kernenergiewet", "Kernenergiewet"),
    ("regel 1\nregel 2\r\n\tregel 3", "regel 1 regel 2 regel 3"),
    ("a\x00b\x1b[31mc\x7fd\x85e", "a b [31mc d e"),
    ("links\u202erechts\u2066x\u2069", "links rechts x"),
    ("kapot \ud800 teken", "kapot \ufffd teken"),
    ("a\u2028b\u2029c", "a b c"),
    ("  veel    ruimte  ", "veel ruimte"),
    ("rapport_2021_def.pdf", "rapport_2021_def.pdf"),
    (None, ""),
])
def test_plain(value: str | None, expected: str) -> None:
    assert plain(value) == expected


@pytest.mark.parametrize(("value", "expected"), [
    ("regel 1\nregel 2\ttab\r\n", "regel 1\nregel 2\ttab\r\n"),
    ("a\x00b\x1b[31mc\x07d\x85e", "ab[31mcde"),
    ("links\u202erechts \u2067x\u2069 \u200fRLM", "linksrechts x \u200fRLM"),
    ("kapot \ud800", "kapot \ufffd"),
    (None, ""),
])
def test_body(value: str | None, expected: str) -> None:
    assert body(value) == expected


@pytest.mark.parametrize(("value", "expected"), [
    ("https://wetten.overheid.nl/BWBR0002402", "https://wetten.overheid.nl/BWBR0002402"),
    ("HTTP://example.org/a?b=c#d", "HTTP://example.org/a?b=c#d"),
    ("javascript:alert(1)", ""),
    ("JavaScript:alert(1)", ""),
    (" javascript:alert(1)", ""),
    ("java\nscript:alert(1)", ""),
    ("data:text/html,<script>alert(1)</script>", ""),
    ("vbscript:msgbox", ""),
    ("file:///etc/passwd", ""),
    ("//evil.example/x", ""),
    ("/etc/passwd", ""),
    ("https:", ""),
    ("https:///nohost", ""),
    ("http://[::1", ""),
    ("https://a.example/x y", ""),
    ("https://a.example/a)(b", "https://a.example/a%29%28b"),
    ("https://a.example/<x>", "https://a.example/%3Cx%3E"),
    ("", ""),
])
def test_safe_url(value: str, expected: str) -> None:
    assert safe_url(value) == expected


def test_safe_url_keeps_the_services_own_paths_only_when_asked() -> None:
    assert safe_url("/v1/files/abc/content", own_prefixes=("/v1/files/",)) == "/v1/files/abc/content"
    assert safe_url("/v1/files/abc/content") == ""
    assert safe_url("//evil.example/v1/files/", own_prefixes=("/v1/files/",)) == ""


@pytest.mark.parametrize("title", HOSTILE_TITLES)
def test_markdown_text_renders_as_the_text_it_was(title: str) -> None:
    """Rendered by a real CommonMark parser, in the places the service writes titles (a list item, a line), the
    escaped title is one paragraph of text: no link, image, tag, heading, list, quote, table or emphasis."""
    md = MarkdownIt("commonmark").enable("table").enable("strikethrough")
    for line in (f"1. {markdown_text(title)} — p. 3", markdown_text(title), f"- {markdown_text(title)}"):
        tokens = md.parse(line)
        kinds = {t.type for t in tokens} | {c.type for t in tokens for c in (t.children or [])}
        assert kinds <= {"paragraph_open", "paragraph_close", "inline", "text", "ordered_list_open",
                         "ordered_list_close", "bullet_list_open", "bullet_list_close", "list_item_open",
                         "list_item_close"}, (title, line, kinds)
        assert "\n" not in markdown_text(title)
    assert plain(title) == "".join(c.content for t in md.parse(markdown_text(title)) for c in (t.children or []))


@pytest.mark.parametrize(("value", "expected"), [
    ("gewoon", "gewoon"),
    ("a\nrefused: passwd.pdf", "a\\nrefused: passwd.pdf"),
    ("\x1b[2J\x07", "\\x1b[2J\\x07"),
    ("naam\u202eexe.pdf", "naam\\u202eexe.pdf"),
    ("x\x9by", "x\\x9by"),
    ("kapot\ud800", "kapot\\ud800"),
    ("tab\there", "tab\\there"),
    ("Één ünïcode", "Één ünïcode"),
])
def test_terminal(value: str, expected: str) -> None:
    assert terminal(value) == expected
