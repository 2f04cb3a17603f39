"""In-memory BM25 index over document chunks, one BM25 model per collection.

BM25 is written out by hand (rather than taken from rank-bm25 or similar)
because we need things those packages do not give together: statistics and
filtering per collection, a field boost for title/section words, stem *sets*
per token (Dutch + English stems, see ``textkit``), weighted terms for the
parts of Dutch compounds (see ``compounds.py``), and fully deterministic
ranking with ties broken on (doc_id, chunk_index).  No numpy: postings are
stdlib arrays (a 20,000-chunk index answers in milliseconds and takes a few
hundred MB), only the best hits are sorted, and a running server's index is
updated with the documents that changed instead of built again (``previous``;
``python -m bench --only scale`` measures all of this).

Compounds: a chunk containing "vergunningverlening" is indexed with that
token and, at ``PART_WEIGHT``, with "vergunning" and "verlening"; a query is
expanded the same way.  A query word that never occurs on its own ("limiet")
also looks for the corpus compounds that contain it ("dosislimieten"), at
``PART_WEIGHT``.  The dictionary is the vocabulary of all indexed documents,
so the same corpus always gives the same splits.
"""

import hashlib
import heapq
import logging
import re
from bisect import insort
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from textkit import analyze, stems, tokenize

from . import hybrid
from .bm25 import BM25, Term
from .compounds import Decompounder
from .corpus import BUNDLED_CORPUS, Chunk, Collection, Document, chunk_text, load_collections, load_corpus
from .hybrid import FUSION_DEPTH, SlotVectors, fuse
from .sentences import Match, SentenceVectors
from .store import IndexVersion, Snapshot, read_snapshot, resolve_index_path
from .vectors import file_vectors, passage_digest

__all__ = ["HEADER_BOOST", "PART_WEIGHT", "Hit", "Index"]

logger = logging.getLogger("docserver")

# Title and section words are counted this many times in a chunk.
HEADER_BOOST = 3
# A word found inside a compound counts this much (of one occurrence) in a chunk and in a query.
PART_WEIGHT = 0.5

# A query that names an article ("artikel 15a", "article 7") ranks the chunk *of* that article (ingested law
# texts are chunked per article) above chunks that merely mention it, such as summaries quoting it.
ARTICLE_REF = re.compile(r"\b(?:artikel|art\.|article)\s+(\d+[a-z]?(?:\.\d+[a-z]?)*)", re.IGNORECASE)
ARTICLE_BOOST = 2.0


def _chunk_tokens(chunk: Chunk) -> tuple[list[str], list[str]]:
    """(text tokens, title + section tokens) of a chunk."""
    return tokenize(chunk.text), tokenize(f"{chunk.title} {chunk.section}")


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


def _best(
    scored: list[tuple[float, int]], pairs: Sequence[tuple[Document, Chunk]], limit: int | None
) -> list[tuple[float, int]]:
    """``_diversified`` of the ranking cut to ``limit``, without sorting every hit: hits come best first off a heap
    until the next one, even undiscounted, ranks below the ``limit``-th kept (a discount only lowers a score), so a
    query matching most of 20,000 chunks sorts a few dozen of them."""
    if limit is None:
        return _diversified(
            sorted(scored, key=lambda s: (-s[0], pairs[s[1]][0].doc_id, pairs[s[1]][1].chunk_index)), pairs
        )
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
        doc_id, chunk_index = pairs[i][0].doc_id, pairs[i][1].chunk_index
        seen[doc_id] += 1
        extra = seen[doc_id] - SUMMARY_CHUNKS
        if pairs[i][0].kind == "summary" and extra > 0:
            negative = -(-negative * SUMMARY_DECAY**extra)
        insort(kept, (negative, doc_id, chunk_index, i))
        del kept[limit:]
    return [(-negative, i) for negative, _, _, i in kept]


def _fingerprint(documents: Iterable[Document]) -> str:
    """A digest of what ``documents`` say (ids, titles, links, every chunk): it changes when any of that does."""
    digest = hashlib.sha256()
    for d in sorted(documents, key=lambda d: d.doc_id):
        digest.update(repr((d.doc_id, d.title, d.year, d.url, d.kind, d.language, d.disclaimer, d.chunks)).encode())
    return digest.hexdigest()[:12]


