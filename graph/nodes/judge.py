"""Judge: is the evidence sufficient? Coverage first (no call), then the fast model, or rules offline."""

from __future__ import annotations

import json
import re
import time

from langgraph.runtime import Runtime

from graph import messages
from graph.events import Step, emit
from graph.loop import coverage_verdict, refine, rules_verdict, stop_reason
from graph.state import Context, State, Usage, Verdict
from graph.structured import ask_fast


def parse_verdict(text: str, labels: dict[str, str]) -> Verdict:
    """The model's JSON verdict; `missing` must name research tasks (by label)."""
    match = re.search(r"\{.*\}", text, re.DOTALL)
    if not match:
        raise ValueError("no JSON object")
    raw = json.loads(match.group(0))
    by_label = {label.lower(): task_id for task_id, label in labels.items()}
    missing, queries = [], {}
    for item in raw.get("missing") or []:
        task_id = by_label.get(str(item.get("source", "")).lower()) if isinstance(item, dict) else None
        if task_id:
            missing.append(labels[task_id])
            if item.get("query"):
                queries[task_id] = str(item["query"])
    return Verdict.model_validate({"status": raw.get("status"), "missing": missing, "queries": queries, "judged_by": "llm"})


async def judge(state: State, runtime: Runtime[Context]) -> dict:
    ctx, language, route = runtime.context, state["language"], state["route"]
    tasks, facts = state.get("tasks", []), state.get("facts", [])
    evidence = state.get("evidence", [])
    collections_with_facts = {e.collection for e in evidence if any(e.id in f.evidence_ids for f in facts)}
    covered = set(state.get("covered", [])) | {t.id for t in tasks if t.collection in collections_with_facts}
    usage = Usage()
    verdict = coverage_verdict(route.query_type, tasks, covered, facts)
    if verdict is None and ctx.llm is not None:
        labels = {t.id: t.label for t in tasks}
        facts_block = "\n".join(f"- {f.text}" for f in facts)
        prompt = ctx.prompts.render(
            "judge", language, question=state["question"], facts=facts_block, sources=", ".join(labels.values())
        )
        verdict, usage = await ask_fast(ctx, prompt, language, lambda text: parse_verdict(text, labels), max_tokens=300)
    if verdict is None:
        verdict = rules_verdict(tasks, covered)
    status = messages.status_label(verdict.status, language)
    if verdict.missing:
        emit(Step(messages.line("verdict_missing", language, status=status, missing=", ".join(verdict.missing))))
    else:
        emit(Step(messages.line("verdict", language, status=status)))
    used = (state.get("usage") or Usage()) + usage
    reason = stop_reason(
        verdict,
        round_no=state.get("round", 1),
        max_iterations=ctx.max_iterations,
        new_evidence=len(evidence) - state.get("evidence_seen", 0),
        tokens_used=used.total_tokens,
        token_budget=ctx.token_budget,
        seconds_left=state.get("deadline", float("inf")) - time.monotonic(),
        refinable=len(refine(tasks, verdict, state.get("round", 1), set(state.get("failed", [])))),
    )
    if state.get("pending") and reason in ("sufficient", "nothing_left", None):
        reason = None  # planned sub-questions that needed earlier findings still have to run
    elif reason and reason != "sufficient":
        emit(Step(messages.line("stop", language, reason=messages.reason_label(reason, language))))
    if route.query_type == "deep_dive" and reason is None:
        reason = "max_iterations"  # one careful read; no refinement rounds for deep dives
    return {"verdict": verdict, "stop_reason": reason or "", "usage": usage}


def after_judge(state: State) -> str:
    """Continue researching while there is no stop reason."""
    return "synthesize" if state.get("stop_reason") else "plan"
