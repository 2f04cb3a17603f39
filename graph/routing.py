"""Heuristic routing: pure functions from a question to a query type and target collections."""

from __future__ import annotations

import re

from graph.collections import Collection
from graph.models import QueryType, Route

_WORD = re.compile(r"[\w\-']+", re.UNICODE)

# First match wins; each entry: (query type, phrases that signal it, reason code).
_TYPE_SIGNALS: list[tuple[QueryType, tuple[str, ...]]] = [
    ("comparative", ("verschil", "verschillen", "vergelijk", "vergelijking", "verhouden", "verhoudt", "tegenover",
                     "overeenkomsten", "compare", "comparison", "differ", "difference", "versus", " vs ", "relate to",
                     "relates to", "relatie tussen", "verhouding tussen")),
    ("exploratory", ("welke documenten", "welke publicaties", "welke bronnen", "overzicht van", "which documents",
                     "what documents", "which publications", "overview of", "list of", "lijst van")),
    ("deep_dive", ("leg uit", "gedetailleerd", "in detail", "uitgebreid", "uitgebreide", "diepgaand", "toelichting op",
                   "explain", "detailed", "in depth", "in-depth", "uitleg")),
]


_FACTUAL_SIGNALS = ("wat is", "wat zijn", "wat houdt", "wat betekent", "wanneer", "hoeveel", "hoe lang", "wie ", "welk ",
                    "welke ", "waar ", "mag ", "moet ", "what is", "what are", "what does", "when ", "how many",
                    "how much", "how long", "who ", "which ", "where ", "is het", "is er", "does ", "do i ")
# "which/what/are there ... documents/publications/conventions": a question about what exists
_LISTING = re.compile(
    r"\b(welke|which|what|zijn er|are there|is there|bestaan er)\b[^?]{0,60}?"
    r"(documenten|publicaties|publications|documents|conventions|verdragen|richtlijnen|guides|leidraden|normen|standards)\b"
)
# A question that opens with one of these asks for something specific, even without another signal
_INTERROGATIVE = re.compile(r"^\s*(wat|wie|waar|wanneer|welk|welke|hoeveel|what|who|where|when|which)\b")
_FOLLOW_UP_START = ("en ", "and ", "maar ", "but ", "ook ", "what about", "hoe zit het", "en wat", "and what")
_FOLLOW_UP_REFERENCE = {"daarover", "daarvan", "hierover", "hiervan", "daarbij", "daarin", "daarop", "hiermee", "daarmee",
                        "it", "that", "this", "they", "their", "them", "those"}


def words(text: str) -> list[str]:
    return [w.lower() for w in _WORD.findall(text)]


def mentioned_collections(question: str, collections: list[Collection]) -> list[str]:
    """Collections named or pointed at by a keyword, in configuration order."""
    tokens = set(words(question))
    tokens |= {part for token in tokens if "-" in token for part in token.split("-")}
    hits = []
    for c in collections:
        signals = {c.name.lower(), c.display_name.lower(), *c.keywords}
        if tokens & signals or any(" " in s and s in question.lower() for s in signals):
            hits.append(c.name)
    return hits


def query_type(question: str, mentioned: int) -> tuple[QueryType, str]:
    text = f" {question.lower()} "
    if re.search(r"\bleg\b.{1,80}\buit\b", text):
        return "deep_dive", "leg … uit"
    for kind, phrases in _TYPE_SIGNALS:
        for phrase in phrases:
            if phrase in text:
                return kind, phrase.strip()
    if mentioned >= 2 and re.search(r"\b(en|and)\b", text) and re.search(r"\b(hoe|how)\b", text):
        return "comparative", "+".join(sorted(set(words(question)) & {"en", "and"}))
    if _LISTING.search(text):
        return "exploratory", "documenten"
    for phrase in _FACTUAL_SIGNALS:
        if text.lstrip().startswith(phrase) or f" {phrase}" in text[:40]:
            return "factual", phrase.strip()
    if opener := _INTERROGATIVE.match(text):
        return "factual", opener.group(1)
    return "factual", "-"


def is_ambiguous(route: Route) -> bool:
    """No type signal at all: the heuristics only guessed (the fast model may classify it)."""
    return route.reason == ""


def is_follow_up(question: str, history_has_user_turn: bool) -> bool:
    if not history_has_user_turn:
        return False
    tokens = words(question)
    lowered = question.lower().strip()
    return len(tokens) <= 12 and (lowered.startswith(_FOLLOW_UP_START) or bool(set(tokens) & _FOLLOW_UP_REFERENCE))


def standalone(question: str, previous: str, collections: list[Collection]) -> str:
    """Deterministic follow-up rewrite: the new question plus the topic words of the previous one."""
    topic = [w for w in focus_terms(previous, collections).split() if w.lower() not in _STOP_TOPIC]
    return f"{question.rstrip('?. ')} ({' '.join(topic)})?" if topic else question


_STOP_TOPIC = {"hoe", "wat", "wie", "welke", "waar", "wanneer", "en", "de", "het", "een", "van", "voor", "over", "in",
               "op", "is", "zijn", "how", "what", "who", "which", "the", "a", "an", "of", "for", "about", "and", "are", "do", "does"}


def heuristic_route(question: str, collections: list[Collection]) -> Route:
    named = mentioned_collections(question, collections)
    kind, signal = query_type(question, len(named))
    targets = named or [c.name for c in collections]
    return Route(
        query_type=kind,
        collections=targets,
        reason="" if signal == "-" else signal,
        search_query=focus_terms(question, collections),
    )


_GENERIC = {"documenten", "document", "publicaties", "bronnen", "gaan", "gaat", "geef", "graag", "uitleg", "over",
            "documents", "publications", "sources", "give", "about", "tell", "me", "please", "zeggen", "zegt", "say",
            "says", "staat", "stand"}


def focus_terms(question: str, collections: list[Collection]) -> str:
    """The question without collection names, question-type signals and generic words: what to search for."""
    text = f" {question} "
    for _, phrases in _TYPE_SIGNALS:
        for phrase in phrases:
            text = re.sub(rf"(?<!\w){re.escape(phrase.strip())}\w*", " ", text, flags=re.IGNORECASE)
    drop = {c.name.lower() for c in collections} | {c.display_name.lower() for c in collections} | _GENERIC
    kept = [w for w in _WORD.findall(text) if w.lower() not in drop]
    return " ".join(kept) or question
