"""Per-key rate limit (`RATE_LIMIT`, e.g. "60/minute"; empty = off), with the `limits` library.

Counted per API key (hashed) or, without a key, per client address; shared through Redis when `REDIS_URL`
is set, so several workers enforce one limit. Over the limit: 429 with Retry-After.
"""

from __future__ import annotations

import math
import time

from fastapi import Request
from limits import RateLimitItem, parse
from limits.aio.storage import MemoryStorage, Storage
from limits.aio.strategies import MovingWindowRateLimiter
from limits.storage import storage_from_string

from app.auth import bearer_token
from app.errors import APIError
from graph.clients.cache import tenant_of


class RateLimiter:
    def __init__(self, rule: str, redis_url: str = "") -> None:
        self.item: RateLimitItem = parse(rule)
        storage: Storage = (
            storage_from_string(f"async+{redis_url}", implementation="redispy") if redis_url else MemoryStorage()
        )
        self.limiter = MovingWindowRateLimiter(storage)

    async def check(self, identity: str) -> None:
        if await self.limiter.hit(self.item, identity):
            return
        stats = await self.limiter.get_window_stats(self.item, identity)
        retry_after = max(1, math.ceil(stats.reset_time - time.time()))
        raise APIError(
            429,
            f"rate limit of {self.item} exceeded; retry after {retry_after}s",
            code="rate_limit_exceeded",
            headers={"Retry-After": str(retry_after)},
        )


async def rate_limit(request: Request) -> None:
    limiter: RateLimiter | None = request.app.state.rate_limiter
    if limiter is None:
        return
    token = bearer_token(request)
    identity = tenant_of(token) if token else f"ip:{request.client.host if request.client else '-'}"
    await limiter.check(identity)
