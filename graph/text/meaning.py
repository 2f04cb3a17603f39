"""Facts from sentences found by meaning in another language than the question, where its words cannot judge them.

Extractive selection (`selection.select_facts`) reads words: a Dutch question over an English review plan shares
only its names and numbers with the passage that answers it, so every passage looks off-topic and the question is
declined. A document server that embeds sentences names, per passage it returns, the sentences whose cosine to the
question reaches a threshold measured for its embedding model (`Evidence.matching_sentences`; the reference server:
docserver/sentences.py, `EMBEDDINGS_SENTENCE_MATCH`). When words selected nothing, those sentences of passages in
another language than the question answer it, most similar first, at most `per_source` per passage, provided that
every name and number of the question occurs in the evidence (they survive translation: a question about
"Frankrijk" or "2022" is not answered from passages that never mention them).

The same sentences in the question's language are left to words: there they judge well, and the threshold was
chosen on questions in the other language (`python -m eval.hybrid --only sentence-match`).
"""

from __future__ import annotations

from graph.glossary import Glossary
from graph.models import Evidence, Fact, Language, holds_sentence
from graph.text.language import detect_language
from graph.text.relevance import entity_words, name_stems, stems_of

__all__ = ["meaning_facts"]


def meaning_facts(question: str, evidence: list[Evidence], language: Language, limit: int, *, per_source: int = 2,
                  glossary: Glossary | None = None) -> list[Fact]:
    """The sentences that match `question` by meaning in passages of `evidence` in another language than
    `language`, most similar first (ties: evidence order), at most `per_source` per passage and `limit` in all;
    none when a name or number of the question occurs in no passage of `evidence`."""
    if limit <= 0 or not any(e.matching_sentences for e in evidence):
        return []
    found = frozenset().union(*(stems_of(e.text, glossary) for e in evidence))
    if any(not name_stems(word) & found for word in entity_words(question)):
        return []
    ranked = sorted(((-cosine, n, sentence, e.id) for n, e in enumerate(evidence) if e.matching_sentences
                     and detect_language(e.text, default=language) != language
                     for sentence, cosine in e.matching_sentences if holds_sentence(e.text, sentence)))
    taken: dict[str, int] = {}
    facts: list[Fact] = []
    for _, _, sentence, evidence_id in ranked:
        if taken.get(evidence_id, 0) >= per_source or any(f.text == sentence for f in facts):
            continue
        taken[evidence_id] = taken.get(evidence_id, 0) + 1
        facts.append(Fact(text=sentence, evidence_ids=[evidence_id]))
        if len(facts) == limit:
            break
    return facts
