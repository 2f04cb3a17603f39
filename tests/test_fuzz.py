"""Fuzzing: schemathesis against the service's own OpenAPI schema, and hypothesis over message shapes.
Never a 5xx; every error is the OpenAI envelope; every 200 stream ends with [DONE]."""

from __future__ import annotations

import json

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.conftest import sse_events


@pytest.fixture(scope="module")
def fuzz_base(tmp_path_factory: pytest.TempPathFactory):
    """The service with a document library of its own: the fuzzer creates vector stores and uploads files, which
    must not become collections of the session's shared document server (every later test would see them)."""
    from app.main import create_app
    from app.settings import Settings
    from docserver.server import create_app as create_docserver
    from tests.fakes.servers import ServerThread

    index = tmp_path_factory.mktemp("fuzz-library") / "index.sqlite3"
    with pytest.MonkeyPatch.context() as env:
        env.setenv("DOCSERVER_INDEX", str(index))  # the library the service writes uploads to, and the server serves
        with ServerThread(create_docserver(index_path=index)) as docs:
            settings_ = Settings(_env_file=None, mcp_server_url=docs.base_url + "/mcp", llm_base_url="",
                                 accept_any_model=True, response_cache=False, request_timeout_s=30)
            with ServerThread(create_app(settings_)) as server:
                yield server.base_url


def _check_envelope(response) -> None:
    assert response.status_code < 500, response.text[:500]
    if response.status_code >= 400:
        error = response.json()["error"]
        assert set(error) == {"message", "type", "param", "code"} and error["message"]


def test_openapi_schema_fuzz(fuzz_base: str) -> None:
    """Every operation of /openapi.json with schemathesis-generated cases (positive and negative data).

    Driven through hypothesis directly: schemathesis' pytest plugin does not support this pytest version."""
    api = schemathesis.openapi.from_url(fuzz_base + "/openapi.json")
    operations = [result.ok() for result in api.get_all_operations()]
    assert {op.path for op in operations} >= {"/v1/chat/completions", "/v1/models", "/health"}
    for operation in operations:

        @given(case=operation.as_strategy())
        @settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
        def run(case) -> None:
            response = case.call(base_url=fuzz_base, timeout=60)
            _check_envelope(response)
            if response.status_code == 200 and "text/event-stream" in response.headers.get("content-type", ""):
                assert response.text.endswith("data: [DONE]\n\n")

        run()


_text = st.text(max_size=200)
_part = st.one_of(
    st.fixed_dictionaries({"type": st.just("text"), "text": _text}),
    st.fixed_dictionaries({"type": st.sampled_from(["image_url", "input_audio", "file", "weird"])}),
    st.dictionaries(st.text(max_size=8), st.one_of(st.none(), st.integers(), _text), max_size=3),
)
_content = st.one_of(st.none(), _text, st.lists(_part, max_size=4), st.integers(), st.booleans(),
                     st.dictionaries(st.text(max_size=5), _text, max_size=2))
_message = st.fixed_dictionaries(
    {"role": st.sampled_from(["system", "developer", "user", "assistant", "tool", "function", "robot", ""]),
     "content": _content},
    optional={"name": _text, "tool_call_id": _text, "tool_calls": st.lists(st.dictionaries(st.text(max_size=5), _text))},
)
_body = st.fixed_dictionaries(
    {"messages": st.one_of(st.lists(_message, max_size=6), _text, st.none())},
    optional={
        "model": st.one_of(st.just("neo-nl-agent"), st.just("neo-nl-agent-lite"), _text, st.integers()),
        "stream": st.one_of(st.booleans(), _text),
        "stream_options": st.one_of(st.none(), st.fixed_dictionaries({"include_usage": st.booleans()}), _text),
        "temperature": st.one_of(st.floats(allow_nan=True), _text),
        "n": st.integers(min_value=-2, max_value=3),
        "tools": st.one_of(st.none(), st.lists(st.dictionaries(st.text(max_size=5), _text), max_size=3)),
    },
)


@given(body=_body)
@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
def test_message_shapes_fuzz(fuzz_base: str, body: dict) -> None:
    response = httpx.post(fuzz_base + "/v1/chat/completions", content=json.dumps(body, allow_nan=True),
                          headers={"content-type": "application/json"}, timeout=60)
    _check_envelope(response)
    if response.status_code == 200 and body.get("stream") is True:
        assert sse_events(response)[-1] == "[DONE]"
