"""How an article of a law is named: "artikel 15a", "Article 7", "art. 3.1", "Artikel 15aa" (all case-insensitive).

An article number is digits with letter suffixes, dotted parts allowed ("15a", "3.1", "9.1.3a"). The patterns differ
on purpose, and each caller keeps the one its figures were measured with:

* ``ARTICLE_REF``: an article named anywhere in a text or a question, any letters after each number part ("15aa").
* ``ARTICLE_REF_ONE_LETTER``: the same with at most one letter per part, as the document server's search boost reads
  a query (``docserver/ranking.py``: "artikel 15aa" boosts article 15a; changing it would change rankings).
* ``SECTION_ARTICLE``: the article a chunk's section heading starts with ("Artikel 15a (deel 2) — Hoofdstuk 3"), at
  most one letter per part and a word boundary after the number; use with ``match``.
* ``ARTICLE_HEADING``: a law text's article heading, whole: ``word`` ("Artikel"/"Article"), ``number`` (any letters,
  or a Roman numeral with at most one letter: "Artikel IV"), ``caption`` (what follows); use with ``match``.
* ``SECTION_ARTICLE_LOOSE``: any word characters and dots after "artikel"/"article" ("15a.", "IV"), how the eval
  reads the article a hit's section names; use with ``search`` and strip a trailing dot.
"""

from __future__ import annotations

import re

__all__ = ["ARTICLE_HEADING", "ARTICLE_REF", "ARTICLE_REF_ONE_LETTER", "SECTION_ARTICLE", "SECTION_ARTICLE_LOOSE"]

_NUMBER = r"\d+[a-z]*(?:\.\d+[a-z]*)*"  # "15a", "15aa", "3.1", "9.1.3a"
_NUMBER_ONE_LETTER = r"\d+[a-z]?(?:\.\d+[a-z]?)*"  # "15a", "3.1"; of "15aa" only "15a"

ARTICLE_REF = re.compile(rf"\b(?:artikel|art\.|article)\s+({_NUMBER})", re.IGNORECASE)
ARTICLE_REF_ONE_LETTER = re.compile(rf"\b(?:artikel|art\.|article)\s+({_NUMBER_ONE_LETTER})", re.IGNORECASE)
SECTION_ARTICLE = re.compile(rf"\s*(?:artikel|article)\s+({_NUMBER_ONE_LETTER})\b", re.IGNORECASE)
ARTICLE_HEADING = re.compile(
    rf"^(?P<word>artikel|article)\s+(?P<number>{_NUMBER}|[IVXLC]+[a-z]?)\b\.?\s*(?P<caption>.*)$", re.IGNORECASE
)
SECTION_ARTICLE_LOOSE = re.compile(r"(?:artikel|article)\s+([\w.]+)", re.IGNORECASE)
