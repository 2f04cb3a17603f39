"""The embeddings client (docserver/embeddings.py) against a scripted OpenAI-compatible endpoint over real HTTP:
what it sends, how it batches, caches and orders, and that every way the endpoint can fail is a quick
EmbeddingError saying which."""

from __future__ import annotations

import asyncio
import socket
import time
from dataclasses import replace

import numpy as np
import pytest
from starlette.responses import Response

from docserver.embeddings import MAX_DIMENSION, Embedder, EmbeddingError, EmbeddingSettings
from tests.fakes.fake_embeddings import (
    FakeEmbeddings,
    embed_text,
    fake_embeddings_fixture,  # noqa: F401  (the fixture "fake_embeddings")
)

SECRET = "vertrouwelijke passage over het splijtstofbassin"


def embedder(fake: FakeEmbeddings, **settings: object) -> Embedder:
    return Embedder(EmbeddingSettings(url=fake.url, **settings))  # type: ignore[arg-type]


def expected(texts: list[str], dim: int = 64) -> np.ndarray:
    return np.array([embed_text(text, dim) for text in texts], np.float32)


def test_batches_run_concurrently_and_keep_the_input_order(fake_embeddings: FakeEmbeddings) -> None:
    fake_embeddings.delay_s, fake_embeddings.reverse = 0.2, True
    texts = [f"tekst nummer {n} over reactor {n % 3}" for n in range(10)]
    done: list[int] = []
    with embedder(fake_embeddings, batch_size=3, concurrency=2) as client:
        vectors = client.passages(texts, progress=done.append)
    assert vectors.dtype == np.float32 and vectors.shape == (10, 64)
    np.testing.assert_allclose(vectors, expected(texts), atol=1e-6)
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-6)
    assert sorted(fake_embeddings.inputs) == sorted([texts[0:3], texts[3:6], texts[6:9], texts[9:]])
    assert fake_embeddings.peak_in_flight == 2
    assert done == sorted(done) and done[-1] == 10 and len(done) == 4
    assert client.dimension == 64


def test_prefixes_input_types_model_and_key_are_sent(fake_embeddings: FakeEmbeddings) -> None:
    settings = {"model": "intfloat/multilingual-e5-small", "api_key": "sk-test", "query_prefix": "query: ",
                "passage_prefix": "passage: ", "query_input_type": "query", "passage_input_type": "passage"}
    with embedder(fake_embeddings, **settings) as client:
        client.passages(["kerncentrale", ""])
        client.query("vergunning")
    passage, query = (r.body for r in fake_embeddings.requests)
    assert passage == {"model": "intfloat/multilingual-e5-small", "input": ["passage: kerncentrale", "passage: "],
                       "encoding_format": "float", "input_type": "passage"}
    assert query == {"model": "intfloat/multilingual-e5-small", "input": ["query: vergunning"],
                     "encoding_format": "float", "input_type": "query"}
    assert {r.headers["authorization"] for r in fake_embeddings.requests} == {"Bearer sk-test"}


def test_plain_settings_send_no_input_type_and_no_authorization(fake_embeddings: FakeEmbeddings) -> None:
    with embedder(fake_embeddings) as client:
        client.passages([""])  # an empty text without a prefix is sent as it is
        client.query("")
    for request in fake_embeddings.requests:
        assert set(request.body) == {"model", "input", "encoding_format"}
        assert "authorization" not in request.headers


@pytest.mark.parametrize("suffix", ["/v1", "/v1/", "/v1/embeddings", "/v1/embeddings/"])
def test_the_url_may_name_the_api_or_the_endpoint(fake_embeddings: FakeEmbeddings, suffix: str) -> None:
    url = fake_embeddings.url.removesuffix("/v1") + suffix
    with Embedder(EmbeddingSettings(url=url)) as client:
        assert client.query("borssele").shape == (64,)


