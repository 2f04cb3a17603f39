"""The word side of an index: per collection its passages by slot and their BM25 model (``bm25.py``), over one
vocabulary (``vocabulary.py``); built from scratch, or updated from the index served before.

A running server's index is updated with the documents that changed instead of built again (``updated``): only the
documents added, changed or removed are tokenized, and only the postings of their stems copied.  Ranking stays
exactly that of a full build: the compound splits depend on the vocabulary's counts, so every token's terms are
worked out again with the new vocabulary, and a document holding a token whose terms changed is indexed again as
well.  A removed passage leaves an empty slot (None) until so many are empty that a full build is due.
"""

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from textkit import stems

from .bm25 import BM25
from .documents import Chunk, Document
from .vocabulary import HEADER_BOOST, Vocabulary, chunk_tokens

__all__ = ["Documents", "Lexical", "Settings"]

Documents = Mapping[str, Mapping[str, Document]]  # per collection, its documents by doc_id
Settings = tuple[float, float, bool]  # BM25's k1 and b, and whether compounds are split


@dataclass(slots=True)
class Lexical:
    """``chunks``: per collection, its passages by slot (None: a passage removed since the last full build);
    ``slots``: per collection and doc_id, its chunks' slots; ``bm25``: per collection, its model."""

    vocabulary: Vocabulary
    chunks: dict[str, list[tuple[Document, Chunk] | None]]
    slots: dict[str, dict[str, list[int]]]
    bm25: dict[str, BM25]

    @classmethod
    def build(cls, documents: Documents, settings: Settings) -> "Lexical":
        """Every collection's model from scratch."""
        k1, b, decompound = settings
        # (text tokens, title + section tokens) per chunk, tokenized once for the vocabulary and the streams
        tokens = {name: [chunk_tokens(c) for d in docs.values() for c in d.chunks] for name, docs in documents.items()}
        counts = Counter(t for chunks in tokens.values() for text, header in chunks for t in text + header)
        lexical = cls(Vocabulary.of(counts, decompound=decompound), {}, {}, {})
        for name, docs in documents.items():
            lexical.chunks[name] = [(d, c) for d in docs.values() for c in d.chunks]
            lexical.slots[name] = {}
            for slot, (d, _) in enumerate(lexical.chunks[name]):
                lexical.slots[name].setdefault(d.doc_id, []).append(slot)
            frequencies = (lexical.vocabulary.frequencies(text, header) for text, header in tokens[name])
            lengths = [len(text) + len(header) * HEADER_BOOST for text, header in tokens[name]]
            lexical.bm25[name] = BM25.build(frequencies, lengths, k1, b)
        return lexical

    def updated(self, before: Documents, after: Documents, settings: Settings) -> "Lexical | None":
        """This model (of the documents ``before``, built with ``settings``) as that of the documents ``after``,
        reusing it (it is not modified); None when so many chunks would be left as empty slots that a full build is
        due."""
        names = before.keys() | after.keys()
        old = {name: before.get(name, {}) for name in names}
        new = {name: after.get(name, {}) for name in names}
        gone = {name: [d for doc_id, d in old[name].items() if new[name].get(doc_id) != d] for name in names}
        added = {name: [d for doc_id, d in new[name].items() if old[name].get(doc_id) != d] for name in names}
        tokens = _Tokens()
        counts = self.vocabulary.counts.copy()
        counts.subtract(t for docs in gone.values() for d in docs for x, y in tokens.of(d) for t in x + y)
        counts.update(t for docs in added.values() for d in docs for x, y in tokens.of(d) for t in x + y)
        vocabulary, changed = self.vocabulary.updated(+counts)
        lexical = Lexical(vocabulary, {}, {}, {})
        for name, docs in after.items():
            redo = {d.doc_id for d in gone[name]} | self._holding(name, changed)
            if not lexical._update_collection(self, name, docs, old[name], redo, tokens, settings):
                return None
        return lexical

    def _holding(self, name: str, tokens: set[str]) -> set[str]:
        """The doc_ids of the documents of collection ``name`` whose chunks hold any of ``tokens``."""
        bm25 = self.bm25.get(name)
        if not tokens or bm25 is None:
            return set()
        hit = {i for token in tokens for stem in stems(token) for i in bm25.postings.get(stem, ((),))[0]}
        return {pair[0].doc_id for i in hit if (pair := self.chunks[name][i]) is not None}

    def _update_collection(self, previous: "Lexical", name: str, docs: Mapping[str, Document],
                           before: Mapping[str, Document], redo: set[str], tokens: "_Tokens",
                           settings: Settings) -> bool:
        """Collection ``name`` of ``previous`` changed into ``docs`` (its documents ``before``), the documents of
        ``redo`` indexed again; False when too many of its slots would be empty."""
        old_bm25, old_slots = previous.bm25.get(name), previous.slots.get(name, {})
        removed_docs = [before[doc_id] for doc_id in redo if doc_id in before]
        added_docs = [d for doc_id, d in docs.items() if doc_id in redo or doc_id not in before]
        pairs = list(previous.chunks.get(name, []))
        dead = len(pairs) - (old_bm25.live if old_bm25 else 0) + sum(len(d.chunks) for d in removed_docs)
        if dead > len(pairs) // 4:
            return False
        slots: dict[str, list[int]] = {}
        for doc_id, d in docs.items():  # the documents kept: the new objects (metadata may differ)
            if doc_id not in redo and doc_id in before:
                slots[doc_id] = old_slots[doc_id]
                for slot, chunk in zip(slots[doc_id], d.chunks, strict=True):
                    pairs[slot] = (d, chunk)
        removed: dict[int, Iterable[str]] = {}
        for d in removed_docs:
            for slot, (text, header) in zip(old_slots[d.doc_id], tokens.of(d), strict=True):
                removed[slot] = previous.vocabulary.frequencies(text, header).keys()
                pairs[slot] = None
        frequencies, lengths = [], []
        for d in added_docs:
            slots[d.doc_id] = list(range(len(pairs), len(pairs) + len(d.chunks)))
            pairs += [(d, c) for c in d.chunks]
            for text, header in tokens.of(d):
                frequencies.append(self.vocabulary.frequencies(text, header))
                lengths.append(len(text) + len(header) * HEADER_BOOST)
        self.chunks[name], self.slots[name] = pairs, slots
        k1, b, _ = settings
        self.bm25[name] = (old_bm25.updated(removed, frequencies, lengths) if old_bm25 is not None
                           else BM25.build(frequencies, lengths, k1, b))
        return True


class _Tokens:
    """Per document object, its chunks' (text tokens, title + section tokens), tokenized once."""

    def __init__(self) -> None:
        self._tokens: dict[int, list[tuple[list[str], list[str]]]] = {}

    def of(self, document: Document) -> list[tuple[list[str], list[str]]]:
        if id(document) not in self._tokens:
            self._tokens[id(document)] = [chunk_tokens(c) for c in document.chunks]
        return self._tokens[id(document)]
