"""What a chat request asks for: its conversation, the fields it may not hold, the options that change its answer
and where its progress lines go."""

from __future__ import annotations

import re

import jsonschema

from app.errors import APIError, model_not_found
from app.filters import search_filters
from app.protocol import ChatCompletionRequest
from app.services import Services
from graph.context import AnswerOptions
from graph.models import Turn

_THINK_BLOCK = re.compile(r"<think>.*?</think>\s*", re.S | re.I)
EFFORTS = {"none": "low", "minimal": "low", "low": "low", "medium": "medium", "high": "high"}  # -> research depth
JSON_HINT_CHARS = 2000


def conversation(request: ChatCompletionRequest) -> list[Turn]:
    """User/assistant turns up to the last user message; 400 when there is no question.

    System and developer messages are not passed to the pipeline: its own prompts define its behaviour."""
    turns: list[Turn] = []
    for message in request.messages:
        text = message.text()
        if message.role in ("user", "assistant"):
            if message.role == "assistant":
                text = _THINK_BLOCK.sub("", text)
            turns.append(Turn(role=message.role, content=text))
    while turns and turns[-1].role != "user":
        turns.pop()
    if not turns or not turns[-1].content.strip():
        raise APIError(400, "messages must contain a user message with text content", param="messages")
    return turns


def validate(request: ChatCompletionRequest, services: Services) -> None:
    settings = services.settings
    if request.model not in (settings.model_id, settings.lite_model_id) and not settings.accept_any_model:
        raise model_not_found(request.model)
    refused = unsupported_field(request, offline=settings.offline)
    if refused is not None:
        raise APIError(400, refused[1], param=refused[0], code="unsupported_value")
    if len(request.messages) > settings.max_messages:
        raise APIError(400, f"at most {settings.max_messages} messages are accepted", param="messages",
                       code="too_many_messages")
    for i, message in enumerate(request.messages):
        if len(message.text()) > settings.max_message_chars:
            raise APIError(
                400, f"message {i} is longer than {settings.max_message_chars} characters", param=f"messages.{i}.content",
                code="context_length_exceeded")


def requested_effort(request: ChatCompletionRequest) -> str | None:
    """`reasoning_effort`, or OpenRouter's `reasoning.effort`."""
    return request.reasoning_effort or (request.reasoning.effort if request.reasoning else None)


def answer_options(request: ChatCompletionRequest) -> AnswerOptions:
    """The request fields that change the answer (docs/API.md, "Request fields"), for the pipeline's answer call."""
    fmt = request.response_format or {}
    schema: dict | None = None
    if fmt.get("type") == "json_schema":
        schema = fmt["json_schema"]["schema"]
    elif fmt.get("type") == "json_object":
        schema = {"type": "object"}
    hint = ""
    if schema is not None:  # the caller's own description of the JSON often sits in its system message
        hint = "\n".join(m.text() for m in request.messages if m.role in ("system", "developer"))[:JSON_HINT_CHARS]
    stop = (request.stop,) if isinstance(request.stop, str) else tuple(request.stop or ())
    effort = requested_effort(request)
    return AnswerOptions(
        max_tokens=request.max_completion_tokens or request.max_tokens, stop=stop, temperature=request.temperature,
        top_p=request.top_p, seed=request.seed, json_schema=schema, json_hint=hint.strip(),
        depth=EFFORTS[effort] if effort else None, filters=search_filters(request.filters),
    )


def unsupported_field(request: ChatCompletionRequest, *, offline: bool) -> tuple[str, str] | None:
    """The first request field this service cannot honour and will not silently ignore (param, message): what
    it would return is not what the caller asked for. Fields that are harmless to ignore are listed in the table
    of docs/API.md ("Request fields"), with the reason."""
    if request.n not in (None, 1):
        return "n", "only n=1 is supported"
    if request.logprobs or request.top_logprobs:
        field = "logprobs" if request.logprobs else "top_logprobs"
        return field, "log probabilities are not available: the answer is assembled from several model calls"
    if request.audio is not None or "audio" in (request.modalities or []):
        return ("audio" if request.audio is not None else "modalities"), "only text output is supported"
    choice = request.tool_choice
    if choice == "required" or isinstance(choice, dict):
        return "tool_choice", "this service never calls tools; tool_choice can only be 'auto' or 'none'"
    effort = requested_effort(request)
    if effort is not None and effort not in EFFORTS:
        param = "reasoning_effort" if request.reasoning_effort else "reasoning.effort"
        return param, f"reasoning_effort must be one of {', '.join(EFFORTS)}"
    refused = unsupported_format(request)
    if refused is None and structured_format(request) and offline:
        return "response_format", ("a JSON answer needs a model and this service runs offline (no LLM_BASE_URL): "
                                   "only the extractive text answer is available")
    return refused


def unsupported_format(request: ChatCompletionRequest) -> tuple[str, str] | None:
    """What is wrong with the request's `response_format` (param, message), or None: an unknown type, or a
    `json_schema` without a valid schema."""
    fmt = request.response_format or {}
    kind, spec = fmt.get("type"), fmt.get("json_schema")
    if kind not in (None, "text", "json_object", "json_schema"):
        return "response_format.type", f"unknown response_format type '{kind}'"
    if kind == "json_schema" and not (isinstance(spec, dict) and isinstance(spec.get("schema"), dict)):
        return "response_format.json_schema", "response_format json_schema needs a 'json_schema.schema' object"
    if kind == "json_schema":
        try:
            jsonschema.validators.validator_for(spec["schema"]).check_schema(spec["schema"])
        except jsonschema.SchemaError as exc:
            return "response_format.json_schema.schema", f"not a valid JSON schema: {exc.message}"
    return None


def progress_mode(request: ChatCompletionRequest, default: str) -> str:
    """Where this request's progress lines go: `default` (THINK_MODE) unless the request says otherwise with
    OpenRouter's conventions: `reasoning: {"exclude": true}` (or `"enabled": false`) or `include_reasoning: false`,
    nowhere;
    any other `reasoning` object or `include_reasoning: true`, `reasoning_content` (a client that asks for
    reasoning reads it as a field, not as tags in the content). A structured `response_format` never gets
    tags: its content must be the JSON document alone."""
    options = request.reasoning
    if (options and (options.exclude or options.enabled is False)) or request.include_reasoning is False:
        return "off"
    if options is not None or request.include_reasoning:
        return "reasoning_content"
    if default == "tags" and structured_format(request):
        return "reasoning_content"
    return default


def structured_format(request: ChatCompletionRequest) -> bool:
    """Whether the request asks for a JSON answer (`json_object` or `json_schema`)."""
    kind = (request.response_format or {}).get("type")
    return kind in ("json_object", "json_schema")