def test_an_api_key_the_endpoint_refuses_is_an_error(fake_embeddings: FakeEmbeddings) -> None:
    fake_embeddings.api_key = "right"
    with embedder(fake_embeddings, api_key="wrong") as client, pytest.raises(EmbeddingError, match="HTTP 401"):
        client.query("x")
    with embedder(fake_embeddings, api_key="right") as client:
        assert client.query("x").shape == (64,)


FULL = {"EMBEDDINGS_URL": " http://nano:8091/v1 ", "EMBEDDINGS_MODEL": " e5 ", "EMBEDDINGS_API_KEY": "k",
        "EMBEDDINGS_QUERY_PREFIX": "query: ", "EMBEDDINGS_PASSAGE_PREFIX": "passage: ",
        "EMBEDDINGS_QUERY_INPUT_TYPE": "query", "EMBEDDINGS_PASSAGE_INPUT_TYPE": "passage",
        "EMBEDDINGS_BATCH": "16", "EMBEDDINGS_CONCURRENCY": "4", "EMBEDDINGS_TIMEOUT_S": "2.5",
        "EMBEDDINGS_SENTENCE_MATCH": "0.85"}


@pytest.mark.parametrize(("environ", "want"), [
    ({}, None),
    ({"EMBEDDINGS_URL": "  "}, None),
    ({"EMBEDDINGS_URL": "https://api.example/v1"}, EmbeddingSettings(url="https://api.example/v1")),
    ({"EMBEDDINGS_URL": "http://h/v1", "EMBEDDINGS_BATCH": "", "EMBEDDINGS_TIMEOUT_S": " "},
     EmbeddingSettings(url="http://h/v1")),
    (FULL, EmbeddingSettings(url="http://nano:8091/v1", model="e5", api_key="k", query_prefix="query: ",
                             passage_prefix="passage: ", query_input_type="query", passage_input_type="passage",
                             batch_size=16, concurrency=4, timeout_s=2.5, sentence_match=0.85)),
])
def test_from_env(environ: dict[str, str], want: EmbeddingSettings | None) -> None:
    assert EmbeddingSettings.from_env(environ) == want


@pytest.mark.parametrize(("variable", "value"), [
    ("EMBEDDINGS_URL", "nano:8091/v1"), ("EMBEDDINGS_URL", "ftp://h/v1"), ("EMBEDDINGS_URL", "http://[::1/v1"),
    ("EMBEDDINGS_URL", "http:///v1"), ("EMBEDDINGS_URL", "http://h:99999/v1"), ("EMBEDDINGS_URL", "http://h:0/v1"),
    ("EMBEDDINGS_BATCH", "0"), ("EMBEDDINGS_BATCH", "1.5"),
    ("EMBEDDINGS_BATCH", "veel"), ("EMBEDDINGS_CONCURRENCY", "-1"), ("EMBEDDINGS_CONCURRENCY", "1000"),
    ("EMBEDDINGS_TIMEOUT_S", "0"), ("EMBEDDINGS_TIMEOUT_S", "nan"), ("EMBEDDINGS_TIMEOUT_S", "inf"),
    ("EMBEDDINGS_SENTENCE_MATCH", "1.5"), ("EMBEDDINGS_SENTENCE_MATCH", "nan"), ("EMBEDDINGS_SENTENCE_MATCH", "hoog"),
])
def test_from_env_names_the_bad_variable(variable: str, value: str) -> None:
    with pytest.raises(ValueError, match=variable):
        EmbeddingSettings.from_env({"EMBEDDINGS_URL": "http://h/v1", variable: value})


def test_settings_made_in_code_are_checked_and_hide_the_key() -> None:
    with pytest.raises(ValueError, match="batch_size"):
        EmbeddingSettings(url="http://h/v1", batch_size=0)
    with pytest.raises(ValueError, match="url"):
        EmbeddingSettings(url="h/v1")
    assert "sk-secret" not in repr(EmbeddingSettings(url="http://h/v1", api_key="sk-secret"))


