"""In-memory BM25 index over document chunks, one BM25 model per collection.

BM25 is written out by hand (rather than taken from rank-bm25 or similar)
because we need things those packages do not give together: statistics and
filtering per collection, a field boost for title/section words, stem *sets*
per token (Dutch + English stems, see ``textkit``), weighted terms for the
parts of Dutch compounds (see ``compounds.py``), and fully deterministic
ranking with ties broken on (doc_id, chunk_index).  A corpus of a few
thousand chunks needs no numpy; a dict-based inverted index answers in
milliseconds.

Compounds: a chunk containing "vergunningverlening" is indexed with that
token and, at ``PART_WEIGHT``, with "vergunning" and "verlening"; a query is
expanded the same way.  A query word that never occurs on its own ("limiet")
also looks for the corpus compounds that contain it ("dosislimieten"), at
``PART_WEIGHT``.  The dictionary is the vocabulary of all indexed documents,
so the same corpus always gives the same splits.
"""

import logging
import math
import re
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from textkit import analyze, stems, tokenize

from .compounds import Decompounder
from .corpus import BUNDLED_CORPUS, Chunk, Collection, Document, load_collections, load_corpus
from .store import IndexVersion, load_snapshot, resolve_index_path

__all__ = ["HEADER_BOOST", "PART_WEIGHT", "Hit", "Index"]

logger = logging.getLogger("docserver")

# Title and section words are counted this many times in a chunk.
HEADER_BOOST = 3
# A word found inside a compound counts this much (of one occurrence) in a chunk and in a query.
PART_WEIGHT = 0.5

Term = tuple[frozenset[str], float]  # the stems of one token and its weight

# A query that names an article ("artikel 15a", "article 7") ranks the chunk *of* that article (ingested law
# texts are chunked per article) above chunks that merely mention it, such as summaries quoting it.
ARTICLE_REF = re.compile(r"\b(?:artikel|art\.|article)\s+(\d+[a-z]?(?:\.\d+[a-z]?)*)", re.IGNORECASE)
ARTICLE_BOOST = 2.0


def _article_of(chunk: Chunk) -> str | None:
    match = re.match(r"\s*(?:artikel|article)\s+(\d+[a-z]?(?:\.\d+[a-z]?)*)\b", chunk.section, re.IGNORECASE)
    return match.group(1).lower() if match else None


# A summary document's chunks after its first `SUMMARY_CHUNKS` count `SUMMARY_DECAY` less each: one long summary
# that matches everywhere must not push the official article it summarises out of the top 10.
SUMMARY_CHUNKS, SUMMARY_DECAY = 2, 0.5


def _diversified(scored: list[tuple[float, int]], pairs: Sequence[tuple[Document, Chunk]]) -> list[tuple[float, int]]:
    """The ranking (best first) with a summary document's later chunks discounted, re-sorted: scores stay in
    rank order, nothing is dropped."""
    seen: Counter[str] = Counter()
    out = []
    for score, i in scored:
        document = pairs[i][0]
        seen[document.doc_id] += 1
        extra = seen[document.doc_id] - SUMMARY_CHUNKS
        out.append((score * SUMMARY_DECAY ** extra if document.kind == "summary" and extra > 0 else score, i))
    out.sort(key=lambda s: (-s[0], pairs[s[1]][0].doc_id, pairs[s[1]][1].chunk_index))
    return out


@dataclass(frozen=True, slots=True)
class Hit:
    document: Document
    chunk: Chunk
    score: float  # raw BM25 score
    relevance: float  # score / best score of the same query, 0..1, 4 decimals
    matched_terms: float = 0.0  # share of the distinct query tokens found in the chunk, 0..1, 3 decimals


