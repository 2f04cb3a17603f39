"""Searches that evidence suggests: the names a question is about, and the bridge names first-hop evidence gives.

A question about two named things ("Who is older, A or B?") is searched for each name on its own as well as
whole: one BM25 query with both names ranks passages that mention either, rarely both articles. A question that
goes through an intermediate entity ("the band that recorded album X was formed in which city?") needs a second
hop: the first hop finds the passage about X, which names the band; the band's name plus the words of the
question that passage does not cover is the next query; the names first-hop passages give are also looked up as
document titles (`link_candidates`, `titled`: the judge asks `list_documents`). Pure functions over text; the loop
decides when to use them (`graph/loop.py`). Written by hand: the names come from capitalisation and quotes, which
no library here extracts for both Dutch and English without a model.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Protocol, TypeVar

from graph.glossary import Glossary
from graph.models import Evidence, Fact
from graph.text.relevance import names_title, query_terms, stems_of, title_core, unqualified, weighted_coverage
from graph.tuning import tuning
from textkit import STOPWORDS
from textkit.sentences import BOUNDARY as SENTENCE_BOUNDARY

# A name: capitalised words (or words with digits), joined by short lower-case connectors ("Folie à Deux",
# "United States Merchant Marine Academy", "GSR Part 2", "Lemony Snicket's A Series of Unfortunate Events")
_NAME = re.compile(
    r"(?<![\w'’])(?:[A-Z][\w'’.&/-]*)(?:\s+(?:(?:of|the|de|van|der|den|het|la|le|du|des|à|for|on|in|a)\s+)*"
    r"[A-Z0-9][\w'’.&/-]*)*"
)
_QUOTED = re.compile(r"\"([^\"]{2,100})\"|“([^”]{2,100})”")
_LEADING = set(
    "what which who whom whose where when why how is are was were does do did can could has have had in on at of "
    "the a an and or both wat welke welk wie waar wanneer waarom hoe is zijn was waren heeft hebben kan mag moet "
    "de het een en of in op bij van volgens".split()
)


def _clean(span: str) -> str:
    words = span.split()
    while words and words[0].lower() in _LEADING:
        words = words[1:]
    return re.sub(r"['’]s$", "", " ".join(words)).strip(" .,:;'’")


def names(text: str, exclude: set[str] | frozenset[str] = frozenset()) -> list[str]:
    """The names in a text, in order, without repeats: quoted titles first, then capitalised spans (a question's
    opening word and words in `exclude`, such as collection names, are not names)."""
    found = [a or b for a, b in _QUOTED.findall(text)]
    rest = _QUOTED.sub(" , ", text)
    # a name does not run on past the end of a sentence ("… starring Ginger Rogers. It made …"): the one rule of
    # where sentences end, not after an abbreviation or an initial ("St. Louis", "F.C.")
    found += [_clean(part) for m in _NAME.finditer(rest) for part in SENTENCE_BOUNDARY.split(m.group(0))]
    out: dict[str, None] = {}
    for name in found:
        name = name.strip()
        if len(name) < 2 or name.lower() in exclude or name.lower() in STOPWORDS or name.isdigit():
            continue
        out.setdefault(name, None)
    return list(out)


def entity_queries(question: str, focus: str, exclude: set[str]) -> list[str]:
    """Each named thing of a question about two or more, searched on its own (nothing for a question about one
    name or none: its focus query is already about it)."""
    found = [n for n in names(question, exclude) if n.lower() != focus.lower()]
    return found[:tuning().max_bridges] if len(found) >= 2 else []


# Two named things a question lists side by side: "A or B", "A and B", "A, B", "A vs. B", "A en B", "A of B"
_JOIN = "or|and|en|of"
_LISTED = (rf"\s*(?:,\s*(?:(?:{_JOIN})\s+)?|\s(?:{_JOIN}|vs\.?|versus)\s+)\s*"
           r"(?:(?:the|a|an|de|het|een)\s+)?")


def listed_things(question: str, exclude: set[str] | frozenset[str] = frozenset()) -> list[str]:
    """The named things a question lists side by side ("Who is older, Ferdi Taygan or Mahesh Bhupathi?"), in
    order; empty for a question about one thing."""
    found = names(question, exclude)
    pairs = [(a, b) for a, b in zip(found, found[1:], strict=False)
             if re.search(re.escape(a) + _LISTED + re.escape(b), question)]
    return list(dict.fromkeys(name for pair in pairs for name in pair))


def unfound_things(question: str, evidence: list[Evidence], exclude: set[str] | frozenset[str] = frozenset()
                   ) -> list[str]:
    """The things a question lists side by side ("Which band is from England, Fireflight or Dirty Pretty
    Things?") that no passage names in full, when another listed thing is named in full by one: the question
    can then be answered in part, saying what was not found, instead of being declined. Empty for a question
    about one thing, or when none or all of the listed things are found."""
    passages = [stems_of(f"{e.title} {e.text}") for e in evidence]
    named = {n: any(all(t & p for t in terms) for p in passages)
             for n in listed_things(question, exclude) if (terms := query_terms(n))}
    unfound = [n for n, ok in named.items() if not ok]
    return unfound if unfound and len(unfound) < len(named) else []


def without(question: str, things: list[str]) -> str:
    """The question with `things` taken out (what is left to answer when they were not found); in a keyword
    query, which has lost a name's small words ("LaLee's Kin Legacy Cotton"), the name's other words."""
    for thing in things:
        pattern = rf"(?:\s*,\s*|\s+(?:{_JOIN})\s+)?" + re.escape(thing)
        if re.search(pattern, question):
            question = re.sub(pattern, "", question, count=1)
        else:
            for word in (w for w in re.findall(r"[\w'’.&/-]+", thing) if w.lower() not in STOPWORDS):
                question = re.sub(rf"(?<![\w'’]){re.escape(word)}(?![\w'’])", "", question, count=1)
    return " ".join(question.split())


def complete(focus: str, facts: list[Fact], evidence: list[Evidence], glossary: Glossary | None = None) -> bool:
    """The passages the facts rest on (with their titles) hold every topic word of the question: nothing is
    left for a second hop to find. Passages rather than the facts' words: a model's facts paraphrase."""
    query = query_terms(focus, glossary)
    cited = {i for f in facts for i in f.evidence_ids}
    have: set[str] = set()
    for e in evidence:
        if e.id in cited:
            have |= stems_of(f"{e.title} {e.text}", glossary)
    return all(t & have for t in query)


def uncovered_words(question_focus: str, passage: str) -> list[str]:
    """The question's topic words a passage does not contain, in the question's order."""
    have = stems_of(passage)
    words = re.findall(r"[\w'’/.-]+", question_focus)
    return [w for w in words if w.lower() not in STOPWORDS
            and not any(group & have for group in query_terms(w))]


def best_covering(coverage: list[float], n: int = 3) -> list[int]:
    """The positions of the `n` passages covering the question best (ties in evidence order)."""
    return sorted(range(len(coverage)), key=lambda i: -coverage[i])[:n]


def bridge_queries(question: str, focus: str, evidence: list[Evidence], exclude: set[str]) -> list[str]:
    """Second-hop queries: for the passages that cover the question best, the names they mention that the
    question does not (the bridge), each with the question's words those passages leave uncovered."""
    if not evidence:
        return []
    query = query_terms(focus)
    if not query:
        return []
    coverage = weighted_coverage(query, [stems_of(e.text) for e in evidence])
    best = best_covering(coverage)
    asked = {n.lower() for n in names(question, exclude)} | {w.lower() for w in focus.split()}
    queries: list[str] = []
    for i in best:
        if coverage[i] <= 0:
            continue
        missing = uncovered_words(focus, evidence[i].text)
        if not missing:
            continue
        candidates = [unqualified(evidence[i].title)] + names(evidence[i].text, exclude)
        for name in candidates:
            if name.lower() in asked or name.lower() in question.lower() or not name:
                continue
            queries.append(f"{name} {' '.join(missing)}")
            asked.add(name.lower())
            if len(queries) >= tuning().max_bridges:
                return queries
    return queries


MAX_CANDIDATES = 16  # names checked against the document titles (`list_documents`), one call each (see judge)


def title_like(name: str, text: str) -> bool:
    """Whether a name found in a passage may be another document's title: not a date or numbered reference
    ("December 2033", "Artikel 15a": fewer than two words without digits beside a number), and a single word
    only where it is capitalised mid-sentence ("in Bratislava"), not merely as a sentence's first word ("Langer
    dan …")."""
    words = name.split()
    plain = [w for w in words if not any(c.isdigit() for c in w)]
    if len(plain) < (2 if len(plain) < len(words) else 1):
        return False
    return len(plain) > 1 or bool(re.search(r"[\w,;:]\s+" + re.escape(name), text))


def _unfollowed_names(question: str, evidence: list[Evidence], exclude: set[str], passages: list[int],
                      limit: int) -> list[str]:
    """The names `passages` (positions in `evidence`) mention, in order, that may be a title (`title_like`) and that
    neither the question holds nor any gathered document is titled by; at most `limit`."""
    known = {title_core(e.title) for e in evidence}
    asked = question.lower()
    out: list[str] = []
    for i in passages:
        for name in names(evidence[i].text, exclude):
            low = name.lower()
            if len(low) < 3 or low in asked or not title_like(name, evidence[i].text) \
                    or any(low == k or low.startswith(f"{k} ") for k in known):  # a gathered document's title
                continue
            if name not in out:
                out.append(name)
            if len(out) >= limit:
                return out
    return out


def _best_passages(focus: str, evidence: list[Evidence]) -> list[int]:
    query = query_terms(focus)
    if not evidence or not query:
        return []
    return best_covering(weighted_coverage(query, [stems_of(f"{e.title} {e.text}") for e in evidence]))


def link_queries(question: str, focus: str, evidence: list[Evidence], exclude: set[str]) -> list[str]:
    """Title lookups for the bridge, searched on every collection: the names the passages covering the question best
    mention that no gathered document is about (a document about a name ranks first for it); at most
    `tuning.max_links`."""
    return _unfollowed_names(question, evidence, exclude, _best_passages(focus, evidence), tuning().max_links)


def link_candidates(question: str, focus: str, evidence: list[Evidence], exclude: set[str],
                    limit: int = MAX_CANDIDATES) -> list[str]:
    """The names that may title the bridge's document, to be checked against the titles (`titled`): those the
    passages of documents the question names mention (a bridge question names its first hop: "the actor who played
    a bellhop in Dead Heat on a Merry-Go-Round"), then those of the passages covering the question best; at most
    `limit`."""
    best = _best_passages(focus, evidence)
    if not best:
        return []
    named = [i for i, e in enumerate(evidence) if names_title(e.title, question)]
    return _unfollowed_names(question, evidence, exclude, list(dict.fromkeys(named + best)), limit)


class Titled(Protocol):
    @property
    def title(self) -> str: ...


T = TypeVar("T", bound=Titled)


def titled(candidates: list[str], refs: Sequence[T], limit: int | None = None) -> list[tuple[str, T]]:
    """The candidates that are the title of a listed document (`list_documents`' answer to them; compared without the
    title's qualifier and case: "Styx" titles "Styx (band)", and "Smyrna" "Smyrna, Georgia"), with that document, in
    candidate order; at most `limit` (default `tuning.max_links`; tuning half of HotpotQA, the comma's qualifier: gold
    articles cited 0.927 -> 0.928)."""
    by_title: dict[str, T] = {}
    for ref in refs:
        by_title.setdefault(title_core(ref.title), ref)
    for ref in refs:  # then by the part before a comma: "Smyrna" titles "Smyrna, Georgia" (not before a full title)
        by_title.setdefault(title_core(ref.title).split(", ")[0], ref)
    out = [(name, by_title[name.lower()]) for name in candidates if name.lower() in by_title]
    return out[:tuning().max_links if limit is None else limit]
