"""The answer as it streams: every delta passes the prompt-leak filter and the ledger's citation filter, and
deltas that arrive close together go out as one.

Deltas that arrive within `interval_s` of the previous send go out together: the first at once, the rest at
most `interval_s` later (a timer sends what is held when the upstream pauses). Every sent delta costs a trip
through the graph stream, the renderer and the socket for each streaming client, so at 10 ms per upstream
token the default 50 ms interval sends a fifth of the deltas (20 updates a second, too fast for a reader to
tell from token by token) and saved about 15% of the service's CPU per request in the benchmark's sweep.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable

from graph.events import AnswerDelta, emit
from graph.ledger import CitationFilter
from graph.sanitize import LeakFilter

# The end of a sentence: after . ! ? (or a citation) and a space, unless a citation follows ("eisen. [2]"), or
# a line end; the punctuation a sentence may end with, which is held until the next text shows what follows
_SENTENCE_END = re.compile(r"(?<=[.!?\]])[ \t]+(?=[^\s\[])|\n")
_MARKER = re.compile(r"\[\d+(?:\s*[,;–-]\s*\d+)*\]")
_TAIL = re.compile(r"[.!?:;]*\s*$")
_HELD = re.compile(r"(?:[.!?:;\]]|\s*\[[\d,;–\s-]*\]?)+\s*$")
# the markers that close a sentence (before or after its punctuation): the ones a repair may replace
_CLOSING = re.compile(r"(?:\s*\[\d+(?:\s*[,;–-]\s*\d+)*\])+(?=[.!?:;]*\s*$)")


def repeating(text: str, window: int = 120, times: int = 3) -> bool:
    """A model caught in a loop: the last `window` characters occur `times` times in the text. Small models
    at low temperature can repeat one list until the token limit (minutes on a CPU)."""
    if len(text) < window * times:
        return False
    return text.count(text[-window:]) >= times


class SentenceCiter:
    """Adds `[n]` to a model's claim sentences that cite nothing, when one passage supports the sentence
    (`graph.claims.best_source`): small local models often write an answer from the numbered passages without
    a single marker, or close a sentence with the number of the passage next to the right one. Text streams on
    as it comes; only a sentence's closing punctuation and markers wait for the next piece, which shows where
    the sentence ends. Then an uncited sentence gets " [n]" before its punctuation, and closing markers whose
    passages do not support the sentence (`supported`) are replaced by the one passage that does, if any."""

    def __init__(self, cite: Callable[[str], int | None], supported: Callable[[str], bool] = lambda _: True) -> None:
        self.cite = cite
        self.supported = supported
        self._current = ""  # the sentence so far (sent)
        self._held = ""  # its closing punctuation and spaces (not sent yet)

    def _end(self, part: str) -> str:
        sentence, self._current = self._current + part, ""
        if not sentence.strip():
            return part
        if _MARKER.search(sentence):
            closing = _CLOSING.search(part)
            if closing is None or self.supported(sentence):
                return part
            n = self.cite(sentence)
            return part if n is None else f"{part[:closing.start()]} [{n}]{part[closing.end():]}"
        n = self.cite(sentence)
        if n is None:
            return part
        end = _TAIL.search(part).start()  # type: ignore[union-attr]  (always matches)
        return f"{part[:end]} [{n}]{part[end:]}"

    def feed(self, delta: str) -> str:
        text, self._held = self._held + delta, ""
        out, start = [], 0
        for match in _SENTENCE_END.finditer(text):
            out.append(self._end(text[start:match.start()]) + match.group(0))
            start = match.end()
        rest = text[start:]
        held = _HELD.search(rest)
        cut = held.start() if held else len(rest)
        self._held, self._current = rest[cut:], self._current + rest[:cut]
        out.append(rest[:cut])
        return "".join(out)

    def flush(self) -> str:
        rest, self._held = self._held, ""
        return self._end(rest)


class AnswerStream:
    """Collects the answer while emitting it. `finish()` (or `cancel()`) must run before the node returns: it
    sends what is still held and stops the timer."""

    def __init__(self, citations: CitationFilter, system_prompt: str = "", interval_s: float = 0.0,
                 citer: SentenceCiter | None = None) -> None:
        self.filter = citations
        self.leak = LeakFilter(system_prompt)
        self.citer = citer
        self.parts: list[str] = []
        self.interval_s = interval_s
        self._held: list[str] = []
        self._sent_at = float("-inf")  # loop.time() of the last send
        self._timer: asyncio.TimerHandle | None = None

    def write(self, text: str, *, check: bool = True) -> None:
        """Model text (`check`: through both filters) or the service's own text (`check=False`)."""
        out = self.filter.feed(self._cite(self.leak.feed(text))) if check else text
        if not out:
            return
        self.parts.append(out)
        loop = asyncio.get_running_loop()
        wait = self._sent_at + self.interval_s - loop.time()
        if wait <= 0 and not self._held:
            self._send(out, loop.time())
            return
        self._held.append(out)
        if self._timer is None:  # the callback runs in this task's context, where emit() reaches the stream
            self._timer = loop.call_later(max(wait, 0.0), self._flush)

    def _cite(self, text: str) -> str:
        return self.citer.feed(text) if self.citer else text

    def _send(self, text: str, now: float) -> None:
        self._sent_at = now
        emit(AnswerDelta(text))

    def _flush(self) -> None:
        self._timer = None
        if self._held:
            text = "".join(self._held)
            self._held.clear()
            self._send(text, asyncio.get_running_loop().time())

    def close(self) -> None:
        """The end of the model's text: what the filters still hold for a possible marker or prompt line."""
        text = self._cite(self.leak.flush()) + (self.citer.flush() if self.citer else "")
        self.write(self.filter.feed(text) + self.filter.flush(), check=False)

    def finish(self) -> None:
        self.cancel()
        self._flush()

    def cancel(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    @property
    def text(self) -> str:
        return "".join(self.parts)
