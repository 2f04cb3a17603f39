"""The corrective research loop: its state (`Loop`), the one rule that decides the next step (`decide`) and what
the think block says of that decision (`assessment`).

    plan (round 1) -> research -> summarize -> judge: verdict -> decide -+-> research the next round's tasks
                                                                         +-> stop with a reason -> synthesize

Nodes do the work (search, condense, judge); the functions here only decide, from plain values, and are
table-tested in tests/test_pipeline.py. `Loop` is set in full when a request starts; `plan` fills round 1,
`judge` writes every later round or the stop.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from typing import Literal

from graph.models import Evidence, Fact, Outcome, QueryType, ResearchTask, Status, Verdict

StopReason = Literal["sufficient", "max_rounds", "no_new_evidence", "nothing_left", "budget", "deep_dive"]


@dataclass(frozen=True, slots=True)
class Loop:
    round: int = 1  # the research round in progress (1-based)
    tasks: list[ResearchTask] = field(default_factory=list)  # this round's research tasks
    pending: list[ResearchTask] = field(default_factory=list)  # tasks that need another task's findings first
    evidence_seen: int = 0  # evidence entries gathered before this round (what is new this round)
    verdict: Verdict | None = None  # the judge's verdict on the evidence so far
    stop: StopReason | None = None  # set when research is over
    tried: frozenset[tuple[str, str]] = frozenset()  # (collection, query) searched so far: never searched again

    def start(self, tasks: list[ResearchTask], pending: list[ResearchTask], evidence_seen: int) -> Loop:
        """The first round."""
        return replace(self, tasks=tasks, pending=pending, evidence_seen=evidence_seen, tried=searches(tasks))

    def after(self, verdict: Verdict, decision: Decision, evidence_seen: int) -> Loop:
        """The loop once `decision` is taken: stopped, or at the next round with its tasks."""
        if decision.stop is not None:
            return replace(self, verdict=verdict, stop=decision.stop)
        return Loop(round=self.round + 1, tasks=decision.tasks, evidence_seen=evidence_seen, verdict=verdict,
                    tried=self.tried | searches(decision.tasks))


def searches(tasks: list[ResearchTask]) -> frozenset[tuple[str, str]]:
    """The (collection, query) pairs tasks search, queries compared without case and spacing."""
    return frozenset((t.collection, " ".join(q.lower().split())) for t in tasks for q in t.queries)


def untried(tasks: list[ResearchTask], tried: frozenset[tuple[str, str]]) -> list[ResearchTask]:
    """The tasks with their queries not searched before on their collection (tasks left without one dropped,
    and a query only once per round): a correction round always tries something new."""
    seen = set(tried)
    out = []
    for task in tasks:
        queries = [q for q in task.queries if (task.collection, " ".join(q.lower().split())) not in seen]
        seen |= {(task.collection, " ".join(q.lower().split())) for q in queries}
        if queries:
            out.append(task.model_copy(update={"query": queries[0], "extra": queries[1:]}))
    return out


@dataclass(frozen=True, slots=True)
class Limits:
    """What bounds the loop, from the pipeline configuration and the request's deadline."""

    max_rounds: int
    tokens_left: int
    seconds_left: float


def research_rounds(max_iterations: int, depth: str | None) -> int:
    """Research rounds a request may take: one at depth "low" (the caller's `reasoning_effort`: the cheapest
    path, no correction round or second hop), else the configured bound (MAX_ITERATIONS)."""
    return 1 if depth == "low" else max_iterations


def model_judges(depth: str | None, coverage_decided: bool, model: bool) -> bool:
    """Whether the model judges the evidence: when coverage cannot decide (the adaptive default), also when it
    can at depth "high" (the full loop: a model's verdict may ask for another round), never at depth "low"."""
    return model and depth != "low" and (not coverage_decided or depth == "high")


@dataclass(frozen=True, slots=True)
class Decision:
    stop: StopReason | None  # None: research `tasks` in another round
    tasks: list[ResearchTask] = field(default_factory=list)


