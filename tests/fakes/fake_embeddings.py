"""Scripted fake of an OpenAI-compatible embeddings endpoint (``POST /v1/embeddings``) on 127.0.0.1, for tests.

Vectors are deterministic (``embed_text``): the words of a text hashed into ``dim`` buckets (a bag of words),
L2-normalised, so texts sharing words get similar vectors and a text always the same one.  An empty text or one
without words still gets a vector (one bucket of its own).

Scripting: attributes read on every request, so a test may change them while the server runs.

* ``dim``; ``delay_s`` before answering (the wait ends early when the client hangs up, counted in ``disconnects``)
* ``fail_status`` with ``fail_body`` (sent as is, e.g. 500 or 429 with an OpenAI error object)
* ``wrong_dim_after=n``: the first n requests get ``dim``, later ones ``dim + 1``
* ``base64``: embeddings as base64 of little-endian float32; ``reverse``: ``data`` in reverse order (indexes kept)
* ``api_key``: demand this Bearer token, else 401
* ``answer``: a function of the request body returning a starlette Response, or a payload sent as JSON, instead
* ``synonyms``: words read as another word (a bilingual fake: {"lekkage": "leakage"} puts a Dutch question near
  an English passage)
* ``down = True`` stops the listener (connection refused); ``down = False`` brings it back on the same port

Every request is recorded in ``requests`` (``Recorded``: parsed body, headers, ``inputs``), and ``in_flight`` /
``peak_in_flight`` count concurrent ones.

Use it as a context manager (``url`` is the base URL an Embedder takes)::

    with FakeEmbeddings(dim=32) as fake:
        embedder = Embedder(EmbeddingSettings(url=fake.url))

or take the pytest fixture ``fake_embeddings`` (a started fake with the defaults, stopped after the test) by
importing it into a test module or conftest.py::

    from tests.fakes.fake_embeddings import fake_embeddings_fixture  # noqa: F401  (the fixture "fake_embeddings")
"""

from __future__ import annotations

import asyncio
import base64 as b64
import hashlib
import json
import re
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from tests.fakes.servers import ServerThread

_WORDS = re.compile(r"\w+")
DEFAULT_FAIL_BODY = '{"error": {"message": "scripted failure", "type": "server_error"}}'


def embed_text(text: str, dim: int, synonyms: dict[str, str] | None = None) -> list[float]:
    """The fake's vector for `text`: word counts hashed into `dim` buckets, L2-normalised; a word in `synonyms`
    counts as the word it maps to."""
    counts = np.zeros(dim)
    for word in _WORDS.findall(text.lower()) or [""]:
        word = (synonyms or {}).get(word, word)
        digest = hashlib.blake2b(word.encode(), digest_size=8).digest()
        counts[int.from_bytes(digest, "little") % dim] += 1.0
    return (counts / np.linalg.norm(counts)).tolist()


@dataclass(frozen=True)
class Recorded:
    body: Any  # the parsed JSON body (None when it was not JSON)
    headers: dict[str, str]  # lower-case names

    @property
    def inputs(self) -> list[str]:
        raw = self.body.get("input") if isinstance(self.body, dict) else None
        return [raw] if isinstance(raw, str) else list(raw or [])


class FakeEmbeddings:
    def __init__(self, *, dim: int = 64, delay_s: float = 0.0, fail_status: int | None = None,
                 fail_body: str = DEFAULT_FAIL_BODY, wrong_dim_after: int | None = None, base64: bool = False,
                 reverse: bool = False, api_key: str | None = None,
                 answer: Callable[[Any], Response | Any] | None = None,
                 synonyms: dict[str, str] | None = None) -> None:
        self.dim, self.delay_s, self.wrong_dim_after = dim, delay_s, wrong_dim_after
        self.fail_status, self.fail_body = fail_status, fail_body
        self.base64, self.reverse, self.api_key, self.answer = base64, reverse, api_key, answer
        self.synonyms = dict(synonyms or {})
        self.requests: list[Recorded] = []
        self.in_flight = self.peak_in_flight = self.disconnects = 0
        self._lock = threading.Lock()
        self._down = False
        app = Starlette(routes=[Route("/v1/embeddings", self._handle, methods=["POST"])])
        self._server = ServerThread(app)

    @property
    def url(self) -> str:
        return self._server.base_url + "/v1"

    @property
    def inputs(self) -> list[list[str]]:
        """The texts of each request, in the order the requests came."""
        return [r.inputs for r in self.requests]

    @property
    def down(self) -> bool:
        return self._down

    @down.setter
    def down(self, value: bool) -> None:
        if value and not self._down:
            self._server.stop()
        elif not value and self._down:
            self._server.start()  # the same port: ServerThread keeps it
        self._down = value

    def start(self) -> FakeEmbeddings:
        self._server.start()
        return self

    def stop(self) -> None:
        if not self._down:
            self._server.stop()

    def __enter__(self) -> FakeEmbeddings:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    async def _handle(self, request: Request) -> Response:
        raw = await request.body()
        try:
            body = json.loads(raw)
        except ValueError:
            body = None
        with self._lock:
            number = len(self.requests)
            self.requests.append(Recorded(body, dict(request.headers)))
            self.in_flight += 1
            self.peak_in_flight = max(self.peak_in_flight, self.in_flight)
        try:
            if self.delay_s and not await self._wait(request):
                return Response(status_code=499)
            return self._reply(body, request, number)
        finally:
            with self._lock:
                self.in_flight -= 1

    async def _wait(self, request: Request) -> bool:
        """Sleep `delay_s`; False when the client hung up meanwhile."""
        deadline = time.monotonic() + self.delay_s
        while (left := deadline - time.monotonic()) > 0:
            if await request.is_disconnected():
                with self._lock:
                    self.disconnects += 1
                return False
            await asyncio.sleep(min(left, 0.02))
        return True

    def _reply(self, body: Any, request: Request, number: int) -> Response:
        if self.api_key is not None and request.headers.get("authorization") != f"Bearer {self.api_key}":
            return JSONResponse({"error": {"message": "Incorrect API key provided", "type": "invalid_request_error"}},
                                status_code=401)
        if self.fail_status is not None:
            kind = "application/json" if self.fail_body.startswith("{") else "text/plain"
            return Response(self.fail_body, status_code=self.fail_status, media_type=kind)
        if self.answer is not None:
            result = self.answer(body)
            return result if isinstance(result, Response) else JSONResponse(result)
        inputs = Recorded(body, {}).inputs
        if not inputs or not all(isinstance(text, str) for text in inputs):
            return JSONResponse({"error": {"message": "'input' must be a string or a list of strings"}}, 400)
        dim = self.dim + 1 if self.wrong_dim_after is not None and number >= self.wrong_dim_after else self.dim
        data = [{"object": "embedding", "index": i, "embedding": self._encode(embed_text(text, dim, self.synonyms))}
                for i, text in enumerate(inputs)]
        words = sum(len(_WORDS.findall(text)) for text in inputs)
        return JSONResponse({"object": "list", "data": data[::-1] if self.reverse else data,
                             "model": body.get("model", ""), "usage": {"prompt_tokens": words, "total_tokens": words}})

    def _encode(self, vector: list[float]) -> list[float] | str:
        return b64.b64encode(np.asarray(vector, "<f4").tobytes()).decode() if self.base64 else vector


@pytest.fixture(name="fake_embeddings")
def fake_embeddings_fixture() -> Iterator[FakeEmbeddings]:
    """A started FakeEmbeddings with the defaults (script it through its attributes), stopped after the test."""
    with FakeEmbeddings() as fake:
        yield fake
