"""End-to-end in a real browser: what a user sees of NEO NL Agent in Open WebUI 0.12.4 (opt-in: NEO_E2E_OPENWEBUI=1).

The same stack as test_openwebui.py (the service in offline mode with the bundled document server, the recording
relay, Open WebUI with a signed-up admin; `start_stack`), driven by headless Chromium through Playwright: Debian's
`chromium` (apt-get install chromium; Playwright's own browser download is not used) and the `playwright` Python
package (the `e2e` extra). The test signs in through the login form, opens a new chat per question, picks the model
`neo-nl-agent` in the model selector, types the question and sends it, waits until the answer is finished, and then
asserts on the DOM of the answer:

- the reasoning (think block) is a collapsed "Thought …" button, and none of its lines is visible;
- no literal `<think>`/`</think>` and no raw JSON (`{"event"`, `"choices"`) is visible;
- every `[n]` group of the answer became an inline citation chip showing the title of source n (Open WebUI
  shows titles, not numbers, on chips), every distinct cited `[n]` is covered, and the "N Sources" button counts
  exactly the distinct cited sources;
- the sources panel lists them numbered 1..N by title, without a second number ("1 [1] Title");
- the Markdown "Bronnen" list at the end is an ordered list 1..N with no chips in it;
- the expanded status timeline has no line twice and ends with "Klaar: antwoord met N geciteerde bron(nen)";
- the chat's generated title is shown in the sidebar.

Full-page screenshots (after each answer, with the sources panel open, with the status timeline and the reasoning
open) and a JSON report of what the DOM showed go to a folder that is kept after the run: NEO_E2E_SCREENSHOTS, or a
new `neo-e2e-browser-*` temp dir (its path is printed). See docs/OPENWEBUI_E2E.md.

Run: NEO_E2E_OPENWEBUI=1 .venv/bin/python -m pytest tests/e2e -q -s -rxX -k browser
"""

from __future__ import annotations

import json
import os
import re
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.test_openwebui import (
    ADMIN_EMAIL,
    ADMIN_PASSWORD,
    EXPECTED_DATE,
    Checks,
    Stack,
    start_stack,
)

CHROMIUM = Path(os.environ.get("NEO_E2E_CHROMIUM") or "/usr/bin/chromium")
MODEL_NAME = "NEO NL Agent"  # the display name of MODEL in Open WebUI's model selector
QUESTIONS = {
    "factual": "Wanneer vervalt de vergunning van kerncentrale Borssele?",
    "comparative": "Hoe verschillen IAEA en ANVS eisen voor veiligheidscultuur?",
}
# What the answer must say, visibly (the factual question has one right date; the comparative one names both sides).
MUST_SHOW = {"factual": [EXPECTED_DATE], "comparative": ["IAEA", "ANVS"]}
# Literal text that must never be visible in an answer: the think tags, and raw stream / event JSON.
RAW_TEXT = ("<think>", "</think>", '{"event"', '"choices"', '"delta"')
VIEWPORT = {"width": 1366, "height": 900}


def _skip_reason() -> str | None:
    if os.environ.get("NEO_E2E_OPENWEBUI") != "1":
        return "opt-in: set NEO_E2E_OPENWEBUI=1 (installs open-webui==0.12.4 into its own venv, several GB)"
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "the browser step needs the playwright package: pip install -e '.[e2e]' (never `playwright install`)"
    if not CHROMIUM.is_file():
        return f"the browser step needs Debian's chromium at {CHROMIUM}: apt-get install chromium (or NEO_E2E_CHROMIUM)"
    return None


SKIP_REASON = _skip_reason()
pytestmark = pytest.mark.skipif(SKIP_REASON is not None, reason=SKIP_REASON or "")


# ---------------------------------------------------------------------------------------------- Open WebUI's rules
# Ports of what 0.12.4 does with an answer (read in src/lib/utils/marked/citation-extension.ts and
# src/lib/components/chat/Messages/Markdown/{SourceToken,Source}.svelte), to say what the DOM must show.
CITATION_GROUP = re.compile(r"(\[(?:\d+(?:#[^,\]\s]+)?(?:,\s*\d+(?:#[^,\]\s]+)?)*)\])+")


def citation_groups(markdown: str) -> list[list[int]]:
    """The `[n]` groups of the text in reading order; adjacent markers ("[1][2]", "[1, 2]") are one group, which
    Open WebUI renders as one chip ("Title +1")."""
    groups = []
    for match in CITATION_GROUP.finditer(markdown):
        if markdown[max(0, match.start() - 1) : match.start()] == "^":
            continue  # "[^1]" is a footnote, not a citation
        groups.append([int(n) for n in re.findall(r"(\d+)(?:#[^,\]\s]+)?", match.group(0))])
    return groups