def decide(loop: Loop, verdict: Verdict, *, kind: QueryType, new_evidence: int, failed: set[str],
           limits: Limits, follow_ups: list[ResearchTask] | None = None,
           alternatives: dict[str, list[str]] | None = None) -> Decision:
    """The loop's stop rule, in order: a deep dive reads once; enough evidence; the round bound; a round that
    found nothing new; nothing left to try; the token or time budget. What a next round tries: the judge's
    refined queries and the `follow_ups` the evidence suggests (second hops, other wordings), only queries not
    yet searched on their collection. Sub-questions waiting for earlier findings run before research stops
    for being sufficient or out of refinements."""
    if kind == "deep_dive":  # one careful read of the best document; there are no tasks to refine
        return Decision("sufficient" if verdict.status == "sufficient" else "deep_dive")
    refined = untried(refine(loop.tasks, verdict, loop.round, failed, alternatives) + (follow_ups or []), loop.tried)
    reason: StopReason | None = None
    if verdict.status == "sufficient":
        reason = "sufficient"
    elif loop.round >= limits.max_rounds:
        reason = "max_rounds"
    elif loop.round > 1 and new_evidence == 0:
        reason = "no_new_evidence"
    elif not refined:
        reason = "nothing_left"
    elif limits.tokens_left <= 0 or limits.seconds_left <= 0:
        reason = "budget"
    if loop.pending and reason in (None, "sufficient", "nothing_left"):
        return Decision(None, loop.pending + refined)
    return Decision(reason) if reason else Decision(None, refined)


def assessment(verdict: Verdict, decision: Decision) -> Status:
    """The assessment the think line shows, read from the decision that routes (`decide`, what `Loop.after`
    stores), not from the verdict alone: "sufficient" exactly when research stops for it. Evidence judged
    sufficient while research goes on (sub-questions waiting for its findings) is partial: the line said
    "Beoordeling: voldoende" and another search round followed (issue 58)."""
    if decision.stop == "sufficient":
        return "sufficient"
    return "partial" if verdict.status == "sufficient" else verdict.status


def coverage_verdict(kind: QueryType, tasks: list[ResearchTask], covered: set[str], facts: list[Fact],
                     complete: bool = True) -> Verdict | None:
    """A deterministic verdict when coverage settles it (no judging call needed); None when it does not.

    Comparative research is sufficient when every sub-agent produced facts; the other types (one retrieval,
    one summary) as soon as there are facts that together hold every topic word of the question (`complete`),
    which keeps a factual question at two upstream calls; facts that leave words uncovered are partial (a
    second hop may find the rest). Nothing found at all is plainly insufficient.
    """
    if not facts:
        return Verdict(status="insufficient", missing=[t.label for t in tasks], judged_by="coverage")
    if kind == "comparative" and any(t.condense for t in tasks):  # sides researched by sub-agents
        missing = [t.label for t in tasks if t.condense and t.id not in covered]
        return Verdict(status="sufficient", judged_by="coverage") if not missing else None
    return Verdict(status="sufficient" if complete else "partial", judged_by="coverage")


def follows_links(kind: QueryType, side_by_side: bool, round_no: int) -> bool:
    """Whether research looks up what the first round's best passages name (`graph.text.hops.link_queries`)
    although coverage may call the evidence sufficient: for a question about one thing or comparing named things,
    in the first round only. A question's words can all be held by the passage that names the bridge while the
    answer is in the document about the bridge (HotpotQA's bridge questions); a title lookup costs a search, not a
    model call. Overviews, deep dives and comparisons of sources read broadly instead."""
    return kind in ("factual", "comparative") and not side_by_side and round_no == 1


def unexplored(verdict: Verdict) -> Verdict:
    """A verdict once the evidence names things not yet looked up: sufficient becomes partial (so the loop's rule
    runs the lookups as its next round); any other verdict stands."""
    return verdict.model_copy(update={"status": "partial"}) if verdict.status == "sufficient" else verdict


