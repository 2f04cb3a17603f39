"""ASGI app: `app.main:app` (settings from the environment) or `create_app(settings)` in tests."""

from __future__ import annotations

import asyncio
from contextlib import asynccontextmanager

from fastapi import FastAPI

from app.errors import install_error_handlers
from app.limits import BodyLimitMiddleware
from app.observability import Metrics, RequestIdMiddleware, configure_logging, monitor_loop_lag
from app.ratelimit import RateLimiter
from app.routes import router
from app.services import Services
from app.settings import Settings


def create_app(settings: Settings | None = None) -> FastAPI:
    settings = settings or Settings()
    configure_logging(settings.log_level, settings.log_json)

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        app.state.services = await Services.start(settings)
        lag = asyncio.create_task(monitor_loop_lag(app.state.metrics), name="loop-lag")
        try:
            yield
        finally:
            lag.cancel()
            await app.state.services.aclose()

    app = FastAPI(title="NEO NL Agent", version="0.1.0", lifespan=lifespan)
    app.state.settings = settings
    app.state.metrics = Metrics()
    app.state.rate_limiter = RateLimiter(settings.rate_limit, settings.redis_url) if settings.rate_limit else None
    install_error_handlers(app)
    app.add_middleware(BodyLimitMiddleware, max_bytes=settings.max_body_bytes)
    app.add_middleware(RequestIdMiddleware)
    app.include_router(router)
    return app


app = create_app()
