"""OpenAI chat-completions protocol models (requests, responses, chunks, errors), in one file.

Requests accept every standard field and ignore unknown ones, but a standard field of the wrong JSON type is a
400 as in the OpenAI API (`"stream": "yes"` is no boolean: strict types, no coercion); responses carry exactly
the fields that clients rely on (see docs: `refusal: null`, `logprobs: null`, one id/created per stream).
Every string of a request body must be text (`TextOnly`).
"""

from __future__ import annotations

import re
import time
import uuid
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictFloat, StrictInt, ValidationError, model_validator
from pydantic_core import InitErrorDetails, PydanticCustomError

# ---------------------------------------------------------------- requests

INVALID_TEXT = "invalid_text"  # the error type (pydantic) and code (API) of a request string that is no text
# A lone surrogate is no Unicode character: JSON can carry one (`"\ud800"`), Python decodes it, and UTF-8 cannot
# encode it, so every cache key, log line, upstream request and reply that held it would fail. A NUL ends C
# strings and is refused by log shippers and databases. (A surrogate pair decodes to one character: not matched.)
_NOT_TEXT = re.compile("[\x00\ud800-\udfff]")


def text_problem(text: str) -> str | None:
    """What makes `text` unusable as text, or None. The message never holds the text itself."""
    found = _NOT_TEXT.search(text)
    if found is None:
        return None
    if found.group() == "\x00":
        return "holds a NUL character (\\u0000)"
    return f"is not valid Unicode: it holds a lone surrogate (\\u{ord(found.group()):04x})"


def first_invalid_text(data: Any) -> tuple[tuple[str | int, ...], str] | None:
    """Where in a parsed JSON value (dicts, lists, strings) the first string that is no text stands, and what is
    wrong with it. A bad key is reported at its object. Iterative: the nesting is as deep as the client made it."""
    stack: list[tuple[tuple[str | int, ...], Any]] = [((), data)]
    while stack:
        loc, value = stack.pop()
        if isinstance(value, str):
            problem = text_problem(value)
            if problem is not None:
                return loc, f"the text {problem}"
        elif isinstance(value, dict):
            children: list[tuple[tuple[str | int, ...], Any]] = []
            for key, item in value.items():
                if isinstance(key, str) and (problem := text_problem(key)) is not None:
                    return loc, f"a key of this object {problem}"
                children.append(((*loc, key), item))
            stack.extend(reversed(children))
        elif isinstance(value, list):
            stack.extend(reversed([((*loc, i), item) for i, item in enumerate(value)]))
    return None


class TextOnly(BaseModel):
    """A request body whose every string (values and keys, known fields and extra ones) is valid Unicode text
    without NUL: checked once on the raw JSON, before any field, so that no later step (cache key, upstream call,
    log line, reply) meets a string it cannot encode. The 400 names the string's place (`messages.0.content`)."""

    @model_validator(mode="before")
    @classmethod
    def _only_text(cls, data: Any) -> Any:
        found = first_invalid_text(data)
        if found is None:
            return data
        loc, problem = found
        # a ValidationError raised here keeps its locations (a ValueError would be reported at the body itself)
        error = InitErrorDetails(type=PydanticCustomError(INVALID_TEXT, problem), loc=loc, input=None)
        raise ValidationError.from_exception_data(cls.__name__, [error])


class ContentPart(BaseModel):
    model_config = ConfigDict(extra="allow")
    type: str
    text: str | None = None


class ChatMessage(BaseModel):
    model_config = ConfigDict(extra="allow")
    role: Literal["system", "developer", "user", "assistant", "tool", "function"]
    content: str | list[ContentPart] | None = None
    name: str | None = None

    def text(self) -> str:
        if isinstance(self.content, str):
            return self.content
        if not self.content:
            return ""
        return "\n".join(part.text for part in self.content if part.type in ("text", "input_text") and part.text)


class StreamOptions(BaseModel):
    model_config = ConfigDict(extra="allow")
    include_usage: StrictBool = False


class ReasoningOptions(BaseModel):
    """OpenRouter's `reasoning` request object; here it says where the progress goes (`exclude`: nowhere)."""

    model_config = ConfigDict(extra="allow")
    exclude: StrictBool = False
    enabled: StrictBool | None = None
    effort: str | None = None


class RequestFilters(BaseModel):
    """`filters` (an extension; SDKs send it with `extra_body`): which passages research may use."""

    model_config = ConfigDict(extra="forbid")
    collections: list[str] | None = Field(default=None, min_length=1)  # names or display names
    kind: Literal["official", "summary"] | None = None
    language: Literal["nl", "en"] | None = None  # the language of a collection's documents


