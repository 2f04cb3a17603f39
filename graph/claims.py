"""Claim check: each answer sentence that makes a claim must be supported by the evidence it cites.

Deterministic and cheap: a sentence is supported when most of its content words (stemmed) and every number
in it occur in the passages it cites. Used for high-stakes (legal and procedural) answers.
"""

from __future__ import annotations

import re
from functools import lru_cache

from graph.models import Evidence
from textkit import analyze

_CITE = re.compile(r"\[(\d+)\]")
_NUMBER = re.compile(r"\b\d[\d.,/]*\b")
_SENTENCE = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9ÀÉÈËÏÖÜ(\"'*])")
_HIGH_STAKES = re.compile(
    r"\b(artikel|wet|wetten|besluit|vergunning|verplicht|procedure|termijn|boete|sanctie|aanvraag|moet|mag|"
    r"article|law|act|decree|licen[cs]e|obligation|mandatory|procedure|deadline|fine|penalty|must|shall)\w*",
    re.IGNORECASE,
)


def high_stakes_question(question: str) -> bool:
    """A legal or procedural question (obligations, deadlines, articles). Collections of such texts are flagged
    `high_stakes` in the collections file instead."""
    return bool(_HIGH_STAKES.search(question))


def _stems(text: str) -> set[str]:
    return {s for group in analyze(text) for s in group if len(s) > 3}


@lru_cache(maxsize=512)
def _source_stems(text: str) -> frozenset[str]:
    """Stems of one evidence text: every answer sentence that cites it compares against them (analysing a
    passage per citing sentence was the claim check's whole cost)."""
    return frozenset(_stems(text))


def claim_sentences(answer: str) -> list[str]:
    """The sentences of an answer body that are long enough to carry a claim."""
    out = []
    for paragraph in answer.split("\n"):
        paragraph = paragraph.strip().lstrip("-*• ").strip()
        out += [s for s in _SENTENCE.split(paragraph) if len(_stems(_CITE.sub("", s))) >= 3]
    return out


def cited_numbers(sentence: str, size: int) -> list[int]:
    return [int(n) for n in _CITE.findall(sentence) if 1 <= int(n) <= size]


def supported(sentence: str, *sources: str, threshold: float = 0.5) -> bool:
    """Most content words of the sentence, and every number in it, occur in the cited source texts."""
    claim = _CITE.sub("", sentence)
    words = _stems(claim)
    if not words:
        return True
    known = frozenset().union(*(_source_stems(source) for source in sources))
    overlap = len(words & known) / len(words)
    return overlap >= threshold and all(any(n in source for source in sources) for n in _NUMBER.findall(claim))


def unsupported_claims(answer: str, ledger: list[Evidence]) -> list[str]:
    """Sentences with a claim whose cited evidence does not back them up (uncited claims with numbers too)."""
    flagged = []
    for sentence in claim_sentences(answer):
        cited = cited_numbers(sentence, len(ledger))
        if not cited:
            if _NUMBER.search(_CITE.sub("", sentence)):
                flagged.append(sentence)
        elif not supported(sentence, *(ledger[n - 1].text for n in cited)):
            flagged.append(sentence)
    return flagged
