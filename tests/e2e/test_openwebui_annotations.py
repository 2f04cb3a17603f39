"""The browser step with the service's own Open WebUI events off: the source chips come from `url_citation` annotations.

A second stack (`start_stack(..., openwebui_events="off")`): the service recognises Open WebUI but sends it no
`status` or `source` events, only the OpenAI shape, so whatever Open WebUI shows of the sources it built itself
from the streamed `delta.annotations` (0.12.4's middleware turns each `url_citation` into a source whose id is
the citation's url). Through the page in headless Chromium (the same sign-in, model choice and question as the
browser step) the test asserts:

- the service's stream carried annotations and no Open WebUI event;
- the message Open WebUI stored has one source per cited source of the answer, in the order of the answer's `[n]`,
  each with the url and title of its annotations;
- every `[n]` group is an inline chip with its source's title, the "N Sources" button counts the cited sources,
  and the sources panel lists them 1..N (by address: Open WebUI names a source keyed by a web address so);
- no two sources of the answer share an address (Open WebUI would merge them and shift every later `[n]`).

Screenshots: the answer, and the answer with its sources panel open (`annotations/` beside the browser step's).

Run: NEO_E2E_OPENWEBUI=1 .venv/bin/python -m pytest tests/e2e -q -s -rxX -k annotations
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any
from urllib.parse import unquote

import pytest

from tests.e2e.test_openwebui import Checks, Stack, start_stack
from tests.e2e.test_openwebui_browser import (
    MUST_SHOW,
    QUESTIONS,
    RAW_TEXT,
    SKIP_REASON,
    Browser,
    _norm,
    _texts,
    ask,
    chips_shown,
    citation_groups,
    open_browser,
    shots_dir,
    source_titles,
)

pytestmark = pytest.mark.skipif(SKIP_REASON is not None, reason=SKIP_REASON or "")


@pytest.fixture(scope="module")
def stack(request: pytest.FixtureRequest) -> Iterator[Stack]:
    with start_stack(request, openwebui_events="off") as running:
        yield running


@pytest.fixture(scope="module")
def browser(stack: Stack) -> Iterator[Browser]:
    with open_browser(stack, shots_dir("annotations")) as state:
        yield state


def streamed(stack: Stack, question: str) -> tuple[list[dict[str, Any]], list[str]]:
    """The annotations and the Open WebUI event types of the service's stream that answered `question`."""
    for record in reversed(stack.proxy.chat_requests()):
        body = record["body"] or {}
        user = [m for m in body.get("messages") or [] if m.get("role") == "user"]
        if body.get("stream") and user and question in json.dumps(user[-1], ensure_ascii=False):
            annotations: list[dict[str, Any]] = []
            events: list[str] = []
            for line in (record["response"] or "").splitlines():
                if not line.startswith("data: {"):
                    continue
                chunk = json.loads(line[6:])
                if "event" in chunk:
                    events.append(chunk["event"].get("type", "?"))
                for choice in chunk.get("choices") or []:
                    annotations += (choice.get("delta") or {}).get("annotations") or []
            return annotations, events
    pytest.fail(f"no streamed chat request for {question!r} crossed the relay")


def check_annotation_chips(state: Browser, label: str) -> Checks:
    turn = ask(state, label, QUESTIONS[label])
    page, c = state.page, Checks()
    record: dict[str, Any] = {"question": QUESTIONS[label], "chat_id": turn.chat_id, "seconds": turn.seconds}
    state.report[label] = record
    answer = page.locator(f"#message-{turn.message_id}")
    content_box = answer.locator("#response-content-container")
    record["screenshots"] = {"answer": state.screenshot(f"{label}-answer")}

    annotations, events = streamed(state.stack, QUESTIONS[label])
    cites = [a["url_citation"] for a in annotations if a.get("type") == "url_citation"]
    urls = list(dict.fromkeys(a["url"] for a in cites))
    title_of = {a["url"]: a["title"] for a in cites}
    record["stream"] = {"annotations": len(cites), "urls": urls, "openwebui_events": sorted(set(events))}
    c.check("stream: no Open WebUI events", not events, sorted(set(events)))
    c.check("stream: url_citation annotations, each with a url", bool(cites) and all(urls), urls)

    stored = turn.message
    body = (stored.get("content") or "").partition("**Bronnen**")[0]
    groups = citation_groups(body)
    cited = sorted({n for group in groups for n in group})
    sources = stored.get("sources") or []
    titles = source_titles(sources)
    stored_urls = list(dict.fromkeys((s.get("source") or {}).get("url") for s in sources))
    record["stored"] = {"cited": cited, "sources": titles, "urls": stored_urls}
    c.check("stream: one url per cited source", len(urls) == len(cited), {"urls": urls, "cited": cited})
    c.check("answer shown", all(w in answer.inner_text() for w in MUST_SHOW[label]), MUST_SHOW[label])
    raw = [token for token in RAW_TEXT if token in answer.inner_text()]
    c.check("no <think> tags or raw JSON visible", not raw, raw)
    c.check(
        "stored sources: the annotations' sources, one per cited [n], in the answer's order",
        stored_urls == urls and titles == [title_of[u] for u in urls] and len(titles) == len(cited)
        and cited == list(range(1, len(titles) + 1)),
        {"stored": stored_urls, "annotations": urls, "cited": cited},
    )

    chip_texts, expected = chips_shown(content_box, groups, titles)
    record["chips"] = chip_texts
    c.check("answer cites [n]", bool(cited), cited)
    c.check(
        "every [n] group is a chip with its source's title",
        chip_texts == expected and None not in expected,
        {"dom": chip_texts[:12], "expected": expected[:12]},
    )

    toggle = answer.get_by_role("button", name=re.compile(r"^Toggle \d+ sources?$"))
    toggle_text = _norm(toggle.inner_text())
    found = re.search(r"\d+", toggle_text)
    record["sources_button"] = toggle_text
    c.check("'N Sources' = distinct cited sources", bool(found) and int(found.group(0)) == len(cited), toggle_text)
    toggle.click()
    panel = answer.locator("button[id^='source-']")
    panel.first.wait_for(state="visible")
    panel_texts = _texts(panel)
    record["sources_panel"] = panel_texts
    # 0.12.4's panel names a source whose id is a web address by that address, decoded (the chips keep the title)
    c.check(
        "sources panel: 1..N, each once, by address",
        panel_texts == [f"{n} {unquote(url) if url.startswith('http') else title_of[url]}" for n, url in enumerate(urls, 1)],
        panel_texts[:12],
    )
    record["screenshots"]["sources"] = state.screenshot(f"{label}-sources-open")
    toggle.click()
    record["checks"] = {k: ("pass" if v["ok"] else "FAIL") for k, v in c.results.items()}
    return c


@pytest.mark.parametrize("label", list(QUESTIONS))
def test_chips_from_annotations(browser: Browser, label: str) -> None:
    """Open WebUI's chips, sources button and panel, built from the annotations alone."""
    try:
        checks = check_annotation_chips(browser, label)
    except Exception:
        browser.report.setdefault(label, {})["failure_screenshot"] = browser.screenshot(f"{label}-failure")
        raise
    checks.assert_all()