def display_title(title: str) -> str:
    """The text of a chip: a URL is shown as its domain, and a long title as its first 15 and last 10 characters."""
    if title.startswith("http"):
        title = title.replace("http://", "").replace("https://", "")
        title = re.split(r"[/?#]", title)[0]
        title = title[4:] if title.startswith("www.") else title
    if not title:
        return "N/A"
    return title[:15] + "..." + title[-10:] if len(title) > 30 else title


def source_titles(sources: list[dict[str, Any]]) -> list[str]:
    """What `[n]` resolves to: the n-th distinct `metadata.source` (see `openwebui_source_ids` in test_openwebui)."""
    titles, seen = [], set()
    for source in sources:
        for index in range(len(source.get("document") or [])):
            metadata = (source.get("metadata") or [None] * (index + 1))[index] or {}
            key = metadata.get("source") or (source.get("source") or {}).get("id") or "N/A"
            if key in seen:
                continue
            seen.add(key)
            titles.append(metadata.get("name") or (source.get("source") or {}).get("name") or key)
    return titles


def _norm(text: str) -> str:
    return " ".join(text.split())


# ---------------------------------------------------------------------------------------------- fixtures
@pytest.fixture(scope="module")
def stack(request: pytest.FixtureRequest) -> Iterator[Stack]:
    with start_stack(request) as running:
        yield running


def shots_dir(sub: str = "") -> Path:
    """Where a module's screenshots and browser-report.json go (NEO_E2E_SCREENSHOTS, then `sub` in it); kept."""
    configured = os.environ.get("NEO_E2E_SCREENSHOTS")
    path = Path(configured) / sub if configured else Path(tempfile.mkdtemp(prefix=f"neo-e2e-browser-{sub}"))
    path.mkdir(parents=True, exist_ok=True)
    print(f"\n[e2e-browser] screenshots: {path}", flush=True)
    return path


@pytest.fixture(scope="module")
def shots() -> Path:
    return shots_dir()


@dataclass
class Browser:
    page: Any  # playwright.sync_api.Page
    stack: Stack
    shots: Path
    report: dict[str, Any] = field(default_factory=dict)
    console_errors: list[str] = field(default_factory=list)
    shot_count: int = 0

    def screenshot(self, name: str) -> str:
        """A full-page screenshot of the whole conversation: the chat scrolls inside #messages-container (the page
        itself is one screen high), so the viewport is made as tall as that container's content first."""
        page = self.page
        height = page.evaluate(
            "() => { const c = document.getElementById('messages-container'); return c ? c.scrollHeight : 0; }"
        )
        page.set_viewport_size({"width": VIEWPORT["width"], "height": max(VIEWPORT["height"], min(height + 260, 9000))})
        page.wait_for_timeout(400)
        self.shot_count += 1
        path = self.shots / f"{self.shot_count:02d}-{name}.png"
        page.screenshot(path=str(path), full_page=True)
        page.set_viewport_size(VIEWPORT)
        print(f"[e2e-browser] screenshot {path}", flush=True)
        return str(path)


@contextmanager
def open_browser(stack: Stack, shots: Path) -> Iterator[Browser]:
    """Headless Debian chromium, signed in through Open WebUI's login form as the admin the stack created; the
    report is written to `shots` on exit."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=str(CHROMIUM), headless=True)
        context = chromium.new_context(viewport=VIEWPORT, locale="en-US", color_scheme="light")
        context.set_default_timeout(30_000)
        page = context.new_page()
        state = Browser(page=page, stack=stack, shots=shots)
        page.on("console", lambda m: state.console_errors.append(m.text[:300]) if m.type == "error" else None)
        try:
            sign_in(state)
            yield state
        finally:
            state.report["console_errors"] = state.console_errors[:40]
            report = {"date": datetime.now(UTC).isoformat(timespec="seconds"), "webui": stack.webui_url, **state.report}
            (shots / "browser-report.json").write_text(json.dumps(report, ensure_ascii=False, indent=2), "utf-8")
            stack.report["browser"] = report
            print(f"[e2e-browser] report: {shots / 'browser-report.json'}", flush=True)
            context.close()
            chromium.close()


@pytest.fixture(scope="module")
def browser(stack: Stack, shots: Path) -> Iterator[Browser]:
    with open_browser(stack, shots) as state:
        yield state


def dismiss_changelog(page: Any, wait_ms: int = 0) -> None:
    """An admin's first visit can open the "What's New" modal; close it like a user would."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    button = page.get_by_role("button", name="Okay, Let's Go!")
    try:
        button.wait_for(state="visible", timeout=wait_ms or 1)
    except PlaywrightTimeout:  # not shown: nothing to dismiss
        return
    button.click()
    button.wait_for(state="hidden")


