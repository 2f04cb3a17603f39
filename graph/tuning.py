"""The tuned numbers of offline selection and research, in one typed place: what each trades, and how to measure it.

Each is a field of `Tuning` (frozen), with its default and, in the field's metadata, `trades` (what moving it up or
down buys and costs) and `grid` (the values `python -m eval.tune NAME` sweeps). The pipeline reads the numbers in
force through `tuning()`; `tuned(**changes)` puts other ones in force for a block of code (a context variable: the
runs inside it, and only those, read them), which is how the sweep measures a value without editing code.

`python -m eval.tune NAME` runs the offline pipeline on the tuning halves (the Dutch gold set's and HotpotQA's) once
per value of the grid and writes the table to docs/tuning/NAME.md, the value in force marked: re-tune on your own
corpus and questions (`--gold`, `--hotpot`) instead of trusting a figure quoted in a comment. Choose on the tuning
half; `make eval` reports the test half.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field, fields, replace
from typing import Any

__all__ = ["Tuning", "describe", "tuned", "tuning"]


def _tuned(default: float, trades: str, grid: tuple[float, ...]) -> Any:
    """A tuned field: its default, what it trades, the values a sweep tries."""
    return field(default=default, metadata={"trades": trades, "grid": grid})


@dataclass(frozen=True, slots=True)
class Tuning:
    """The numbers; each field's metadata says what it trades (`describe`)."""

    # --- which collections and passages an offline answer reads (graph/text/selection.py) ---
    keep_ratio: float = _tuned(
        0.8, "a collection contributes when its best passage covers this share of what the best passage of all "
        "covers (IDF-weighted): lower lets more sources into an overview, higher keeps it to the strongest",
        (0.6, 0.7, 0.8, 0.9))
    prior_ratio: float = _tuned(
        0.6, "the same for a collection the question names (its raised prior): lower keeps a named source in the "
        "answer on weaker evidence", (0.4, 0.5, 0.6, 0.7, 0.8))
    focus_ratio: float = _tuned(
        0.6, "a focused answer (one thing, or named things) counts a collection from this share: lower cites more "
        "documents per answer, higher may drop the source of a bridge's second hop", (0.0, 0.6, 0.7, 0.8))
    focus_words: int = _tuned(
        3, "the topic words a passage must hold for a focused answer at most: without a cap long questions are "
        "declined, a low cap answers from passages that hold only a few of their words", (2, 3, 4, 5))
    pair_coverage: float = _tuned(
        0.6, "two linked passages answer a question naming two things when together they hold this share of its "
        "topic words: lower answers more bridge questions, and risks answering from a loose pair", (0.5, 0.6, 0.75))
    prior_bonus: float = _tuned(
        0.5, "added to the score of a named collection's sentences: higher puts the source the user named first "
        "even when another says it better", (0.0, 0.5, 1.0))
    title_bonus: float = _tuned(
        1.0, "added to the sentences of a document whose title the question names: its sentences speak about the "
        "thing without repeating its name", (0.0, 0.5, 1.0, 2.0))
    article_bonus: float = _tuned(
        5.0, "the sentences of the article a question names come first, whatever words they use: lower lets a "
        "passage that merely quotes the article's words win", (1.0, 3.0, 5.0, 10.0))
    selectable_share: float = _tuned(
        0.5, "of a collection that counts, a passage's sentences compete from this share of what the best passage "
        "covers: lower lets passages that hold a word or two crowd the answer, higher leaves out a second passage "
        "of the same source that holds the rest", (0.3, 0.4, 0.5, 0.6, 0.7))
    summary_article_share: float = _tuned(
        0.5, "a summary of the named article gets this share of `article_bonus`: ahead of passages that do not "
        "name it, behind the official text", (0.25, 0.5, 0.75, 1.0))
    other_language_factor: float = _tuned(
        0.7, "a sentence in another language than the question's scores this share: 1 no preference, lower the "
        "other language's facts only where the question's language has none", (0.5, 0.7, 0.85, 1.0))
    relevance_weight: float = _tuned(
        0.5, "what the server's relevance (0..1) adds to a sentence's score: breaks ties in favour of the better "
        "ranked passage; higher lets the ranking outweigh a rare topic word", (0.0, 0.25, 0.5, 1.0))
    name_answer_share: float = _tuned(
        0.5, "a question asking for a name: a sentence holding a capitalised word the question does not gets this "
        "share of the answer bonus (a number asked for gets all of it)", (0.0, 0.25, 0.5, 1.0))
    answer_documents: int = _tuned(
        3, "documents a focused offline answer cites at most: more lets a bridge's answer in, fewer keeps the "
        "answer to the passages that hold the question", (2, 3, 4))
    # --- linked pairs: two passages that answer together (graph/text/pairs.py) ---
    link_min: float = _tuned(
        0.5, "share of a document title's words a passage must hold to count as naming it: half, so a surname "
        "names a person; lower links pairs on a shared common word", (0.34, 0.5, 0.75))
    link_weight: float = _tuned(
        0.25, "what a link adds to a pair's coverage: higher prefers linked pairs to pairs that merely hold more "
        "of the question's words", (0.0, 0.25, 0.5))
    named_weight: float = _tuned(
        0.25, "what a pair adds when both its passages are documents of things the question names (two things "
        "compared): higher answers comparisons from the two named documents over a pair that holds more words",
        (0.0, 0.25, 0.5, 1.0))
    from_named_weight: float = _tuned(
        0.5, "a bridge from the document the question names beats a pair of passages that hold more of its words "
        "by this much: higher finds more bridges, and cites fewer documents of both", (0.25, 0.5, 0.75))
    pair_first: int = _tuned(
        24, "a pair's first passage is one of this many passages covering most of the question: more finds "
        "deeper pairs at a quadratic cost", (12, 24, 48))
    partner_margin: float = _tuned(
        0.3, "a second pair joins the prompt when it scores within this of the best: higher puts both gold "
        "documents in more prompts, with more documents in each", (0.1, 0.2, 0.3, 1.0))
    link_power: int = _tuned(
        3, "a partial link counts as its strength to this power: higher trusts only links that name a title "
        "whole", (1, 2, 3))
    # --- research: names looked up, second hops (graph/text/hops.py) and the relevance floor (nodes/summarize.py) ---
    max_links: int = _tuned(
        4, "names of the first round's passages looked up as titles: more gathers both documents of a bridge "
        "more often, each a `list_documents` call and its search", (2, 4, 6))
    max_bridges: int = _tuned(
        3, "second-hop queries (and names searched alone) a round sends at most: more reaches a third named thing, "
        "each a search on every collection", (2, 3, 4))
    broad_coverage: float = _tuned(
        0.6, "an overview, deep dive or comparison is answered from passages holding this share of what a factual "
        "question's must (MIN_COVERAGE): lower answers more broad questions from passages that merely touch on "
        "them", (0.4, 0.6, 0.8, 1.0))


_IN_FORCE: ContextVar[Tuning] = ContextVar("tuning", default=Tuning())  # noqa: B039 (frozen: never mutated)


def tuning() -> Tuning:
    """The numbers in force (the defaults, unless a `tuned` block says otherwise)."""
    return _IN_FORCE.get()


@contextmanager
def tuned(**changes: float) -> Iterator[Tuning]:
    """Other numbers in force inside the block (for the code it runs and the tasks it starts); a name that is no
    field is a TypeError."""
    token = _IN_FORCE.set(replace(_IN_FORCE.get(), **changes))
    try:
        yield _IN_FORCE.get()
    finally:
        _IN_FORCE.reset(token)


def describe() -> list[tuple[str, float, str, tuple[float, ...]]]:
    """(name, default, what it trades, the values swept) of every field, in declaration order."""
    return [(f.name, f.default, f.metadata["trades"], f.metadata["grid"]) for f in fields(Tuning)]
