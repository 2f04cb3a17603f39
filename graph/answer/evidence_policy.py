"""Which evidence an answer rests on: the documents of its ledger (`answer_documents`, `answer_ledger`), whether a
model's prompt reads the linked pair of passages (`reads_pair`, `leads`), a comparison's sides, the passages a model's
answer prompt reads (`prompt_passages`), the documents an exploratory answer names and the addresses an answer may
carry. Synthesis asks it of the final state; the evaluation asks it too, to measure what would reach a model's
prompt."""

from __future__ import annotations

from collections.abc import Sequence

from graph.answer.contacts import Allowed
from graph.answer.ledger import Ledger
from graph.config import PipelineConfig
from graph.models import Evidence, Fact, Route, side_by_side, spread


def answer_documents(route: Route, config: PipelineConfig, model: bool, paired: int = 0) -> int:
    """How many documents the answer may rest on: for a model answering a question about one thing (or
    comparing named things), those of the best facts up to `focus_documents` (the five of a plain RAG): on
    HotpotQA the rest were passages sharing a phrase with the question and nothing else, which cost prompt
    tokens and led a small model astray; with `pair_focus`, only the `paired` documents of the linked pair that
    explains the question and its partner (`linked_pair`, `leads`): a small model answers from the two right
    passages (the oracle's prompt) far better than from five that hold them. Overviews, deep dives and
    comparisons of sources read more, and an offline answer quotes only its few key sentences anyway."""
    if spread(route) or not model:
        return config.ledger_limit
    if paired and config.pair_focus:
        return paired
    return min(config.focus_documents, config.ledger_limit)


def reads_pair(route: Route, model: bool) -> bool:
    """Whether the answer reads the best linked pair of passages among the evidence and its partner
    (`graph.text.pairs.linked_pair`) even when no key fact comes from them: a model's, for a question about one
    thing or named things (not `spread`), since a bridge's answer passage may share no word with the question."""
    return model and not spread(route)


def leads(pair: list[Evidence], facts: list[Fact], evidence: list[Evidence]) -> bool:
    """Whether a linked pair explains the question: the best key fact comes from one of its documents. Asked
    for the fundamental safety objective of a standard it names (gold set f16), the best pair linked two other
    standards while the best fact was the named standard's own sentence: the model must read that one."""
    by_id = {e.id: e for e in evidence}
    best = next((by_id[i] for f in facts for i in f.evidence_ids if i in by_id), None)
    return best is not None and any((best.collection, best.doc_id) == (e.collection, e.doc_id) for e in pair)


def answer_ledger(facts: list[Fact], evidence: list[Evidence], route: Route, config: PipelineConfig, model: bool,
                  pair: Sequence[Evidence] = ()) -> tuple[Ledger, dict[str, list[int]]]:
    """What the answer rests on: the ledger of the documents the facts cite (`answer_documents` of them) and a
    comparison's sides. For a model, what its one answer prompt reads, and so all it may cite: the ledger cut to
    the evidence budget (`Ledger.fit`), unless the answer is written side by side (a side reads a few passages);
    when it `reads_pair`, with the linked `pair` (`graph.text.pairs.linked_pair` of the question over the
    evidence; left unread otherwise). The evaluation calls this with `model=True` to measure what would reach the
    prompt."""
    pair = list(pair) if reads_pair(route, model) else []
    paired = len({(e.collection, e.doc_id) for e in pair}) if leads(pair, facts, evidence) else 0
    ledger = Ledger.for_answer(facts, evidence, answer_documents(route, config, model, paired), pair)
    sides = comparison_sides(side_by_side(route), route.collections, ledger, config.prompt_passages)
    if model and not sides:
        ledger = ledger.fit(config.evidence_tokens, config.passage_chars)
    return ledger, sides


def comparison_sides(by_collection: bool, collections: list[str], ledger: Ledger, passages: int
                     ) -> dict[str, list[int]]:
    """A comparison's sides: per routed collection with evidence, the `[n]` of its best passages (ledger order
    is best first per collection), an even share of `passages` (at least 2). Empty unless the question compares
    collections (`by_collection`: `graph.models.side_by_side`) and at least two of them have evidence."""
    if not by_collection:
        return {}
    numbers = {c: [n for n, e in ledger.numbered() if e.collection == c] for c in collections}
    numbers = {c: ns for c, ns in numbers.items() if ns}
    if len(numbers) < 2:
        return {}
    share = max(2, passages // len(numbers))
    return {c: ns[:share] for c, ns in numbers.items()}


def prompt_passages(ledger: Ledger, sides: dict[str, list[int]]) -> list[Evidence]:
    """The entries a model's answer prompt reads: the ledger's, or only the sides' when written side by side."""
    if not sides:
        return list(ledger)
    return [ledger.entries[n - 1] for numbers in sides.values() for n in numbers]


def named_documents(route: Route, found: list[dict], ledger: Ledger) -> list[dict]:
    """Exploratory answers name documents: the title matches the documents tool `found`, plus the documents the
    evidence came from."""
    if route.query_type != "exploratory":
        return []
    documents = list(found)
    known = {d["doc_id"] for d in documents}
    for e in ledger:
        if e.doc_id not in known:
            known.add(e.doc_id)
            documents.append({"collection": e.collection, "doc_id": e.doc_id, "title": e.title, "year": e.year})
    return documents


def allowed_addresses(ledger: Ledger, evidence: list[Evidence], facts: list[Fact]) -> Allowed:
    """The addresses an answer may carry: those of the passages the model reads (the ledger's, which `fit` may
    have cut to the budget) and of the key facts' passages whole (an extractive answer quotes them)."""
    quoted = {i for f in facts for i in f.evidence_ids}
    return Allowed([*ledger.entries, *(e for e in evidence if e.id in quoted)])