def _versions(collections: Iterable[Collection], corpus: Iterable[Document], snapshot: Snapshot) -> dict[str, str]:
    """Each collection's version: the index file's counter for it (``schema.collection_versions``; the file's
    generation when code from before the counters wrote its documents), then a digest of its corpus documents."""
    from_corpus: dict[str, list[Document]] = defaultdict(list)
    for doc in corpus:
        from_corpus[doc.collection].append(doc)
    in_file = {doc.collection for doc in snapshot.documents}
    generation = snapshot.version.generation if snapshot.version is not None else 0
    versions = {}
    for name in (c.name for c in collections):
        counted = snapshot.versions.get(name) or (f"g{generation}" if name in in_file else None)
        parts = [counted, "c" + _fingerprint(from_corpus[name]) if name in from_corpus else None]
        versions[name] = "+".join(p for p in parts if p) or "c" + _fingerprint(())
    return versions


@dataclass(frozen=True, slots=True)
class Hit:
    document: Document
    chunk: Chunk
    score: float  # raw BM25 score (0: found by meaning alone)
    relevance: float  # score / best score of the same query (searched by meaning too: of the fused score), 0..1
    matched_terms: float = 0.0  # share of the distinct query tokens found in the chunk, 0..1, 3 decimals
    similarity: float | None = None  # cosine of the passage's vector to the query's, 4 decimals; None: not searched
    # by meaning, or the passage has no vector yet
    sentences: tuple[Match, ...] = ()  # its sentences that say what the query asks, by meaning (``sentences.py``)


