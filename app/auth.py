"""Bearer API keys (`API_KEYS`; empty = no auth), compared in constant time and never logged; who is calling."""

from __future__ import annotations

import hmac

from fastapi import Request

from app.access import Caller
from app.errors import APIError
from graph.clients.cache import tenant_of

CHALLENGE = {"WWW-Authenticate": "Bearer"}  # RFC 6750: how to authenticate, on every 401


def bearer_token(request: Request) -> str | None:
    scheme, _, token = request.headers.get("authorization", "").partition(" ")
    return token.strip() or None if scheme.lower() == "bearer" else None


def has_valid_key(request: Request) -> bool:
    """No keys configured, or the request carries one of them."""
    try:
        _check(request)
    except APIError:
        return False
    return True


async def check_operator_key(request: Request) -> None:
    """/metrics: open without API_KEYS or with METRICS_PUBLIC=true, else a key like the API."""
    if not request.app.state.settings.metrics_public:
        _check(request)


async def check_api_key(request: Request) -> None:
    # async on purpose: FastAPI runs a plain `def` dependency in its thread pool, a thread hop per request
    _check(request)


def require_api_key(request: Request) -> None:
    """`check_api_key` inside a route that opens with another credential too (a signed link)."""
    _check(request)


async def caller(request: Request) -> Caller:
    """The calling key's id and, behind Open WebUI, its user (`app.access`); 401 for an invalid user token.
    After `check_api_key`: the key is one of API_KEYS (or none are configured)."""
    return request.app.state.services.access.identify(request.headers, tenant_of(bearer_token(request)))


def _check(request: Request) -> None:
    keys: list[bytes] = request.app.state.settings.api_key_bytes
    if not keys:
        return
    header = request.headers.get("authorization", "")
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise APIError(401, "missing API key: send 'Authorization: Bearer <key>'", headers=CHALLENGE)
    given = token.strip().encode()
    # Compare against every key without short-circuiting, so timing does not reveal which one matched.
    matched = False
    for key in keys:
        matched |= hmac.compare_digest(given, key)
    if not matched:
        raise APIError(401, "invalid API key", headers=CHALLENGE)
