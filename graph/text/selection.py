"""Fact selection: the key sentences of the evidence for a question, or none when no passage covers it (the decline
rule). Every answer's key facts come from here, with a model or without: an offline answer quotes them, a model's
answer prompt lists them and the template answer quotes them when the upstream fails (`graph.nodes.summarize`), and
research's sub-agents condense a source with them. How much of the question a text holds is read by
`graph.text.relevance`; the linked pairs of passages that open and close a focused answer by `graph.text.pairs`."""

from __future__ import annotations

import math
import re
from collections.abc import Collection, Hashable
from typing import NamedTuple

from graph.glossary import Glossary
from graph.models import Evidence, Fact, Language
from graph.text.language import detect_language
from graph.text.pairs import anchored, asked_pairs, best_pair, named_things, partnered
from graph.text.relevance import (
    describes,
    entity_words,
    idf,
    name_stems,
    names_title,
    query_terms,
    question_names,
    respelled,
    stems_of,
    typos,
    weighted_coverage,
)
from graph.tuning import tuning
from textkit.articles import ARTICLE_REF
from textkit.sentences import passage_sentences as sentences


def counts(best: float, top: float, named: bool, spread: bool) -> bool:
    """Whether a collection contributes to an answer: its best passage covers (IDF-weighted) at least
    `tuning.keep_ratio` of what the best passage of all covers, `tuning.prior_ratio` for a collection the question
    names, `tuning.focus_ratio` for a focused answer (not `spread`: the collections of HotpotQA's pooled articles are
    shards of one encyclopedia, and a document that answers need not share a collection with the one that covers
    most)."""
    return best >= (tuning().prior_ratio if named else tuning().keep_ratio if spread else tuning().focus_ratio) * top


def selectable(counted: bool, share: float, linked: bool, named: bool) -> bool:
    """Whether the sentences of a passage holding some of the question's words compete for the answer: of a
    collection that `counts`, covering at least half what the best passage covers (`share`); one of the linked pair
    (`best_pair`); or of a document the question names (`names_title`), however little of the question it holds:
    its sentences speak about what is asked ("In Person is a 1935 film starring …": the film's own passage, in a
    collection whose best passage covers less than another's, was left out; tuning half of HotpotQA, gold articles
    cited 0.885 -> 0.896, documents cited 3.85 -> 3.90, replayed on the run's final evidence)."""
    return (counted and share >= tuning().selectable_share) or linked or named


def article_bonus(evidence: Evidence, article: str) -> float:
    """For a question naming an article ("artikel 15aa"): the passage that is that article (its section or
    title names it, not merely its text) ranks up, its official text ahead of a summary of it."""
    named = [m.group(1).lower() for text in (evidence.section, evidence.title) if (m := ARTICLE_REF.search(text))]
    if article not in named:
        return 0.0
    return tuning().article_bonus * tuning().summary_article_share if evidence.summary else tuning().article_bonus


# A question asking for a number, date or name: sentences holding one that the question does not hold rank up
_ASKS_NUMBER = re.compile(r"\b(hoeveel|how many|how much|wanneer|when|welk jaar|which year|what year|sinds|since|"
                          r"hoe lang|how long|hoe oud|how old|binnen welke|termijn|date|datum)\b", re.IGNORECASE)
_ASKS_NAME = re.compile(r"\b(wie|who|whom|whose|waar|where|welke|which|what|wat)\b", re.IGNORECASE)
ANSWER_BONUS, COVER_BONUS, MIN_SHARE = 1.0, 0.5, 0.3  # tuning halves: the cover bonus barely matters, 0.3 > 0.5

Scored = tuple[float, int, int, str, str]  # a sentence's score, -(its passage's index), -(its index), it, evidence id


class _Reading(NamedTuple):
    """What selection reads of the evidence for one question, once."""

    query: list[frozenset[str]]  # the question's topic words, a name written with a typo read as the passages write it
    stems: list[frozenset[str]]  # per passage
    found: set[str]  # every stem of the evidence
    named_words: list[str]  # the question's names and numbers (`entity_words`)
    fixes: dict[str, frozenset[str]]  # `typos`
    covered: list[tuple[float, int, Evidence]]  # per passage: the share of the topic words it holds, its index, it
    single: float  # the largest share one passage holds


