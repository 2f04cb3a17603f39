"""Language detection between Dutch and English: the function-word rule of ``textkit.language``, cached."""

from __future__ import annotations

from functools import lru_cache

from graph.models import Language
from textkit.language import detect_language as _detect


@lru_cache(maxsize=2048)
def detect_language(text: str, default: Language = "nl") -> Language:
    """Cached: the claim check asks it of the same passages for every sentence that cites them."""
    return _detect(text, default)
