"""Which sentences of a passage say what a question asks, by meaning.

A search by meaning finds a passage in another language than the question, but the question's words cannot tell
which of its sentences answers: a Dutch question over an English review plan shares only its names and numbers with
it, so a reader of words (the agent's extractive selection and decline rule) finds nothing there.  With
``EmbeddingSettings.sentence_match`` set, every sentence of a passage has a vector too (``vectors.py`` embeds them
after the passages), and a search names, per passage it returns, the sentences whose cosine to the query reaches
that threshold, best first (``SentenceVectors.matching``; the server sends them as ``metadata.matching_sentences``).

The threshold is on the embedding model's own scale (multilingual-e5-small's cosines crowd between 0.7 and 0.95,
other models spread theirs elsewhere), so it is a setting measured per model (``python -m eval.hybrid --only
sentence-match``), not a constant of this module.
"""

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from textkit.sentences import passage_sentences

from .vectors import file_digests, file_vectors

__all__ = ["MATCHES_PER_PASSAGE", "Match", "SentenceVectors"]

MATCHES_PER_PASSAGE = 3  # sentences named per passage at most (a passage is a section: the answer is one or two)

Match = tuple[str, float]  # a sentence of the passage and its cosine to the query, 4 decimals
SentenceLookup = Callable[[Sequence[str]], Mapping[str, np.ndarray]]


@dataclass(frozen=True, slots=True)
class SentenceVectors:
    """The sentence vectors of one vector space: which passages (by digest) have them, and how to read them."""

    stored: frozenset[str]
    read: SentenceLookup

    @classmethod
    def of_file(cls, path: Path, key: str) -> "SentenceVectors":
        """Those of the index file at ``path`` (read when a search asks; none when there is no file)."""
        return cls(frozenset(file_digests(path, key, "sentence_vectors")),
                   lambda digests: file_vectors(path, key, digests, sentences=True))

    def matching(self, passages: Sequence[tuple[str | None, str]], query: np.ndarray, threshold: float
                 ) -> list[tuple[Match, ...]]:
        """Per (passage digest, passage text), its sentences whose cosine to ``query`` (a normalised vector of the
        same space) is at least ``threshold``, best first, at most ``MATCHES_PER_PASSAGE``.  A passage whose
        sentences have no vectors yet, or vectors of other sentences than its text splits into now (stored by
        another version of the splitter), names none."""
        wanted = [digest for digest, _ in passages if digest is not None and digest in self.stored]
        matrices = self.read(wanted) if wanted else {}
        query = np.asarray(query, dtype=np.float32)
        found: list[tuple[Match, ...]] = []
        for digest, text in passages:
            matrix = matrices.get(digest) if digest is not None else None
            sentences = passage_sentences(text) if matrix is not None else []
            if matrix is None or not sentences or matrix.shape != (len(sentences), len(query)):
                found.append(())
                continue
            cosines = matrix @ query
            best = sorted((i for i in range(len(sentences)) if cosines[i] >= threshold),
                          key=lambda i: (-float(cosines[i]), i))[:MATCHES_PER_PASSAGE]
            found.append(tuple((sentences[i], round(float(cosines[i]), 4)) for i in best))
        return found
