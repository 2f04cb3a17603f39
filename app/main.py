"""ASGI app: `app.main:app` (settings from the environment) or `create_app(settings)` in tests."""

from __future__ import annotations

import logging
from contextlib import asynccontextmanager

from fastapi import FastAPI

from app.errors import install_error_handlers
from app.limits import BodyLimitMiddleware
from app.routes import router
from app.services import Services
from app.settings import Settings


def create_app(settings: Settings | None = None) -> FastAPI:
    settings = settings or Settings()
    logging.basicConfig(level=settings.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        app.state.services = await Services.start(settings)
        try:
            yield
        finally:
            await app.state.services.aclose()

    app = FastAPI(title="NEO NL Agent", version="0.1.0", lifespan=lifespan)
    app.state.settings = settings
    install_error_handlers(app)
    app.add_middleware(BodyLimitMiddleware, max_bytes=settings.max_body_bytes)
    app.include_router(router)
    return app


app = create_app()
