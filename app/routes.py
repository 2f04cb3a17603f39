"""HTTP routes: models, chat completions, search, health and readiness."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Request
from fastapi.responses import JSONResponse, Response
from sse_starlette import EventSourceResponse

from app.access import Caller
from app.annotations import deep_link
from app.answer_events import pipeline_events, task_events
from app.auth import bearer_token, caller, check_api_key, check_operator_key, has_valid_key
from app.chat import complete_chat, new_renderer, stream_chat
from app.chat_request import answer_options, conversation, validate
from app.errors import APIError, model_not_found
from app.filters import narrowed, search_filters
from app.protocol import (
    ChatCompletion,
    ChatCompletionRequest,
    ErrorResponse,
    ModelCard,
    ModelList,
    Passage,
    RequestFilters,
    SearchRequest,
    SearchResponse,
)
from app.ratelimit import rate_limit
from app.request_record import RequestRecord
from app.services import Services
from app.settings import Settings
from app.tasks import detect_task
from graph.answer.ledger import cut_at_word
from graph.clients.cache import tenant_of
from graph.clients.mcp_client import DocumentError
from graph.context import AnswerOptions, Context
from graph.models import Evidence, Turn
from graph.nodes.search import first_round
from graph.runner import start

router = APIRouter()
_ERRORS = {code: {"model": ErrorResponse} for code in (400, 401, 404, 413, 429, 500)}
_STARTED = 1_735_689_600  # fixed `created` for the static model list
SNIPPET_CHARS = 300  # of a passage in /v1/search


async def services(request: Request) -> Services:
    """The process's services, their catalog brought up to what the library holds (`Services.follow_library`)."""
    # async: a plain `def` dependency would run in FastAPI's thread pool, a thread hop per request
    svc: Services = request.app.state.services
    await svc.follow_library()
    return svc


ServicesDep = Annotated[Services, Depends(services)]
CallerDep = Annotated[Caller, Depends(caller)]


def caller_context(svc: Services, visible: tuple[str, ...], filters: RequestFilters | None) -> Context:
    """The pipeline context of a caller who may see `visible`, narrowed by the request's filters (`app.filters`)."""
    if not visible:  # says nothing about which collections exist
        raise APIError(403, "no document collection is open to this caller", code="permission_denied")
    return svc.context_for(narrowed(visible, filters, svc.catalog))


def _wants_openwebui_events(request: Request, svc: Services) -> bool:
    mode = svc.settings.openwebui_events
    if mode != "auto":
        return mode == "on"
    # Only Open WebUI's chat path sends X-OpenWebUI-Chat-Id; the user-info headers also come on its API
    # passthrough, whose clients must never see `event` lines.
    return "x-openwebui-chat-id" in request.headers


def _models(settings: Settings) -> list[ModelCard]:
    return [
        ModelCard(id=settings.model_id, created=_STARTED, name="NEO NL Agent"),
        ModelCard(id=settings.lite_model_id, created=_STARTED, name="NEO NL Agent (lite, background tasks)"),
    ]


@router.get("/v1/models", response_model=ModelList, dependencies=[Depends(check_api_key)], responses=_ERRORS)
async def list_models(request: Request) -> ModelList:
    return ModelList(data=_models(request.app.state.settings))


@router.get("/v1/models/{model:path}", response_model=ModelCard, dependencies=[Depends(check_api_key)],
            responses=_ERRORS)
async def retrieve_model(model: str, request: Request) -> ModelCard:
    """One model of the list (`client.models.retrieve`); a model id may hold a slash."""
    for card in _models(request.app.state.settings):
        if card.id == model:
            return card
    raise model_not_found(model)


@router.post(
    "/v1/chat/completions",
    response_model=ChatCompletion,
    dependencies=[Depends(check_api_key), Depends(rate_limit)],
    responses={200: {"content": {"text/event-stream": {}}}, **_ERRORS},
)
async def chat_completions(body: ChatCompletionRequest, request: Request, svc: ServicesDep, who: CallerDep):
    validate(body, svc)
    turns = conversation(body)
    visible = svc.access.visible(who, svc.catalog.names)
    context = caller_context(svc, visible, body.filters)
    task = detect_task(body.model, request.headers.get("x-openwebui-task"), turns[-1].content, svc.settings)
    if task is not None:
        events = task_events(svc, context.catalog, task, body)
        renderer = new_renderer(body, svc, think=False, openwebui=False)
    else:
        events = pipeline_events(svc, context, turns, who.key_id, body.model, answer_options(body))
        renderer = new_renderer(body, svc, think=True, openwebui=_wants_openwebui_events(request, svc))
    streamed = bool(body.stream)
    record = RequestRecord(request.app.state.metrics, "task" if task else "chat", streamed, who, visible)
    if not streamed:
        return await complete_chat(request, renderer, events, record)
    return EventSourceResponse(
        stream_chat(renderer, events, body.include_usage, record),
        ping=svc.settings.sse_ping_s,
        sep="\n",
        headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
    )


@router.post("/v1/search", response_model=SearchResponse, dependencies=[Depends(check_api_key), Depends(rate_limit)],
             responses={**_ERRORS, 403: {"model": ErrorResponse}, 502: {"model": ErrorResponse}})
async def search(body: SearchRequest, svc: ServicesDep, who: CallerDep) -> SearchResponse:
    """The passages the first research round would gather for `query` (`graph/nodes/search.py`), with the caller's
    access and the request's filters, best first."""
    found = await found_passages(svc, who, body.query, body.filters)
    return SearchResponse(data=[passage(e) for e in found[: body.top_k]])


async def found_passages(svc: Services, who: Caller, query: str, filters: RequestFilters | None) -> list[Evidence]:
    """What `/v1/search` (and a vector store's search) finds: the first research round for `query`, in the
    collections the caller may see cut to `filters`, best first; 502 when the document server fails."""
    context = caller_context(svc, svc.access.visible(who, svc.catalog.names), filters)
    state, context = start([Turn(role="user", content=query)], context, who.key_id,
                           AnswerOptions(filters=search_filters(filters)))
    try:
        return await first_round(state, context)
    except DocumentError as exc:
        raise APIError(502, f"the document server failed: {exc}", code="upstream_error") from exc


def passage(e: Evidence) -> Passage:
    return Passage(id=e.id, title=e.title, collection=e.collection, page=e.page, section=e.section,
                   score=round(e.relevance, 4), snippet=cut_at_word(e.text, SNIPPET_CHARS), text=e.text,
                   url=deep_link(e.url, e.page))


@router.get("/health")
async def health() -> dict[str, str]:
    return {"status": "ok"}


@router.get("/health/ready")
async def ready(request: Request, svc: ServicesDep) -> JSONResponse:
    """Ready or degraded (503); the detail (upstream URLs, collections, cache) only for a caller with a key
    when API_KEYS is set, unless METRICS_PUBLIC=true: a load balancer needs the status, not the topology. The
    collections listed are those the key may search (section "Collections per caller" under docs/); user headers
    play no part here."""
    report = await svc.readiness(svc.access.visible(Caller(tenant_of(bearer_token(request))), svc.catalog.names))
    status = 200 if report["status"] == "ready" else 503
    if not (svc.settings.metrics_public or has_valid_key(request)):
        report = {"status": report["status"]}
    return JSONResponse(report, status_code=status)


@router.get("/metrics", dependencies=[Depends(check_operator_key)])
async def metrics(request: Request, svc: ServicesDep) -> Response:
    body = request.app.state.metrics.render(svc.cache.hits, svc.cache.misses)
    return Response(body, media_type="text/plain; version=0.0.4; charset=utf-8")