# Looks up vectors by passage digest (``Index.load``: the index served before, then the index file).
VectorLookup = Callable[[Sequence[str]], Mapping[str, np.ndarray]]


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
        previous: "Index | None" = None,
        vector_key: str | None = None,
        vectors: VectorLookup | Mapping[str, np.ndarray] | None = None,
        sentences: SentenceVectors | None = None,
    ) -> None:
        """``previous``: an index of (mostly) the same documents built with the same settings, reused so that
        only what changed is indexed (a running server's reload, ``live.py``); the result is the same.
        ``vector_key``: the vector space the passages are searched by meaning in (``EmbeddingSettings.key``;
        None: by words only), ``vectors`` their vectors by ``passage_digest`` (a passage without one waits);
        ``sentences``: their sentences' vectors, when searches name the sentences that match (a passage waits for
        those too)."""
        self._collections = {c.name: c for c in collections}
        # The version of the index file the documents were read from (``Index.load``); None: no file.
        self.source_version: IndexVersion | None = None
        # Per collection, a string that changes whenever what it holds changes (``version``), and the original file
        # of each document read from one (by collection and doc_id): both from the index file (``Index.load``).
        self.versions: dict[str, str] = {}
        self.file_ids: dict[tuple[str, str], str] = {}
        self._documents: dict[str, dict[str, Document]] = {name: {} for name in self._collections}
        for doc in sorted(documents, key=lambda d: (d.collection, d.doc_id)):
            if doc.collection not in self._collections:
                self._collections[doc.collection] = Collection(doc.collection, doc.collection)
                self._documents[doc.collection] = {}
            self._documents[doc.collection][doc.doc_id] = doc
        self._settings = (k1, b, decompound)
        if previous is None or previous._settings != self._settings or not self._update(previous):
            self._build()
        given = vectors if vectors is not None else {}
        self._set_vectors(vector_key, given if callable(given) else lambda digests: given)
        self._sentences = sentences if vector_key is not None else None

    def _set_vectors(self, key: str | None, lookup: VectorLookup) -> None:
        """Per collection, the vectors of its passages (``SlotVectors``) and each slot's digest."""
        self.vector_key = key
        self._digests: dict[str, list[str | None]] = {}
        self._semantic: dict[str, SlotVectors | None] = {}
        self._vectors: dict[str, np.ndarray] = {}
        if key is None:
            return
        for name, pairs in self._chunks.items():
            self._digests[name] = [passage_digest(key, chunk_text(p[1])) if p is not None else None for p in pairs]
        found = lookup([d for digests in self._digests.values() for d in digests if d is not None])
        self._vectors = dict(found)
        for name, digests in self._digests.items():
            self._semantic[name] = SlotVectors.of(digests, self._vectors)

    def waiting(self) -> list[Chunk]:
        """The passages searched by words only because no vector of ``vector_key`` exists for them yet."""
        if self.vector_key is None:
            return []
        sentences = self._sentences.stored if self._sentences is not None else None
        return [pair[1] for name, pairs in self._chunks.items() for pair, digest in zip(pairs, self._digests[name],
                strict=True) if pair is not None and (digest not in self._vectors
                                                      or (sentences is not None and digest not in sentences))]

    def searches_by_meaning(self, collection: str) -> bool:
        """Whether some passage of ``collection`` has a vector (a query vector would be compared with it)."""
        return self._semantic.get(collection) is not None

    def _build(self) -> None:
        """Every collection's model from scratch."""
        k1, b, decompound = self._settings
        # (text tokens, title + section tokens) per chunk, tokenized once for the vocabulary and the streams
        tokens = {name: [_chunk_tokens(c) for d in docs.values() for c in d.chunks]
                  for name, docs in self._documents.items()}
        self._vocabulary = Counter(t for chunks in tokens.values() for text, header in chunks for t in text + header)
        self._decompounder = Decompounder(self._vocabulary) if decompound else None
        self._weighted: dict[str, list[tuple[str, float]]] = {}  # per distinct token: its stems and its parts'
        self._chunks: dict[str, list[tuple[Document, Chunk] | None]] = {}
        self._slots: dict[str, dict[str, list[int]]] = {}  # per collection and doc_id: its chunks' slots
        self._bm25: dict[str, BM25] = {}
        for name, docs in self._documents.items():
            self._chunks[name] = [(d, c) for d in docs.values() for c in d.chunks]
            self._slots[name] = {}
            for slot, (d, _) in enumerate(self._chunks[name]):
                self._slots[name].setdefault(d.doc_id, []).append(slot)
            frequencies = (self._frequencies(text, header) for text, header in tokens[name])
            lengths = [len(text) + len(header) * HEADER_BOOST for text, header in tokens[name]]
            self._bm25[name] = BM25.build(frequencies, lengths, k1, b)
        self._set_titles()

    def _set_titles(self) -> None:
        """Per collection, the documents whose title holds each stem (a title lookup reads only its words' lists,
        not every title: research looks names up as titles, many at once)."""
        self._titles: dict[str, dict[str, set[str]]] = {}
        for name, docs in self._documents.items():
            postings = self._titles[name] = {}
            for d in docs.values():
                for stem in frozenset().union(*analyze(d.title)):
                    postings.setdefault(stem, set()).add(d.doc_id)

    def _update(self, previous: "Index") -> bool:
        """This index as ``previous`` changed into it, reusing ``previous`` (which is not modified): only the
        documents added, changed or removed are tokenized, and only the postings of their stems copied.

        Ranking stays exactly that of a full build: the compound splits depend on the vocabulary's counts, so
        every token's terms are worked out again with the new vocabulary, and a document holding a token whose
        terms changed is indexed again as well.  False (nothing done) when so many chunks would be left as
        empty slots that a full build is due."""
        k1, b, decompound = self._settings
        names = self._documents.keys() | previous._documents.keys()
        before = {name: previous._documents.get(name, {}) for name in names}
        after = {name: self._documents.get(name, {}) for name in names}
        gone = {name: [d for doc_id, d in before[name].items() if after[name].get(doc_id) != d] for name in names}
        new = {name: [d for doc_id, d in after[name].items() if before[name].get(doc_id) != d] for name in names}
        tokens: dict[int, list[tuple[list[str], list[str]]]] = {}  # per document (by id): its chunks' tokens

        def tokens_of(document: Document) -> list[tuple[list[str], list[str]]]:
            if id(document) not in tokens:
                tokens[id(document)] = [_chunk_tokens(c) for c in document.chunks]
            return tokens[id(document)]

        vocabulary = previous._vocabulary.copy()
        vocabulary.subtract(t for docs in gone.values() for d in docs for x, y in tokens_of(d) for t in x + y)
        vocabulary.update(t for docs in new.values() for d in docs for x, y in tokens_of(d) for t in x + y)
        self._vocabulary = +vocabulary
        changed: set[str] = set()
        if self._vocabulary == previous._vocabulary:
            self._decompounder, self._weighted = previous._decompounder, dict(previous._weighted)
        else:
            self._decompounder = Decompounder(self._vocabulary) if decompound else None
            self._weighted = {}
            for token, terms in previous._weighted.items():
                if token in self._vocabulary:
                    self._weighted[token] = fresh = self._token_terms(token)
                    if fresh != terms:
                        changed.add(token)
        self._chunks, self._slots, self._bm25 = {}, {}, {}
        for name, docs in self._documents.items():
            old_bm25, old_slots = previous._bm25.get(name), previous._slots.get(name, {})
            redo = {d.doc_id for d in gone[name]}
            if changed and old_bm25 is not None:  # documents holding a token whose terms changed: index again
                hit = {i for token in changed for stem in stems(token) for i in old_bm25.postings.get(stem, ((),))[0]}
                redo |= {pair[0].doc_id for i in hit if (pair := previous._chunks[name][i]) is not None}
            removed_docs = [before[name][doc_id] for doc_id in redo if doc_id in before[name]]
            added_docs = [d for doc_id, d in docs.items() if doc_id in redo or doc_id not in before[name]]
            pairs = list(previous._chunks.get(name, []))
            dead = len(pairs) - (old_bm25.live if old_bm25 else 0) + sum(len(d.chunks) for d in removed_docs)
            if dead > len(pairs) // 4:
                return False
            slots: dict[str, list[int]] = {}
            for doc_id, d in docs.items():  # the documents kept: the new objects (metadata may differ)
                if doc_id not in redo and doc_id in before[name]:
                    slots[doc_id] = old_slots[doc_id]
                    for slot, chunk in zip(slots[doc_id], d.chunks, strict=True):
                        pairs[slot] = (d, chunk)
            removed: dict[int, Iterable[str]] = {}
            for d in removed_docs:
                for slot, (text, header) in zip(old_slots[d.doc_id], tokens_of(d), strict=True):
                    removed[slot] = previous._frequencies(text, header).keys()
                    pairs[slot] = None
            frequencies, lengths = [], []
            for d in added_docs:
                slots[d.doc_id] = list(range(len(pairs), len(pairs) + len(d.chunks)))
                pairs += [(d, c) for c in d.chunks]
                for text, header in tokens_of(d):
                    frequencies.append(self._frequencies(text, header))
                    lengths.append(len(text) + len(header) * HEADER_BOOST)
            self._chunks[name], self._slots[name] = pairs, slots
            self._bm25[name] = (old_bm25.updated(removed, frequencies, lengths) if old_bm25 is not None
                                else BM25.build(frequencies, lengths, k1, b))
        self._set_titles()
        return True

    def _parts(self, token: str) -> tuple[str, ...]:
        return self._decompounder.parts(token) if self._decompounder is not None else ()

    def _token_terms(self, token: str) -> list[tuple[str, float]]:
        """Every stem ``_terms`` gives one occurrence of ``token``, with its weight."""
        return [(stem, weight) for token_stems, weight in self._terms((token,)) for stem in token_stems]

    def _frequencies(self, text: Sequence[str], header: Sequence[str]) -> dict[str, float]:
        """A chunk's weighted count per stem: ``_terms(text) + _terms(header) * HEADER_BOOST`` summed per stem,
        worked out once per distinct token (``_weighted``).  The weights are multiples of ``PART_WEIGHT`` (0.5),
        so the sums are exact whatever the order of adding."""
        counts = Counter(text)
        for token, n in Counter(header).items():
            counts[token] += n * HEADER_BOOST
        frequencies: dict[str, float] = defaultdict(float)
        for token, n in counts.items():
            terms = self._weighted.get(token)
            if terms is None:
                terms = self._weighted[token] = self._token_terms(token)
            for stem, w in terms:
                frequencies[stem] += n * w
        return frequencies

    def _terms(self, tokens: Sequence[str]) -> list[Term]:
        """Each token at weight 1, then the words inside compound tokens at ``PART_WEIGHT``."""
        whole = [(stems(t), 1.0) for t in tokens]
        return whole + [(stems(p), PART_WEIGHT) for t in tokens for p in self._parts(t)]

    @classmethod
    def from_directory(cls, corpus_dir: Path | str) -> "Index":
        """The Markdown corpus in ``corpus_dir`` only."""
        return cls(load_corpus(corpus_dir), load_collections(corpus_dir))

    @classmethod
    def load(
        cls,
        corpus_dir: Path | str | None = None,
        *,
        index_path: Path | str | None = None,
        previous: "Index | None" = None,
        vector_key: str | None = None,
        sentences: bool = False,
    ) -> "Index":
        """The corpus directory (default: the bundled corpus) plus every document of the persisted index.

        ``index_path`` defaults to ``$DOCSERVER_INDEX`` or the checkout's ``data/`` folder (see
        ``store.py``); a missing file means nothing was ingested.  An ingested document replaces a
        corpus document with the same collection and doc_id.  ``source_version`` records which
        version of the file was read, so a server can tell when to load again (``live.py``), which
        passes the index it serves as ``previous`` to index only what changed.  ``vector_key``: search by meaning
        too, with the passages' vectors of that space in the file (or in ``previous``); ``sentences``: and their
        sentences' vectors (``sentences.py``).
        """
        root = Path(corpus_dir) if corpus_dir is not None else BUNDLED_CORPUS
        corpus = load_corpus(root)
        documents = {(d.collection, d.doc_id): d for d in corpus}
        path = resolve_index_path(index_path)
        snapshot = read_snapshot(path)
        for doc in snapshot.documents:
            if (doc.collection, doc.doc_id) in documents:
                logger.warning("ingested %s/%s replaces the corpus document", doc.collection, doc.doc_id)
            documents[(doc.collection, doc.doc_id)] = doc
        if snapshot.documents:
            logger.info("%d ingested documents from %s", len(snapshot.documents), path)
        described = load_collections(root)
        created = [Collection(c.name, c.display_name) for c in snapshot.collections
                   if c.name not in {d.name for d in described}]
        known = previous._vectors if previous is not None and previous.vector_key == vector_key else {}

        def lookup(digests: Sequence[str]) -> dict[str, np.ndarray]:
            found = {d: known[d] for d in digests if d in known}
            return found | file_vectors(path, vector_key, [d for d in digests if d not in found]) if vector_key else {}

        index = cls(documents.values(), [*described, *created], previous=previous, vector_key=vector_key,
                    vectors=lookup, sentences=SentenceVectors.of_file(path, vector_key) if vector_key and sentences
                    else None)
        index.source_version = snapshot.version
        index.file_ids = snapshot.file_ids
        index.versions = _versions(index.collections, corpus, snapshot)
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

    def file_id(self, collection: str, doc_id: str) -> str | None:
        """The id of the original file the document was read from (``library.py``), if the library keeps one."""
        return self.file_ids.get((collection, doc_id))

    def version(self, collection: str) -> str:
        """A string that changes whenever what ``collection`` holds changes: the index file's counter for it and a
        digest of its corpus documents (``Index.load``); for an index built otherwise, a digest of its documents."""
        if collection not in self.versions:
            self.versions[collection] = "c" + _fingerprint(self.documents(collection))
        return self.versions[collection]

    @property
    def chunk_count(self) -> int:
        return sum(bm25.live for bm25 in self._bm25.values())

    def search(
        self,
        query: str,
        collection: str,
        *,
        limit: int | None = 10,
        doc_id: str | None = None,
        query_vector: np.ndarray | None = None,
        fusion: tuple[float, float] | None = None,
        sentence_match: float | None = None,
    ) -> list[Hit]:
        """Best chunks of ``collection`` (optionally of one document) for ``query``: by its words, and with
        ``query_vector`` (the query embedded in ``vector_key``'s space) by meaning too, the two fused
        (``hybrid.py``; ``fusion``: the weights of words and meaning, default ``hybrid``'s); with
        ``sentence_match`` too, each hit names its sentences whose cosine to the query reaches it."""
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
        scored = [(score, i) for i, score in enumerate(bm25.scores(weights.items())) if score > 0]
        if doc_id is not None:
            scored = [(score, i) for score, i in scored if pairs[i][0].doc_id == doc_id]
        if articles:
            scored = [(score * (ARTICLE_BOOST if _article_of(pairs[i][1]) in articles else 1.0), i) for score, i in scored]
        semantic = self._semantic.get(collection)
        if query_vector is None or semantic is None or semantic.dimension != len(query_vector):
            ranked = _best(scored, pairs, limit)
            similarity: dict[int, float] = {}
        else:
            lexical, semantic_weight = fusion or (hybrid.LEXICAL_WEIGHT, hybrid.SEMANTIC_WEIGHT)
            ranked, similarity = self._fused(scored, semantic, query_vector, collection, limit, doc_id,
                                             (lexical * self._known_share(bm25, tokens), semantic_weight))
        raw = dict((i, score) for score, i in scored)
        top = ranked[0][0] if ranked else 1.0
        matched = self._matched_terms(bm25, tokens, compounds, [i for _, i in ranked])
        hits = [Hit(*pairs[i], raw.get(i, 0.0), round(score / top, 4), matched[i],
                    round(similarity[i], 4) if i in similarity else None) for score, i in ranked]
        if sentence_match is None or not similarity or self._sentences is None:
            return hits
        digests = self._digests[collection]
        found = self._sentences.matching([(digests[i], pairs[i][1].text) for _, i in ranked],  # type: ignore[index]
                                         query_vector, sentence_match)  # type: ignore[arg-type]
        return [replace(hit, sentences=matches) if matches else hit for hit, matches in zip(hits, found, strict=True)]

    def _fused(
        self,
        scored: list[tuple[float, int]],
        semantic: SlotVectors,
        query_vector: np.ndarray,
        collection: str,
        limit: int | None,
        doc_id: str | None,
        fusion: tuple[float, float],
    ) -> tuple[list[tuple[float, int]], dict[int, float]]:
        """(the fused ranking best first, cut to ``limit``; its passages' cosines to the query)."""
        pairs = self._chunks[collection]
        depth = max(limit or len(pairs), FUSION_DEPTH)
        allowed = None
        if doc_id is not None:
            allowed = np.fromiter((pairs[s][0].doc_id == doc_id for s in semantic.slots.tolist()), bool)  # type: ignore[index]
        cosines = semantic.similarities(query_vector)
        fused = fuse(_best(scored, pairs, depth), semantic.nearest(cosines, depth, allowed), weights=fusion)
        ranked = sorted(((score, i) for i, score in fused.items()),
                        key=lambda s: (-s[0], pairs[s[1]][0].doc_id, pairs[s[1]][1].chunk_index))  # type: ignore[index]
        ranked = ranked[:limit] if limit is not None else ranked
        return ranked, semantic.at(cosines, [i for _, i in ranked])

    def _known_share(self, bm25: BM25, tokens: Sequence[str]) -> float:
        """The share of the query's words the collection holds at all (any stem of the word, or of a part of it):
        about 1 for a question in the collection's language, near 0 for one in another language."""
        if not tokens:
            return 0.0
        known = sum(any(stem in bm25.postings for stem in stems(t)) or any(
            stem in bm25.postings for part in self._parts(t) for stem in stems(part)) for t in tokens)
        return known / len(tokens)

    def _compounds_with(self, tokens: Sequence[str]) -> dict[str, list[str]]:
        """Corpus compounds containing the query words that never occur on their own in the corpus."""
        if self._decompounder is None:
            return {}
        extra = frozenset(tokens)
        return {t: self._decompounder.compounds_with(t, extra) for t in tokens if not self._decompounder.known(t)}

    def _matched_terms(
        self, bm25: BM25, tokens: Sequence[str], compounds: dict[str, list[str]], hits: Sequence[int]
    ) -> dict[int, float]:
        """Per hit, the share of the (distinct) query tokens it contains: via any of their stems, a compound
        containing them, or (for a compound token) all of its parts."""
        found: dict[int, int] = dict.fromkeys(hits, 0)
        for token in tokens:
            variants = [stems(token), *(stems(compound) for compound in compounds.get(token, ()))]
            parts = [stems(p) for p in self._decompounder.split(token)] if self._decompounder is not None else []
            for i in found:
                if any(bm25.contains(v, i) for v in variants) or (parts and all(bm25.contains(p, i) for p in parts)):
                    found[i] += 1
        return {i: round(n / len(tokens), 3) if tokens else 0.0 for i, n in found.items()}

    def match_titles(self, query: str, collection: str) -> list[Document]:
        """Documents whose title shares a stem with ``query``; most matched query words first."""
        postings = self._titles.get(collection, {})
        hits: Counter[str] = Counter()
        for token in dict.fromkeys(analyze(query)):
            hits.update(set().union(*(postings.get(stem, ()) for stem in token)))
        return [self._documents[collection][doc_id] for _, doc_id in sorted((-n, d) for d, n in hits.items())]
