"""Linked pairs of passages: two passages of different documents that answer a question together, because one names
the document of the other (a bridge: "the composer of Chaconne in F minor" -> Johann Pachelbel) or each is the
document of a thing the question names (a comparison). Ranked by the question's topic words they hold together and
by their link (`ranked_pairs`); fact selection opens and closes a focused answer with them, and a model's answer
prompt reads the best pair and its partner (`linked_pair`)."""

from __future__ import annotations

from collections.abc import Collection, Hashable
from functools import lru_cache
from typing import NamedTuple

from graph.glossary import Glossary
from graph.models import Evidence
from graph.text.relevance import idf_weights, names_title, query_terms, stems_of, title_core
from graph.tuning import tuning
from textkit import analyze

Ranked = tuple[float, float, tuple[int, int]]  # a pair's score, the share of topic words it holds, its two indexes


def holds_phrase(text: str, phrase: str) -> bool:
    """Whether `phrase` occurs in `text` as words, not inside a longer word ("Change" is not in "changed")."""
    start = text.find(phrase)
    while start >= 0:
        end = start + len(phrase)
        if (start == 0 or not text[start - 1].isalnum()) and (end == len(text) or not text[end].isalnum()):
            return True
        start = text.find(phrase, start + 1)
    return False


@lru_cache(maxsize=4096)  # pairs of passages compare the same titles over and over (`best_pair`)
def _title_words(core: str) -> tuple[frozenset[str], ...]:
    return tuple(analyze(core))


@lru_cache(maxsize=65536)  # `ranked_pairs` reads each pair both ways, and runs in selection and in synthesis
def _names_share(text: str, title: str) -> float:
    """How plainly a passage's `text` names the document `title` is the title of: 1.0 when it holds the title
    (without qualifier) in full, as words (`holds_phrase`: "Change" is not named by "changed"; tuning half of
    HotpotQA, gold articles cited 0.925 -> 0.927), else the share of the title's words it holds, when the title has
    two or more ("Manchester United F.C. in European football" from a passage on Old Trafford)."""
    name = title_core(title)
    if len(name) > 3 and holds_phrase(text.lower(), name):
        return 1.0
    words = _title_words(name)
    if len(words) < 2:
        return 0.0
    have = stems_of(text)
    return sum(bool(w & have) for w in words) / len(words)


class _Side(NamedTuple):
    """What `_linked` reads of a passage, read once per question (`ranked_pairs` compares every pair)."""

    doc: str
    core: str  # `title_core`
    named: bool  # `names_title`: the question names its document
    text: str
    title: str


def _side(e: Evidence, question: str) -> _Side:
    return _side_of(e.doc_id, e.title, e.text, question)


def _side_of(doc: str, title: str, text: str, question: str) -> _Side:
    return _Side(doc, title_core(title), names_title(title, question), text, title)


def _link(a: Evidence, b: Evidence, question: str) -> float:
    """How strongly two passages belong together for a question (`_linked`)."""
    return _linked(_side(a, question), _side(b, question))


def _linked(a: _Side, b: _Side) -> float:
    """How strongly two passages belong together: each is about a different thing the question names (a
    comparison: 1.0), or one names the document of the other (a bridge: `_names_share`, either way, counted
    from `tuning.link_min`); 0 otherwise."""
    if a.doc == b.doc:
        return 0.0
    if a.core in b.core or b.core in a.core:  # "Fall River" and "Fall River (Idaho)": one name, not a bridge
        return 0.0
    if a.named and b.named:
        return 1.0
    # the bridge: a passage names the document of the other, which the question does not name (tuning half: this
    # reading of "names" beats the title held in any case, 0.745 to 0.739)
    strength = max(_names_share(a.text, b.title) if not b.named else 0.0,
                   _names_share(b.text, a.title) if not a.named else 0.0)
    return strength if strength >= tuning().link_min else 0.0


