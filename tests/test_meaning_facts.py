"""Facts from passages found by meaning in the other language (graph/text/meaning.py): a table test of the rule."""

from __future__ import annotations

import pytest

from graph.models import Evidence
from graph.text.meaning import MEANING_Z, meaning_facts

ENGLISH = ("[SRP 9.3.4 — Acceptance criteria]\nThe precoating unit of the demineralizers need not be designed to "
           "seismic Category I in full. Its failure cannot affect the safety-related portions of the system. A third "
           "sentence about the letdown line and its flow restrictor follows here.")
DUTCH = ("[Kernenergiewet — Artikel 15a]\nDe vergunning voor de kerncentrale Borssele vervalt op 31 december 2033. "
         "Daarna mag de centrale geen elektriciteit meer produceren voor het net.")


def _evidence(n: int, text: str, z: float | None) -> Evidence:
    return Evidence(id=f"c/d{n}#0", collection="c", doc_id=f"d{n}", title=f"D{n}", text=text, similarity_z=z)


@pytest.mark.parametrize(
    ("evidence", "language", "expected"),
    [
        # an English passage standing out for a Dutch question: its opening sentences, two at most
        ([_evidence(1, ENGLISH, 5.0)], "nl", [("c/d1#0", "The precoating unit"), ("c/d1#0", "Its failure")]),
        ([_evidence(1, ENGLISH, MEANING_Z - 0.01)], "nl", []),  # not distinct enough
        ([_evidence(1, ENGLISH, None)], "nl", []),  # not searched by meaning
        ([_evidence(1, ENGLISH, 5.0)], "en", []),  # the question's own language: its words decide
        ([_evidence(2, DUTCH, 4.0), _evidence(1, ENGLISH, 6.0)], "en",  # the Dutch one for an English question
         [("c/d2#0", "De vergunning"), ("c/d2#0", "Daarna mag")]),
        ([_evidence(1, ENGLISH, 4.0), _evidence(3, ENGLISH.replace("SRP", "X"), 6.0)], "nl",  # most distinct first
         [("c/d3#0", "The precoating"), ("c/d3#0", "Its failure"), ("c/d1#0", "The precoating")]),
    ],
)
def test_passages_in_the_other_language_that_stand_out_give_their_opening_sentences(evidence, language,
                                                                                    expected) -> None:
    facts = meaning_facts(evidence, language, limit=3)
    assert [(f.evidence_ids[0], f.text[: len(start)]) for f, (_, start) in zip(facts, expected, strict=False)] == \
        expected
    assert len(facts) == len(expected)
