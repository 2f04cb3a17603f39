"""The pipeline's configuration: plain values, built once per process from the service settings."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal


@dataclass(frozen=True, slots=True)
class PipelineConfig:
    """The pipeline's knobs (the pipeline part of the service settings, `Settings.pipeline`)."""

    top_k: int = 6  # passages kept from a search
    max_facts: int = 8
    facts_per_agent: int = 4
    max_iterations: int = 3  # research rounds at most
    token_budget: int = 60_000  # upstream tokens after which no further round starts
    claim_check: Literal["auto", "on", "off"] = "on"
    research_seconds: float = 60.0  # after this long no further research round starts
    ledger_limit: int = 12  # evidence entries the answer may cite
    focus_documents: int = 5  # documents a model reads for a question about one thing (FOCUS_DOCUMENTS)
    # a question two linked passages explain: the model reads their documents and a partner's only (PAIR_FOCUS)
    pair_focus: bool = True
    prompt_passages: int = 6  # passages one summarising model call reads (the best ones)
    passage_chars: int = 800  # characters of a passage in a prompt
    evidence_tokens: int = 1200  # the answer prompt's evidence block at most (estimated tokens; EVIDENCE_TOKENS)
    answer_max_tokens: int = 1000  # the longest answer a model may write (about 600 words)
    auto_cite: bool = True  # a model's claim sentences without [n] get the passage that supports them
    model_route: bool = False  # the fast model classifies a question the heuristics are torn about (MODEL_ROUTE)
    model_summary: bool = True  # the fast model condenses selected passages over the evidence budget (MODEL_SUMMARY)
    # Optional model steps of a comparison (off: per-collection templates and extractive fact selection, which
    # cost milliseconds; on the local model each call took 7-22 s)
    model_decompose: bool = False
    model_condense: bool = False
    stream_interval_s: float = 0.0  # answer deltas closer together than this are sent as one (0 = every delta)
    min_coverage: float = 0.6  # share of topic words a passage must contain for a factual answer (offline)
    cache_ttl_s: float = 3600.0  # plan cache entries (routes, decompositions, rewrites made by the model)
