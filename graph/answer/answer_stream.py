"""The answer as it streams: every delta passes the prompt-leak filter, the address filter (`graph.answer.contacts`) and
the ledger's citation filter, and deltas that arrive close together go out as one.

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

from graph.answer.contacts import ContactFilter
from graph.answer.events import ECHO_VERDICTS, AnswerDelta, EchoVerdicts, emit
from graph.answer.ledger import CitationFilter
from graph.answer.sanitize import LeakFilter
from textkit.sentences import NOT_ABBREVIATED

# The end of a sentence: after . ! ? (or a citation) and a space, unless a citation follows ("eisen. [2]") or the
# dot closes an abbreviation or an initial (`textkit.sentences`), or a line end; the punctuation a sentence
# may end with, which is held until the next text shows what follows
_SENTENCE_END = re.compile(r"(?<=[.!?\]])" + NOT_ABBREVIATED + r"[ \t]+(?=[^\s\[])|\n")
_LOOKBACK = 12  # characters of the sentence so far that the abbreviation rule reads before a dot
LATE = 0.5  # of an interval: how long after its end model text waits for a next piece before a timer filters it
_MARKER = re.compile(r"\[\d+(?:\s*[,;–-]\s*\d+)*\]")
_TAIL = re.compile(r"[.!?:;]*\s*$")
_HELD = re.compile(r"(?:[.!?:;\]]|\s*\[[\d,;–\s-]*\]?)+\s*$")
# the markers that close a sentence (before or after its punctuation): the ones a repair may replace
_CLOSING = re.compile(r"(?:\s*\[\d+(?:\s*[,;–-]\s*\d+)*\])+(?=[.!?:;]*\s*$)")
# A line that starts a sources list the model writes itself: a heading ("Bronnen van <organisatie>:", "**Sources**",
# "### Referenties") or a copy of an evidence block's head ("[2] <organisatie> | <titel> — …", `Ledger.render`)
_LIST_HEADING = re.compile(
    r"\s*(?:#{1,6}\s*)?(?:\*\*|__)?\s*(?:(?:bronnen(?:lijst)?|bronvermelding|sources|references|referenties)"
    r"(?:\s+(?:van|uit|from|of)\s+[^\n:.!?]{1,40})?|(?:bron|source)(?=\s*:))\s*(?:\*\*|__)?\s*:?\s*(?:\*\*|__)?\s*",
    re.IGNORECASE)
_LIST_WORDS = ("bronnen", "bronvermelding", "bron:", "sources", "source:", "references", "referenties")
_MARKUP = re.compile(r"\s*(?:#{1,6}\s*)?(?:\*\*|__)?\s*")
_ECHOED_HEAD = re.compile(r"\s*(?:[-*]\s*)?\[\d+\][^\n|\[\]]{1,80}\|")
_MAYBE_HEAD = re.compile(r"\s*(?:[-*]\s*)?(?:\[(?:\d+(?:\][^\n|\[\]]{0,80})?)?)?")
HOLD_CHARS = 90  # a line start held longer than this is answer text


def repeating(text: str, window: int = 120, times: int = 3) -> bool:
    """A model caught in a loop: the last `window` characters occur `times` times in the text. Small models
    at low temperature can repeat one list until the token limit (minutes on a CPU)."""
    if len(text) < window * times:
        return False
    return text.count(text[-window:]) >= times


def _list_line(line: str, complete: bool) -> bool | None:
    """Whether `line` (the start of a line, or all of it when `complete`) opens a model-written sources list:
    True, False, or None while the text so far could still become one."""
    if _ECHOED_HEAD.match(line) or (complete and _LIST_HEADING.fullmatch(line)):
        return True
    if complete or len(line) > HOLD_CHARS:
        return False
    if _MAYBE_HEAD.fullmatch(line):
        return None
    word = line[_MARKUP.match(line).end():].lower()  # type: ignore[union-attr]  (always matches)
    if any(w.startswith(word) or word.startswith(w) for w in _LIST_WORDS):
        return None
    return False


class SourceListGate:
    """Drops a sources list the model writes itself, and everything the call writes after it.

    The service appends the sources it cited (`Ledger.sources`); the prompt says not to write a list, yet a
    small model sometimes ends a paragraph with "Bronnen van <organisatie>:" and copies the heads and text of its
    evidence, under numbers and organisations of its own (the support check then flags every copied line).
    The start of each line is held until it is plainly answer text (at most HOLD_CHARS characters or the
    line's end); once a list starts, the rest of the call is dropped (`closed`, which also stops the upstream
    call) until `flush()` ends the call. Hand-written: no library filters a token stream by line shape."""

    def __init__(self) -> None:
        self.closed = False
        self.lists = 0  # calls cut at a list of their own (all calls of the answer)
        self._line_start = True
        self._pending = ""

    def feed(self, delta: str) -> str:
        text, self._pending = self._pending + delta, ""
        out = []
        while text and not self.closed:
            newline = text.find("\n")
            if not self._line_start:
                if newline == -1:
                    out.append(text)
                    break
                out.append(text[:newline + 1])
                text, self._line_start = text[newline + 1:], True
                continue
            verdict = _list_line(text if newline == -1 else text[:newline], newline != -1)
            if verdict is None:
                self._pending = text
                break
            self.closed, self._line_start = verdict, False
            self.lists += verdict
        return "".join(out)

    def flush(self) -> str:
        listed = not self.closed and bool(self._pending) and bool(_list_line(self._pending, True))
        rest = "" if self.closed or listed else self._pending
        self.lists += listed
        self.closed, self._line_start, self._pending = False, True, ""
        return rest


_ECHO_MARKUP = re.compile(r"[#*_`>]+")
_ECHO_BULLET = re.compile(r"^\s*[-•]\s+")
_ECHO_CLOSE = re.compile(r"[*_`]*[:.?!]+[*_`]*")
ECHO_MIN_CHARS = 30  # a cut-off copy of a prompt line this long is still a copy
LABEL_WORDS = 4  # a prompt line ending in a colon with at most this many words labels a block ("Bronnen van X:")


def _echo_norm(line: str) -> str:
    """A line as compared with the prompt's: no markdown, bullet, case, spacing or closing punctuation (a
    clause's comma or semicolon included)."""
    text = _ECHO_MARKUP.sub(" ", _ECHO_BULLET.sub("", line))
    return " ".join(text.lower().split()).rstrip(" :.?!,;")