def select_facts(
    question: str,
    ledger: list[Evidence],
    max_facts: int,
    *,
    language: Language = "nl",
    per_source: int = 2,
    min_coverage: float = 0.6,
    prior: frozenset[str] | set[str] = frozenset(),
    spread: bool = True,
    glossary: Glossary | None = None,
    asked: str = "",
) -> list[Fact]:
    """Key sentences for the question from the passages that cover it.

    Declining comes first and is decided per passage: when no passage contains at least `min_coverage` of the question's
    topic words (for a question naming two things, or reaching its subject through a description (`describes`), without
    `spread`: nor two linked passages together, `best_pair`), or a name or number from the question occurs in no passage
    at all, nothing is selected and the question is declined instead of answered with near misses (`min_coverage=0`
    turns this off, for sub-agents researching a source the user named). Then the evidence decides which collections
    count (`counts`): those whose best passage clears `tuning.keep_ratio` of the best one (`tuning.prior_ratio` for the
    collections in `prior`, the ones the question names; `tuning.focus_ratio` without `spread`). Sentences of their
    covering passages, of the linked pair and of the documents the question names (`selectable`) are ranked by the
    IDF-weighted query words they share (rare words count most; the glossary's concepts count as words), in the
    question's language first, named collections, documents the question names and the article it names ahead; at most
    `per_source` per passage. With `spread`, collections take turns so every consulted source is represented (overviews,
    comparisons); else the sentences that together cover the question win (`_covering`), opened by a sentence of each of
    two linked passages (`best_pair`, `pair_sentences`) when together they hold more of the question than any one
    passage, from at most `tuning.answer_documents` documents, and closed, past `max_facts`, by a sentence of each
    document of the linked pair the answer rests on that it does not cite (`completing`). `asked`: the question as the
    user typed it, when `question` is a search query made of it (without its small words: "Queen Blood" no longer names
    the film "Queen of Blood"), for what reads names and titles."""
    read = _read(question, ledger, glossary)
    if read is None:
        return []
    asked = asked or question
    pair = best_pair(read.query, read.stems, ledger, asked) if not spread else None
    if min_coverage and _declined(read, pair, ledger, asked, min_coverage, glossary):
        return []
    competing = _competing(read, ledger, prior, spread, pair, asked)
    candidates = [(i, j, sentence, e, stems_of(sentence, glossary))
                  for i, e in competing for j, sentence in enumerate(sentences(e.text))]
    total = len(candidates) or 1
    weight = {t: idf(total, sum(bool(t & c[4]) for c in candidates)) for t in read.query}
    scored = _scored(candidates, read.query, weight, _asked_article(question), asked, language, prior)
    if spread:
        by_collection: dict[str, list[Scored]] = {}
        for collection, item in scored:
            by_collection.setdefault(collection, []).append(item)
        return _taking_turns(list(by_collection.values()), max_facts, per_source)
    # two linked passages that hold more of the question than any one passage open the answer, one sentence each (a
    # bridge's second passage may share few words with the question, so ranking alone would drop it)
    opening = (pair_sentences([ledger[i] for i in pair[1]], read.query, weight, asked, glossary)
               if pair is not None and pair[0] > read.single else [])
    document = {e.id: (e.collection, e.doc_id) for e in ledger}
    facts = _covering([item for _, item in scored], read.query, weight, question, max_facts, per_source, glossary,
                      opening, document)
    return facts + _closing(facts, read, ledger, document, weight, asked, glossary)


def _read(question: str, ledger: list[Evidence], glossary: Glossary | None) -> _Reading | None:
    """The question's topic words and the passages' stems, None when the question has no topic word or there is
    no evidence. A name written with a typo is read as the passages write it (`typos`)."""
    query = query_terms(question, glossary)
    if not query or not ledger:
        return None
    stems = [stems_of(e.text, glossary) for e in ledger]
    found = set().union(*stems)
    named_words = entity_words(question)
    fixes = typos(named_words, found)
    query = [respelled(t, fixes) for t in query]
    covered = [(sum(bool(t & s) for t in query) / len(query), i, e)
               for i, (e, s) in enumerate(zip(ledger, stems, strict=True))]
    return _Reading(query, stems, found, named_words, fixes, covered, max(c for c, _, _ in covered))