def _partners(sides: list[_Side]) -> list[set[int]]:
    """For each passage, the passages `_linked` may link it to (a superset): both naming things the question names,
    or one holding `tuning.link_min` of the other's title. Read per title rather than per pair: a ledger has a few dozen
    passages from a dozen documents, and `ranked_pairs` would otherwise test every pair it meets (twice a request)."""
    by_title: dict[str, list[int]] = {}
    for k, side in enumerate(sides):
        by_title.setdefault(side.title, []).append(k)
    named = {k for k, side in enumerate(sides) if side.named}
    partners = [set(named) if side.named else set() for side in sides]
    for title, titled in by_title.items():
        for k, side in enumerate(sides):
            if _names_share(side.text, title) >= tuning().link_min:  # k names the document of every passage in `titled`
                partners[k].update(titled)
                for t in titled:
                    partners[t].add(k)
    return partners


Passages = tuple[tuple[str, str, str], ...]  # each passage's (document, title, text): all the pair ranking reads


def _passages(ledger: list[Evidence]) -> Passages:
    return tuple((e.doc_id, e.title, e.text) for e in ledger)


@lru_cache(maxsize=16)
def _pair_index(question: str, passages: Passages) -> tuple[list[_Side], list[set[int]]]:
    """What `ranked_pairs` reads of a ledger whatever the query: each passage's side and its possible partners.
    Selection ranks the pairs of one ledger for one question twice, with two queries (the decline rule's pair for
    the search query, `asked_pairs` for the question as asked): this is read once. Callers must not change what it
    returns."""
    sides = [_side_of(doc, title, text, question) for doc, title, text in passages]
    return sides, _partners(sides)


def pair_score(share: float, link: float, named: int) -> float:
    """The score of two linked passages: `share`, the IDF-weighted share of the question's topic words they hold
    together, plus `tuning.link_weight` times their `link` (a partial link, three of the four words of "Nevada Union
    High School" in a passage on another school in Nevada, is weak evidence of a bridge: it counts as its strength to
    the `tuning.link_power`, far less than a title named in full), and more when the question names one of the two
    documents (`named`: a bridge from the thing it names, `tuning.from_named_weight`) or both (two things compared,
    `tuning.named_weight`)."""
    t = tuning()
    bonus = link ** t.link_power + t.named_weight * (named == 2) + t.from_named_weight * (named == 1)
    return share + t.link_weight * bonus


def ranked_pairs(query: list[frozenset[str]], stems: list[frozenset[str]], ledger: list[Evidence], question: str
                 ) -> list[Ranked]:
    """Every two linked passages (`_link`), best first by `pair_score`: a bridge question's words are spread over
    the passage that names the bridge and the one about it, which may share few words with the question. The
    first passage is one of the `tuning.pair_first` covering most, the second any. Each pair as (its score, the share of
    topic words it holds unweighted, as the decline rule reads coverage, the two indexes)."""
    return _ranked(query, stems, _passages(ledger), question)


def _ranked(query: list[frozenset[str]], stems: list[frozenset[str]], passages: Passages, question: str
            ) -> list[Ranked]:
    weight = idf_weights(query, stems)
    total = sum(weight) or 1.0
    hits = [frozenset(k for k, t in enumerate(query) if t & s) for s in stems]
    order = sorted(range(len(stems)), key=lambda i: -sum(weight[k] for k in hits[i]))
    scored: list[Ranked] = []
    sides, partners = _pair_index(question, passages)
    for i in order[:tuning().pair_first]:
        if not hits[i]:
            continue
        for j in order:
            if j not in partners[i] or sides[i].doc == sides[j].doc:
                continue
            link = _linked(sides[i], sides[j])
            if not link:
                continue
            union = hits[i] | hits[j]
            named = sides[i].named + sides[j].named  # how many of the two documents the question names
            scored.append((pair_score(sum(weight[k] for k in union) / total, link, named), len(union) / len(query),
                           (i, j)))
    scored.sort(key=lambda t: -t[0])  # stable: of equal pairs, the one whose first passage covers more
    return scored