BASE = EmbeddingSettings(url="http://a/v1", model="e5", query_prefix="query: ", passage_prefix="passage: ")


@pytest.mark.parametrize(("changes", "same_space"), [
    ({"url": "https://b/v1/embeddings"}, True), ({"api_key": "k"}, True), ({"batch_size": 8}, True),
    ({"concurrency": 8}, True), ({"timeout_s": 1.0}, True),
    ({"model": "bge-m3"}, False), ({"query_prefix": ""}, False), ({"passage_prefix": "query: "}, False),
    ({"query_input_type": "query"}, False), ({"passage_input_type": "document"}, False),
])
def test_key_names_the_vector_space(changes: dict[str, object], same_space: bool) -> None:
    assert (replace(BASE, **changes).key == BASE.key) is same_space  # type: ignore[arg-type]
    assert isinstance(BASE.key, str) and "\n" not in BASE.key


def test_a_query_is_embedded_once(fake_embeddings: FakeEmbeddings) -> None:
    with embedder(fake_embeddings, query_prefix="query: ") as client:
        first = client.query("Wanneer vervalt de vergunning?")
        second = client.query("Wanneer vervalt de vergunning?")
        client.query("iets anders")
    assert len(fake_embeddings.requests) == 2
    assert second is first and not first.flags.writeable
    np.testing.assert_allclose(first, embed_text("query: Wanneer vervalt de vergunning?", 64), atol=1e-6)


async def test_concurrent_aqueries_make_one_request_without_blocking_the_loop(fake_embeddings: FakeEmbeddings) -> None:
    fake_embeddings.delay_s = 0.3
    ticks = 0

    async def tick() -> None:
        nonlocal ticks
        while True:
            await asyncio.sleep(0.01)
            ticks += 1

    ticker = asyncio.create_task(tick())
    with embedder(fake_embeddings) as client:
        vectors = await asyncio.gather(*(client.aquery("dezelfde vraag") for _ in range(5)))
        assert client.query("dezelfde vraag") is vectors[0]  # the cache is shared with the blocking form
    ticker.cancel()
    assert len(fake_embeddings.requests) == 1
    assert all(v is vectors[0] for v in vectors)
    assert ticks >= 10


async def test_a_cancelled_aquery_does_not_cancel_the_others(fake_embeddings: FakeEmbeddings) -> None:
    fake_embeddings.delay_s = 0.3
    with embedder(fake_embeddings) as client:
        first = asyncio.create_task(client.aquery("vraag"))
        second = asyncio.create_task(client.aquery("vraag"))
        await asyncio.sleep(0.05)
        first.cancel()
        assert (await second).shape == (64,)
        assert first.cancelled()
        assert client.query("vraag") is await second
    assert len(fake_embeddings.requests) == 1


async def test_a_failed_aquery_is_not_cached(fake_embeddings: FakeEmbeddings) -> None:
    fake_embeddings.fail_status, fake_embeddings.delay_s = 503, 0.2
    with embedder(fake_embeddings) as client:
        results = await asyncio.gather(client.aquery("q"), client.aquery("q"), return_exceptions=True)
        assert all(isinstance(r, EmbeddingError) for r in results)
        fake_embeddings.fail_status = None
        assert (await client.aquery("q")).shape == (64,)
    assert len(fake_embeddings.requests) == 2


def test_base64_answers_give_the_same_vectors(fake_embeddings: FakeEmbeddings) -> None:
    texts = ["eerste tekst", "tweede tekst", "derde"]
    fake_embeddings.base64 = True
    with embedder(fake_embeddings) as client:
        np.testing.assert_allclose(client.passages(texts), expected(texts), atol=1e-6)


def test_vectors_are_normalised_and_integers_are_numbers(fake_embeddings: FakeEmbeddings) -> None:
    fake_embeddings.answer = lambda body: {"data": [{"index": 0, "embedding": [3, 4]}]}
    with embedder(fake_embeddings) as client:
        np.testing.assert_allclose(client.query("x"), [0.6, 0.8], atol=1e-6)


