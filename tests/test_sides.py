"""A comparison written side by side (issue 36): with an upstream that takes several requests at once, every side
is generated at the same time and streamed in order; with `LLM_MAX_CONCURRENCY=1` one call after the other, as
before. Against the scripted fake upstream over HTTP and the reference document server."""

from __future__ import annotations

import asyncio

import pytest

from graph.answer.events import AnswerCut, AnswerDelta, UsageEvent
from graph.build import build_graph
from graph.clients.llm import LLMClient
from graph.context import AnswerOptions
from graph.models import Turn
from graph.runner import run_pipeline, start
from tests.fakes.fake_llm import FakeLLM, Reply
from tests.test_pipeline import SEED_COMPARATIVE, _context, _script, docs  # noqa: F401 - `docs` is a fixture

FOUR = "Hoe verschillen ANVS, IAEA, de wet en security eisen voor beveiliging?"
SIDE = "Bronnen van {}:"  # what only the side prompt of that organisation holds


async def _answer(documents, fake: FakeLLM, concurrency: int, question: str = SEED_COMPARATIVE,
                  answer: AnswerOptions | None = None, cancel_after: float | None = None) -> tuple[str, list]:
    """The answer text and events of one comparison through an upstream client that takes `concurrency`
    requests at once; `cancel_after`: the run is cancelled (the client gone) after so many seconds."""
    llm = LLMClient(fake.base_url, model="big", fast_model="small", timeout_s=10, max_retries=0,
                    max_concurrency=concurrency)
    try:
        state, request = start([Turn(role="user", content=question)], _context(documents, llm), answer=answer)
        events: list = []

        async def run() -> None:
            async for event in run_pipeline(build_graph(), state, request):
                events.append(event)

        if cancel_after is None:
            await run()
        else:
            task = asyncio.create_task(run())
            await asyncio.sleep(cancel_after)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
        return "".join(e.text for e in events if isinstance(e, AnswerDelta)), events
    finally:
        await llm.aclose()


def _sides(fake: FakeLLM, anvs: Reply, iaea: Reply) -> None:
    fake.when_contains(SIDE.format("ANVS"), anvs)
    fake.when_contains(SIDE.format("IAEA"), iaea)
    _script(fake)


def _requests(fake: FakeLLM, needle: str) -> list[dict]:
    return [t for r, t in zip(fake.requests, fake.timings, strict=True)
            if needle in r["messages"][-1]["content"]]


@pytest.mark.asyncio
async def test_a_second_side_that_arrives_first_is_streamed_after_the_first(docs, fake_llm: FakeLLM) -> None:  # noqa: F811
    _sides(fake_llm, Reply(text="ANVS eist leiderschap [1].", ttft_s=0.6),
           Reply(text="IAEA eist een sterke cultuur [1].", ttft_s=0.0))
    answer, _ = await _answer(docs, fake_llm, concurrency=8)
    anvs, iaea = _requests(fake_llm, SIDE.format("ANVS"))[0], _requests(fake_llm, SIDE.format("IAEA"))[0]
    assert iaea["start"] < anvs["end"] and iaea["end"] < anvs["first_token"]  # written at once, the second first
    assert fake_llm.peak_in_flight >= 2
    assert answer.index("**ANVS**") < answer.index("ANVS eist leiderschap") < answer.index("**IAEA**") \
        < answer.index("IAEA eist een sterke cultuur") < answer.index("**Verschillen en overeenkomsten**")
    contrast = fake_llm.requests[-1]["messages"][-1]["content"]
    assert contrast.index("ANVS: ANVS eist leiderschap") < contrast.index("IAEA: IAEA eist een sterke cultuur")


@pytest.mark.asyncio
async def test_one_slot_writes_the_sides_one_after_the_other_and_the_same_answer(docs, fake_llm: FakeLLM) -> None:  # noqa: F811
    # the second side ends with a sources list of its own: the gate drops it and cuts the call, either way
    replies = (Reply(text="ANVS eist leiderschap [1].", ttft_s=0.2),
               Reply(text="IAEA eist een cultuur [1].\n\nBronnen:\n[1] IAEA GSR Part 2, pagina 4\n" + "tekst " * 60))
    _sides(fake_llm, *replies)
    concurrent, _ = await _answer(docs, fake_llm, concurrency=8)
    fake_llm.reset()
    _sides(fake_llm, *replies)
    one, _ = await _answer(docs, fake_llm, concurrency=1)
    anvs, iaea = _requests(fake_llm, SIDE.format("ANVS"))[0], _requests(fake_llm, SIDE.format("IAEA"))[0]
    assert anvs["first_token"] <= iaea["start"]  # (the fake may book a call's end after the next one began)
    assert one == concurrent
    assert "IAEA eist een cultuur" in one and "pagina 4" not in one and "tekst" not in one


