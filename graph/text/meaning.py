"""Facts from passages found by meaning in the other language, where the question's words cannot judge them.

Extractive selection (`extractive.select_facts`) reads words: a Dutch question over an English review plan shares
only its names and numbers with the passage that answers it, so every passage looks off-topic and the question is
declined. A document server that searches by meaning too says how far each passage's vector stands out from the
collection's for this question (`Evidence.similarity_z`: standard deviations above the collection's mean cosine).
When words found nothing, a passage in another language than the question that stands out by at least `MEANING_Z`
gives the answer its opening sentences (a passage is a section: its opening says what it is about), at most
`per_source` each, most distinct first; the model reads the whole passage (the ledger carries it), answers in the
question's language, or says the passages do not answer.

Only with a model (`graph.nodes.summarize`): similarity says what a passage is about, not whether it holds the
answer. Measured offline on the Dutch gold set with multilingual-e5-small, the unanswerable questions' passages
stood out as far (up to 4.3) as those that answer the cross-language set's questions (2.7 to 5.5, median 3.5): with
no model to read them, unanswerable questions were answered (declined 0.14 at 3.5, 0.43 at 4.0), so offline the
words alone decide, as before.
"""

from __future__ import annotations

from graph.models import Evidence, Fact, Language
from graph.text.extractive import sentences
from graph.text.language import detect_language

__all__ = ["MEANING_Z", "meaning_facts"]

# Below the median best standing on the cross-language set's tuning half (odd ids: 3.8, offline run of `python -m
# eval.hybrid --only crosslang-answers`), so that most questions answered in the other language reach the model; what
# it costs is the answer call a declined question skips.
MEANING_Z = 3.5


def meaning_facts(evidence: list[Evidence], language: Language, limit: int, *, per_source: int = 2,
                  min_z: float | None = None) -> list[Fact]:
    """The opening sentences of the passages in another language than `language` that stand out by meaning by at
    least `min_z` (default `MEANING_Z`), most distinct first; at most `limit`."""
    min_z = MEANING_Z if min_z is None else min_z
    found = sorted((e for e in evidence if e.similarity_z is not None and e.similarity_z >= min_z
                    and detect_language(e.text, default=language) != language),
                   key=lambda e: (-(e.similarity_z or 0.0), e.id))
    facts: list[Fact] = []
    for passage in found:
        for sentence in sentences(passage.text)[:per_source]:
            if len(facts) == limit:
                return facts
            facts.append(Fact(text=sentence, evidence_ids=[passage.id]))
    return facts
