"""In-memory BM25 index over document chunks, one BM25 model per collection.

BM25 is written out by hand (rather than taken from rank-bm25 or similar)
because we need things those packages do not give together: statistics and
filtering per collection, a field boost for title/section words, stem *sets*
per token (Dutch + English stems, see ``textkit``), weighted terms for the
parts of Dutch compounds (see ``vocabulary.py``), and fully deterministic
ranking with ties broken on (doc_id, chunk_index) (``ranking.py``).  No numpy
for words: postings are stdlib arrays (a 20,000-chunk index answers in
milliseconds and takes a few hundred MB), only the best hits are sorted, and a
running server's index is updated with the documents that changed instead of
built again (``previous``, ``lexical.py``; ``python -m bench --only scale``
measures all of this).
"""

import hashlib
import logging
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path

import numpy as np

from textkit import analyze

from . import hybrid, postings, ranking
from .bm25 import K1, B
from .corpus import BUNDLED_CORPUS, load_collections, load_corpus
from .documents import Chunk, Collection, Document, chunk_text
from .hybrid import SlotVectors
from .lexical import Lexical
from .searchable import Hit, Outline
from .sentences import SentenceVectors
from .store import IndexVersion, read_snapshot, resolve_index_path
from .vectors import file_vectors, passage_digest

__all__ = ["Hit", "Index", "collection_versions", "corpus_digests"]

logger = logging.getLogger("docserver")


def _fingerprint(documents: Iterable[Document]) -> str:
    """A digest of what ``documents`` say (ids, titles, links, every chunk): it changes when any of that does."""
    digest = hashlib.sha256()
    for d in sorted(documents, key=lambda d: d.doc_id):
        digest.update(repr((d.doc_id, d.title, d.year, d.url, d.kind, d.language, d.disclaimer, d.chunks)).encode())
    return digest.hexdigest()[:12]


def corpus_digests(corpus: Iterable[Document]) -> dict[str, str]:
    """Per collection of ``corpus``, the part of its version its corpus documents give (worked out once per load:
    the corpus does not change while it is served)."""
    from_corpus: dict[str, list[Document]] = defaultdict(list)
    for doc in corpus:
        from_corpus[doc.collection].append(doc)
    return {name: "c" + _fingerprint(docs) for name, docs in from_corpus.items()}


_UNTOUCHED = "c" + _fingerprint(())  # the version of a collection neither the file nor the corpus holds anything of


def collection_versions(names: Iterable[str], digests: Mapping[str, str], counted: Mapping[str, str],
                        in_file: set[str], generation: int) -> dict[str, str]:
    """Each collection's version: the index file's counter for it (``counted``, ``schema.collection_versions``; the
    file's ``generation`` when code from before the counters wrote its documents: ``in_file``), then the digest of
    its corpus documents (``corpus_digests``)."""
    versions = {}
    for name in names:
        count = counted.get(name) or (f"g{generation}" if name in in_file else None)
        versions[name] = "+".join(p for p in (count, digests.get(name)) if p) or _UNTOUCHED
    return versions


# Looks up vectors by passage digest (``Index.load``: the index served before, then the index file).
VectorLookup = Callable[[Sequence[str]], Mapping[str, np.ndarray]]


class Index:
    """Documents grouped by collection with a chunk-level BM25 model per collection."""

    def __init__(
        self,
        documents: Iterable[Document],
        collections: Iterable[Collection] = (),
        *,
        k1: float = K1,
        b: float = B,
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
        lexical = None
        if previous is not None and previous._settings == self._settings:
            lexical = previous._lexical.updated(previous._documents, self._documents, self._settings)
        self._lexical = lexical if lexical is not None else Lexical.build(self._documents, self._settings)
        self._chunks, self._bm25 = self._lexical.chunks, self._lexical.bm25
        self._set_titles()
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

    def _set_titles(self) -> None:
        """Per collection, the documents whose title holds each stem (a title lookup reads only its words' lists,
        not every title: research looks names up as titles, many at once)."""
        self._titles: dict[str, dict[str, set[str]]] = {}
        for name, docs in self._documents.items():
            postings = self._titles[name] = {}
            for d in docs.values():
                for stem in frozenset().union(*analyze(d.title)):
                    postings.setdefault(stem, set()).add(d.doc_id)

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
        index.versions = collection_versions(
            (c.name for c in index.collections), corpus_digests(corpus), snapshot.versions, {d.collection for d in snapshot.documents},
            snapshot.version.generation if snapshot.version is not None else 0)
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

    @property
    def document_count(self) -> int:
        return sum(len(docs) for docs in self._documents.values())

    def listing(self, collection: str, limit: int) -> list[Document]:
        """The first ``limit`` documents of ``collection`` (by doc_id)."""
        return self.documents(collection)[:limit]

    def outline(self, collection: str, titles: int) -> Outline:
        """``collection`` in numbers, with its first ``titles`` titles (``searchable.Outline``)."""
        documents = self.documents(collection)
        return Outline(len(documents), sum(len(d.chunks) for d in documents), [d.title for d in documents[:titles]],
                       Counter((d.title, c.section) for d in documents for c in d.chunks),
                       Counter(d.language for d in documents if d.language))

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
        vocabulary = self._lexical.vocabulary
        asked = postings.query(vocabulary, query)  # the query's terms, as the database engine counts them too
        tokens, compounds = asked.tokens, asked.compounds
        scored = [(score, i) for i, score in enumerate(bm25.scores(asked.weights.items())) if score > 0]
        if doc_id is not None:
            scored = [(score, i) for score, i in scored if pairs[i][0].doc_id == doc_id]
        scored = ranking.boost_articles(scored, pairs, query)
        semantic = self._semantic.get(collection)
        if query_vector is None or semantic is None or semantic.dimension != len(query_vector):
            ranked = ranking.best(scored, pairs, limit)
            similarity: dict[int, float] = {}
        else:
            lexical, semantic_weight = fusion or (hybrid.LEXICAL_WEIGHT, hybrid.SEMANTIC_WEIGHT)
            ranked, similarity = ranking.fused(scored, pairs, semantic, query_vector, limit, doc_id,
                                               (lexical * vocabulary.known_share(tokens, bm25.postings.__contains__),
                                                semantic_weight))
        raw = dict((i, score) for score, i in scored)
        top = ranked[0][0] if ranked else 1.0
        matched = {i: vocabulary.matched_share(tokens, compounds, lambda stems_, i=i: bm25.contains(stems_, i))
                   for _, i in ranked}
        hits = [Hit(*pairs[i], raw.get(i, 0.0), round(score / top, 4), matched[i],
                    round(similarity[i], 4) if i in similarity else None) for score, i in ranked]
        if sentence_match is None or not similarity or self._sentences is None:
            return hits
        digests = self._digests[collection]
        found = self._sentences.matching([(digests[i], pairs[i][1].text) for _, i in ranked],  # type: ignore[index]
                                         query_vector, sentence_match)  # type: ignore[arg-type]
        return [replace(hit, sentences=matches) if matches else hit for hit, matches in zip(hits, found, strict=True)]

    def match_titles(self, query: str, collection: str) -> list[Document]:
        """Documents whose title shares a stem with ``query``; most matched query words first."""
        postings = self._titles.get(collection, {})
        hits: Counter[str] = Counter()
        for token in dict.fromkeys(analyze(query)):
            hits.update(set().union(*(postings.get(stem, ()) for stem in token)))
        return [self._documents[collection][doc_id] for _, doc_id in sorted((-n, d) for d, n in hits.items())]
