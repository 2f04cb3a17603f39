"""Text analysis shared by the document server's index and the agent's extractive answers.

A standalone package on purpose: the agent (``graph``) works against any MCP document server,
so it must not import the reference server (``docserver``); both import this instead.

Pipeline: Unicode NFKD accent folding + casefold, split on anything that is
not a letter or digit, drop a small Dutch/English stopword list, then stem.
The corpus mixes Dutch and English, and a query may be in either language,
so every token is stemmed with BOTH the Dutch and the English Snowball
stemmer; a token is represented by the set of its stems and two tokens match
when their stem sets overlap.  Tokens containing digits ("2", "15a", "2033")
are kept verbatim, and dotted numbers stay one token ("artikel 3.1" must not
match every passage that contains a 3 and a 1).

Beside it: ``textkit.language`` (Dutch or English), ``textkit.articles`` (how an article of a law is named),
``textkit.sentences`` (where a sentence ends) and ``textkit.untrusted`` (text written by others, made safe to show).
"""

import re
import threading
import unicodedata
from functools import lru_cache

import snowballstemmer

__all__ = ["STOPWORDS", "analyze", "normalize", "stems", "tokenize"]

STOPWORDS: frozenset[str] = frozenset(
    # Dutch
    """
    aan al als bij dan dat de deze die dit door een en er geen had heb hebben
    heeft het hier hij hoe hun ik in is je kan kon kunnen maar me meer men met
    mij moet moeten na naar niet nog nu of om omdat ons ook op over te tegen
    toe tot u uit van vanaf veel voor waar wanneer want waren was wat we wel
    welk welke werd werden wie wij wordt worden zal ze zich zij zijn zo zoals
    zonder zou zullen
    """.split()
    # English
    + """
    a about an and are as at be been being but by can could did do does for
    from had has have he her his how i if into it its may might must no not
    of on or our shall she should so than that the their them then there
    these they this those to was we were what when where which who will with
    would you your
    """.split()
)

# A dotted number with an optional letter suffix ("3.1", "9.1.3", "4.2a"), or a run of letters/digits.
_WORD = re.compile(r"\d+(?:\.\d+)+[^\W_]*|[^\W_]+")


class _Stemmers(threading.local):
    """A Dutch and an English Snowball stemmer per thread: a stemmer keeps its state on itself, and the document
    server rebuilds its index in a worker thread while the event loop stems queries."""

    def __init__(self) -> None:
        self.dutch = snowballstemmer.stemmer("dutch")
        self.english = snowballstemmer.stemmer("english")


_STEMMERS = _Stemmers()


class _StripCombining(dict):
    """`str.translate` table that drops combining marks, filled lazily per character seen (an exact and
    much faster equivalent of filtering every character through `unicodedata.combining`)."""

    def __missing__(self, codepoint: int) -> str | None:
        value = None if unicodedata.combining(chr(codepoint)) else chr(codepoint)
        self[codepoint] = value
        return value


_STRIP_COMBINING = _StripCombining()


def normalize(text: str) -> str:
    """Casefold and strip accents: "Überprüfung Één" -> "uberprufung een"."""
    if text.isascii():  # NFKD leaves ASCII alone and it has no combining marks
        return text.casefold()
    return unicodedata.normalize("NFKD", text).translate(_STRIP_COMBINING).casefold()


def tokenize(text: str) -> list[str]:
    """Normalized word tokens without stopwords, in text order."""
    return [t for t in _WORD.findall(normalize(text)) if t not in STOPWORDS]


@lru_cache(maxsize=65536)  # shared by all threads: a token's stems do not depend on the thread
def stems(token: str) -> frozenset[str]:
    """The Dutch and English stems of one normalized token (any thread may call it)."""
    if any(c.isdigit() for c in token):
        return frozenset((token,))
    return frozenset((_STEMMERS.dutch.stemWord(token), _STEMMERS.english.stemWord(token)))


def analyze(text: str) -> list[frozenset[str]]:
    """One stem set per token of ``text``; the unit both index and queries use."""
    return [stems(t) for t in tokenize(text)]
