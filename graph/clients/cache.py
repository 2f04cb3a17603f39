"""Caches for answers and plans: in-process by default, Valkey/Redis when `REDIS_URL` is set.

Values are JSON; keys are namespaced hashes built by `cache_key`, whose parts always include the caller's
identity (a hash of the API key), so nothing cached for one key is ever served to another.
"""

from __future__ import annotations

import hashlib
import json
import logging
from typing import Any, Protocol

from cachetools import TTLCache

log = logging.getLogger(__name__)


def cache_key(kind: str, *parts: Any) -> str:
    digest = hashlib.sha256(json.dumps(parts, sort_keys=True, ensure_ascii=False, default=str).encode()).hexdigest()
    return f"neo-nl:{kind}:{digest[:40]}"


def tenant_of(api_key: str | None) -> str:
    """A stable identity for an API key that does not reveal it."""
    return hashlib.sha256((api_key or "").encode()).hexdigest()[:16] if api_key else "anonymous"


class Cache(Protocol):
    hits: int
    misses: int

    async def get(self, key: str) -> Any | None: ...

    async def set(self, key: str, value: Any, ttl_s: float) -> None: ...

    async def ping(self) -> bool: ...

    async def aclose(self) -> None: ...


class MemoryCache:
    """Per-process LRU with expiry (cachetools): fine for one worker; use Redis to share across workers."""

    def __init__(self, max_items: int = 2048, ttl_s: float = 3600) -> None:
        self._data: TTLCache[str, str] = TTLCache(maxsize=max_items, ttl=ttl_s)
        self.hits = self.misses = 0

    async def get(self, key: str) -> Any | None:
        raw = self._data.get(key)
        self.hits += raw is not None
        self.misses += raw is None
        return None if raw is None else json.loads(raw)

    async def set(self, key: str, value: Any, ttl_s: float) -> None:
        self._data[key] = json.dumps(value, ensure_ascii=False)  # the TTL is the cache's own (one per process)

    async def ping(self) -> bool:
        return True

    async def aclose(self) -> None:
        self._data.clear()


class RedisCache:
    """Valkey/Redis (redis-py asyncio). A cache that is down costs a miss, never a failed request."""

    def __init__(self, url: str) -> None:
        from redis.asyncio import Redis

        self._redis = Redis.from_url(url, socket_timeout=1.0, socket_connect_timeout=1.0)
        self.hits = self.misses = 0

    async def get(self, key: str) -> Any | None:
        from redis.exceptions import RedisError

        try:
            raw = await self._redis.get(key)
        except (RedisError, OSError) as exc:
            log.warning("cache get failed: %s", exc)
            raw = None
        self.hits += raw is not None
        self.misses += raw is None
        return None if raw is None else json.loads(raw)

    async def set(self, key: str, value: Any, ttl_s: float) -> None:
        from redis.exceptions import RedisError

        try:
            await self._redis.set(key, json.dumps(value, ensure_ascii=False), ex=max(1, int(ttl_s)))
        except (RedisError, OSError) as exc:
            log.warning("cache set failed: %s", exc)

    async def ping(self) -> bool:
        from redis.exceptions import RedisError

        try:
            return bool(await self._redis.ping())
        except (RedisError, OSError):
            return False

    async def aclose(self) -> None:
        await self._redis.aclose()


def make_cache(redis_url: str, *, max_items: int, ttl_s: float) -> Cache:
    return RedisCache(redis_url) if redis_url.strip() else MemoryCache(max_items, ttl_s)