class EchoGate:
    """Drops the lines in which the model repeats its prompt instead of answering: the question (alone, as a
    heading or after the prompt's "Vraag:" label), the prompt's labels and its instructions, whole or in part.

    The local 1.5B model (EVAL-LLM.md) answered "Geef een gedetailleerde uitleg van de Kernenergiewet" with only
    "Vraag: Geef een gedetailleerde uitleg van de Kernenergiewet", once copied "Beantwoord nu de vraag met
    alleen deze bronnen. …" as a heading, and answered "Hoe meld ik een beveiligingsincident …?" with "Begin met
    het directe antwoord in één of twee zinnen: Hoe meld ik een beveiligingsincident …?" (a clause of its system
    prompt's style line, then the question; issue 58). The prompt's own lines and their clauses (`expect`, per
    call; the evidence is not among them, quoting a passage is answering) are compared line by line: a line
    start that may still become one is held, a line that is one is dropped, a line that starts with one loses
    that part and what follows is judged again (a chain of copied parts leaves nothing). `echoed` tells whether
    anything was dropped, `repeated` whether that was more than the prompt's labels ("Bronnen:"): the question
    or an instruction. Hand-written: no library filters a token stream against a prompt's lines."""

    def __init__(self) -> None:
        self.lines: frozenset[str] = frozenset()
        self.labels: frozenset[str] = frozenset()  # the prompt's labels of its parts: "Vraag:", "Bronnen:"
        self.echoed = False
        self.repeated = False
        self.verdicts = dict.fromkeys(ECHO_VERDICTS, 0)  # lines of the current call, by verdict
        self._line_start = True
        self._started = False  # this call has sent text (blank lines before that are dropped)
        self._cut = False  # the current line has lost a copied start
        self._pending = ""

    def expect(self, lines: list[str]) -> None:
        """The prompt lines (and clauses, `graph.answer.prompts.clauses`) of the next call."""
        self.lines = frozenset(n for n in map(_echo_norm, lines) if n)
        self.labels = frozenset(_echo_norm(line) for line in lines
                                if line.rstrip().endswith(":") and len(line.split()) <= LABEL_WORDS) & self.lines

    def _drop(self, copied: str) -> None:
        """A copy of a prompt line, or of its start, is dropped."""
        norm = _echo_norm(copied)
        self.echoed = self.echoed or bool(norm)
        self.repeated = self.repeated or (bool(norm) and norm not in self.labels)

    def _verdict(self, line: str, complete: bool) -> bool | None:
        """True: a copy of a prompt line (or all a copied start left of a line was blank); False: answer text;
        None: may still become a copy."""
        norm = _echo_norm(line)
        if not norm:
            return (not self._started or self._cut) if complete else None
        if complete:
            return norm in self.lines or (len(norm) >= ECHO_MIN_CHARS and any(s.startswith(norm) for s in self.lines))
        return None if any(s.startswith(norm) for s in self.lines) else False

    def _copied_start(self, line: str) -> int:
        """The length of a prompt line the (answer) line starts with and closes with its punctuation ("Vraag:
        <de vraag>? Het antwoord …"), or 0 ("Bronnen van de toezichthouder zeggen …" is answer text)."""
        longest = max(map(len, self.lines), default=0) * 2  # markup and spacing the comparison leaves out
        for end in range(min(len(line) - 1, longest), 0, -1):  # the longest such start
            closing = _ECHO_CLOSE.match(line, end)
            if closing and _echo_norm(line[:end]) in self.lines:
                return closing.end()
        return 0

    def feed(self, delta: str) -> str:
        text, self._pending = self._pending + delta, ""
        out = []
        while text:
            newline = text.find("\n")
            if not self._line_start:
                end = len(text) if newline == -1 else newline + 1
                out.append(text[:end])
                text, self._line_start = text[end:], newline != -1
                continue
            line = text if newline == -1 else text[:newline]
            verdict = self._verdict(line, newline != -1)
            if verdict is None:
                self._pending = text
                break
            if verdict:
                self._drop(line)
                if _echo_norm(line) or self._cut:
                    self.verdicts["copy"] += 1
                text, self._cut = text[newline + 1:], False
                continue
            cut = self._copied_start(line)
            if cut:  # what follows the copied start is judged as a line of its own: it may be a copy too
                self._drop(line[:cut])
                text, self._cut = text[cut:].lstrip(" \t"), True
                continue
            if line.strip():  # blank lines between paragraphs are no verdict
                self.verdicts["trimmed" if self._cut else "answer"] += 1
            self._line_start, self._started, self._cut = False, True, False
        return "".join(out)

    def flush(self) -> str:
        """The end of a call: a held line is judged whole; the call's prompt lines are forgotten (`verdicts` are
        read, then `reset_verdicts()`)."""
        rest = self.feed("\n")
        self._line_start, self._started, self._cut, self._pending = True, False, False, ""
        self.lines = self.labels = frozenset()
        return rest[:-1] if rest.endswith("\n") else rest

    def reset_verdicts(self) -> dict[str, int]:
        """The current call's verdicts, then zero for the next call."""
        verdicts, self.verdicts = self.verdicts, dict.fromkeys(self.verdicts, 0)
        return verdicts


