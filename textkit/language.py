"""Dutch or English: counts of frequent function words of each language, enough for a question and for a document.

One rule for the agent and the document server. The agent asks it of questions and passages (which language an
answer is written in, which sentences extractive selection may take); the document server of a whole document, to
record its language when the document does not state one (``docserver/formats``: Markdown, text, and PDF, DOCX, ODT
or HTML without a language attribute). The server reads only a document's start (``window``): that bounds the cost
of a long file, and a bilingual treaty (../shared/corpus/security/cppnm.md, English first and Dutch after) is
recorded in the language it opens with.
"""

from __future__ import annotations

import re
from typing import Literal

__all__ = ["DOCUMENT_WINDOW", "DUTCH_WORDS", "ENGLISH_WORDS", "Language", "detect_language"]

Language = Literal["nl", "en"]

DUTCH_WORDS = frozenset(
    "de het een en van in is dat op te zijn voor met wat wie hoe welke waar wanneer waarom niet ook er "
    "aan bij door naar over uit wordt worden kan moet mijn geef leg uit eisen verschil verschillen tussen "
    "volgens deze dit die zij wij jullie als dan".split()
)
ENGLISH_WORDS = frozenset(
    "the a an and of in is that on to be for with what who how which where when why not also there "
    "at by from about out are was can must my give explain requirements difference between according "
    "these this those they we you as than does do".split()
)
DOCUMENT_WINDOW = 20_000  # characters of a document the document server reads its language from

_WORD = re.compile(r"[a-zA-Zà-ÿ]+")


def detect_language(text: str, default: Language = "nl", *, window: int | None = None) -> Language:
    """"nl" or "en": the language more of ``text``'s words are function words of; ``default`` on a tie (no such
    word at all, or as many of each). ``window``: read only the first that many characters."""
    words = [w.lower() for w in _WORD.findall(text if window is None else text[:window])]
    dutch = sum(w in DUTCH_WORDS for w in words)
    english = sum(w in ENGLISH_WORDS for w in words)
    if dutch == english:
        return default
    return "nl" if dutch > english else "en"
