"""Plain-text reader, and the decoding every text format (plain text, Markdown) goes through.

A text file is one unit of its whole text (lines without trailing blanks, runs of blank lines as one); the ingest
cuts it into chunks between paragraphs (``docserver/chunking.py``). It states no title (the ingest names it after the
file) and no language, so its language is detected from its words (``textkit.language``). A text holding a NUL or
invalid UTF-8 anywhere is refused ("binary data at byte N"): the sniffer looks only at a file's start.
"""

from __future__ import annotations

import re

from textkit.language import DOCUMENT_WINDOW, detect_language

from .base import Deadline, Extracted, Limits, Refused, Unit

__all__ = ["decoded", "read"]


def read(data: bytes, limits: Limits, deadline: Deadline) -> Extracted:
    """A plain-text file as one unit of its text; ``Refused`` when it holds binary data or no text."""
    text = "\n".join(line.rstrip() for line in decoded(data).lstrip("\ufeff").strip().splitlines())
    if not text:
        raise Refused("no text to index")
    return Extracted(format="text", title=None, units=(Unit(re.sub(r"\n{3,}", "\n\n", text)),),
                     language=detect_language(text, window=DOCUMENT_WINDOW))


def decoded(data: bytes) -> str:
    """A Markdown or text file's bytes as text, without a byte order mark; ``Refused`` at the first NUL or invalid
    UTF-8 byte anywhere in it (the sniffer looks only at the start: a NUL further on would be indexed and handed
    out)."""
    nul = data.find(b"\x00")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        nul = exc.start if nul < 0 else min(nul, exc.start)
    if nul >= 0:
        raise Refused(f"binary data at byte {nul}")
    return text.removeprefix("\ufeff")

