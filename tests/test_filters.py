"""Request filters (`filters`: collections, kind, language) and `POST /v1/search`: they narrow what a caller may
see and never widen it, are named in the think block and in the cache key, and the search call answers with the
passages the first research round gathers."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import httpx
import openai
import pytest

from app.errors import APIError
from app.filters import narrowed, search_filters
from app.protocol import RequestFilters
from app.settings import Settings
from graph.collections import load_catalog
from graph.context import SearchFilters
from graph.models import Evidence, Turn
from graph.nodes.search import first_round
from graph.runner import start
from tests.conftest import QUESTION, chunks, content_of, sse_events
from tests.test_access import ACCESS, BOSS, PLEB, RESTRICTED
from tests.test_api import post

ALL = ("anvs", "iaea", "wetten_overheid", "security")
CATALOG = load_catalog(Settings(_env_file=None).collections_file)


@pytest.mark.parametrize(("visible", "filters", "kept"), [
    (ALL, None, ALL),
    (ALL, {}, ALL),
    (ALL, {"collections": ["iaea"]}, ("iaea",)),
    (ALL, {"collections": ["IAEA", "Wetten"]}, ("iaea", "wetten_overheid")),  # display names, configuration order
    (ALL, {"language": "en"}, ("iaea", "security")),
    (ALL, {"language": "nl"}, ("anvs", "wetten_overheid")),
    (ALL, {"collections": ["iaea", "anvs"], "language": "nl"}, ("anvs",)),
    (ALL, {"kind": "official"}, ALL),  # kind filters passages, not collections
    (("anvs", "iaea"), {"language": "en"}, ("iaea",)),
])
def test_filters_narrow_the_collections(visible: tuple, filters: dict | None, kept: tuple) -> None:
    request = None if filters is None else RequestFilters.model_validate(filters)
    assert narrowed(visible, request, CATALOG) == kept


@pytest.mark.parametrize(("visible", "filters", "param"), [
    (ALL, {"collections": ["nasa"]}, "filters.collections"),
    (("anvs", "iaea"), {"collections": ["security"]}, "filters.collections"),  # hidden: refused like "nasa"
    (("anvs", "wetten_overheid"), {"language": "en"}, "filters.language"),
    (ALL, {"collections": ["iaea"], "language": "nl"}, "filters.language"),
])
def test_a_filter_that_leaves_nothing_or_reaches_further_is_refused(visible: tuple, filters: dict, param: str) -> None:
    with pytest.raises(APIError) as caught:
        narrowed(visible, RequestFilters.model_validate(filters), CATALOG)
    assert (caught.value.status, caught.value.param) == (400, param)
    assert "security" not in caught.value.message and "nasa" not in caught.value.message


@pytest.mark.parametrize(("kind", "summary", "admitted"), [
    (None, False, True), (None, True, True),
    ("official", False, True), ("official", True, False),
    ("summary", False, False), ("summary", True, True),
])
def test_the_kind_filter_keeps_official_texts_or_summaries(kind: str | None, summary: bool, admitted: bool) -> None:
    passage = Evidence(id="anvs/d#1", collection="anvs", doc_id="d", title="t", text="x", summary=summary)
    assert SearchFilters(kind=kind).admits(passage) is admitted
    assert bool(search_filters(RequestFilters(kind=kind))) is (kind is not None)


def _think(payloads: list[dict]) -> str:
    return content_of(payloads).split("</think>")[0]


def test_filters_reach_research_and_the_think_block(offline: str) -> None:
    client = openai.OpenAI(base_url=offline + "/v1", api_key="none", max_retries=0)
    only_iaea = client.chat.completions.create(model="neo-nl-agent", messages=[{"role": "user", "content": QUESTION}],
                                               extra_body={"filters": {"collections": ["iaea"]}})
    think = only_iaea.choices[0].message.model_extra["reasoning_content"]
    assert "Filters van het verzoek: collecties IAEA" in think and "Collecties: IAEA\n" in think + "\n"
    assert all(r["url"] == "" or "iaea" in r["url"] for r in only_iaea.model_extra["search_results"])
    # kind: no summary is cited when only official texts may be used; the bundled Borssele answer rests on some
    anywhere = post(offline, {"model": "neo-nl-agent", "messages": [{"role": "user", "content": QUESTION}]}).json()
    official = post(offline, {"model": "neo-nl-agent", "messages": [{"role": "user", "content": QUESTION}],
                              "filters": {"kind": "official"}}).json()
    listed = anywhere["choices"][0]["message"]["content"].split("**Bronnen**")[1]
    kept = official["choices"][0]["message"]["content"].split("**Bronnen**")[-1]
    assert "samenvatting" in listed and "samenvatting" not in kept
    assert "alleen officiële teksten" in official["choices"][0]["message"]["reasoning_content"]
    # streamed, in English
    streamed = chunks(sse_events(post(offline, {"model": "neo-nl-agent", "stream": True, "filters": {"language": "en"},
                                                "messages": [{"role": "user", "content": "When does the licence of the Borssele plant lapse?"}]})))
    assert "Request filters: documents in English" in _think(streamed)


@pytest.mark.parametrize(("filters", "param"), [
    ({"collections": ["nasa"]}, "filters.collections"),
    ({"collections": []}, "filters.collections"),
    ({"kind": "draft"}, "filters.kind"),
    ({"language": "de"}, "filters.language"),
    ({"year": 2020}, "filters.year"),
    ("iaea", "filters"),
])
def test_a_wrong_filter_is_a_400_naming_the_field(offline: str, filters: object, param: str) -> None:
    for path, body in (("/v1/chat/completions", {"model": "neo-nl-agent", "messages": [{"role": "user", "content": QUESTION}]}),
                       ("/v1/search", {"query": QUESTION})):
        response = httpx.post(offline + path, json={**body, "filters": filters}, timeout=30)
        assert response.status_code == 400, (path, response.text)
        assert response.json()["error"]["param"] == param


def test_filters_are_part_of_the_cache_key(service) -> None:
    base = service(response_cache=True)
    request = {"model": "neo-nl-agent", "messages": [{"role": "user", "content": QUESTION}]}
    first = post(base, {**request, "filters": {"collections": ["wetten_overheid"]}}).json()["choices"][0]["message"]
    other = post(base, {**request, "filters": {"collections": ["anvs"]}}).json()["choices"][0]["message"]
    again = post(base, {**request, "filters": {"collections": ["anvs"]}}).json()["choices"][0]["message"]
    assert "Collecties: Wetten" in first["reasoning_content"] and "Collecties: ANVS" in other["reasoning_content"]
    assert "cache" not in other["reasoning_content"].lower() and "cache" in again["reasoning_content"].lower()


@pytest.fixture
def guarded(service, tmp_path: Path) -> str:
    path = tmp_path / "access.json"
    path.write_text(json.dumps(ACCESS), "utf-8")
    return service(api_keys=[BOSS, PLEB], access_file=path)


def test_a_collection_the_caller_may_not_see_is_refused_without_being_named(guarded: str) -> None:
    for path, body in (("/v1/chat/completions", {"model": "neo-nl-agent", "messages": [{"role": "user", "content": QUESTION}]}),
                       ("/v1/search", {"query": QUESTION})):
        hidden = httpx.post(guarded + path, json={**body, "filters": {"collections": [RESTRICTED]}},
                            headers={"Authorization": f"Bearer {PLEB}"}, timeout=30)
        unknown = httpx.post(guarded + path, json={**body, "filters": {"collections": ["nasa"]}},
                             headers={"Authorization": f"Bearer {PLEB}"}, timeout=30)
        assert hidden.status_code == unknown.status_code == 400
        assert hidden.json()["error"]["message"] == unknown.json()["error"]["message"]
        assert RESTRICTED not in hidden.text
        granted = httpx.post(guarded + path, json={**body, "filters": {"collections": [RESTRICTED]}},
                             headers={"Authorization": f"Bearer {BOSS}"}, timeout=30)
        assert granted.status_code == 200


def test_search_answers_with_passages_within_the_callers_reach(guarded: str) -> None:
    question = {"query": "Welke categorieën nucleair materiaal onderscheidt NSS 13?", "top_k": 50}
    plain = httpx.post(guarded + "/v1/search", json=question, headers={"Authorization": f"Bearer {PLEB}"}, timeout=30)
    boss = httpx.post(guarded + "/v1/search", json=question, headers={"Authorization": f"Bearer {BOSS}"}, timeout=30)
    assert plain.status_code == boss.status_code == 200
    assert RESTRICTED not in {p["collection"] for p in plain.json()["data"]}
    assert RESTRICTED in {p["collection"] for p in boss.json()["data"]}
    data = boss.json()["data"]
    assert boss.json()["object"] == "list" and len(data) <= 50
    assert [p["score"] for p in data] == sorted((p["score"] for p in data), reverse=True)
    for p in data:
        assert set(p) == {"id", "title", "collection", "page", "section", "score", "snippet", "text", "url"}
        assert p["id"].startswith(p["collection"] + "/") and p["text"].startswith(p["snippet"].rstrip(" …"))
    top3 = httpx.post(guarded + "/v1/search", json={**question, "top_k": 3}, headers={"Authorization": f"Bearer {BOSS}"},
                      timeout=30).json()["data"]
    assert top3 == data[:3]
    for wrong in ({"top_k": 0}, {"top_k": 51}, {"query": ""}, {"question": "x"}):
        refused = httpx.post(guarded + "/v1/search", json={**question, **wrong}, headers={"Authorization": f"Bearer {BOSS}"},
                             timeout=30)
        assert refused.status_code == 400
    assert httpx.post(guarded + "/v1/search", json=question, timeout=30).status_code == 401


@pytest.mark.parametrize("question", [QUESTION, "Hoe verschillen IAEA en ANVS eisen voor veiligheidscultuur?",
                                      "What does the IAEA require of a safety culture?"])
def test_search_gives_what_the_first_research_round_gathers(docserver_url: str, question: str) -> None:
    """In process: the evidence the pipeline's first research round adds (every research task of the first
    superstep) is what `first_round` finds, with the same filters."""
    from app.services import Services

    async def run() -> tuple[set[str], set[str]]:
        services = await Services.start(Settings(_env_file=None, mcp_server_url=docserver_url, llm_base_url="",
                                                 response_cache=False))
        try:
            state, ctx = start([Turn(role="user", content=question)], services.context, "t")
            gathered: set[str] = set()
            async for part in services.graph.astream(state, context=ctx, stream_mode="updates"):
                if "summarize" in part:
                    break
                for update in [v for k, v in part.items() if k == "research"]:
                    gathered |= {e.id for e in update.get("evidence", [])}
            found = {e.id for e in await first_round(state, ctx)}
            return gathered, found
        finally:
            await services.aclose()

    gathered, found = asyncio.run(run())
    assert gathered and gathered == found