class _BM25:
    """Okapi BM25 over a fixed list of weighted term streams; ``lengths`` count whole tokens only."""

    def __init__(self, streams: Sequence[Sequence[Term]], lengths: Sequence[int], k1: float, b: float) -> None:
        self.k1, self.b = k1, b
        self.lengths = list(lengths)
        self.avgdl = (sum(self.lengths) / len(self.lengths) if self.lengths else 0.0) or 1.0
        self.postings: dict[str, list[tuple[int, float]]] = defaultdict(list)
        for i, stream in enumerate(streams):
            counts: dict[str, float] = defaultdict(float)
            for token_stems, weight in stream:
                for stem in token_stems:
                    counts[stem] += weight
            for stem, tf in counts.items():
                self.postings[stem].append((i, tf))
        n = len(self.lengths)
        # Lucene-style IDF: always positive, even for terms in most chunks.
        self.idf = {t: math.log(1 + (n - len(p) + 0.5) / (len(p) + 0.5)) for t, p in self.postings.items()}

    def scores(self, query: Iterable[Term]) -> dict[int, float]:
        """Score per stream index; a query term counts once, via its best-matching stem, times its weight."""
        total: dict[int, float] = defaultdict(float)
        for token_stems, weight in query:
            best: dict[int, float] = {}
            for stem in sorted(token_stems):
                idf = self.idf.get(stem)
                if idf is None:
                    continue
                for i, tf in self.postings[stem]:
                    norm = self.k1 * (1 - self.b + self.b * self.lengths[i] / self.avgdl)
                    score = idf * tf * (self.k1 + 1) / (tf + norm)
                    if score > best.get(i, 0.0):
                        best[i] = score
            for i, score in best.items():
                total[i] += weight * score
        return total

    def containing(self, token_stems: frozenset[str]) -> set[int]:
        """Indexes of the streams that contain any of ``token_stems``."""
        return {i for stem in token_stems for i, _ in self.postings.get(stem, ())}