@pytest.mark.asyncio
@pytest.mark.parametrize("concurrency", [2, 8])
async def test_four_sides_run_at_once_and_keep_their_order(docs, fake_llm: FakeLLM, concurrency: int) -> None:  # noqa: F811
    names = ("ANVS", "IAEA", "Wetten", "Security")
    for k, name in enumerate(names):  # the later the side, the sooner its reply
        fake_llm.when_contains(SIDE.format(name), Reply(text=f"Zijde {name} [1].", ttft_s=0.1 * (len(names) - k)))
    _script(fake_llm)
    answer, events = await _answer(docs, fake_llm, concurrency=concurrency, question=FOUR)
    assert fake_llm.peak_in_flight >= min(4, concurrency)  # as many sides at once as the upstream takes
    starts = {name: _requests(fake_llm, SIDE.format(name))[0] for name in names}
    if concurrency == 2:  # the third side waited for a slot: it began once one of the first two had streamed
        assert starts["Wetten"]["start"] >= min(starts[n]["first_token"] for n in names[:2])
    positions = [answer.index(f"Zijde {name}") for name in names]
    assert positions == sorted(positions)
    assert sum(e.calls for e in events if isinstance(e, UsageEvent)) == fake_llm.calls == 5


@pytest.mark.asyncio
@pytest.mark.parametrize("concurrency", [1, 8])
async def test_a_failing_second_side_ends_the_answer_as_before(docs, fake_llm: FakeLLM, concurrency: int) -> None:  # noqa: F811
    _sides(fake_llm, Reply(text="ANVS eist leiderschap [1].", ttft_s=0.3), Reply(fault="early_end", text="IAEA begint"))
    answer, _ = await _answer(docs, fake_llm, concurrency)
    assert "ANVS eist leiderschap" in answer and "afgebroken" in answer
    assert "**Verschillen en overeenkomsten**" not in answer  # no contrast of half the sides
    assert not any("Wat elke organisatie zegt:" in r["messages"][-1]["content"] for r in fake_llm.requests)
    assert await fake_llm.wait_idle(1.0)


@pytest.mark.asyncio
@pytest.mark.parametrize("concurrency", [1, 8])
async def test_a_side_cut_by_the_callers_max_tokens_is_reported(docs, fake_llm: FakeLLM, concurrency: int) -> None:  # noqa: F811
    long = " ".join(["woord"] * 40) + " [1]."
    _sides(fake_llm, Reply(text="ANVS kort [1]."), Reply(text=long))
    answer, events = await _answer(docs, fake_llm, concurrency, answer=AnswerOptions(max_tokens=8))
    side_requests = [r for r in fake_llm.requests if "Bronnen van " in r["messages"][-1]["content"]]
    assert all(r["max_tokens"] == 8 for r in side_requests)
    assert any(isinstance(e, AnswerCut) for e in events)
    assert answer.index("ANVS kort") < answer.index("woord")


@pytest.mark.asyncio
async def test_a_cancelled_comparison_ends_every_side_in_flight(docs, fake_llm: FakeLLM) -> None:  # noqa: F811
    _sides(fake_llm, Reply(fault="hang"), Reply(fault="hang"))
    await _answer(docs, fake_llm, concurrency=8, cancel_after=1.5)
    assert len([r for r in fake_llm.requests if "Bronnen van " in r["messages"][-1]["content"]]) == 2
    assert await fake_llm.wait_idle(1.0)  # both side calls were closed with the request


@pytest.mark.asyncio
@pytest.mark.parametrize("concurrency", [1, 8])
async def test_later_headings_go_out_before_their_calls_first_words(docs, fake_llm: FakeLLM, concurrency: int) -> None:  # noqa: F811
    """A later side's heading and the contrast's go out as the part before them ends, not with their call's first
    piece: a call that fails at once leaves its heading above the line that says the answer broke off. The first
    side's heading waits for its first piece: failing at once, it leaves the extractive answer without one."""
    _sides(fake_llm, Reply(text="ANVS eist leiderschap [1]."), Reply(status=500))
    answer, _ = await _answer(docs, fake_llm, concurrency)
    assert answer.index("ANVS eist leiderschap") < answer.index("**IAEA**") < answer.index("afgebroken")

    fake_llm.reset()
    fake_llm.when_contains("Wat elke organisatie zegt:", Reply(status=500))  # the contrast (first rule that matches)
    _sides(fake_llm, Reply(text="ANVS eist leiderschap [1]."), Reply(text="IAEA eist een sterke cultuur [1]."))
    answer, _ = await _answer(docs, fake_llm, concurrency)
    assert answer.index("IAEA eist een sterke cultuur") < answer.index("**Verschillen en overeenkomsten**") \
        < answer.index("afgebroken")

    fake_llm.reset()
    _sides(fake_llm, Reply(status=500), Reply(text="IAEA eist een sterke cultuur [1]."))
    answer, _ = await _answer(docs, fake_llm, concurrency)
    # the answer from the passages, as without a model, opened by the line that says so (not by a side's heading)
    assert answer.startswith("*Het taalmodel") and "afgebroken" not in answer
