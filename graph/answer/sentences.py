"""Where a sentence ends, in a passage and in a model's answer: after . ! ? and a space, before what may open a
sentence, unless the dot closes an abbreviation ("art. 15", "Op. 5", "o.a.") or an initial ("Philip K. Dick",
"U.S. Navy"). One rule for extractive selection, the support check and the streamed citer: split "Philip K." from
"Dick", the check judged (and withdrew) half a name, and the citer put a marker after the initial.
"""

from __future__ import annotations

import re

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