def _declined(read: _Reading, pair: tuple[float, tuple[int, int]] | None, ledger: list[Evidence], asked: str,
              min_coverage: float, glossary: Glossary | None) -> bool:
    """The decline rule (`select_facts`): a name or number of the question is in no passage, or no passage (nor
    the linked pair that counts as one, `_pair_counts`) holds `min_coverage` of its topic words, or they do not meet
    in the text (`_focused`)."""
    topic = set().union(*read.query)
    names = [respelled(named, read.fixes) for word in read.named_words
             if (named := frozenset(name_stems(word))) and named <= topic]
    if any(not named & read.found for named in names):
        return True
    covers = read.single >= min_coverage or _pair_counts(pair, ledger, asked)
    return not covers or not _focused(read.query, names, ledger, glossary)


def _pair_counts(pair: tuple[float, tuple[int, int]] | None, ledger: list[Evidence], asked: str) -> bool:
    """Whether two linked passages count as one for the decline rule: for a question naming two things, through two
    linked passages (a bridge) or about both, or one describing what it asks about ("the man who …": a bridge through a
    thing it does not name; tuning half of HotpotQA, gold articles cited 0.928 -> 0.930, the Dutch gold set's
    unanswerable questions, which describe nothing, stay declined), when together they hold `tuning.pair_coverage` of
    its topic words, or each is the document of a thing it names."""
    return pair is not None and (len(question_names(asked)) >= 2 or describes(asked)) and (
        pair[0] >= tuning().pair_coverage or named_things(pair, ledger, asked))


def _competing(read: _Reading, ledger: list[Evidence], prior: Collection[str], spread: bool,
               pair: tuple[float, tuple[int, int]] | None, asked: str) -> list[tuple[int, Evidence]]:
    """The passages whose sentences compete for the answer (`selectable`), with their indexes: of the collections
    that count (`counts`), of the linked pair, of the documents the question names."""
    weighted = weighted_coverage(read.query, read.stems)
    top = max(weighted)
    best: dict[str, float] = {}
    for e, w in zip(ledger, weighted, strict=True):
        best[e.collection] = max(best.get(e.collection, 0.0), w)
    kept = {c for c, w in best.items() if counts(w, top, c in prior, spread)}
    linked = set(pair[1]) if pair else set()
    return [(i, e) for c, i, e in read.covered
            if c > 0 and selectable(e.collection in kept, weighted[i] / top if top else 0.0, i in linked,
                                    names_title(e.title, asked))]


def _asked_article(question: str) -> str:
    """The article a question names ("artikel 15aa" -> "15aa"), "" when none."""
    return m.group(1).lower() if (m := ARTICLE_REF.search(question)) else ""


def _scored(candidates: list[tuple[int, int, str, Evidence, frozenset[str]]], query: list[frozenset[str]],
            weight: dict[frozenset[str], float], article: str, asked: str, language: Language,
            prior: Collection[str]) -> list[tuple[str, Scored]]:
    """Each candidate sentence holding a topic word, or of the article the question names, scored, with its collection,
    in candidate order: the IDF weight of the topic words it holds (`tuning.other_language_factor` of it in another
    language), plus `tuning.relevance_weight` of its passage's relevance, `tuning.prior_bonus` in a collection the
    question names, `tuning.title_bonus` in a document it names and the `article_bonus`."""
    scored = []
    for i, j, sentence, evidence, sentence_stems in candidates:
        score = sum(weight[t] for t in query if t & sentence_stems)
        bonus = article_bonus(evidence, article) if article else 0.0  # its sentences need not repeat the question
        if not score and not bonus:
            continue
        if detect_language(sentence, default=language) != language:
            score *= tuning().other_language_factor
        score += tuning().relevance_weight * evidence.relevance
        score += tuning().prior_bonus if evidence.collection in prior else 0.0
        if names_title(evidence.title, asked):
            score += tuning().title_bonus  # a document about something the question names: its sentences speak about it
        score += bonus
        scored.append((evidence.collection, (score, -i, -j, sentence, evidence.id)))
    return scored


def _taking_turns(collections: list[list[Scored]], max_facts: int, per_source: int) -> list[Fact]:
    """An answer spread over its sources: the collections take turns, the one with the best sentence first, each
    giving its best sentence not yet taken, at most `per_source` per passage."""
    queues = [sorted(items, reverse=True) for items in collections]
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


