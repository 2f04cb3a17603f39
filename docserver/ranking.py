"""How a search's scores become its ranking: the article a query names first, a long summary's later chunks
discounted, ties broken on (doc_id, chunk_index), and by words and by meaning fused (``hybrid.py``).

Scores are ``(score, slot)`` pairs, a slot indexing the collection's passages (``pairs``: (document, chunk), None
for a passage removed since the last full build, never scored).
"""

import heapq
from bisect import insort
from collections import Counter
from collections.abc import Callable, Sequence

import numpy as np

from textkit.articles import ARTICLE_REF_ONE_LETTER, SECTION_ARTICLE

from .documents import Chunk, Document
from .hybrid import FUSION_DEPTH, SlotVectors, fuse

__all__ = ["ARTICLE_BOOST", "SUMMARY_CHUNKS", "SUMMARY_DECAY", "article_of", "best", "boost_articles", "fused",
           "named_articles", "ordered"]

Pairs = Sequence[tuple[Document, Chunk] | None]

# A query that names an article ("artikel 15a", "article 7") ranks the chunk *of* that article (ingested law
# texts are chunked per article) above chunks that merely mention it, such as summaries quoting it.
ARTICLE_BOOST = 2.0
# A summary document's chunks after its first `SUMMARY_CHUNKS` count `SUMMARY_DECAY` less each: one long summary
# that matches everywhere must not push the official article it summarises out of the top 10.
SUMMARY_CHUNKS, SUMMARY_DECAY = 2, 0.5


def boost_articles(scored: list[tuple[float, int]], pairs: Pairs, query: str) -> list[tuple[float, int]]:
    """``scored`` with the chunks of the articles ``query`` names (``ARTICLE_REF_ONE_LETTER``) counted
    ``ARTICLE_BOOST`` times."""
    articles = set(named_articles(query))
    if not articles:
        return scored
    return [(score * (ARTICLE_BOOST if article_of(pairs[i][1]) in articles else 1.0), i)  # type: ignore[index]
            for score, i in scored]


def named_articles(query: str) -> list[str]:
    """The articles ``query`` names ("artikel 15a" -> "15a"), once each, sorted."""
    return sorted({m.lower() for m in ARTICLE_REF_ONE_LETTER.findall(query)})


def article_of(chunk: Chunk) -> str | None:
    """The article a chunk's section heading starts with ("Artikel 15a (deel 2)" -> "15a")."""
    match = SECTION_ARTICLE.match(chunk.section)
    return match.group(1).lower() if match else None


def _order(pairs: Pairs) -> Callable[[tuple[float, int]], tuple[float, str, int]]:
    """The sort key of (score, slot): best first, ties by (doc_id, chunk_index)."""
    return lambda s: (-s[0], pairs[s[1]][0].doc_id, pairs[s[1]][1].chunk_index)  # type: ignore[index]


def _diversified(scored: list[tuple[float, int]], pairs: Pairs) -> list[tuple[float, int]]:
    """The ranking (best first) with a summary document's later chunks discounted, re-sorted: scores stay in
    rank order, nothing is dropped."""
    seen: Counter[str] = Counter()
    out = []
    for score, i in scored:
        document = pairs[i][0]  # type: ignore[index]
        seen[document.doc_id] += 1
        extra = seen[document.doc_id] - SUMMARY_CHUNKS
        out.append((score * SUMMARY_DECAY ** extra if document.kind == "summary" and extra > 0 else score, i))
    out.sort(key=_order(pairs))
    return out


def best(scored: list[tuple[float, int]], pairs: Pairs, limit: int | None) -> list[tuple[float, int]]:
    """``_diversified`` of the ranking cut to ``limit``, without sorting every hit: hits come best first off a heap
    until the next one, even undiscounted, ranks below the ``limit``-th kept (a discount only lowers a score), so a
    query matching most of 20,000 chunks sorts a few dozen of them."""
    if limit is None:
        return _diversified(sorted(scored, key=_order(pairs)), pairs)
    # Popped by (score, slot): a document's chunks have ascending slots in chunk order, so its equal-scored chunks
    # come in the ranking's order and its discounts are the same; other ties are settled by ``kept``'s order.
    heap = [(-score, i) for score, i in scored]
    heapq.heapify(heap)
    seen: Counter[str] = Counter()
    kept: list[tuple[float, str, int, int]] = []  # (-score, doc_id, chunk_index, i), best first, at most ``limit``
    while heap and limit > 0:
        negative, i = heapq.heappop(heap)
        if len(kept) == limit and negative > kept[-1][0]:
            break
        document, chunk = pairs[i]  # type: ignore[misc]
        seen[document.doc_id] += 1
        extra = seen[document.doc_id] - SUMMARY_CHUNKS
        if document.kind == "summary" and extra > 0:
            negative = -(-negative * SUMMARY_DECAY**extra)
        insort(kept, (negative, document.doc_id, chunk.chunk_index, i))
        del kept[limit:]
    return [(-negative, i) for negative, _, _, i in kept]


def fused(scored: list[tuple[float, int]], pairs: Pairs, semantic: SlotVectors, query_vector: np.ndarray,
          limit: int | None, doc_id: str | None, weights: tuple[float, float]
          ) -> tuple[list[tuple[float, int]], dict[int, float]]:
    """(the ranking by words, ``scored``, fused with that by meaning, best first, cut to ``limit``; its passages'
    cosines to the query). ``doc_id``: of that document only."""
    depth = max(limit or len(pairs), FUSION_DEPTH)
    allowed = None
    if doc_id is not None:
        slots = semantic.slots.tolist()
        allowed = np.fromiter((pairs[s][0].doc_id == doc_id for s in slots), bool)  # type: ignore[index]
    cosines = semantic.similarities(query_vector)
    scores = fuse(best(scored, pairs, depth), semantic.nearest(cosines, depth, allowed), weights=weights)
    ranked = ordered(scores, pairs, limit)
    return ranked, semantic.at(cosines, [i for _, i in ranked])


def ordered(scores: dict[int, float], pairs: Pairs, limit: int | None) -> list[tuple[float, int]]:
    """Fused ``scores`` (slot -> score) as a ranking, best first, ties by (doc_id, chunk_index), cut to ``limit``."""
    ranked = sorted(((score, i) for i, score in scores.items()), key=_order(pairs))
    return ranked[:limit] if limit is not None else ranked