def sign_in(state: Browser) -> None:
    page = state.page
    page.goto(state.stack.webui_url + "/auth")
    page.locator("#email").fill(ADMIN_EMAIL)
    page.locator("#password").fill(ADMIN_PASSWORD)
    page.get_by_role("button", name="Sign in", exact=True).click()
    page.locator("#chat-input").wait_for(state="visible", timeout=60_000)
    dismiss_changelog(page, wait_ms=4000)
    # A first visit starts with the sidebar folded to an icon rail; open it, so the chat titles are in view.
    opener = page.get_by_role("button", name="Open Sidebar").filter(visible=True)
    if opener.count():
        opener.first.click()
    page.get_by_role("button", name="Close Sidebar").filter(visible=True).first.wait_for(state="visible")
    state.screenshot("signed-in")


# ---------------------------------------------------------------------------------------------- one chat
@dataclass
class Turn:
    label: str
    chat_id: str
    message_id: str
    title: str
    message: dict[str, Any]
    seconds: float


def choose_model(page: Any) -> None:
    selector = page.get_by_role("button", name=re.compile(r"^(Select a model|Selected model: )")).first
    selector.click()
    page.get_by_role("option", name=f"Select {MODEL_NAME} model", exact=True).click()
    page.get_by_role("button", name=f"Selected model: {MODEL_NAME}", exact=True).first.wait_for(state="visible")


def ask(state: Browser, label: str, question: str) -> Turn:
    """A new chat: pick the model, type the question, send it; wait until the answer is finished and stored, the
    title is generated, and the answer is rendered as finished (sources button, reasoning button, follow-ups)."""
    page, stack = state.page, state.stack
    page.goto(stack.webui_url + "/")
    page.locator("#chat-input").wait_for(state="visible")
    dismiss_changelog(page)
    choose_model(page)
    page.locator("#chat-input").click()
    page.keyboard.type(question)
    started = time.monotonic()
    page.keyboard.press("Enter")
    page.wait_for_url(re.compile(r"/c/[0-9a-f-]{36}"), timeout=60_000)
    chat_id = page.url.rstrip("/").rsplit("/", 1)[-1]

    deadline = time.monotonic() + 300
    with stack.client() as client:
        while True:
            chat = client.get(f"/api/v1/chats/{chat_id}").json()
            history = chat["chat"]["history"]
            message = history["messages"].get(history.get("currentId") or "", {})
            if (
                message.get("role") == "assistant"
                and message.get("done")
                and chat.get("title") not in (None, "", "New Chat")
                and stack.metrics()["in_flight"] == 0
            ):
                break
            assert time.monotonic() < deadline, f"{label}: not finished after 300s (title={chat.get('title')!r})"
            time.sleep(0.5)
    seconds = round(time.monotonic() - started, 2)
    turn = Turn(label, chat_id, message["id"], chat["title"], message, seconds)
    answer = page.locator(f"#message-{turn.message_id}")
    answer.get_by_role("button", name=re.compile(r"^Toggle \d+ sources?$")).wait_for(state="visible", timeout=60_000)
    answer.get_by_role("button", name=re.compile(r"^Thought")).wait_for(state="visible")
    answer.get_by_role("button", name="Copy", exact=True).wait_for(state="visible")
    page.wait_for_timeout(1500)  # follow-ups and the sidebar title arrive by socket.io after `done`
    return turn


def _texts(locator: Any) -> list[str]:
    return [_norm(t) for t in locator.all_inner_texts()]


def chips_shown(content_box: Any, groups: list[list[int]], titles: list[str]) -> tuple[list[str], list[str | None]]:
    """The inline chips' texts in the answer, and what they must be: one per `[n]` group in reading order, source
    n's title as Open WebUI shortens it, "+k" for k more markers in the group (None where n has no source)."""
    chips = content_box.locator(
        "button[aria-label^='View source: ']:not([id^='source-']), button[aria-label$=' more sources']"
    )
    expected = [
        display_title(titles[g[0] - 1]) + (f" +{len(g) - 1}" if len(g) > 1 else "") if g[0] <= len(titles) else None
        for g in groups
    ]
    return _texts(chips), expected