def _json(text: str) -> object:
    return lambda body: Response(text, media_type="application/json")


def _items(*embeddings: object) -> object:
    return lambda body: {"data": [{"index": i, "embedding": e} for i, e in enumerate(embeddings)]}


@pytest.mark.parametrize(("answer", "message"), [
    (lambda body: Response("<html>Bad Gateway</html>", 200), "not JSON"),
    (_json('{"object": "list"}'), "no 'data' list"),
    (_json("[" * 100_000 + "]" * 100_000), "not JSON"),
    (_json("[1, 2]"), "no 'data' list"),
    (_items([0.1, 0.2]), "1 embeddings for 2 texts"),
    (_items([0.1, 0.2], [0.3, 0.4], [0.5, 0.6]), "3 embeddings for 2 texts"),
    (_items([0.1, "0.2"], [0.3, 0.4]), "not a list of numbers"),
    (_items([0.1, None], [0.3, 0.4]), "not a list of numbers"),
    (_items([[0.1], [0.2, 0.3]], [0.3, 0.4]), "not a list of numbers"),
    (_items({"values": [1]}, [0.3, 0.4]), "without an embedding"),
    (_json('{"data": [{"index": 0, "embedding": [NaN, 1]}, {"index": 1, "embedding": [1, 1]}]}'), "NaN"),
    (_json('{"data": [{"index": 0, "embedding": [1e999, 1]}, {"index": 1, "embedding": [1, 1]}]}'), "infinity"),
    (_items([0.0, 0.0], [0.3, 0.4]), "all-zero"),
    (_items([], []), "0-dimensional"),
    (_items([0.1] * (MAX_DIMENSION + 1), [0.1] * (MAX_DIMENSION + 1)), f"{MAX_DIMENSION + 1}-dimensional"),
    (_items([0.1, 0.2], [0.1, 0.2, 0.3]), "different lengths"),
    (_items("not base64!", "AAAAAA=="), "neither numbers nor base64"),
    (_items("AAAAAAA=", "AAAAAA=="), "not whole float32"),
    (lambda body: {"data": [{"index": 0, "embedding": [1]}, {"index": 0, "embedding": [1]}]}, "index"),
    (lambda body: {"data": [{"index": 2, "embedding": [1]}, {"index": 0, "embedding": [1]}]}, "index"),
    (lambda body: {"data": [{"index": True, "embedding": [1]}, {"index": 0, "embedding": [1]}]}, "index"),
    (lambda body: {"data": ["x", "y"]}, "index"),
])
def test_unusable_answers_are_errors(fake_embeddings: FakeEmbeddings, answer: object, message: str) -> None:
    fake_embeddings.answer = answer  # type: ignore[assignment]
    with embedder(fake_embeddings) as client, pytest.raises(EmbeddingError, match=message) as caught:
        client.passages([SECRET, "tweede"])
    assert str(caught.value).startswith(f"embeddings endpoint {fake_embeddings.url}/embeddings answered ")
    assert SECRET not in str(caught.value) and len(str(caught.value)) < 400


@pytest.mark.parametrize(("status", "body", "message"), [
    (500, '{"error": {"message": "CUDA out of memory", "type": "server_error"}}', "HTTP 500: CUDA out of memory$"),
    (429, '{"error": {"message": "Rate limit reached", "type": "rate_limit_error"}}', "HTTP 429: Rate limit"),
    (413, '{"error": "Input validation error: inputs too long", "error_type": "Validation"}', "HTTP 413: Input"),
    (422, '{"detail": [{"msg": "field required"}]}', 'HTTP 422: {"detail"'),
    (502, "", r"HTTP 502: \(empty\)$"),
    (500, "boom\x00\x1b[31m\r\nrood\t" + "x" * 5000, r"HTTP 500: boom \[31m rood x+…$"),
])
def test_error_statuses_say_the_status_and_a_clean_excerpt(fake_embeddings: FakeEmbeddings, status: int, body: str,
                                                           message: str) -> None:
    fake_embeddings.fail_status, fake_embeddings.fail_body = status, body
    with embedder(fake_embeddings) as client, pytest.raises(EmbeddingError, match=message) as caught:
        client.query(SECRET)
    text = str(caught.value)
    assert SECRET not in text and len(text) < 300
    assert not any(ord(c) < 32 or 0x7F <= ord(c) <= 0x9F for c in text)


