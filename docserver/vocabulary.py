"""The words of an index: every token of its chunks with its count, the compounds they split into, and the weighted
stems each token counts as.

Compounds: a chunk containing "vergunningverlening" is indexed with that token and, at ``PART_WEIGHT``, with
"vergunning" and "verlening"; a query is expanded the same way.  A query word that never occurs on its own
("limiet") also looks for the corpus compounds that contain it ("dosislimieten"), at ``PART_WEIGHT``.  The
dictionary is the vocabulary of all indexed documents (``compounds.py``), so the same corpus always gives the same
splits.
"""

from collections import Counter, defaultdict
from collections.abc import Callable, Mapping, Sequence

from textkit import stems, tokenize

from .bm25 import Term
from .compounds import Decompounder
from .documents import Chunk

__all__ = ["HEADER_BOOST", "PART_WEIGHT", "Vocabulary", "chunk_tokens"]

# Title and section words are counted this many times in a chunk.
HEADER_BOOST = 3
# A word found inside a compound counts this much (of one occurrence) in a chunk and in a query.
PART_WEIGHT = 0.5


def chunk_tokens(chunk: Chunk) -> tuple[list[str], list[str]]:
    """(text tokens, title + section tokens) of a chunk."""
    return tokenize(chunk.text), tokenize(f"{chunk.title} {chunk.section}")


class Vocabulary:
    """The tokens of every indexed chunk (``counts``), the compound splits they give (``decompounder``; None: no
    splits) and, per distinct token seen, its weighted stems (worked out once, ``weighted``)."""

    def __init__(self, counts: Counter[str], decompounder: Decompounder | None,
                 weighted: dict[str, list[tuple[str, float]]] | None = None) -> None:
        self.counts = counts
        self.decompounder = decompounder
        self.weighted = {} if weighted is None else weighted  # per distinct token: its stems and its parts'

    @classmethod
    def of(cls, counts: Counter[str], *, decompound: bool) -> "Vocabulary":
        """The vocabulary of ``counts``, splitting compounds when ``decompound``."""
        return cls(counts, Decompounder(counts) if decompound else None)

    def updated(self, counts: Counter[str]) -> tuple["Vocabulary", set[str]]:
        """The vocabulary of ``counts`` (this one's after documents were added and removed), and the tokens whose
        terms changed: the compound splits depend on the counts, so each token's terms are worked out again with
        the new ones (unless the counts are the same)."""
        if counts == self.counts:
            return Vocabulary(counts, self.decompounder, dict(self.weighted)), set()
        fresh = Vocabulary.of(counts, decompound=self.decompounder is not None)
        changed: set[str] = set()
        for token, terms in self.weighted.items():
            if token in counts:
                fresh.weighted[token] = new = fresh.token_terms(token)
                if new != terms:
                    changed.add(token)
        return fresh, changed

    def parts(self, token: str) -> tuple[str, ...]:
        return self.decompounder.parts(token) if self.decompounder is not None else ()

    def split(self, token: str) -> tuple[str, ...]:
        """The parts of a compound token, all of which a chunk must hold to contain it (none without compounds)."""
        return self.decompounder.split(token) if self.decompounder is not None else ()

    def token_terms(self, token: str) -> list[tuple[str, float]]:
        """Every stem ``terms`` gives one occurrence of ``token``, with its weight."""
        return [(stem, weight) for token_stems, weight in self.terms((token,)) for stem in token_stems]

    def frequencies(self, text: Sequence[str], header: Sequence[str]) -> dict[str, float]:
        """A chunk's weighted count per stem: ``terms(text) + terms(header) * HEADER_BOOST`` summed per stem,
        worked out once per distinct token (``weighted``).  The weights are multiples of ``PART_WEIGHT`` (0.5),
        so the sums are exact whatever the order of adding."""
        counts = Counter(text)
        for token, n in Counter(header).items():
            counts[token] += n * HEADER_BOOST
        frequencies: dict[str, float] = defaultdict(float)
        for token, n in counts.items():
            terms = self.weighted.get(token)
            if terms is None:
                terms = self.weighted[token] = self.token_terms(token)
            for stem, w in terms:
                frequencies[stem] += n * w
        return frequencies

    def terms(self, tokens: Sequence[str]) -> list[Term]:
        """Each token at weight 1, then the words inside compound tokens at ``PART_WEIGHT``."""
        whole = [(stems(t), 1.0) for t in tokens]
        return whole + [(stems(p), PART_WEIGHT) for t in tokens for p in self.parts(t)]

    def known_share(self, tokens: Sequence[str], holds: Callable[[str], bool]) -> float:
        """The share of ``tokens`` a collection holds at all (``holds(stem)``: some chunk has it), by any stem of the
        word or of a part of it: about 1 for a question in the collection's language, near 0 for one in another
        (it weighs words against meaning, ``hybrid.py``)."""
        if not tokens:
            return 0.0
        known = sum(any(holds(stem) for stem in stems(t)) or any(holds(stem) for part in self.parts(t)
                                                                  for stem in stems(part)) for t in tokens)
        return known / len(tokens)

    def matched_share(self, tokens: Sequence[str], compounds: Mapping[str, Sequence[str]],
                      contains: Callable[[frozenset[str]], bool]) -> float:
        """The share of the (distinct) query ``tokens`` a chunk holds (``contains(stems)``: any of those stems), 3
        decimals: via any of a token's stems, a compound holding it (``compounds_with``), or (for a compound token)
        all of its parts."""
        if not tokens:
            return 0.0
        found = 0
        for token in tokens:
            variants = [stems(token), *(stems(compound) for compound in compounds.get(token, ()))]
            parts = [stems(p) for p in self.split(token)]
            if any(contains(v) for v in variants) or (parts and all(contains(p) for p in parts)):
                found += 1
        return round(found / len(tokens), 3)

    def compounds_with(self, tokens: Sequence[str]) -> dict[str, list[str]]:
        """Corpus compounds containing the query words that never occur on their own in the corpus."""
        if self.decompounder is None:
            return {}
        extra = frozenset(tokens)
        return {t: self.decompounder.compounds_with(t, extra) for t in tokens if not self.decompounder.known(t)}
