"""Support check: each answer sentence that makes a claim must be backed by the evidence it cites.

Deterministic and cheap (no model call): a sentence is supported when every number in it, every name of an
organisation or document in it (written in capitals: WHO, ISO-9001, SSR-2/1) and most of its content words
(stemmed) occur in the passages it cites. The name rule is what catches a position attributed to the wrong
source: "The WHO stresses ... [2]" with [2] a passage of another organisation that never names the WHO.
Content words are compared only with passages in the answer's language (a Dutch answer paraphrasing an English
passage shares no stems with it); numbers and names are compared always.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from functools import lru_cache
from itertools import combinations

from graph.models import Evidence, Language
from graph.text.language import detect_language
from textkit import analyze, sentences

_CITE = re.compile(r"\[(\d+)\]")
_NUMBER = re.compile(r"\b\d[\d.,/]*\b")
# A name as organisations and standards are written: two or more capitals, optionally with a number part
_NAME = re.compile(r"\b[A-Z][A-Z0-9]+(?:[-/][A-Z0-9]+)*\b")
_HIGH_STAKES = re.compile(
    r"\b(artikel|wet|wetten|besluit|vergunning|verplicht|procedure|termijn|boete|sanctie|aanvraag|moet|mag|"
    r"article|law|act|decree|licen[cs]e|obligation|mandatory|procedure|deadline|fine|penalty|must|shall)\w*",
    re.IGNORECASE,
)


def high_stakes_question(question: str) -> bool:
    """A legal or procedural question (obligations, deadlines, articles). Collections of such texts are flagged
    `high_stakes` in the collections file instead."""
    return bool(_HIGH_STAKES.search(question))


@lru_cache(maxsize=2048)
def _stems(text: str) -> frozenset[str]:
    """Content stems of a text. Cached: a passage is compared with every answer sentence that cites it, and an
    answer sentence is read by the citer while it streams and again by the claim check at the end."""
    return frozenset(s for group in analyze(text) for s in group if len(s) > 3)


def claim_sentences(answer: str) -> list[str]:
    """The sentences of an answer body that are long enough to carry a claim."""
    out = []
    for paragraph in answer.split("\n"):
        paragraph = paragraph.strip().lstrip("-*• ").strip()
        out += [s for s in sentences.split(paragraph) if len(_stems(_CITE.sub("", s))) >= 3]
    return out


def cited_numbers(sentence: str, size: int) -> list[int]:
    return [int(n) for n in _CITE.findall(sentence) if 1 <= int(n) <= size]


def _words_found(claim: str, sources: tuple[str, ...] | list[str], threshold: float) -> bool:
    words = _stems(claim)
    if not words:
        return True
    known = frozenset().union(*(_stems(source) for source in sources))
    return len(words & known) / len(words) >= threshold


def _numbers_found(claim: str, sources: tuple[str, ...] | list[str]) -> bool:
    return all(any(n in source for source in sources) for n in _NUMBER.findall(claim))


def supported(sentence: str, *sources: str, threshold: float = 0.5) -> bool:
    """Most content words of the sentence, and every number in it, occur in the cited source texts."""
    claim = _CITE.sub("", sentence)
    return _words_found(claim, sources, threshold) and _numbers_found(claim, sources)


def names_found(sentence: str, cited: list[Evidence], display: Callable[[str], str] = str) -> bool:
    """Every name in capitals in the sentence occurs in a cited passage (text or title) or is the name of a
    cited passage's collection."""
    names = set(_NAME.findall(_CITE.sub("", sentence)))
    if not names:
        return True
    known = " ".join([e.text for e in cited] + [e.title for e in cited] + [display(e.collection) for e in cited]
                     + [e.collection for e in cited]).upper()
    return all(re.search(rf"(?<![A-Z0-9]){re.escape(name)}(?![A-Z0-9])", known) for name in names)


def sentence_supported(sentence: str, cited: list[Evidence], language: Language,
                       display: Callable[[str], str] = str) -> bool:
    """Numbers, names and (in the answer's language) content words of the sentence are in what it cites."""
    claim = _CITE.sub("", sentence)
    if not names_found(claim, cited, display):
        return False
    # the number inside a name (INSAG-4, SSR-2/1) was checked with the name; a year may be in the title
    if not _numbers_found(_NAME.sub("", claim), [e.text for e in cited] + [e.title for e in cited]):
        return False
    same_language = [e.text for e in cited if detect_language(e.text, default=language) == language]
    return not same_language or _words_found(claim, same_language, 0.5)


