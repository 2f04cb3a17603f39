"""BM25 over postings kept in a database: what a chunk is indexed as, and how a search scores its candidates.

The index in memory (``index.py``) scores every posting of every query stem.  A database engine cannot afford that
on a large library (a question's common words match most chunks), so it reads per stem only its ``CHAMPIONS``
postings of the highest *impact* (a posting's BM25 term score without the IDF, ``impact``: an index on (stem,
impact) hands them over without reading the rest), sums those into a first ranking, and scores its best
``CANDIDATES`` chunks exactly from their own stems and counts (``score``).  A chunk that is not among the
champions of any stem it holds is missed; ranking among the candidates is exactly the index's.  With fewer
postings than ``CHAMPIONS`` (a rare stem, a small collection) nothing is left out: there the ranking is the index's.

The terms are the index's (``vocabulary.py``): Dutch and English stems per token, compound parts at
``PART_WEIGHT``, title and section words ``HEADER_BOOST`` times; BM25 with its ``K1`` and ``B`` and its IDF.
"""

from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from textkit import stems, tokenize

from .bm25 import K1, B, idf, norm
from .documents import Chunk
from .vocabulary import HEADER_BOOST, PART_WEIGHT, Vocabulary, chunk_tokens

__all__ = ["B", "CANDIDATES", "CHAMPIONS", "K1", "ChunkTerms", "Query", "Redone", "candidates", "chunk_terms", "idf",
           "impact", "query", "redo", "resplit_tokens", "score"]

CHAMPIONS = 2000  # per query stem, the postings of highest impact read; more: closer to exact, slower (bench)
CANDIDATES = 300  # chunks of the first ranking scored exactly, at most; a search's limit times PER_HIT, at least
PER_HIT, FEWEST = 10, 100  # FEWEST: so a search for 10 scores 100 (reading each candidate's stems costs, bench)


def candidates(limit: int | None) -> int:
    """How many chunks of the first ranking a search for ``limit`` hits (None: all) scores exactly."""
    return CANDIDATES if limit is None else min(CANDIDATES, max(FEWEST, PER_HIT * limit))


@dataclass(frozen=True, slots=True)
class ChunkTerms:
    """A chunk as BM25 counts it: its weighted count per stem and its length (tokens, header words counted
    ``HEADER_BOOST`` times)."""

    frequencies: dict[str, float]
    length: int


def chunk_terms(vocabulary: Vocabulary, chunk: Chunk) -> ChunkTerms:
    """What ``chunk`` is indexed as with ``vocabulary``'s compound splits."""
    text, header = chunk_tokens(chunk)
    return ChunkTerms(vocabulary.frequencies(text, header), len(text) + len(header) * HEADER_BOOST)


def impact(tf: float, length: float, avgdl: float) -> float:
    """A posting's term score without the IDF: what orders a stem's postings (champions first)."""
    return tf * (K1 + 1) / (tf + norm(length, avgdl or 1.0))


@dataclass(frozen=True, slots=True)
class Query:
    """A query's words as a search counts them: its distinct tokens, the corpus compounds holding the ones the
    corpus only knows inside compounds, and per distinct stem set its weight (a word both whole and a part counts
    whole)."""

    tokens: list[str]
    compounds: dict[str, list[str]]
    weights: dict[frozenset[str], float]

    @property
    def stems(self) -> list[str]:
        """Every stem of every term, once."""
        return sorted({stem for term in self.weights for stem in term})


def query(vocabulary: Vocabulary, text: str) -> Query:
    """``text`` as ``Index.search`` counts it."""
    tokens = list(dict.fromkeys(tokenize(text)))
    compounds = vocabulary.compounds_with(tokens)
    weights: dict[frozenset[str], float] = {}
    terms = vocabulary.terms(tokens) + [(stems(w), PART_WEIGHT) for found in compounds.values() for w in found]
    for token_stems, weight in terms:
        weights[token_stems] = max(weight, weights.get(token_stems, 0.0))
    return Query(tokens, compounds, weights)


def score(weights: Mapping[frozenset[str], float], frequencies: Mapping[str, float], length: float,
          idfs: Mapping[str, float], avgdl: float) -> float:
    """A chunk's BM25 score for a query, as ``bm25.BM25.scores`` gives it: each term once, by its best stem,
    times its weight."""
    total, chunk_norm = 0.0, norm(length, avgdl or 1.0)
    for term, weight in weights.items():
        best = 0.0
        for stem in sorted(term):
            tf = frequencies.get(stem)
            if tf and stem in idfs:
                best = max(best, idfs[stem] * tf * (K1 + 1) / (tf + chunk_norm))
        if best:
            total += best if weight == 1.0 else weight * best
    return total


def resplit_tokens(before: Counter[str], after: Counter[str]) -> tuple[Vocabulary, set[str]]:
    """The vocabulary of the library's token counts ``after`` a change, and the tokens (of those ``before``) whose
    terms it changes: the compound splits depend on the counts (``compounds.py``)."""
    vocabulary = Vocabulary.of(after, decompound=True)
    if not before or after == before:
        return vocabulary, set()
    old = Vocabulary.of(before, decompound=True)
    return vocabulary, {t for t in before.keys() & after.keys() if old.token_terms(t) != vocabulary.token_terms(t)}


@dataclass(frozen=True, slots=True)
class Redone:
    """Chunks whose terms a change of the vocabulary changed: (chunk id, collection, new terms) each, and what that
    does to the statistics (document frequency per (collection, stem), total length per collection)."""

    chunks: list[tuple[int, str, ChunkTerms]]
    df: Counter[tuple[str, str]]
    length: dict[str, float]


def redo(vocabulary: Vocabulary, stored: Iterable[tuple[int, Chunk, ChunkTerms]]) -> Redone:
    """Of ``stored`` chunks (id, chunk, the terms stored for it), those whose terms differ under ``vocabulary``."""
    df: Counter[tuple[str, str]] = Counter()
    length: dict[str, float] = defaultdict(float)
    chunks = []
    for chunk_id, chunk, old in stored:
        terms = chunk_terms(vocabulary, chunk)
        if terms.frequencies == old.frequencies and terms.length == old.length:
            continue
        df.subtract((chunk.collection, stem) for stem in old.frequencies)
        df.update((chunk.collection, stem) for stem in terms.frequencies)
        length[chunk.collection] += terms.length - old.length
        chunks.append((chunk_id, chunk.collection, terms))
    return Redone(chunks, df, length)
