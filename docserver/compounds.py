"""Splitting Dutch compounds into known words: "stralingsbescherming" -> straling + bescherming.

Dutch writes compounds as one word, so without help a query for "vergunning"
misses a passage about "vergunningverlening".  Instead of shipping a word
list (or a language model) the dictionary is the vocabulary of the indexed
corpus itself: a token is split when it is the concatenation of known words,
optionally joined by a Dutch linking morpheme ("s", "en", "e").  The last
part may also be an inflected form of a known word ("verlening" is accepted
because "verlenen" shares its stem).  When several splits are possible, the
one with the fewest parts wins, then the one whose parts are most frequent in
the corpus (geometric mean, after Koehn & Knight 2003), then the earliest
split point, so the result depends only on the vocabulary: deterministic.

A word that occurs only inside compounds ("limiet" in "dosislimieten") is
not in that dictionary; ``compounds_with`` finds such compounds for a query
word by treating the words of the query as known too.
"""

import math
from bisect import bisect_right
from collections import Counter
from collections.abc import Iterable
from itertools import accumulate

from textkit import STOPWORDS, stems

__all__ = ["LINKERS", "MIN_PART", "Decompounder"]

MIN_PART = 4  # shorter "words" ("lid", "wet") split too many unrelated words apart
MIN_STEM = 5  # an inflected last part must share a stem at least this long
LINKERS = ("s", "en", "e")
# Prepositions and adverbs that start many words without being a meaningful
# part of them ("ondernemer" is not about "onder", "vrijstelling" not about "vrij").
PARTICLES = frozenset(
    "onder achter boven binnen buiten tussen daar waar weer vrij mede samen terug voort verder".split()
)

_EXCLUDED = STOPWORDS | PARTICLES

_Split = tuple[tuple[str, ...], tuple[int, ...]]  # (parts, their corpus frequencies)


def _is_word(token: str) -> bool:
    """Whether ``token`` may be a part of a compound."""
    return len(token) >= MIN_PART and token.isalpha() and token not in _EXCLUDED


class Decompounder:
    """Splits tokens into words of a vocabulary (normalized tokens with their corpus frequency)."""

    def __init__(self, vocabulary: Counter[str] | Iterable[str]) -> None:
        counts = vocabulary if isinstance(vocabulary, Counter) else Counter(vocabulary)
        self._words: dict[str, int] = {w: n for w, n in counts.items() if _is_word(w)}
        self._stems: Counter[str] = Counter()
        for word, n in self._words.items():
            for stem in stems(word):
                if len(stem) >= MIN_STEM:
                    self._stems[stem] += n
        self._compounds = sorted(w for w in self._words if len(w) >= 2 * MIN_PART)
        # All compounds in one newline-separated string: `str.find` scans it at C speed for the compounds that
        # contain a fragment, instead of a Python loop over the whole vocabulary for every unknown query word.
        self._blob = "\n".join(self._compounds)
        self._starts = list(accumulate((len(w) + 1 for w in self._compounds[:-1]), initial=0))
        self._splits: dict[str, _Split | None] = {}

    def known(self, word: str) -> bool:
        return word in self._words

    def split(self, token: str, extra: frozenset[str] = frozenset()) -> tuple[str, ...]:
        """The best split of ``token`` into known words (plus ``extra`` ones), or ``()`` when there is none."""
        extra = frozenset(w for w in extra if _is_word(w))
        # Only corpus words are remembered, so a long-running server's memory does not grow with its queries.
        best = self._best(token, extra, self._splits if not extra and token in self._words else {})
        return best[0] if best else ()

    def parts(self, token: str, extra: frozenset[str] = frozenset()) -> tuple[str, ...]:
        """All words inside ``token``, recursively: kernenergiecentrale -> kernenergie, kern, energie, centrale."""
        found: dict[str, None] = {}
        for part in self.split(token, extra):
            found[part] = None
            found.update(dict.fromkeys(self.parts(part, extra)))
        return tuple(found)

    def compounds_with(self, word: str, extra: frozenset[str]) -> list[str]:
        """Corpus words that contain ``word`` (or an inflection) as a part when the ``extra`` words are known too.

        For query words that never occur on their own in the corpus: "limiet" finds
        "dosislimieten", and "diepte" with "verdediging" finds "diepteverdediging".
        """
        word_stems = stems(word)
        candidates = sorted({i for s in word_stems if len(s) >= MIN_PART for i in self._containing(s)})
        return [
            w
            for w in (self._compounds[i] for i in candidates)
            if w != word and any(stems(p) & word_stems for p in self.parts(w, extra | {word}))
        ]

    def _containing(self, fragment: str) -> set[int]:
        """Indexes (into the sorted compounds) of the compounds that contain ``fragment``."""
        found: set[int] = set()
        at = self._blob.find(fragment)
        while at >= 0:
            i = bisect_right(self._starts, at) - 1
            found.add(i)
            at = self._blob.find(fragment, self._starts[i] + len(self._compounds[i]) + 1)
        return found

    def _frequency(self, word: str, last: bool, extra: frozenset[str]) -> int:
        if word in self._words:
            return self._words[word]
        if word in extra:
            return 1
        if last:  # the head noun of a compound may be inflected: "-verlening" <- "verlenen"
            word_stems = [s for s in stems(word) if len(s) >= MIN_STEM]
            corpus = max((self._stems[s] for s in word_stems), default=0)
            return corpus or int(any(s in stems(e) for e in extra for s in word_stems))
        return 0

    def _best(self, token: str, extra: frozenset[str], cache: dict[str, _Split | None]) -> _Split | None:
        if token in cache:
            return cache[token]
        best: _Split | None = None
        best_key: tuple[int, float, int] | None = None
        if token.isalpha() and len(token) >= 2 * MIN_PART and token not in STOPWORDS:
            for i in range(MIN_PART, len(token) - MIN_PART + 1):
                prefix, rest = token[:i], token[i:]
                heads = [prefix] + [prefix[: -len(s)] for s in LINKERS if prefix.endswith(s) and i - len(s) >= MIN_PART]
                for head in heads:
                    head_n = self._frequency(head, False, extra)
                    if not head_n:
                        continue
                    rest_n = self._frequency(rest, True, extra)
                    candidate: _Split
                    if rest_n:
                        candidate = ((head, rest), (head_n, rest_n))
                    elif (sub := self._best(rest, extra, cache)) is not None:
                        candidate = ((head, *sub[0]), (head_n, *sub[1]))
                    else:
                        continue
                    counts = candidate[1]
                    key = (len(counts), -(math.prod(counts) ** (1 / len(counts))), i)
                    if best_key is None or key < best_key:
                        best, best_key = candidate, key
        cache[token] = best
        return best