def test_a_failed_batch_stops_the_rest(fake_embeddings: FakeEmbeddings) -> None:
    fake_embeddings.fail_status = 500
    done: list[int] = []
    with embedder(fake_embeddings, batch_size=1, concurrency=2) as client, pytest.raises(EmbeddingError):
        client.passages([f"tekst {n}" for n in range(20)], progress=done.append)
    assert len(fake_embeddings.requests) == 2 and done == []


def test_a_progress_callback_that_raises_stops_the_rest(fake_embeddings: FakeEmbeddings) -> None:
    def abort(done: int) -> None:
        raise KeyboardInterrupt

    with embedder(fake_embeddings, batch_size=1, concurrency=2) as client, pytest.raises(KeyboardInterrupt):
        client.passages([f"tekst {n}" for n in range(20)], progress=abort)
    assert len(fake_embeddings.requests) == 2


def test_a_dimension_change_is_an_error(fake_embeddings: FakeEmbeddings) -> None:
    fake_embeddings.wrong_dim_after = 1
    with embedder(fake_embeddings, batch_size=2, concurrency=1) as client:
        with pytest.raises(EmbeddingError, match="65-dimensional vectors after 64-dimensional"):
            client.passages(["a", "b", "c", "d"])
        assert client.dimension == 64
        with pytest.raises(EmbeddingError, match="65-dimensional"):
            client.query("e")


def test_empty_input_embeds_nothing(fake_embeddings: FakeEmbeddings) -> None:
    with embedder(fake_embeddings) as client:
        assert client.passages([]).shape == (0, 0)
        client.query("x")
        assert client.passages([]).shape == (0, 64)
    assert len(fake_embeddings.requests) == 1


def test_a_slow_endpoint_fails_within_the_timeout(fake_embeddings: FakeEmbeddings) -> None:
    fake_embeddings.delay_s = 5.0
    started = time.monotonic()
    with embedder(fake_embeddings, timeout_s=0.3) as client, pytest.raises(EmbeddingError, match="within 0.3 s"):
        client.passages(["traag"] * 4)
    assert time.monotonic() - started < 2.0
    deadline = time.monotonic() + 2
    while fake_embeddings.disconnects < 1 and time.monotonic() < deadline:
        time.sleep(0.02)
    assert fake_embeddings.disconnects >= 1  # the client hung up rather than leaving the request open


def test_a_closed_port_is_unreachable() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    started = time.monotonic()
    with Embedder(EmbeddingSettings(url=f"http://127.0.0.1:{port}/v1")) as client:
        with pytest.raises(EmbeddingError, match=f"127.0.0.1:{port}/v1/embeddings is unreachable: ConnectError"):
            client.query("x")
    assert time.monotonic() - started < 2.0


def test_an_endpoint_that_goes_down_and_comes_back(fake_embeddings: FakeEmbeddings) -> None:
    with embedder(fake_embeddings) as client:
        client.query("voor")
        fake_embeddings.down = True
        with pytest.raises(EmbeddingError, match="unreachable"):
            client.query("tijdens")
        fake_embeddings.down = False
        assert client.query("na").shape == (64,)


def test_credentials_in_the_url_stay_out_of_messages() -> None:
    with Embedder(EmbeddingSettings(url="http://user:pw@127.0.0.1:9/v1", timeout_s=1)) as client:
        with pytest.raises(EmbeddingError) as caught:
            client.query("x")
    assert "pw" not in str(caught.value) and "user" not in str(caught.value)