def check_turn(state: Browser, turn: Turn) -> Checks:
    """Every DOM check of one answer (all evaluated, then asserted); screenshots along the way."""
    page, c = state.page, Checks()
    record: dict[str, Any] = {
        "question": QUESTIONS[turn.label],
        "chat_id": turn.chat_id,
        "title": turn.title,
        "seconds_to_answer": turn.seconds,
    }
    state.report[turn.label] = record
    answer = page.locator(f"#message-{turn.message_id}")
    content_box = answer.locator("#response-content-container")
    record["screenshots"] = {"answer": state.screenshot(f"{turn.label}-answer")}

    stored = turn.message
    content = stored.get("content") or ""
    body, _, bronnen_md = content.partition("**Bronnen**")
    titles = source_titles(stored.get("sources") or [])
    groups = citation_groups(body)
    cited = sorted({n for group in groups for n in group})
    reasoning = "".join(
        part.get("text") or ""
        for item in stored.get("output") or []
        if item.get("type") == "reasoning"
        for part in item.get("content") or []
    )
    think_lines = [line.strip() for line in reasoning.splitlines() if line.strip()]
    visible = answer.inner_text()
    record["stored"] = {"cited": cited, "groups": groups, "sources": titles, "think_lines": len(think_lines)}

    # The answer itself
    c.check(
        "answer shown",
        all(word in visible for word in MUST_SHOW[turn.label]),
        {word: word in visible for word in MUST_SHOW[turn.label]},
    )
    raw = [token for token in RAW_TEXT if token in visible]
    c.check("no <think> tags or raw JSON visible", not raw, raw)

    # Reasoning: one collapsed "Thought ..." button; none of its lines visible
    thought = answer.get_by_role("button", name=re.compile(r"^Thought"))
    thought_label = _norm(thought.first.inner_text()) if thought.count() else None
    record["reasoning_button"] = thought_label
    c.check(
        "reasoning collapsed",
        thought.count() == 1 and thought.first.get_attribute("aria-expanded") == "false",
        {"buttons": thought.count(), "label": thought_label},
    )
    shown_think = [line for line in think_lines if answer.get_by_text(line, exact=True).filter(visible=True).count()]
    c.check("no think line visible while collapsed", bool(think_lines) and not shown_think, shown_think[:5])

    # Inline citation chips: one per [n] group, in reading order, each showing its source's title
    chip_texts, expected_chips = chips_shown(content_box, groups, titles)
    record["chips"] = chip_texts
    record["numbers_in_reading_order"] = [n for g in groups for n in g]
    c.check("answer cites [n]", bool(cited), cited)
    c.check(
        "every [n] group is a chip with its source's title",
        chip_texts == expected_chips and None not in expected_chips,
        {"dom": chip_texts[:12], "expected": expected_chips[:12]},
    )
    first_seen = list(dict.fromkeys(n for g in groups for n in g))
    c.check("[n] numbered in reading order ([1] first)", first_seen == sorted(first_seen), first_seen)

    # The sources button counts the distinct cited sources
    toggle = answer.get_by_role("button", name=re.compile(r"^Toggle \d+ sources?$"))
    toggle_text = _norm(toggle.inner_text())
    count = int(re.search(r"\d+", toggle_text).group(0)) if re.search(r"\d+", toggle_text) else -1
    record["sources_button"] = toggle_text
    c.check(
        "'N Sources' = distinct cited sources",
        count == len(cited) == len(titles) and cited == list(range(1, len(titles) + 1)),
        {"button": toggle_text, "cited": cited, "sources": len(titles)},
    )

    # The sources panel: numbered 1..N by title, no second number
    toggle.click()
    panel = answer.locator("button[id^='source-']")
    panel.first.wait_for(state="visible")
    panel_texts = _texts(panel)
    record["sources_panel"] = panel_texts
    expected_panel = [f"{n} {title}" for n, title in enumerate(titles, 1)]
    c.check("sources panel: 1..N, each once, by title", panel_texts == expected_panel, panel_texts[:12])
    doubled = [t for t in panel_texts if re.match(r"^\d+\s+\[\d+\]", t)]
    c.check("sources panel: no doubled number ('1 [1] …')", not doubled, doubled)
    record["screenshots"]["sources"] = state.screenshot(f"{turn.label}-sources-open")
    toggle.click()

    # The Markdown "Bronnen" list: an ordered list 1..N of the same sources, without chips
    bronnen = content_box.locator("ol").filter(has_text=re.compile(re.escape(titles[0]) if titles else "$^")).last
    items = _texts(bronnen.locator("> li")) if bronnen.count() else []
    start = bronnen.get_attribute("start") if bronnen.count() else None
    record["bronnen_list"] = {"start": start, "items": items}
    md_items = re.findall(r"^(\d+)\. (.+)$", bronnen_md, re.M)
    c.check("Bronnen heading shown", content_box.get_by_text("Bronnen", exact=True).count() == 1, None)
    c.check(
        "Bronnen: an ordered list 1..N, as in the answer",
        len(items) == len(md_items) == len(titles)
        and [int(n) for n, _ in md_items] == list(range(1, len(md_items) + 1))
        and start in (None, "1")
        and all(item.startswith(title) for item, title in zip(items, titles, strict=False)),
        {"dom": items[:10], "markdown": [f"{n}. {t[:60]}" for n, t in md_items[:10]]},
    )
    chips_in_list = bronnen.locator("button").count() if bronnen.count() else -1
    c.check("Bronnen: no chips in the list", chips_in_list == 0, chips_in_list)

    # The status timeline, expanded: no line twice, the last one says what the answer rests on
    status_toggle = answer.get_by_role("button", name="Toggle status history")
    header = _norm(status_toggle.inner_text()) if status_toggle.count() else ""
    record["status_header"] = header
    status_lines: list[str] = []
    if status_toggle.count():
        status_toggle.click()
        entries = status_toggle.locator("xpath=following-sibling::*[1]").locator(".status-description")
        entries.first.wait_for(state="visible")
        status_lines = _texts(entries)
    record["status_lines"] = status_lines
    repeated = sorted({line for line in status_lines if status_lines.count(line) > 1})
    c.check("status timeline: ≥3 lines", len(status_lines) >= 3, len(status_lines))
    c.check("status timeline: no line twice", not repeated, repeated)
    c.check(
        "status timeline: ends with 'Klaar: antwoord met N geciteerde bron(nen)'",
        bool(status_lines)
        and re.fullmatch(r"Klaar: antwoord met (\d+) geciteerde bron\(nen\)", status_lines[-1]) is not None
        and int(re.search(r"\d+", status_lines[-1]).group(0)) == len(cited)
        and header == status_lines[-1],
        {"last": status_lines[-1:] or None, "header": header, "cited": len(cited)},
    )

    # The reasoning, opened: the think lines are there
    if thought.count() == 1:
        thought.first.click()
        page.wait_for_timeout(600)
        opened = [line for line in think_lines if answer.get_by_text(line).filter(visible=True).count()]
        record["reasoning_opened_lines"] = len(opened)
        c.check(
            "reasoning opens to its think lines",
            thought.first.get_attribute("aria-expanded") == "true" and len(opened) == len(think_lines),
            {"visible": len(opened), "think_lines": len(think_lines)},
        )
    record["screenshots"]["expanded"] = state.screenshot(f"{turn.label}-status-and-reasoning-open")
    if thought.count() == 1:
        thought.first.click()
    if status_toggle.count():
        status_toggle.click()

    # The sidebar shows the generated title
    # (a chat item is a link holding the title and a "2 minutes ago" label: the title is its `dir=auto` text)
    sidebar_link = page.locator(f"a[href='/c/{turn.chat_id}']").filter(visible=True)
    box = sidebar_link.first.bounding_box() if sidebar_link.count() else None
    record["sidebar_link_box"] = box
    sidebar_title = (
        _norm(sidebar_link.first.locator("div[dir='auto']").first.inner_text()) if sidebar_link.count() else None
    )
    record["sidebar_title"] = sidebar_title
    c.check(
        "sidebar shows the generated title",
        sidebar_title == _norm(turn.title)
        and turn.title != QUESTIONS[turn.label]
        and box is not None
        and box["x"] >= 0
        and box["width"] > 50,
        {"sidebar": sidebar_title, "stored": turn.title, "box": box},
    )
    record["sidebar_chats"] = _texts(page.locator("a[href^='/c/']").filter(visible=True).locator("div[dir='auto']"))
    record["checks"] = {k: ("pass" if v["ok"] else "FAIL") for k, v in c.results.items()}
    return c


# ---------------------------------------------------------------------------------------------- tests
@pytest.mark.parametrize("label", list(QUESTIONS))
def test_browser_chat(browser: Browser, label: str) -> None:
    """A factual and (in a new chat) a comparative question, asked through the Open WebUI page in Chromium."""
    try:
        turn = ask(browser, label, QUESTIONS[label])
    except Exception:
        browser.report.setdefault(label, {})["failure_screenshot"] = browser.screenshot(f"{label}-failure")
        raise
    checks = check_turn(browser, turn)
    checks.assert_all()