def _organisations(a: Evidence, b: Evidence, display: Callable[[str], str]) -> set[str]:
    return {name.upper() for e in (a, b) for name in (e.collection, display(e.collection))}


def best_sources(sentence: str, ledger: list[Evidence], language: Language,
                 display: Callable[[str], str] = str, threshold: float = 0.5) -> tuple[int, ...]:
    """The `[n]`s that best support a claim sentence (uncited, or citing what does not back it): the one passage
    that passes the support check alone with most of the sentence's content words among its stems; failing that,
    the two passages that pass it together, each holding a word, number or name of the sentence the other does
    not (a bridge answer joins its two passages in one sentence: "X, born in 1976, wrote Y"). () when none does
    (or the sentence is too short to carry a claim)."""
    claim = _CITE.sub("", sentence)
    words = _stems(claim)
    if len(words) < 3:
        return ()
    best, best_share = (), 0.0
    for n, e in enumerate(ledger, 1):  # the first of equally good passages wins
        share = len(words & _stems(e.text)) / len(words)
        if share >= threshold and share > best_share and sentence_supported(sentence, [e], language, display):
            best, best_share = (n,), share
    if best:
        return best
    named = _NAME.findall(claim)
    tokens, names = _NUMBER.findall(claim) + named, {name.upper() for name in named}
    for i, j in combinations(range(len(ledger)), 2):
        a, b = ledger[i], ledger[j]
        if a.collection != b.collection and names & _organisations(a, b, display):
            continue  # "The IAEA requires X [1][2]" with X from the other organisation's passage: misattributed
        own_a, own_b = _stems(a.text), _stems(b.text)
        share = len(words & (own_a | own_b)) / len(words)
        if share < threshold or share <= best_share:
            continue
        # each passage holds something of the sentence the other does not: else one of them would do alone
        adds = [bool(words & own - other) or any(t in x.text and t not in y.text for t in tokens)
                for own, other, x, y in ((own_a, own_b, a, b), (own_b, own_a, b, a))]
        if all(adds) and sentence_supported(sentence, [a, b], language, display):
            best, best_share = (i + 1, j + 1), share
    return best


_EMPTY_ITEM = re.compile(r"^[ \t]*(?:[-*•]|\d+\.)[ \t]*$\n?", re.MULTILINE)


def _cut(text: str, sentence: str) -> str:
    """`text` without each occurrence of `sentence` and the spaces or tabs before it, or, with none before it (at the
    start of a line), those after it. What `re.sub(r"[ \t]+S|S[ \t]*", "", text)` does, by `str.find`: the regular
    expression tried both branches at every character of the answer, 0.5 ms per withdrawn sentence."""
    if not sentence:
        return text
    kept, start = [], 0
    while (found := text.find(sentence, start)) != -1:
        before = found
        while before > start and text[before - 1] in " \t":
            before -= 1
        end = found + len(sentence)
        if before == found:  # nothing before it: the spaces after it go
            while end < len(text) and text[end] in " \t":
                end += 1
        kept.append(text[start:before])
        start = end
    kept.append(text[start:])
    return "".join(kept)


def withdraw(text: str, sentences: list[str] | tuple[str, ...], correction: str = "") -> str:
    """The answer as a reader of the whole text gets it: without the withdrawn sentences (a list item left empty
    goes too) and without the correction that a stream appends instead."""
    if correction:
        text = text.replace(correction, "")
    for sentence in sentences:
        text = _cut(text, sentence)
    text = _EMPTY_ITEM.sub("", text)
    return re.sub(r"\n{3,}", "\n\n", text).strip("\n")


def unsupported_claims(answer: str, ledger: list[Evidence], language: Language = "nl",
                       display: Callable[[str], str] = str) -> list[str]:
    """Sentences with a claim whose cited evidence does not back them up (uncited claims with numbers too)."""
    flagged = []
    for sentence in claim_sentences(answer):
        cited = cited_numbers(sentence, len(ledger))
        if not cited:
            if _NUMBER.search(_CITE.sub("", sentence)):
                flagged.append(sentence)
        elif not sentence_supported(sentence, [ledger[n - 1] for n in cited], language, display):
            flagged.append(sentence)
    return list(dict.fromkeys(flagged))  # a sentence the model repeated is one claim