class Index:
    """Documents grouped by collection with a chunk-level BM25 model per collection."""

    def __init__(
        self,
        documents: Iterable[Document],
        collections: Iterable[Collection] = (),
        *,
        k1: float = 1.5,
        b: float = 0.75,
        decompound: bool = True,
    ) -> None:
        self._collections = {c.name: c for c in collections}
        # The version of the index file the documents were read from (``Index.load``); None: no file.
        self.source_version: IndexVersion | None = None
        self._documents: dict[str, dict[str, Document]] = {name: {} for name in self._collections}
        for doc in sorted(documents, key=lambda d: (d.collection, d.doc_id)):
            if doc.collection not in self._collections:
                self._collections[doc.collection] = Collection(doc.collection, doc.collection)
                self._documents[doc.collection] = {}
            self._documents[doc.collection][doc.doc_id] = doc
        # (text tokens, title + section tokens) per chunk, tokenized once for the vocabulary and the streams
        tokens = {
            name: [(tokenize(c.text), tokenize(f"{c.title} {c.section}")) for d in docs.values() for c in d.chunks]
            for name, docs in self._documents.items()
        }
        vocabulary = Counter(t for chunks in tokens.values() for text, header in chunks for t in text + header)
        self._decompounder = Decompounder(vocabulary) if decompound else None
        self._chunks: dict[str, list[tuple[Document, Chunk]]] = {}
        self._bm25: dict[str, _BM25] = {}
        self._titles: dict[str, dict[str, frozenset[str]]] = {}
        for name, docs in self._documents.items():
            self._chunks[name] = [(d, c) for d in docs.values() for c in d.chunks]
            streams = [self._terms(text) + self._terms(header) * HEADER_BOOST for text, header in tokens[name]]
            lengths = [len(text) + len(header) * HEADER_BOOST for text, header in tokens[name]]
            self._bm25[name] = _BM25(streams, lengths, k1, b)
            self._titles[name] = {d.doc_id: frozenset().union(*analyze(d.title)) for d in docs.values()}

    def _parts(self, token: str) -> tuple[str, ...]:
        return self._decompounder.parts(token) if self._decompounder is not None else ()

    def _terms(self, tokens: Sequence[str]) -> list[Term]:
        """Each token at weight 1, then the words inside compound tokens at ``PART_WEIGHT``."""
        whole = [(stems(t), 1.0) for t in tokens]
        return whole + [(stems(p), PART_WEIGHT) for t in tokens for p in self._parts(t)]

    @classmethod
    def from_directory(cls, corpus_dir: Path | str) -> "Index":
        """The Markdown corpus in ``corpus_dir`` only."""
        return cls(load_corpus(corpus_dir), load_collections(corpus_dir))

    @classmethod
    def load(cls, corpus_dir: Path | str | None = None, *, index_path: Path | str | None = None) -> "Index":
        """The corpus directory (default: the bundled corpus) plus every document of the persisted index.

        ``index_path`` defaults to ``$DOCSERVER_INDEX`` or the checkout's ``data/`` folder (see
        ``store.py``); a missing file means nothing was ingested.  An ingested document replaces a
        corpus document with the same collection and doc_id.  ``source_version`` records which
        version of the file was read, so a server can tell when to load again (``live.py``).
        """
        root = Path(corpus_dir) if corpus_dir is not None else BUNDLED_CORPUS
        documents = {(d.collection, d.doc_id): d for d in load_corpus(root)}
        path = resolve_index_path(index_path)
        version, persisted = load_snapshot(path)
        for doc in persisted:
            if (doc.collection, doc.doc_id) in documents:
                logger.warning("ingested %s/%s replaces the corpus document", doc.collection, doc.doc_id)
            documents[(doc.collection, doc.doc_id)] = doc
        if persisted:
            logger.info("%d ingested documents from %s", len(persisted), path)
        index = cls(documents.values(), load_collections(root))
        index.source_version = version
        return index

    @property
    def collections(self) -> list[Collection]:
        return list(self._collections.values())

    def collection(self, name: str) -> Collection | None:
        return self._collections.get(name)

    def documents(self, collection: str | None = None) -> list[Document]:
        names = [collection] if collection is not None else list(self._documents)
        return [d for n in names for d in self._documents.get(n, {}).values()]

    def document(self, collection: str, doc_id: str) -> Document | None:
        return self._documents.get(collection, {}).get(doc_id)

    @property
    def chunk_count(self) -> int:
        return sum(len(pairs) for pairs in self._chunks.values())

    def search(self, query: str, collection: str, *, limit: int | None = 10, doc_id: str | None = None) -> list[Hit]:
        """Best chunks of ``collection`` (optionally of one document) for ``query``."""
        if collection not in self._bm25:
            raise KeyError(collection)
        bm25, pairs = self._bm25[collection], self._chunks[collection]
        tokens = list(dict.fromkeys(tokenize(query)))
        compounds = self._compounds_with(tokens)
        weights: dict[frozenset[str], float] = {}  # distinct stem sets; a word both whole and a part counts whole
        terms = self._terms(tokens) + [(stems(w), PART_WEIGHT) for found in compounds.values() for w in found]
        for token_stems, weight in terms:
            weights[token_stems] = max(weight, weights.get(token_stems, 0.0))
        articles = {m.lower() for m in ARTICLE_REF.findall(query)}
        scored = [
            (score * (ARTICLE_BOOST if articles and _article_of(pairs[i][1]) in articles else 1.0), i)
            for i, score in bm25.scores(weights.items()).items()
            if score > 0 and (doc_id is None or pairs[i][0].doc_id == doc_id)
        ]
        scored.sort(key=lambda s: (-s[0], pairs[s[1]][0].doc_id, pairs[s[1]][1].chunk_index))
        scored = _diversified(scored, pairs)[:limit]
        top = scored[0][0] if scored else 1.0
        matched = self._matched_terms(bm25, tokens, compounds, [i for _, i in scored])
        return [Hit(*pairs[i], score, round(score / top, 4), matched[i]) for score, i in scored]

    def _compounds_with(self, tokens: Sequence[str]) -> dict[str, list[str]]:
        """Corpus compounds containing the query words that never occur on their own in the corpus."""
        if self._decompounder is None:
            return {}
        extra = frozenset(tokens)
        return {t: self._decompounder.compounds_with(t, extra) for t in tokens if not self._decompounder.known(t)}

    def _matched_terms(
        self, bm25: _BM25, tokens: Sequence[str], compounds: dict[str, list[str]], hits: Sequence[int]
    ) -> dict[int, float]:
        """Per hit, the share of the (distinct) query tokens it contains: via any of their stems, a compound
        containing them, or (for a compound token) all of its parts."""
        found: dict[int, int] = dict.fromkeys(hits, 0)
        for token in tokens:
            containing = bm25.containing(stems(token))
            for compound in compounds.get(token, ()):
                containing |= bm25.containing(stems(compound))
            parts = self._decompounder.split(token) if self._decompounder is not None else ()
            if parts:
                containing |= set.intersection(*(bm25.containing(stems(p)) for p in parts))
            for i in found.keys() & containing:
                found[i] += 1
        return {i: round(n / len(tokens), 3) for i, n in found.items()}

    def match_titles(self, query: str, collection: str) -> list[Document]:
        """Documents whose title shares a stem with ``query``; most matched query words first."""
        query_tokens = dict.fromkeys(analyze(query))
        matches: list[tuple[int, str]] = []
        for doc_id, title_stems in self._titles.get(collection, {}).items():
            hits = sum(1 for token in query_tokens if token & title_stems)
            if hits:
                matches.append((-hits, doc_id))
        return [self._documents[collection][doc_id] for _, doc_id in sorted(matches)]
