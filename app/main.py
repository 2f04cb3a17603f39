"""ASGI app factory: `create_app()` reads the settings from the environment (`uvicorn --factory app.main:create_app`,
as `python -m app serve` does), `create_app(settings)` in tests. Nothing is built at import."""

from __future__ import annotations

import asyncio
import gc
from contextlib import asynccontextmanager

from fastapi import FastAPI

from app.errors import install_error_handlers
from app.library_routes import router as library_router
from app.limits import BodyLimitMiddleware
from app.observability import Metrics, RequestIdMiddleware, configure_logging, monitor_loop_lag
from app.ratelimit import RateLimiter
from app.routes import router
from app.services import Services
from app.settings import Settings
from app.tracing import start_tracing

# Collections start after this many new container objects (CPython's default is 700). A streaming request
# allocates thousands that die young by reference counting; at the default, 100 concurrent streams triggered
# several collections per second, each scanning every object of every request in flight.
GC_YOUNG_THRESHOLD = 50_000


def tune_gc() -> None:
    """Freeze what startup created, collect less often.

    Everything alive after startup (modules, the compiled graph, clients, pools) lives as long as the process;
    frozen, the collector no longer scans it. Measured over the benchmark's sweep up to 100 streams (500
    requests): without either change full collections of 190-260 ms were the largest event-loop stalls and the
    collector took about 2.6 s of CPU; with both, about 0.35 s, and the largest stall at 100 streams fell from
    about 265 ms to about 115 ms (docs/BENCHMARKS.md, section 5).

    What remains are young collections: at 100 streams 4-6 per 300 requests, each 30-110 ms of CPU, because
    they scan the live objects of the requests in flight (50-110 thousand, about 1 us each in a fragmented
    heap). A lower threshold does not bound them (freed older objects lower the allocation count, so the young
    list outgrows the threshold): 10_000 measured more collector CPU, gen1 pauses up to 160 ms and a larger lag."""
    gc.collect()
    gc.freeze()
    _, older, oldest = gc.get_threshold()
    gc.set_threshold(GC_YOUNG_THRESHOLD, older, oldest)


def create_app(settings: Settings | None = None) -> FastAPI:
    settings = settings or Settings()
    tracing = start_tracing(settings)
    configure_logging(settings.log_level, settings.log_json, traced=tracing.on)

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        app.state.services = await Services.start(settings, tracing)
        tune_gc()
        lag = asyncio.create_task(monitor_loop_lag(app.state.metrics), name="loop-lag")
        try:
            yield
        finally:
            lag.cancel()
            await app.state.services.aclose()
            tracing.shutdown()

    app = FastAPI(title="NEO NL Agent", version="0.1.0", lifespan=lifespan)
    app.state.settings = settings
    app.state.tracing = tracing
    app.state.metrics = Metrics()
    app.state.rate_limiter = RateLimiter(settings.rate_limit, settings.redis_url) if settings.rate_limit else None
    install_error_handlers(app)
    app.add_middleware(BodyLimitMiddleware, max_bytes=settings.max_body_bytes)
    app.add_middleware(RequestIdMiddleware)
    app.include_router(router)
    app.include_router(library_router)
    tracing.instrument(app)  # the server span, around everything above
    return app

