"""Bearer API keys (`API_KEYS`; empty = no auth), compared in constant time and never logged."""

from __future__ import annotations

import hmac

from fastapi import Request

from app.errors import APIError


def bearer_token(request: Request) -> str | None:
    scheme, _, token = request.headers.get("authorization", "").partition(" ")
    return token.strip() or None if scheme.lower() == "bearer" else None


async def check_api_key(request: Request) -> None:
    # async on purpose: FastAPI runs a plain `def` dependency in its thread pool, a thread hop per request
    keys: list[bytes] = request.app.state.settings.api_key_bytes
    if not keys:
        return
    header = request.headers.get("authorization", "")
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise APIError(401, "missing API key: send 'Authorization: Bearer <key>'", code="invalid_api_key")
    given = token.strip().encode()
    # Compare against every key without short-circuiting, so timing does not reveal which one matched.
    matched = False
    for key in keys:
        matched |= hmac.compare_digest(given, key)
    if not matched:
        raise APIError(401, "invalid API key", code="invalid_api_key")