def _closing(facts: list[Fact], read: _Reading, ledger: list[Evidence], document: dict[str, Hashable],
             weight: dict[frozenset[str], float], asked: str, glossary: Glossary | None) -> list[Fact]:
    """What closes a focused answer, one sentence each: the passages of the linked pair (and its partner) whose
    documents it lacks (a bridge's answer passage, `completing`), then those of the best pair through a document it
    cites (`anchored`), and the documents the question names (`named_passages`)."""
    pairs = asked_pairs(asked, ledger, glossary)
    pair_of = partnered(pairs, ledger)
    cited = {document.get(i) for f in facts for i in f.evidence_ids}
    through = [e for e in anchored(pairs, ledger, cited, document) if e not in pair_of]
    partners = completing(facts, pair_of + through, document)
    partners += named_passages([(c, e) for c, _, e in read.covered], asked, document,
                               cited | {document.get(e.id) for e in partners})
    held = frozenset().union(*(stems_of(f.text, glossary) for f in facts))
    return [Fact(text=sentence, evidence_ids=[eid])
            for sentence, eid, _ in pair_sentences(partners, read.query, weight, asked, glossary, held)
            if all(f.text != sentence for f in facts)]


def _focused(query: list[frozenset[str]], names: list[set[str]], ledger: list[Evidence],
             glossary: Glossary | None) -> bool:
    """Whether the question's topic words meet in the text, not only scattered over a passage: a name of the
    question and another of its topic words in one sentence or two adjacent ones, or, for a question naming
    nothing, half its topic words (at most `tuning.focus_words`) in one sentence; a sentence is read with its
    document's title. A chunk about Borssele holds "kernreactoren", "bedrijf" and, elsewhere, "Frankrijk", yet
    says nothing about the reactors France operates; "waters", "sea", "levels" and "point" spread over a treaty
    do not answer "the boiling point of water at sea level"."""
    in_names = {k for k, t in enumerate(query) if any(t & named for named in names)}
    if names and len(in_names) == len(query):  # the question is only the name: where it occurs is enough
        return True
    need = min(math.ceil(len(query) / 2), tuning().focus_words)
    for e in ledger:
        title = stems_of(e.title, glossary)
        held = [{k for k, t in enumerate(query) if t & (stems_of(s, glossary) | title)} for s in sentences(e.text)]
        if not held:  # a passage without a sentence (all of it withheld, `graph.text.injection`)
            continue
        if not names and any(len(h) >= need for h in held):
            return True
        windows = (here | after for here, after in zip(held, [*held[1:], set()], strict=True))
        if names and any(w & in_names and w - in_names for w in windows):
            return True
    return False


def _answer_bonus(sentence: str, question: str) -> float:
    asked = {w.lower() for w in re.findall(r"[\w'-]+", question)}
    if _ASKS_NUMBER.search(question) and any(n not in asked for n in re.findall(r"\b\d[\d.,]*\b", sentence)):
        return ANSWER_BONUS
    words = re.findall(r"[\w'-]+", sentence)
    named = (w for i, w in enumerate(words) if i > 0 and w[:1].isupper())
    if _ASKS_NAME.search(question) and any(w.lower() not in asked for w in named):
        return ANSWER_BONUS * tuning().name_answer_share
    return 0.0


def pair_sentences(pair: list[Evidence], query: list[frozenset[str]], weight: dict, question: str,
                   glossary: Glossary | None, held: frozenset[str] = frozenset()
                   ) -> list[tuple[str, str, frozenset[str]]]:
    """The opening facts of an answer through two linked passages (`best_pair`), or the closing ones of the
    passages that complete it (`completing`, `held`: the stems the answer's sentences hold already): from each,
    in turn, the sentence holding the most weight of the topic words not yet held, then the kind of answer asked
    for, then the earliest (a document's first sentence says what its title is: the bridge). As (sentence,
    evidence id, stems)."""
    covered: set[int] = {m for m, t in enumerate(query) if t & held}
    out = []
    for e in pair:
        options = [(k, sentence, stems_of(sentence, glossary)) for k, sentence in enumerate(sentences(e.text))]
        if not options:
            continue
        held = covered
        _, sentence, stems = max(options, key=lambda o: (
            sum(weight[t] for m, t in enumerate(query) if m not in held and t & o[2]),
            _answer_bonus(o[1], question), -o[0]))
        covered = covered | {m for m, t in enumerate(query) if t & stems}
        out.append((sentence, e.id, stems))
    return out


