"""Pipeline state: what the nodes read and write, every key set when a request starts (`graph/runner.py`).

Keys written by parallel research branches have reducers; the corrective loop's bookkeeping is one `Loop`
value (`graph/loop.py`) that only `plan` and `judge` write. Clients and settings are not state: they travel
in the run's `Context` (`graph/context.py`).
"""

from __future__ import annotations

import operator
from typing import Annotated, TypedDict

from graph.loop import Loop
from graph.models import Evidence, Fact, Outcome, Route, Turn, Usage
from graph.text.instructions import Instructions


def merge_evidence(left: list[Evidence], right: list[Evidence]) -> list[Evidence]:
    """Reducer: append new evidence, drop ids already present (parallel branches may overlap)."""
    seen = {e.id for e in left}
    return left + [e for e in right if e.id not in seen and not seen.add(e.id)]  # type: ignore[func-returns-value]


def merge_facts(left: list[Fact], right: list[Fact]) -> list[Fact]:
    """Reducer: append facts not seen before (same text and evidence)."""
    seen = {(f.text, tuple(f.evidence_ids)) for f in left}
    return left + [f for f in right if (f.text, tuple(f.evidence_ids)) not in seen]


class State(TypedDict):
    question: str  # the standalone question (`route` rewrites a follow-up), without answer instructions
    instructions: Instructions  # what the user asked about the answer ("answer briefly"): synthesis only
    history: list[Turn]
    route: Route | None  # set by `route`, the first node
    documents: list[dict]  # exploratory/deep-dive: list_documents hits
    loop: Loop
    evidence: Annotated[list[Evidence], merge_evidence]
    facts: Annotated[list[Fact], merge_facts]
    outcomes: Annotated[list[Outcome], operator.add]  # one per research task run
    gaps: Annotated[list[str], operator.add]  # what could not be searched, said in the answer
    unfound: list[str]  # listed things no passage names, left out of the answer's facts (`summarize`), said in it
    answer: str
    sources: list[Evidence]  # what the answer's [1], [2], ... point at, in that order (set by `synthesize`)
    usage: Annotated[Usage, operator.add]
