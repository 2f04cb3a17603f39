"""OpenAI error envelope for every failure: no FastAPI 422 bodies, no bare 500s.

Every error has a `type` from its HTTP status and a `code` that names the error kind, streamed or not (docs/API.md,
"Errors"): the status's default code (`CODES`) unless a more specific one applies, such as `model_not_found`
or `context_length_exceeded`.
"""

from __future__ import annotations

import logging

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from app.protocol import INVALID_TEXT, ErrorBody, ErrorResponse

log = logging.getLogger(__name__)

_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    405: "invalid_request_error",
    413: "invalid_request_error",
    429: "rate_limit_error",
    503: "service_unavailable",
    504: "timeout",
}
CODES = {
    400: "invalid_request",
    401: "invalid_api_key",
    403: "permission_denied",
    404: "not_found",
    405: "method_not_allowed",
    413: "request_too_large",
    429: "rate_limit_exceeded",
    499: "client_closed",
    500: "internal_error",
    502: "upstream_error",
    503: "unavailable",
    504: "timeout",
}
JSON_TYPE = "application/json"


def default_code(status: int) -> str:
    """The error code of a status when no more specific one applies (`CODES`)."""
    return CODES.get(status, "internal_error")


class APIError(Exception):
    def __init__(
        self, status: int, message: str, *, param: str | None = None, code: str | None = None, headers: dict | None = None
    ) -> None:
        super().__init__(message)
        self.status, self.message, self.param, self.headers = status, message, param, headers
        self.code = code or default_code(status)


def model_not_found(model: str) -> APIError:
    return APIError(404, f"The model '{model}' does not exist", param="model", code="model_not_found")


def error_body(status: int, message: str, *, param: str | None = None, code: str | None = None) -> dict:
    kind = _TYPES.get(status, "server_error")
    code = code or default_code(status)
    return ErrorResponse(error=ErrorBody(message=message, type=kind, param=param, code=code)).model_dump()


def event_status(kind: str) -> int:
    """The HTTP status of a pipeline `ErrorEvent` kind: what a non-streamed request answers, and what a stream's
    in-band error says by its `type` and `code`."""
    return {"timeout": 504, "upstream": 502}.get(kind, 500)


RETRYABLE = (408, 409, 429)  # and 5xx, except a request that used up its own time budget


def retry_headers(status: int, code: str | None = None) -> dict[str, str]:
    """What tells an SDK not to retry: openai-python (and the clients built on it) retry 408, 409, 429 and any
    5xx twice unless `x-should-retry: false`. A request that ran out of REQUEST_TIMEOUT_S would run the whole
    pipeline again and time out again; a refused request is refused again."""
    if status in RETRYABLE or (status >= 500 and (code or default_code(status)) != "timeout"):
        return {}
    return {"x-should-retry": "false"}


def error_response(
    status: int, message: str, *, param: str | None = None, code: str | None = None, headers: dict | None = None
) -> JSONResponse:
    headers = {**retry_headers(status, code), **(headers or {})}
    return JSONResponse(error_body(status, message, param=param, code=code), status_code=status, headers=headers)


SPECIFIC_CODES = {INVALID_TEXT}  # validation errors whose kind is their code (`app.protocol`); others: the default


def _validation_message(exc: RequestValidationError) -> tuple[str, str | None, str | None]:
    """The message, `param` and code of a 400 for the first validation error."""
    errors = exc.errors()
    if not errors:
        return "invalid request", None, None
    first = errors[0]
    loc = [str(p) for p in first.get("loc", ()) if p != "body"]
    param = ".".join(loc) or None
    kind = first.get("type")
    if kind == "json_invalid":
        return "request body is not valid JSON", None, None
    msg = first.get("msg", "invalid value")
    return (f"{param}: {msg}" if param else msg), param, kind if kind in SPECIFIC_CODES else None


def install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(APIError)
    async def _api_error(_: Request, exc: APIError) -> JSONResponse:
        return error_response(exc.status, exc.message, param=exc.param, code=exc.code, headers=exc.headers)

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        media = request.headers.get("content-type", "").split(";")[0].strip().lower()
        if media != JSON_TYPE and not media.endswith("+json"):  # FastAPI did not read the body as JSON at all
            given = f"'{media}'" if media else "none"
            return error_response(400, f"the request body must be JSON sent with 'Content-Type: {JSON_TYPE}' "
                                       f"(Content-Type given: {given})", code="invalid_content_type")
        message, param, code = _validation_message(exc)
        return error_response(400, message, param=param, code=code)

    @app.exception_handler(StarletteHTTPException)
    async def _http(_: Request, exc: StarletteHTTPException) -> JSONResponse:
        return error_response(exc.status_code, str(exc.detail), headers=getattr(exc, "headers", None))

    @app.exception_handler(Exception)
    async def _unexpected(_: Request, exc: Exception) -> JSONResponse:
        log.exception("unhandled error", exc_info=exc)
        return error_response(500, "internal server error")