def best_pair(query: list[frozenset[str]], stems: list[frozenset[str]], ledger: list[Evidence], question: str
              ) -> tuple[float, tuple[int, int]] | None:
    """The best of `ranked_pairs` as (coverage, indexes), or None when no two passages are linked."""
    best = next(iter(ranked_pairs(query, stems, ledger, question)), None)
    return None if best is None else best[1:]


def linked_pair(question: str, evidence: list[Evidence], glossary: Glossary | None = None) -> list[Evidence]:
    """The two passages of the best linked pair over all the evidence (`ranked_pairs`: a bridge, one naming the other's
    document; or the documents of two things the question names), then the partner the next pairs give either of them
    when the best pair is not clearly best: the other passage of the best next pair that shares one of their documents,
    adds one and scores within `tuning.partner_margin` of the best. When the best pair is right in one half only, the
    prompt still holds the other (tuning half of HotpotQA: both gold articles in a model's prompt 0.76 -> 0.81, as with
    a partner for every pair, but with 0.24 fewer documents per prompt). [] when no two passages are linked."""
    return partnered(asked_pairs(question, evidence, glossary), evidence)


def asked_pairs(question: str, evidence: list[Evidence], glossary: Glossary | None = None) -> list[Ranked]:
    """`ranked_pairs` over all the evidence for the question's topic words ([] when it has none). Selection and
    synthesis both ask it of the same evidence: it is ranked once (`_asked_pairs`)."""
    if len(evidence) < 2:
        return []
    return list(_asked_pairs(question, glossary, _passages(evidence)))


@lru_cache(maxsize=16)
def _asked_pairs(question: str, glossary: Glossary | None, passages: Passages) -> tuple[Ranked, ...]:
    query = query_terms(question, glossary)
    if not query:
        return ()
    return tuple(_ranked(query, [stems_of(text, glossary) for _, _, text in passages], passages, question))


def partnered(ranked: list[Ranked], evidence: list[Evidence]) -> list[Evidence]:
    """The best of `ranked` pairs and its partner (`linked_pair`)."""
    if not ranked:
        return []
    best, _, (i, j) = ranked[0]
    documents = {evidence[i].doc_id, evidence[j].doc_id}
    partner = next((k for score, _, pair in ranked[1:] if best - score <= tuning().partner_margin for k in pair
                    if evidence[k].doc_id not in documents and {evidence[m].doc_id for m in pair} & documents), None)
    return [evidence[i], evidence[j]] + ([] if partner is None else [evidence[partner]])


def anchored(ranked: list[Ranked], evidence: list[Evidence], cited: Collection[Hashable],
             document: dict[str, Hashable]) -> list[Evidence]:
    """The best of the `ranked` pairs (`ranked_pairs`) one of whose documents an answer cites (`cited`), [] when
    none: where the best pair of all is another reading of the question, the pair through what the answer says
    holds the document its bridge leads to (tuning half of HotpotQA, with `named_passages` and 3
    `tuning.answer_documents`: gold articles cited 0.906 -> 0.909, documents cited 3.57 -> 3.63, replayed on the run's
    final evidence). `document`: passage id -> its document."""
    cited = set(cited)
    return next(([evidence[i], evidence[j]] for _, _, (i, j) in ranked
                 if {document.get(evidence[i].id), document.get(evidence[j].id)} & cited), [])


def named_things(pair: tuple[float, tuple[int, int]], ledger: list[Evidence], question: str) -> bool:
    """Each passage of the pair is from the document about a different thing the question names (its title)."""
    i, j = pair[1]
    return title_core(ledger[i].title) != title_core(ledger[j].title) and all(
        names_title(ledger[k].title, question) for k in (i, j))
