"""Deterministic strategies for offline mode and for upstream failures: extractive facts, template answers."""

from __future__ import annotations

import math
import re
from collections.abc import Callable

from graph import messages
from graph.language import detect_language
from graph.ledger import Ledger, answer_order
from graph.models import Evidence, Fact, Language
from textkit import analyze

_HEADER = re.compile(r"^\s*\[[^\]\n]{1,200}\]\s*\n")
_ABBREVIATIONS = ("Rev.", "rev.", "nr.", "Nr.", "art.", "Art.", "No.", "no.", "bijv.", "o.a.", "e.g.", "i.e.", "Vol.", "jo.", "Stb.", "Stcrt.", "Trb.", "lid.")
_SENTENCE = re.compile(
    "".join(f"(?<!{re.escape(a)})" for a in _ABBREVIATIONS) + r"(?<=[.!?])\s+(?=[A-Z0-9ÀÉÈËÏÖÜ(\"'])"
)


def sentences(text: str) -> list[str]:
    body = _HEADER.sub("", text.strip(), count=1)
    out = []
    for paragraph in re.split(r"\n\s*\n", body):
        paragraph = " ".join(paragraph.split()).lstrip("> ").strip()
        out += [s.strip() for s in _SENTENCE.split(paragraph) if len(s.strip()) > 25]
    return out


def _stems(text: str) -> set[str]:
    return set().union(*analyze(text)) if text.strip() else set()


# Question words carry no topic: they must not make an off-topic passage look relevant.
_QUESTION_WORDS = set(
    "hoeveel hoe wat wanneer welke welk wie waar waarom waardoor waarmee kan kunnen mag moet is zijn heeft hebben "
    "sinds binnen vanaf tot houdt bij jaar jaartal datum termijn periode aantal "
    "how many much what when which who where why can could may must does do is are has have since within "
    "year date period number".split()
)  # the last words of each language name the kind of answer ("which year"), which the answer does not repeat


def query_terms(question: str) -> list[frozenset[str]]:
    """One stem set per distinct topic word of the question (a word matches when any of its stems does)."""
    words = " ".join(w for w in re.findall(r"[\w/.-]+", question) if w.lower() not in _QUESTION_WORDS)
    return list(dict.fromkeys(analyze(words))) if words.strip() else []


def entity_words(question: str) -> list[str]:
    """Names and numbers in the question (capitalised words after the first, words with digits)."""
    words = re.findall(r"[\w/.-]+", question)
    return [w for i, w in enumerate(words) if any(c.isdigit() for c in w) or (i > 0 and w[:1].isupper())]


def coverage(query: list[frozenset[str]], text: str) -> float:
    """Share of the query's topic words that occur in a passage (title and section included)."""
    stems = _stems(text)
    return sum(bool(t & stems) for t in query) / len(query) if query else 0.0


def select_facts(
    question: str,
    ledger: list[Evidence],
    max_facts: int,
    *,
    language: Language = "nl",
    per_source: int = 2,
    min_coverage: float = 0.6,
) -> list[Fact]:
    """Key sentences for the question from the passages that cover it.

    Declining comes first and is decided per passage: when no passage contains at least `min_coverage` of
    the question's topic words, or a name or number from the question occurs in no passage at all, nothing
    is selected and the question is declined instead of answered with near misses (`min_coverage=0` turns
    this off, for sub-agents researching a source the user named). Then sentences of the covering passages
    are ranked by the IDF-weighted query words they share (rare words count most), in the question's
    language first; at most `per_source` per passage, collections taking turns so every consulted source
    is represented; ties keep ledger order."""
    query = query_terms(question)
    if not query or not ledger:
        return []
    covered = [(coverage(query, e.text), i, e) for i, e in enumerate(ledger)]
    best = max(c for c, _, _ in covered)
    if min_coverage:
        found = set().union(*(_stems(e.text) for e in ledger))
        for word in entity_words(question):
            stems = {s for group in analyze(word) for s in group}
            if stems and stems <= set().union(*query) and not stems & found:
                return []
        if best < min_coverage:
            return []
    passages = [(i, e) for c, i, e in covered if c >= 0.5 * best and c > 0]
    candidates = [(i, j, sentence, e, _stems(sentence)) for i, e in passages for j, sentence in enumerate(sentences(e.text))]
    total = len(candidates) or 1
    weight = {t: math.log(1 + total / (1 + sum(bool(t & c[4]) for c in candidates))) for t in query}
    ranked: dict[str, list[tuple[float, int, int, str, str]]] = {}
    for i, j, sentence, evidence, stems in candidates:
        score = sum(weight[t] for t in query if t & stems)
        if not score:
            continue
        if detect_language(sentence, default=language) != language:
            score *= 0.7
        score += 0.5 * evidence.relevance
        ranked.setdefault(evidence.collection, []).append((score, -i, -j, sentence, evidence.id))
    queues = [sorted(items, reverse=True) for items in ranked.values()]
    queues.sort(key=lambda q: -q[0][0])
    taken: dict[str, int] = {}
    facts: list[Fact] = []
    while queues and len(facts) < max_facts:
        for queue in list(queues):
            while queue and taken.get(queue[0][4], 0) >= per_source:
                queue.pop(0)
            if not queue:
                queues.remove(queue)
                continue
            _score, _i, _j, sentence, evidence_id = queue.pop(0)
            taken[evidence_id] = taken.get(evidence_id, 0) + 1
            facts.append(Fact(text=sentence, evidence_ids=[evidence_id]))
            if len(facts) >= max_facts:
                break
    return facts


def template_answer(
    facts: list[Fact],
    ledger: Ledger,
    language: Language,
    display: Callable[[str], str],
    banner: str,
    documents: list[dict] | None = None,
) -> str:
    """A cited answer built from facts (each sentence once): grouped per collection when more than one
    collection contributes, in the order that numbered the ledger (`answer_order`), so `[n]` rise as they
    are first cited."""
    groups: dict[str, list[str]] = {}
    written: set[str] = set()
    for fact in answer_order(facts, ledger.passages()):
        cites, entry = ledger.marks(fact), next(filter(None, map(ledger.entry, fact.evidence_ids)), None)
        if cites and entry and fact.text not in written:
            written.add(fact.text)
            groups.setdefault(entry.collection, []).append(f"- {fact.text} {cites}")
    parts = [banner]
    if documents:
        parts += ["", messages.line("documents_intro", language)]
        for doc in documents:
            year = f" ({doc['year']})" if doc.get("year") else ""
            parts.append(f"- {display(doc['collection'])}: {doc['title']}{year}")
    parts += ["", messages.line("intro", language)]
    if len(groups) == 1:
        parts += next(iter(groups.values()))
    else:
        for collection, lines in groups.items():
            parts += ["", f"**{display(collection)}**", *lines]
    return "\n".join(parts)
