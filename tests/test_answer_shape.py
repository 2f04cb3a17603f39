"""The question apart from answer instructions, and the answer's sources: one entry per document, numbered by
first citation, summaries marked only where the metadata says so."""

from __future__ import annotations

import pytest

from graph.answer.ledger import Ledger
from graph.answer.template import template_answer
from graph.models import Evidence, Fact
from graph.text.instructions import split


@pytest.mark.parametrize(
    ("text", "question", "brief", "fmt", "language"),
    [
        ("What does the IAEA say about safety culture? Please answer briefly.",
         "What does the IAEA say about safety culture?", True, "", None),
        ("Wat zegt de ANVS over veiligheidscultuur? Geef een kort antwoord.",
         "Wat zegt de ANVS over veiligheidscultuur?", True, "", None),
        ("Wat is INSAG-4? Antwoord in JSON.", "Wat is INSAG-4?", False, "json", None),
        ("What is INSAG-4? Answer in JSON.", "What is INSAG-4?", False, "json", None),
        ("Welke eisen gelden voor radioactief afval, in een tabel?", "Welke eisen gelden voor radioactief afval?",
         False, "table", None),
        ("Answer in English: wat regelt de Kernenergiewet?", "wat regelt de Kernenergiewet?", False, "", "en"),
        ("Wat is de rol van de ANVS? In het Engels graag.", "Wat is de rol van de ANVS?", False, "", "en"),
        ("Beantwoord in maximaal 50 woorden: wat doet COVRA?", "wat doet COVRA?", True, "", None),
        ("What is a PSR? Please keep it short and use bullet points.", "What is a PSR?", True, "list", None),
        ("wat is de dosislimiet voor werknemers in het kort", "wat is de dosislimiet voor werknemers", True, "", None),
        # no instruction: the text is the question
        ("Leg uitgebreid uit hoe de periodieke veiligheidsevaluatie werkt.",
         "Leg uitgebreid uit hoe de periodieke veiligheidsevaluatie werkt.", False, "", None),
        ("Give a list of all IAEA documents on safety culture.",
         "Give a list of all IAEA documents on safety culture.", False, "", None),
        ("Kernenergiewet: wat regelt artikel 15a?", "Kernenergiewet: wat regelt artikel 15a?", False, "", None),
        ("IAEA vs. ANVS: safety culture", "IAEA vs. ANVS: safety culture", False, "", None),
        # only an instruction: nothing else to search for, so it stays the question
        ("Antwoord kort.", "Antwoord kort.", False, "", None),
    ],
)
def test_instructions_are_split_from_the_question(text, question, brief, fmt, language) -> None:
    got, instructions = split(text)
    assert got == question
    assert (instructions.brief, instructions.format, instructions.language) == (brief, fmt, language)
    assert bool(instructions) == (got != text)


def _chunk(doc: str, n: int, text: str, collection: str = "c1", summary: bool = False) -> Evidence:
    return Evidence(id=f"{collection}/{doc}#{n}", collection=collection, doc_id=doc, title=f"Doc {doc}", text=text,
                    section=f"Section {n}", url=f"https://example.org/{doc}", summary=summary)


def test_the_answer_ledger_has_one_entry_per_document_numbered_by_first_citation() -> None:
    a1, a2 = _chunk("a", 1, "Alpha one says the limit is 20 mSv."), _chunk("a", 2, "Alpha two says 24 hours.")
    b1 = _chunk("b", 1, "Bravo says reports go to the regulator.", collection="c2", summary=True)
    facts = [Fact(text="Bravo says reports go to the regulator.", evidence_ids=[b1.id]),
             Fact(text="Alpha two says 24 hours.", evidence_ids=[a2.id]),
             Fact(text="Alpha one says the limit is 20 mSv.", evidence_ids=[a1.id]),
             Fact(text="Alpha one says the limit is 20 mSv.", evidence_ids=[a1.id])]
    ledger = Ledger.for_answer(facts, [a1, a2, b1], limit=12)
    assert [e.doc_id for e in ledger] == ["b", "a"]  # first cited first; document "a" once
    assert ledger.entries[1].section == "Section 2; Section 1"
    assert ledger.marks(facts[1]) == ledger.marks(facts[2]) == "[2]"
    answer = template_answer(facts, ledger, "en", str, "banner")
    assert answer.count("Alpha one says the limit is 20 mSv.") == 1  # no sentence twice
    assert answer.index("[1]") < answer.index("[2]")
    sources = ledger.sources([1, 2], "en", str)
    assert sources.count("https://example.org/a") == 1 and "Section 2; Section 1" in sources
    assert ledger.summaries() == [1]
    assert "(summary)" in ledger.render(summary_mark="summary", only=[1])
    assert "(summary)" not in ledger.render(summary_mark="summary", only=[2])