def admits(document: Hashable, documents: Collection[Hashable], limit: int | None = None) -> bool:
    """Whether a sentence of `document` may join an answer whose sentences come from `documents`: one of them,
    or a new one while there are fewer than `limit`. A sentence of a fifth document rarely adds the article an
    answer needs (default `tuning.answer_documents`) and costs the reader a source to check."""
    return document in documents or len(documents) < (tuning().answer_documents if limit is None else limit)


def named_passages(covered: list[tuple[float, Evidence]], question: str, document: dict[str, Hashable],
                   cited: Collection[Hashable]) -> list[Evidence]:
    """For each document the question names (`names_title`) that an answer does not cite (`cited`), its passage
    covering most of the question (`covered`: (share of its topic words, passage)), in evidence order: what the
    question asks about speaks in its answer, one sentence each (`pair_sentences`). `document`: passage id -> its
    document."""
    best: dict[Hashable, tuple[float, Evidence]] = {}
    for share, e in covered:
        key = document.get(e.id)
        if key not in cited and names_title(e.title, question) and share > best.get(key, (-1.0, e))[0]:
            best[key] = (share, e)
    return [e for _, e in best.values()]


def completing(facts: list[Fact], pair: list[Evidence], document: dict[str, Hashable]) -> list[Evidence]:
    """The passages of the linked pair (`linked_pair`: a bridge, or two things the question names, and its
    partner) whose documents the answer's facts do not cite yet, one per document, when the facts cite one of
    the pair's documents: the pair then explains the answer, and its other half is the passage that says what
    the first one's name leads to (a bridge's answer passage shares few words with the question, so the covering
    sentences leave it out). A pair none of whose documents the answer cites is another reading of the question:
    nothing. `document`: passage id -> its document."""
    cited = {document.get(i) for f in facts for i in f.evidence_ids}
    if not cited & {document.get(e.id) for e in pair}:
        return []
    return list({document.get(e.id): e for e in pair if document.get(e.id) not in cited}.values())


def _covering(items: list[tuple[float, int, int, str, str]], query: list[frozenset[str]], weight: dict,
              question: str, max_facts: int, per_source: int, glossary: Glossary | None,
              opening: list[tuple[str, str, frozenset[str]]] = (), document: dict[str, Hashable] | None = None
              ) -> list[Fact]:
    """The best sentences that together answer the question: greedily, the one with the best score plus the
    weight of the topic words no chosen sentence holds yet (so the sentence that completes a bridge question
    joins the one that starts it) plus a bonus when it holds the kind of answer asked for (a number, a name);
    sentences scoring under `MIN_SHARE` of the best are never chosen, nor those of a document `admits` keeps out
    (`document`: passage id -> its document; without it, passages count as documents)."""
    if not items and not opening:
        return []
    scored = [(score + _answer_bonus(sentence, question), i, j, sentence, eid, stems_of(sentence, glossary))
              for score, i, j, sentence, eid in items]
    floor = MIN_SHARE * max((s[0] for s in scored), default=0.0)
    left = [s for s in scored if s[0] >= floor]
    covered: set[int] = set()
    taken: dict[str, int] = {}
    facts: list[Fact] = []

    def of(evidence_id: str) -> Hashable:
        return document.get(evidence_id, evidence_id) if document else evidence_id

    for sentence, eid, held in opening:
        taken[eid] = taken.get(eid, 0) + 1
        covered |= {k for k, t in enumerate(query) if t & held}
        facts.append(Fact(text=sentence, evidence_ids=[eid]))
    def gain(s: tuple, covered: set[int]) -> tuple[float, int, int]:
        new = sum(weight[t] for k, t in enumerate(query) if k not in covered and t & s[5])
        return (s[0] + COVER_BONUS * new, s[1], s[2])

    while left and len(facts) < max_facts:
        choice = max(left, key=lambda s: gain(s, covered))
        left.remove(choice)
        if taken.get(choice[4], 0) >= per_source or any(f.text == choice[3] for f in facts):
            continue
        if not admits(of(choice[4]), {of(i) for f in facts for i in f.evidence_ids}):
            continue
        taken[choice[4]] = taken.get(choice[4], 0) + 1
        covered |= {k for k, t in enumerate(query) if t & choice[5]}
        facts.append(Fact(text=choice[3], evidence_ids=[choice[4]]))
    return facts

