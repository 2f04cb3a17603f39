"""``textkit.stems`` and ``textkit.analyze`` that any thread may call, for the index.

A running server rebuilds its index in a worker thread when documents are ingested (``live.py``)
while the event loop keeps answering searches, and in the embedded case the agent stems text on
that loop too.  A Snowball stemmer object keeps its state on itself, so two threads stemming with
the one pair of stemmers in ``textkit`` can corrupt each other's stems.  Here each thread gets its
own pair; the results are textkit's (same rule, same stemmers; a test compares them over the
bundled corpus), so the index and the agent still agree on every stem.
"""

import threading
from functools import lru_cache

import snowballstemmer

from textkit import tokenize

__all__ = ["analyze", "stems"]


class _Stemmers(threading.local):
    """A Dutch and an English Snowball stemmer per thread, made on first use in that thread."""

    def __init__(self) -> None:
        self.dutch = snowballstemmer.stemmer("dutch")
        self.english = snowballstemmer.stemmer("english")


_STEMMERS = _Stemmers()


@lru_cache(maxsize=65536)  # shared by all threads: a token's stems do not depend on the thread
def stems(token: str) -> frozenset[str]:
    """The Dutch and English stems of one normalized token (``textkit.stems``, thread-safe)."""
    if any(c.isdigit() for c in token):
        return frozenset((token,))
    return frozenset((_STEMMERS.dutch.stemWord(token), _STEMMERS.english.stemWord(token)))


def analyze(text: str) -> list[frozenset[str]]:
    """One stem set per token of ``text`` (``textkit.analyze``, thread-safe)."""
    return [stems(t) for t in tokenize(text)]
