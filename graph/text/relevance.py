"""How much of a question a text holds, read by its words: the question's topic words (`query_terms`) and the names
and numbers it holds (`entity_words`), a text's stems (`stems_of`), the share of the topic words a passage holds,
plain (`coverage`) or weighted by how rare each word is (`idf`, `weighted_coverage`), names written with one typo
(`typos`), whether a question names a document's title (`names_title`) and whether it reaches what it asks about
through a description (`describes`). Read by fact selection, by the ranking of linked pairs and by the search hops."""

from __future__ import annotations

import math
import re
from functools import lru_cache

from graph.glossary import Glossary
from textkit import analyze


@lru_cache(maxsize=4096)  # sentences are stemmed by the decline rules, the ranking and the covering; ~8 MB full
def stems_of(text: str, glossary: Glossary | None = None) -> frozenset[str]:
    """The stems of a text's words, and the glossary concepts it mentions (so "safety culture" in a passage
    matches a question's "veiligheidscultuur")."""
    if not text.strip():
        return frozenset()
    tokens = analyze(text)
    return frozenset().union(*tokens) | (glossary.concepts(tokens) if glossary else frozenset())


# Question words carry no topic: they must not make an off-topic passage look relevant.
_QUESTION_WORDS = set(
    "hoeveel hoe wat wanneer welke welk wie waar waarom waardoor waarmee kan kunnen mag moet is zijn heeft hebben "
    "sinds binnen vanaf tot houdt bij jaar jaartal datum termijn periode aantal "
    "how many much what when which who where why can could may must does do is are has have since within "
    "year date period number "
    # words that compare or count what is asked about: the answer gives the facts, not the word
    "older oldest younger youngest first earlier later longer larger bigger taller more less same both either "
    "ouder oudste jonger jongste eerst eerste eerder langer groter meer minder zelfde dezelfde hetzelfde beide".split()
)  # the last words of each language name the kind of answer ("which year"), which the answer does not repeat


def query_terms(question: str, glossary: Glossary | None = None) -> list[frozenset[str]]:
    """One stem set per distinct topic word of the question (a word matches when any of its stems does, or
    the glossary concept of a phrase it is part of)."""
    words = " ".join(w for w in re.findall(r"[\w/.-]+", question) if w.lower() not in _QUESTION_WORDS)
    if not words.strip():
        return []
    tokens = analyze(words)
    if glossary:
        tokens = [t | c for t, c in zip(tokens, glossary.term_concepts(tokens), strict=True)]
    return list(dict.fromkeys(tokens))


def _opens_name(words: list[str]) -> bool:
    """Whether the first word starts a name rather than a sentence: capitalised, a content word, and followed by
    another capitalised word ("Bruce Spizer expert …", the keyword query research hands on; "Lex Antonia
    nullified …"), not "Who is …" or "Name the …"."""
    return (len(words) > 1 and words[0][:1].isupper() and words[1][:1].isupper()
            and words[0].lower() not in _QUESTION_WORDS and bool(analyze(words[0])))


def entity_words(question: str) -> list[str]:
    """Names and numbers in the question (capitalised words after the first, words with digits). The first word
    stays out even when it may open a name: a question is declined when one of these occurs in no passage, and
    "Vergelijk INSAG-10 …" opens with a verb."""
    words = re.findall(r"[\w/.-]+", question)
    return [w for i, w in enumerate(words) if any(c.isdigit() for c in w) or (i > 0 and w[:1].isupper())]


def question_names(question: str) -> list[str]:
    """Capitalised names in a question after its first word unless it opens a name (a question about two things,
    or through one)."""
    words = re.findall(r"[\w'-]+", question)
    words = words if _opens_name(words) else words[1:]
    return list(dict.fromkeys(w for w in words if w[:1].isupper() and w.lower() not in _QUESTION_WORDS))


# a relative clause after a word: "the man who is known for …", "a town that had …", "the book in which …", "de
# minister die …", "de wet waarin …"; not the question's own opening ("Which film …", "In which year …", "Waarin …")
_RELATIVE_EN = r"(?:(?:in|of|for|by|at|on|to|from|with)\s+)?(?:who|whom|whose|which|that)"  # "in which", "that"
_RELATIVE = re.compile(rf"(?<=\w)\s+(?:{_RELATIVE_EN}|die|dat|wiens|wier|waarin|waarvan|waarvoor|waarop|waarmee"
                       r"|waardoor|waarbij|waaraan)\s+[a-z]", re.IGNORECASE)
_OPENING = re.compile(rf"^\W*{_RELATIVE_EN}\b", re.IGNORECASE)


