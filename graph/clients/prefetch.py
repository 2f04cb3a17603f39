"""A streamed model call started before its reader is ready: a comparison's later sides are generated while the
first one streams (issue 36), and read, in order, when their turn comes."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

from graph.clients.llm import LLMClient, StreamEnd

_DONE = object()


class Prefetched:
    """`llm.stream(...)` running now in its own task; its pieces wait in a queue until `pieces()` reads them.

    The reader sees exactly what a direct call would give it: the same pieces, the same `StreamEnd`, and the call's
    error raised where the direct call would raise it (a failure is kept for its turn, so one failing call
    affects nothing read before it). `cut()` stops the call as the direct call's `stop` would (the answer's
    sources-list gate closed while it was read); `cancel()` ends it (the request is gone, or an earlier call
    failed). `seconds`: from the start of the call to its `StreamEnd`, not to the reading of it."""

    def __init__(self, llm: LLMClient, messages: list[dict[str, str]], *, max_tokens: int | None,
                 stop: Callable[[str], bool], sampling: dict[str, Any] | None = None, step: str = "") -> None:
        self._queue: asyncio.Queue[Any] = asyncio.Queue()
        self._cut = False
        self.started = time.perf_counter()
        self.seconds = 0.0

        def stops(text: str) -> bool:
            return self._cut or stop(text)

        self._task = asyncio.create_task(self._run(llm.stream(messages, max_tokens=max_tokens, stop=stops,
                                                              sampling=sampling, step=step)))

    async def _run(self, stream: AsyncIterator[str | StreamEnd]) -> None:
        try:
            async for piece in stream:
                if isinstance(piece, StreamEnd):
                    self.seconds = time.perf_counter() - self.started
                self._queue.put_nowait(piece)
        except Exception as exc:  # noqa: BLE001 - not swallowed: raised to the reader at this call's turn
            self._queue.put_nowait(exc)
        finally:
            self._queue.put_nowait(_DONE)

    async def pieces(self) -> AsyncIterator[str | StreamEnd]:
        while (item := await self._queue.get()) is not _DONE:
            if isinstance(item, Exception):
                raise item
            yield item

    def cut(self) -> None:
        self._cut = True

    def cancel(self) -> None:
        self._task.cancel()
