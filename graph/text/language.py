"""Language detection between Dutch and English: function-word counts, enough for questions."""

from __future__ import annotations

import re
from functools import lru_cache

from graph.models import Language

_NL = set(
    "de het een en van in is dat op te zijn voor met wat wie hoe welke waar wanneer waarom niet ook er "
    "aan bij door naar over uit wordt worden kan moet mijn geef leg uit eisen verschil verschillen tussen "
    "volgens deze dit die zij wij jullie als dan".split()
)
_EN = set(
    "the a an and of in is that on to be for with what who how which where when why not also there "
    "at by from about out are was can must my give explain requirements difference between according "
    "these this those they we you as than does do".split()
)
_WORD = re.compile(r"[a-zA-Zà-ÿ]+")


@lru_cache(maxsize=2048)
def detect_language(text: str, default: Language = "nl") -> Language:
    """Cached: the claim check asks it of the same passages for every sentence that cites them."""
    words = [w.lower() for w in _WORD.findall(text)]
    nl = sum(w in _NL for w in words)
    en = sum(w in _EN for w in words)
    if nl == en:
        return default
    return "nl" if nl > en else "en"
