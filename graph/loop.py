"""Corrective-loop decisions as small pure functions (table-tested)."""

from __future__ import annotations

from graph.state import Fact, QueryType, ResearchTask, Verdict


def coverage_verdict(kind: QueryType, tasks: list[ResearchTask], covered: set[str], facts: list[Fact]) -> Verdict | None:
    """A deterministic verdict when coverage settles it (no judging call needed); None when it does not.

    Comparative research is sufficient when every sub-agent produced facts; the other types (one retrieval,
    one summary) as soon as there is a fact, which keeps a factual question at two upstream calls. Nothing
    found at all is plainly insufficient.
    """
    if not facts:
        return Verdict(status="insufficient", missing=[t.label for t in tasks], judged_by="coverage")
    if kind == "comparative":
        missing = [t.label for t in tasks if t.condense and t.id not in covered]
        return Verdict(status="sufficient", judged_by="coverage") if not missing else None
    return Verdict(status="sufficient", judged_by="coverage")


def rules_verdict(tasks: list[ResearchTask], covered: set[str]) -> Verdict:
    """Offline / fallback judgement: the tasks without facts are what is missing."""
    missing = [t.label for t in tasks if t.id not in covered]
    return Verdict(status="partial" if missing else "sufficient", missing=missing, judged_by="rules")


def stop_reason(
    verdict: Verdict,
    *,
    round_no: int,
    max_iterations: int,
    new_evidence: int,
    tokens_used: int,
    token_budget: int,
    seconds_left: float,
    refinable: int = 1,
) -> str | None:
    """Why the research loop stops now, or None to run another round."""
    if verdict.status == "sufficient":
        return "sufficient"
    if round_no >= max_iterations:
        return "max_iterations"
    if round_no > 1 and new_evidence == 0:
        return "no_new_evidence"
    if not refinable:
        return "nothing_left"
    if tokens_used >= token_budget or seconds_left <= 0:
        return "budget"
    return None


def refine(
    tasks: list[ResearchTask], verdict: Verdict, round_no: int, failed: set[str] | frozenset[str] = frozenset()
) -> list[ResearchTask]:
    """The next round researches only what is missing, with refined queries and a deeper look; collections
    whose search failed outright are not retried (they are reported as gaps)."""
    missing = set(verdict.missing)
    tasks = [t for t in tasks if t.collection not in failed]
    return [
        task.model_copy(
            update={
                "id": f"{task.id.split('@')[0]}@{round_no + 1}",
                "query": verdict.queries.get(task.id, task.query),
                "depth": task.depth + 1,
            }
        )
        for task in tasks
        if task.label in missing or task.id in verdict.queries
    ]
