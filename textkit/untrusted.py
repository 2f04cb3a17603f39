"""Values from outside (document titles, sections, authors, links, file names) made safe for where they are shown.

Everything a document carries is written by somebody else: a title may hold Markdown or HTML, a newline that
starts a fake list entry, a right-to-left override that turns a name around, an escape sequence for the terminal;
a link may be `javascript:`. The functions here are the one place that decides what such a value may become:

- `plain`: one line of text (JSON fields, logs): controls, line breaks and bidirectional overrides are spaces.
- `body`: a text of several lines (a passage): its line breaks and tabs kept, other controls and overrides out.
- `safe_url`: an `http`/`https` link with a host (or a path of the service's own), else the empty string.
- `markdown_text`: `plain`, with every character Markdown or HTML reads as markup escaped (sources list, bullets,
  think block: Open WebUI renders those as Markdown).
- `no_surrogates`: any text the service sends on (a model's reply) made encodable as UTF-8.
- `terminal`: for a terminal (the CLIs): every control character shown as an escape such as ``\\x1b``.
"""

from __future__ import annotations

import re
import unicodedata
from urllib.parse import urlsplit

__all__ = ["body", "markdown_text", "no_surrogates", "plain", "safe_url", "terminal"]

# Bidirectional controls (embeddings, overrides, isolates, marks) turn the text around them: never shown raw.
_BIDI = frozenset("\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")
# What a line of plain text may not hold: C0 and C1 controls, DEL, line and paragraph separators, bidi controls.
_BREAKS = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029" + "".join(sorted(_BIDI)) + "]+")
_SURROGATE = re.compile("[\ud800-\udfff]")
# In a text of several lines: the controls but tab, line feed and carriage return, and the bidi controls that
# reorder what follows (embeddings, overrides, isolates; the marks LRM, RLM and ALM are ordinary in RTL text)
_BODY_CONTROLS = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]+")
_SPACES = re.compile(r"[ \t]{2,}")
# Markdown (CommonMark, GFM) and HTML punctuation that can start markup anywhere in a line; an underscore between
# two letters or digits cannot (CommonMark: no intraword emphasis with `_`), so `rapport_2021_def` stays readable
_MARKUP = re.compile(r"([\\`*\[\]<>!|~#{}]|(?<![^\W_])_|_(?![^\W_]))")
# ... and what starts a block (list, quote, heading, rule) only at the start of a line
_BLOCK_START = re.compile(r"^(\d{1,9})([.)])|^([-+=])")
# Characters a link written into Markdown (`[title](url)`, `<url>`) may not carry raw
_URL_UNSAFE = {c: f"%{ord(c):02X}" for c in " \"'<>()[]\\`{}|^"}


def no_surrogates(text: str) -> str:
    """`text` with each lone surrogate (no Unicode character: UTF-8 cannot encode it, though a JSON `\\ud800`
    escape decodes to one) replaced by U+FFFD."""
    return _SURROGATE.sub("\ufffd", text)


def plain(text: str | None) -> str:
    """`text` as one line: control characters, line breaks and bidi controls become one space; lone surrogates
    (not Unicode) become U+FFFD; the ends are stripped."""
    if not text:
        return ""
    return _SPACES.sub(" ", _BREAKS.sub(" ", no_surrogates(str(text)))).strip()


def body(text: str | None) -> str:
    """`text` with its lines: control characters but tab and line breaks, and the bidi controls that reorder text,
    taken out; lone surrogates become U+FFFD."""
    if not text:
        return ""
    return _BODY_CONTROLS.sub("", no_surrogates(str(text)))


def safe_url(url: str | None, *, own_prefixes: tuple[str, ...] = ()) -> str:
    """`url` when it is an absolute `http`/`https` link with a host, or a path starting with one of `own_prefixes`
    (the service's own file links); else "". Characters that would end a Markdown link are percent-encoded."""
    value = plain(url)
    if not value or any(ch.isspace() for ch in value):
        return ""
    if own_prefixes and value.startswith(own_prefixes) and not value.startswith("//"):
        return "".join(_URL_UNSAFE.get(ch, ch) for ch in value)
    try:
        parts = urlsplit(value)
    except ValueError:  # e.g. an unbalanced IPv6 bracket
        return ""
    if parts.scheme.lower() not in ("http", "https") or not parts.hostname:
        return ""
    return "".join(_URL_UNSAFE.get(ch, ch) for ch in value)


def markdown_text(text: str | None) -> str:
    """`plain(text)`, escaped so that Markdown and HTML show it as written: no link, image, tag, heading, list or
    emphasis can come out of it."""
    line = _MARKUP.sub(r"\\\1", plain(text))
    return _BLOCK_START.sub(lambda m: f"{m.group(1)}\\{m.group(2)}" if m.group(1) else f"\\{m.group(3)}", line)


def _escape(ch: str) -> str:
    named = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}
    if ch in named:
        return named[ch]
    code = ord(ch)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def terminal(text: str | None, *, lines: bool = False) -> str:
    """`text` for a terminal: control characters (C0, C1, DEL), line breaks, bidi controls and lone surrogates are
    written as escapes (``\\x1b``, ``\\n``, ``\\u202e``), so a name can neither move the cursor nor fake a line.
    `lines`: a text of several lines (an answer), whose newlines are kept."""
    if not text:
        return ""
    return "".join(
        ch if lines and ch == "\n" else
        _escape(ch) if (ch in _BIDI or unicodedata.category(ch) in ("Cc", "Cs", "Zl", "Zp")) else ch
        for ch in str(text)
    )