class ChatCompletionRequest(TextOnly):
    model_config = ConfigDict(extra="allow")
    model: str = Field(min_length=1)
    messages: list[ChatMessage] = Field(min_length=1)
    stream: StrictBool | None = False
    stream_options: StreamOptions | None = None
    n: StrictInt | None = Field(default=None, ge=1)
    temperature: StrictFloat | None = Field(default=None, ge=0, le=2)
    top_p: StrictFloat | None = Field(default=None, ge=0, le=1)
    presence_penalty: StrictFloat | None = Field(default=None, ge=-2, le=2)
    frequency_penalty: StrictFloat | None = Field(default=None, ge=-2, le=2)
    max_tokens: StrictInt | None = Field(default=None, ge=1)
    max_completion_tokens: StrictInt | None = Field(default=None, ge=1)
    stop: str | list[str] | None = None
    tools: list[dict[str, Any]] | None = None
    tool_choice: str | dict[str, Any] | None = None
    response_format: dict[str, Any] | None = None
    seed: StrictInt | None = None
    logprobs: StrictBool | None = None
    user: str | None = None
    reasoning_effort: str | None = None
    reasoning: ReasoningOptions | None = None  # OpenRouter's convention
    include_reasoning: StrictBool | None = None  # OpenRouter's older switch
    top_logprobs: StrictInt | None = None
    modalities: list[str] | None = None
    audio: dict[str, Any] | None = None
    filters: RequestFilters | None = None

    @property
    def include_usage(self) -> bool:
        return bool(self.stream_options and self.stream_options.include_usage)


# ---------------------------------------------------------------- responses


def completion_id() -> str:
    return f"chatcmpl-{uuid.uuid4().hex[:24]}"


class StepUsage(BaseModel):
    """What the upstream calls of one pipeline step cost (extension)."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    calls: int = 0


class UsageInfo(BaseModel):
    prompt_tokens: int = 0
    completion_tokens: int = 0
    total_tokens: int = 0
    upstream_calls: int = 0  # extension: LLM calls made for this request
    steps: dict[str, StepUsage] = Field(default_factory=dict)  # extension: the same, per pipeline step

    def add(self, step: str, prompt_tokens: int, completion_tokens: int, calls: int) -> None:
        self.prompt_tokens += prompt_tokens
        self.completion_tokens += completion_tokens
        self.total_tokens = self.prompt_tokens + self.completion_tokens
        self.upstream_calls += calls
        part = self.steps.setdefault(step or "other", StepUsage())
        part.prompt_tokens += prompt_tokens
        part.completion_tokens += completion_tokens
        part.calls += calls


class URLCitation(BaseModel):
    """OpenAI's cited web source: `content[start_index:end_index]` is the text it supports."""

    url: str
    title: str
    start_index: int
    end_index: int


class Annotation(BaseModel):
    type: Literal["url_citation"] = "url_citation"
    url_citation: URLCitation


class DeltaMessage(BaseModel):
    role: Literal["assistant"] | None = None
    content: str | None = None
    reasoning_content: str | None = None
    annotations: list[Annotation] | None = None  # once, on the finish chunk (`app.annotations`)


class ChunkChoice(BaseModel):
    index: int = 0
    delta: DeltaMessage
    finish_reason: Literal["stop", "length"] | None = None
    logprobs: None = None


class SearchResult(BaseModel):
    """A cited document as retrieval-backed OpenAI-compatible APIs give it (Perplexity's `search_results`)."""

    title: str
    url: str
    date: str | None = None  # the document's year, when known
    snippet: str = ""
    page: int | None = None  # extension: the page of a paged source (PDF) the cited passage starts on, 1-based


class ChatCompletionChunk(BaseModel):
    id: str
    object: Literal["chat.completion.chunk"] = "chat.completion.chunk"
    created: int
    model: str
    choices: list[ChunkChoice]
    usage: UsageInfo | None = None
    # extension, on the final chunk only: the cited documents in citation order (`[1]` is the first)
    citations: list[str] | None = None
    search_results: list[SearchResult] | None = None


class ResponseMessage(BaseModel):
    role: Literal["assistant"] = "assistant"
    content: str
    refusal: None = None
    reasoning_content: str | None = None
    annotations: list[Annotation] = Field(default_factory=list)  # url_citation per cited marker (`app.annotations`)


class Choice(BaseModel):
    index: int = 0
    message: ResponseMessage
    finish_reason: Literal["stop", "length"] = "stop"
    logprobs: None = None


class ChatCompletion(BaseModel):
    id: str
    object: Literal["chat.completion"] = "chat.completion"
    created: int
    model: str
    choices: list[Choice]
    usage: UsageInfo
    citations: list[str] = Field(default_factory=list)  # extension: the cited documents' URLs, `[1]` first
    search_results: list[SearchResult] = Field(default_factory=list)  # extension: the same documents, described


class SearchRequest(TextOnly):
    """`POST /v1/search`: the passages research would gather for `query`."""

    model_config = ConfigDict(extra="forbid")
    query: str = Field(min_length=1, max_length=4000)
    filters: RequestFilters | None = None
    top_k: StrictInt = Field(default=10, ge=1, le=50)


class Passage(BaseModel):
    id: str  # stable: `collection/doc_id#n`
    title: str
    collection: str
    page: int | None = None  # the first page of a paged source (PDF), 1-based
    section: str = ""  # the article or section it stands in, where the source says
    score: float  # the document server's relevance
    snippet: str  # its opening, cut at a word
    text: str
    url: str  # with `#page=N` for a paged source whose address names no place


class SearchResponse(BaseModel):
    object: Literal["list"] = "list"
    data: list[Passage]


class ModelCard(BaseModel):
    id: str
    object: Literal["model"] = "model"
    created: int
    owned_by: str = "neo-nl"
    name: str


class ModelList(BaseModel):
    object: Literal["list"] = "list"
    data: list[ModelCard]


class ErrorBody(BaseModel):
    message: str
    type: str
    param: str | None = None
    code: str | None = None


class ErrorResponse(BaseModel):
    error: ErrorBody


def now() -> int:
    return int(time.time())