def no_answer_reason(repeated: bool, listed: bool, echoed: bool) -> str:
    """Why none of the model's text was kept: "echo" when it repeated its question or instructions (`repeated`,
    also when a sources list followed: the 1.5B model's "Begin met het directe antwoord …: <de vraag>" and then
    its evidence copied), "list" when a sources list of its own was all it wrote (under the prompt's "Bronnen:"
    label, `echoed`, at most), "echo" for the prompt's labels alone, else "empty"."""
    if repeated:
        return "echo"
    return "list" if listed else "echo" if echoed else "empty"


def _markers(numbers: tuple[int, ...]) -> str:
    return "".join(f"[{n}]" for n in numbers)


class SentenceCiter:
    """Adds `[n]` to a model's claim sentences that cite nothing, when a passage (or two together) supports the
    sentence (`graph.text.claims.best_sources`): small local models often write an answer from the numbered
    passages without a single marker, or close a sentence with the number of one passage when it joins two. Text
    streams on as it comes; only a sentence's closing punctuation and markers wait for the next piece, which shows
    where the sentence ends. Then an uncited sentence gets " [n]" before its punctuation, and closing markers whose
    passages do not support the sentence (`supported`) are replaced by those that do, if any."""

    def __init__(self, cite: Callable[[str], tuple[int, ...]], supported: Callable[[str], bool] = lambda _: True) -> None:
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
            numbers = self.cite(sentence)
            return part if not numbers else f"{part[:closing.start()]} {_markers(numbers)}{part[closing.end():]}"
        numbers = self.cite(sentence)
        if not numbers:
            return part
        end = _TAIL.search(part).start()  # type: ignore[union-attr]  (always matches)
        return f"{part[:end]} {_markers(numbers)}{part[end:]}"

    def feed(self, delta: str) -> str:
        # the end of the sentence so far goes before the new text: the word before a dot says whether it ends one
        tail = self._current[-_LOOKBACK:]
        text, self._held = tail + self._held + delta, ""
        out, start = [], len(tail)
        for match in _SENTENCE_END.finditer(text, start):
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
    closes the filters, sends what is still held and stops the timer."""

    def __init__(self, citations: CitationFilter, system_prompt: str = "", interval_s: float = 0.0,
                 citer: SentenceCiter | None = None, contacts: ContactFilter | None = None) -> None:
        self.filter = citations
        self.leak = LeakFilter(system_prompt)
        self.contacts = contacts  # addresses no source holds are removed
        self.withdrawn: list[str] = []  # sentences the support check withdrew after the answer was written
        self.echo = EchoGate()
        self.gate = SourceListGate()
        self.citer = citer
        self.answered = False  # checked text (the model's, read once a call ends) has said something
        self.raw: list[str] = []  # the model's text as it came, before the filters (logged at DEBUG when none is kept)
        self.step = ""  # the pipeline step of the model call being written (its echo verdicts are reported)
        self.parts: list[str] = []
        self.interval_s = interval_s
        self._held: list[str] = []
        self._sent_at = float("-inf")  # loop.time() of the last send
        self._timer: asyncio.TimerHandle | None = None
        self._pending: list[str] = []  # model text waiting for the filters (`write`)
        self._filtered_at = float("-inf")  # loop.time() of the filters' last run
        self._filter_timer: asyncio.TimerHandle | None = None

    def write(self, text: str, *, check: bool = True) -> None:
        """Model text (`check`: through the filters) or the service's own text (`check=False`).

        With an `interval_s`, model text that arrives within the interval after the filters last ran waits and
        goes through them together with the first piece that arrives after the interval: the filters run about
        once per interval instead of once per token, and what they let through is sent once per interval anyway.
        The first piece after a pause goes through at once. A timer runs them when no piece follows within half
        an interval more (a model that stops or slows down), so no text waits longer than that; while the model
        streams the timer never fires, and the filters cost no wake-up of their own."""
        if not check:
            self.settle()  # the model's text written before the service's goes out before it
            self._add(text, model=False)
            return
        self.raw.append(text)
        if self.interval_s <= 0:
            self._filter(text)
            return
        self._pending.append(text)
        loop = asyncio.get_running_loop()
        wait = self._filtered_at + self.interval_s - loop.time()
        if wait <= 0:
            self.settle()
        elif self._filter_timer is None:  # the callback runs in this task's context, where emit() reaches the stream
            self._filter_timer = loop.call_later(wait + self.interval_s * LATE, self.settle)

    def _filter(self, text: str) -> None:
        self._add(self.filter.feed(self._cite(self.gate.feed(self.echo.feed(self._scrub(self.leak.feed(text)))))), model=True)

    def settle(self) -> None:
        """Model text waiting for the filters goes through them now."""
        if self._filter_timer is not None:
            self._filter_timer.cancel()
            self._filter_timer = None
        if self._pending:
            text = "".join(self._pending)
            self._pending.clear()
            self._filtered_at = asyncio.get_running_loop().time()
            self._filter(text)

    def _add(self, out: str, *, model: bool) -> None:
        """Text past the filters (`model`: the model's, which counts as `answered`), sent or held for the timer."""
        if not out:
            return
        self.answered = self.answered or (model and any(c.isalnum() for c in out))
        self.parts.append(out)
        loop = asyncio.get_running_loop()
        wait = self._sent_at + self.interval_s - loop.time()
        if wait <= 0 and not self._held:
            self._send(out, loop.time())
            return
        self._held.append(out)
        if self._timer is None:  # the callback runs in this task's context, where emit() reaches the stream
            self._timer = loop.call_later(max(wait, 0.0), self._flush)

    def _scrub(self, text: str, end: bool = False) -> str:
        if self.contacts is None:
            return text
        return self.contacts.feed(text) + (self.contacts.flush() if end else "")

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
        self.settle()
        text = self.gate.feed(self.echo.feed(self._scrub(self.leak.flush(), end=True)) + self.echo.flush())
        text = self._cite(text + self.gate.flush())
        text += self.citer.flush() if self.citer else ""
        self._add(self.filter.feed(text) + self.filter.flush(), model=True)  # held model text, now judged
        verdicts = self.echo.reset_verdicts()
        if self.step:
            emit(EchoVerdicts(self.step, **verdicts))
            self.step = ""

    @property
    def unanswered(self) -> str:
        """Why none of the model's text was kept (`no_answer_reason`)."""
        return no_answer_reason(self.echo.repeated, self.gate.lists > 0, self.echo.echoed)

    def finish(self) -> None:
        """The end of the answer: what the filters still hold goes out (`close`), then what waits for the timer.
        Closing here, not only after a model call, is what keeps the last word of a branch that never called
        the model: the address filter holds the word being written, and the not-found answer lost its last one
        (issue 58). `close` after `close` finds nothing held, so a branch that closed already loses nothing."""
        self.close()
        self.cancel()
        self._flush()

    def cancel(self) -> None:
        for timer in (self._timer, self._filter_timer):
            if timer is not None:
                timer.cancel()
        self._timer = self._filter_timer = None

    @property
    def text(self) -> str:
        return "".join(self.parts)
