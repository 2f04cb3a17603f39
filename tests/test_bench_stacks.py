"""Section 8b's sorting of py-spy's sampled stacks into the parts of a streamed request (`bench/stacks.py`)."""

from __future__ import annotations

from collections import Counter

import pytest

from bench.stacks import OTHER, categorise, per_request

SITE = "/srv/.venv/lib/python3.11/site-packages"
PY = "/usr/lib/python3.11"
# as py-spy writes them (`--full-filenames`); the server's start-up above the event loop's frame
LOOP = (f"_run_module_as_main (<frozen runpy>:198);<module> (/srv/neo/app/__main__.py:46);run ({SITE}/uvicorn/main.py:632);"
        f"asyncio_run ({SITE}/uvicorn/_compat.py:30);Runner.run ({PY}/asyncio/runners.py:118)")
NEO = "/srv/neo"


@pytest.mark.parametrize(("leaf", "category"), [
    ("", "event loop"),  # only the loop's own frame: uvloop's C code
    (f";call_tool ({NEO}/graph/clients/mcp_client.py:250);post ({SITE}/httpx/_client.py:1)", "document server client"),
    (f";call ({NEO}/graph/clients/mcp_direct.py:80);_request ({SITE}/aiohttp/client.py:1)", "document server client"),
    (f";send_request ({SITE}/mcp/client/session.py:3);data_received ({SITE}/aiohttp/client_proto.py:359)",
     "document server client"),  # the MCP SDK's HTTP is the document server's, not the upstream's
    (f";stream ({NEO}/graph/clients/llm.py:271);aiter_sse ({SITE}/httpx_sse/_api.py:46)", "upstream client"),
    (f";stream_into ({NEO}/graph/nodes/synthesize.py:291);write ({NEO}/graph/answer/answer_stream.py:289)",
     "answer stream"),
    (f";write_answer ({NEO}/graph/nodes/synthesize.py:470);unsupported_claims ({NEO}/graph/text/claims.py:161)",
     "answer stream"),
    (f";summarize ({NEO}/graph/nodes/summarize.py:91);ranked_pairs ({NEO}/graph/text/extractive.py:383)",
     "text analysis"),
    (f";route ({NEO}/graph/nodes/route.py:81);render ({NEO}/graph/answer/prompts.py:1)", "pipeline nodes"),
    (f";synthesize ({NEO}/graph/nodes/synthesize.py:1);emit ({NEO}/graph/answer/events.py:160)", "answer stream"),
    (f";atick ({SITE}/langgraph/pregel/_runner.py:366);plan ({NEO}/graph/nodes/plan.py:200)", "pipeline nodes"),
    (f";atick ({SITE}/langgraph/pregel/_runner.py:366)", "LangGraph"),
    (f";pump ({NEO}/graph/runner.py:73);astream ({SITE}/langgraph/pregel/main.py:3520)", "LangGraph"),
    (f";pump ({NEO}/graph/runner.py:73);attach_node ({SITE}/langgraph/graph/state.py:1)", "LangGraph"),  # not ours
    (f";_stream_response ({SITE}/sse_starlette/sse.py:398);send ({SITE}/uvicorn/protocols/http/httptools_impl.py:544)",
     "HTTP and SSE out"),
    (f";stream_chat ({NEO}/app/chat.py:221);event ({NEO}/app/sse.py:100)", "HTTP and SSE out"),
    (f";validate_python ({SITE}/pydantic/type_adapter.py:1)", "validation"),
    (f";_reschedule_timeout ({SITE}/aiohttp/client_proto.py:293)", "HTTP client"),
    (f";wait ({PY}/asyncio/tasks.py:428)", "event loop"),
    (f";atick ({SITE}/langgraph/pregel/_runner.py:366);_wait ({PY}/asyncio/tasks.py:548)", "LangGraph"),
    (f";relay (/srv/neo/bench/relay.py:46);stream ({NEO}/graph/clients/llm.py:275)", "upstream client"),
    (f";relay (/srv/neo/bench/relay.py:46);encode ({SITE}/sse_starlette/event.py:50)", "HTTP and SSE out"),
])
def test_a_sample_goes_to_the_first_category_a_frame_of_it_belongs_to(leaf: str, category: str) -> None:
    assert categorise(f"{LOOP}{leaf} 7\n") == Counter({category: 7})


def test_lines_that_are_not_stacks_are_skipped_and_counts_add_up() -> None:
    worker = f"_bootstrap ({PY}/threading.py:995);run ({PY}/concurrent/futures/thread.py:58);work ({NEO}/graph/nodes/plan.py:9)"
    raw = f"{LOOP} 3\n{LOOP};wait ({PY}/asyncio/tasks.py:428) 2\n\nnot a stack\nidle (/x.py:1) 1\n{worker} 4\n"
    assert categorise(raw) == Counter({"event loop": 5, OTHER: 1, "pipeline nodes": 4})


def test_shares_of_the_samples_are_applied_to_the_measured_cpu_per_request() -> None:
    shares = per_request(Counter({"event loop": 3, "upstream client": 1}), cpu_s=0.8, requests=4)
    assert shares == pytest.approx({"event loop": 0.15, "upstream client": 0.05})
    assert per_request(Counter(), 1.0, 4) == {} and per_request(Counter({"x": 1}), 1.0, 0) == {}