def describes(question: str) -> bool:
    """Whether a question reaches what it asks about through a description of it ("Which city was the man who is
    known for … born in?"): through a thing it does not name, so two linked passages may answer it together."""
    return bool(_RELATIVE.search(_OPENING.sub("", question)))


TYPO_MIN = 5  # letters from which a name written with one typo is still the name ("Lousiana", "Borsele")


def one_typo(a: str, b: str) -> bool:
    """Whether `a` and `b` differ by one letter inserted, left out or replaced, or two neighbours swapped."""
    if a == b or abs(len(a) - len(b)) > 1:
        return False
    start = next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b)))
    if len(a) == len(b):
        swapped = a[start + 2:] == b[start + 2:] and a[start:start + 2] == b[start:start + 2][::-1]
        return a[start + 1:] == b[start + 1:] or swapped
    longer, shorter = (a, b) if len(a) > len(b) else (b, a)
    return longer[start + 1:] == shorter[start:]


def name_stems(word: str) -> set[str]:
    """The stems a name of the question is searched by."""
    return {s for group in analyze(word) for s in group}


def typos(names: list[str], found: set[str]) -> dict[str, frozenset[str]]:
    """The passages' words each name of the question that no passage holds as written is one typo away from, for
    a name of letters only of at least `TYPO_MIN` (its stems): "Lousiana" is Louisiana, "Nambia" Namibia, "Borsele"
    Borssele. Numbers stay as written (2033 is not 2034), and so do short names."""
    fixes: dict[str, frozenset[str]] = {}
    for stem in {stem for word in names for stem in name_stems(word)} - found:
        if stem.isalpha() and len(stem) >= TYPO_MIN and (near := frozenset(o for o in found if one_typo(stem, o))):
            fixes[stem] = near
    return fixes


def respelled(words: frozenset[str], fixes: dict[str, frozenset[str]]) -> frozenset[str]:
    """A topic word or name (its stems) read also as the words its typos stand for (`typos`)."""
    return words.union(*(fixes[s] for s in words & fixes.keys())) if fixes else words


def coverage(query: list[frozenset[str]], text: str) -> float:
    """Share of the query's topic words that occur in a passage (title and section included)."""
    stems = stems_of(text)
    return sum(bool(t & stems) for t in query) / len(query) if query else 0.0


def idf(n: int, df: int) -> float:
    """The inverse document frequency of a word that `df` of `n` texts hold (smoothed: never 0, never infinite):
    a word in every passage counts little, a rare name much. The one weight of a topic word for the coverage of
    passages, the ranking of linked pairs and the ranking of sentences."""
    return math.log(1 + n / (1 + df))


def idf_weights(query: list[frozenset[str]], texts: list[frozenset[str]]) -> list[float]:
    """Per topic word of the query, its `idf` over the stems of `texts` (passages or sentences)."""
    return [idf(len(texts), sum(bool(t & s) for s in texts)) for t in query]


def weighted_coverage(query: list[frozenset[str]], passages: list[frozenset[str]]) -> list[float]:
    """Per passage, the IDF-weighted share of the query's topic words it contains (a word in every passage
    counts little, a rare name much): comparable across collections, unlike the servers' own scores."""
    weight = idf_weights(query, passages)
    total = sum(weight) or 1.0
    return [sum(w for t, w in zip(query, weight, strict=True) if t & s) / total for s in passages]


def unqualified(title: str) -> str:
    """A document title without a trailing qualifier: "Tennis (magazine)" -> "Tennis"."""
    return re.sub(r"\s*\(.*?\)\s*$", "", title).strip()


@lru_cache(maxsize=8192)  # `best_pair` asks for every pair of passages
def names_title(title: str, question: str) -> bool:
    """The question names the document's title (without qualifier, three letters at least) as a word, written as
    a name: with the title's capitals, except that a title of two or more words may open in lower case
    ("kerncentrale Borssele"). A question that writes names with capitals does not name "Pilot (Will & Grace)" by
    "a fighter pilot" or "Music Maker (label)" by "electronic music maker" (tuning half: pair right 0.725 ->
    0.745); one that writes none (all in lower case) names a title in any case."""
    core = unqualified(title)
    if len(core) <= 2:
        return False
    any_case = not question_names(question)
    return any(any_case or said[1:] == core[1:] and (said[0] == core[0] or " " in core)
               for said in re.findall(r"(?<!\w)" + re.escape(core) + r"(?!\w)", question, re.IGNORECASE))


@lru_cache(maxsize=4096)  # pairs of passages compare the same titles over and over (`ranked_pairs`)
def title_core(title: str) -> str:
    """A title as a question would name it: unqualified, lower case."""
    return unqualified(title).lower()
