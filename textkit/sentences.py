"""Where a sentence ends, in a passage and in a model's answer: after . ! ? and a space, before what may open a
sentence, unless the dot closes an abbreviation ("art. 15", "Op. 5", "o.a.") or an initial ("Philip K. Dick",
"U.S. Navy"). One rule for extractive selection, the support check and the streamed citer: split "Philip K." from
"Dick", the check judged (and withdrew) half a name, and the citer put a marker after the initial.

`passage_sentences` is what a passage is read as, sentence by sentence: by the agent's extractive selection and by
the document server, which embeds each sentence to say which of them match a question by meaning.
"""

from __future__ import annotations

import re

__all__ = ["ABBREVIATIONS", "BOUNDARY", "MIN_SENTENCE", "NOT_ABBREVIATED", "passage_sentences", "split"]

ABBREVIATIONS = (
    # Dutch legal and general
    "art.", "Art.", "nr.", "Nr.", "lid.", "jo.", "Stb.", "Stcrt.", "Trb.", "bijv.", "o.a.", "ca.", "blz.", "resp.",
    "incl.", "excl.", "mr.", "dhr.", "mevr.", "zgn.",
    # English
    "No.", "no.", "Op.", "Vol.", "Rev.", "rev.", "e.g.", "i.e.", "vs.", "Mr.", "Mrs.", "Ms.", "Dr.",
    "Prof.", "St.", "Mt.", "Jr.", "Sr.", "Inc.", "Ltd.", "Co.", "Gen.", "Lt.", "Col.", "Capt.", "approx.",
)
# not after an abbreviation (a whole word: "erop." ends a sentence), nor after a capital letter standing alone
# (an initial); Dutch words that end sentences ("op.", "vol.") are no abbreviations here
NOT_ABBREVIATED = "".join(rf"(?<!\b{re.escape(a)})" for a in sorted(set(ABBREVIATIONS))) + r"(?<!\b[A-Z]\.)"
# what may open a sentence: a capital, a digit, a quote, a bracket, emphasis
_OPENS = "A-Z0-9ÀÉÈËÏÖÜ(\"'*‘“"
# the cheap test first: the abbreviation lookbehinds run only after . ! ? (first, they cost 20x per split)
BOUNDARY = re.compile(r"(?<=[.!?])" + NOT_ABBREVIATED + rf"\s+(?=[{_OPENS}])")


def split(paragraph: str) -> list[str]:
    """The sentences of one paragraph (no line ends inside)."""
    return BOUNDARY.split(paragraph)


MIN_SENTENCE = 26  # characters: shorter pieces (a heading, "Artikel 3", a list number) are no sentence to select
_HEADER = re.compile(r"^\s*\[[^\]\n]{1,200}\]\s*\n")  # "[title, section]" opening a passage's text


def passage_sentences(text: str) -> list[str]:
    """The sentences of a passage, paragraph by paragraph, without the bracketed header line that may open it,
    whitespace folded and quote marks ("> ") taken off; pieces shorter than `MIN_SENTENCE` left out."""
    body = _HEADER.sub("", text.strip(), count=1)
    out = []
    for paragraph in re.split(r"\n\s*\n", body):
        paragraph = " ".join(paragraph.split()).lstrip("> ").strip()
        out += [s.strip() for s in split(paragraph) if len(s.strip()) >= MIN_SENTENCE]
    return out
