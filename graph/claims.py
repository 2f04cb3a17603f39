"""Claim check: each answer sentence that makes a claim must be supported by the evidence it cites.

Deterministic and cheap: a sentence is supported when most of its content words (stemmed) and every number
in it occur in the passages it cites. Used for high-stakes (legal and procedural) answers.
"""

from __future__ import annotations

import re

from docserver.text import analyze
from graph.state import Evidence

_CITE = re.compile(r"\[(\d+)\]")
_NUMBER = re.compile(r"\b\d[\d.,/]*\b")
_SENTENCE = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9ÀÉÈËÏÖÜ(\"'*])")
_HIGH_STAKES = re.compile(
    r"\b(artikel|wet|wetten|besluit|vergunning|verplicht|procedure|termijn|boete|sanctie|aanvraag|moet|mag|"
    r"article|law|act|decree|licen[cs]e|obligation|mandatory|procedure|deadline|fine|penalty|must|shall)\w*",
    re.IGNORECASE,
)


def high_stakes(question: str, collections: list[str]) -> bool:
    return "wetten_overheid" in collections or bool(_HIGH_STAKES.search(question))


def _stems(text: str) -> set[str]:
    return {s for group in analyze(text) for s in group if len(s) > 3}


def unsupported_claims(answer: str, ledger: list[Evidence], threshold: float = 0.5) -> list[str]:
    """Sentences with a claim whose cited evidence does not back them up (uncited claims with numbers too)."""
    flagged = []
    for paragraph in answer.split("\n"):
        paragraph = paragraph.strip().lstrip("-*• ").strip()
        for sentence in _SENTENCE.split(paragraph):
            words = _stems(_CITE.sub("", sentence))
            if len(words) < 3:
                continue
            cited = [int(n) for n in _CITE.findall(sentence) if 1 <= int(n) <= len(ledger)]
            numbers = set(_NUMBER.findall(_CITE.sub("", sentence)))
            if not cited:
                if numbers:
                    flagged.append(sentence)
                continue
            source = " ".join(ledger[n - 1].text for n in cited)
            support = _stems(source)
            overlap = len(words & support) / len(words)
            if overlap < threshold or any(number not in source for number in numbers):
                flagged.append(sentence)
    return flagged