def rules_verdict(tasks: list[ResearchTask], covered: set[str]) -> Verdict:
    """Offline / fallback judgement: the tasks without facts are what is missing."""
    missing = [t.label for t in tasks if t.id not in covered]
    return Verdict(status="partial" if missing else "sufficient", missing=missing, judged_by="rules")


def covered_tasks(tasks: list[ResearchTask], outcomes: list[Outcome], facts: list[Fact],
                  evidence: list[Evidence]) -> set[str]:
    """Tasks with facts: condensed by their own sub-agent, or whose collection a summarised fact cites."""
    cited = {i for f in facts for i in f.evidence_ids}
    with_facts = {e.collection for e in evidence if e.id in cited}
    return {o.task_id for o in outcomes if o.facts} | {t.id for t in tasks if t.collection in with_facts}


def failed_collections(outcomes: list[Outcome]) -> set[str]:
    return {o.collection for o in outcomes if o.error}


def refines(task: ResearchTask, verdict: Verdict) -> bool:
    """Whether a next round researches `task` again: the verdict calls it missing or refines its query."""
    return task.label in verdict.missing or task.id in verdict.queries


def refine(tasks: list[ResearchTask], verdict: Verdict, round_no: int, failed: set[str] | frozenset[str] = frozenset(),
           alternatives: dict[str, list[str]] | None = None) -> list[ResearchTask]:
    """The next round researches only what is missing, a deeper look with other queries: the judge's refined
    one, then `alternatives` per collection (other wordings); `untried` drops what was searched already.
    Collections whose search failed outright are not retried (they are reported as gaps)."""
    return [
        task.model_copy(
            update={
                "id": f"{task.id.split('@')[0]}@{round_no + 1}",
                "query": verdict.queries.get(task.id, task.query),
                "extra": (alternatives or {}).get(task.collection, []),
                "depth": task.depth + 1,
            }
        )
        for task in tasks
        if task.collection not in failed and refines(task, verdict)
    ]


def follow_up_tasks(tasks: list[ResearchTask], queries: list[str], round_no: int, failed: set[str]
                    ) -> list[ResearchTask]:
    """Second-hop `queries` on every collection this round searched (not on failed ones)."""
    if not queries:
        return []
    return [task.model_copy(update={"id": f"{task.id.split('@')[0]}@{round_no + 1}+", "query": queries[0],
                                    "extra": queries[1:], "condense": False, "after": None})
            for task in tasks if task.collection not in failed and not task.condense]


def lookup_tasks(tasks: list[ResearchTask], found: list[tuple[str, str, str]], round_no: int, failed: set[str]
                 ) -> list[ResearchTask]:
    """Title lookups: each (name, collection, doc_id) found by `list_documents` searched on its own collection only,
    that document's passages first; only on collections this round searched (not on failed ones)."""
    out = []
    for task in tasks:
        mine = [(name, doc_id) for name, collection, doc_id in found if collection == task.collection]
        if mine and task.collection not in failed and not task.condense:
            out.append(task.model_copy(update={
                "id": f"{task.id.split('@')[0]}@{round_no + 1}=", "query": mine[0][0],
                "extra": [n for n, _ in mine[1:]], "doc_ids": [d for _, d in mine], "condense": False, "after": None}))
    return out


def with_findings(task: ResearchTask, tasks: list[ResearchTask], facts: list[Fact], evidence: list[Evidence]
                  ) -> ResearchTask:
    """A dependent sub-question, sharpened with the names and numbers its prerequisite found."""
    source = next((t.collection for t in tasks if t.id == task.after), None)
    in_source = {e.id for e in evidence if e.collection == source}
    found = " ".join(f.text for f in facts if set(f.evidence_ids) & in_source)
    extra = " ".join(dict.fromkeys(re.findall(r"\b[A-Z][\w/-]{2,}|\b\d[\w./-]*", found)))[:120]
    return task.model_copy(update={"query": f"{task.query} {extra}".strip(), "after": None})
