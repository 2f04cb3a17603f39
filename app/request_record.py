"""What one chat request leaves behind when it ends, however it ends: its metrics and its audit line."""

from __future__ import annotations

import logging
import time
from typing import Any

from app.access import Caller
from app.observability import Metrics
from app.sse import ChunkRenderer
from graph.answer.events import (
    EchoVerdicts,
    InstructionsIgnored,
    LLMFallback,
    Searched,
    SourceFound,
    ThoughtEvent,
    Unsupported,
)

log = logging.getLogger("app.chat")  # the request's closing line, under the logger it always had
audit_log = logging.getLogger("neo_nl.audit")
class RequestRecord:
    """Metrics and the audit line of one chat request, recorded once when it ends (however it ends)."""

    def __init__(self, metrics: Metrics, kind: str, streamed: bool, caller: Caller | None = None,
                 visible: tuple[str, ...] = ()) -> None:
        self.metrics, self.kind, self.streamed, self.started = metrics, kind, streamed, time.perf_counter()
        self.audit = Audit(caller or Caller(), visible)
        metrics.in_flight.inc()

    def observe(self, event: ThoughtEvent) -> None:
        self.audit.observe(event)
        if isinstance(event, LLMFallback):
            self.metrics.fallbacks.labels(event.step, event.reason).inc()
        elif isinstance(event, Unsupported):
            self.metrics.unsupported.inc(len(event.sentences))
        elif isinstance(event, EchoVerdicts):
            for verdict, n in event.counts().items():
                self.metrics.echo.labels(event.step, verdict).inc(n)
        elif isinstance(event, InstructionsIgnored):
            for collection, n in event.collections:
                self.metrics.injection.labels(collection).inc(n)

    def done(self, outcome: str, renderer: ChunkRenderer) -> None:
        self.metrics.in_flight.dec()
        first = renderer.first_answer_at if self.streamed else None
        usage = renderer.usage
        self.metrics.finish(self.kind, outcome, self.started, usage, first)
        steps = {name: part.model_dump() for name, part in usage.steps.items()}
        log.info("%s request %s in %.2f s; upstream: %d calls, %d prompt + %d completion tokens %s", self.kind,
                 outcome, time.perf_counter() - self.started, usage.upstream_calls, usage.prompt_tokens,
                 usage.completion_tokens, " ".join(f"{name}={p['prompt_tokens']}+{p['completion_tokens']}"
                                                   for name, p in steps.items()),
                 extra={"outcome": outcome, "upstream_tokens": steps})
        self.audit.log(self.kind, outcome)


class Audit:
    """Who asked, which collections research searched and which documents the answer cited: one line per chat
    request on the `neo_nl.audit` logger (section "Collections per caller" under docs/). The key id, never the API
    key, and never the user token."""

    def __init__(self, caller: Caller, visible: tuple[str, ...]) -> None:
        self.caller, self.visible = caller, visible
        self.searched: tuple[str, ...] = ()
        self.cached = False
        self.cited: dict[str, dict[str, str]] = {}  # by evidence id, in citation order

    def observe(self, event: ThoughtEvent) -> None:
        if isinstance(event, Searched):
            self.searched, self.cached = event.collections, event.cached
        elif isinstance(event, SourceFound):
            self.cited.setdefault(event.evidence_id, {"collection": event.collection, "title": event.title,
                                                      "url": event.url})

    def fields(self, kind: str, outcome: str) -> dict[str, Any]:
        user = self.caller.user
        return {
            "kind": kind, "outcome": outcome, "key_id": self.caller.key_id,
            "user": {"sub": user.sub, "email": user.email, "role": user.role, "groups": list(user.groups)} if user
            else None,
            "identity": user.source if user else None,
            "collections_visible": list(self.visible), "collections_searched": list(self.searched),
            "from_cache": self.cached, "documents_cited": list(self.cited.values()),
        }

    def log(self, kind: str, outcome: str) -> None:
        fields = self.fields(kind, outcome)
        user = self.caller.user
        who = f"key {self.caller.key_id}" + (f", user {user.email or user.sub} ({user.source})" if user else "")
        searched = ", ".join(self.searched) or "nothing"
        cited = "; ".join(d["title"] for d in fields["documents_cited"]) or "nothing"
        audit_log.info("%s %s by %s: searched %s%s; cited %s", kind, outcome, who, searched,
                       " (cached answer)" if self.cached else "", cited, extra={"audit": fields})
