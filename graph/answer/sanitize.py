"""Streaming text filters for reasoning tags.

Open WebUI (and other chat UIs) treat `<think>`, `<thinking>`, `<reason>`, ... anywhere in streamed content
as the start or end of a reasoning block. Such tags may come from documents, the user or the model, and a
tag may be split across stream deltas, so the filters below hold back a possible tag prefix at the end of
a delta until the next one decides it. Hand-written because no library neutralises UI reasoning markers
in a token stream.
"""

from __future__ import annotations

import re

_TAG_NAMES = r"think|thinking|reason|reasoning|thought|reflection"
TAG_RE = re.compile(
    rf"<\s*/?\s*(?:{_TAG_NAMES})\b[^<>]{{0,40}}>"
    r"|<\|\s*(?:begin|end)_of_(?:thought|solution)\s*\|>"
    r"|◁\s*/?\s*think\s*▷",
    re.IGNORECASE,
)
_OPENERS = ("<", "◁")
_MAX_TAG = 64


def _neutral(match: re.Match[str]) -> str:
    # Full-width angle brackets read the same to a person but are no tag to any parser.
    return match.group(0).replace("<", "‹").replace(">", "›").replace("◁", "‹").replace("▷", "›")


def neutralize(text: str) -> str:
    return TAG_RE.sub(_neutral, text)


def _split_pending(text: str) -> tuple[str, str]:
    """Split `text` into (safe, pending): pending is a trailing fragment that may still become a tag."""
    cut = max(text.rfind(opener) for opener in _OPENERS)
    if cut == -1 or len(text) - cut > _MAX_TAG:
        return text, ""
    tail = text[cut:]
    if ">" in tail or "▷" in tail:
        return text, ""
    return text[:cut], tail


class TagNeutralizer:
    """Neutralises reasoning tags in a stream of text deltas."""

    def __init__(self) -> None:
        self._pending = ""

    def feed(self, delta: str) -> str:
        safe, self._pending = _split_pending(self._pending + delta)
        return neutralize(safe)

    def flush(self) -> str:
        rest, self._pending = self._pending, ""
        return neutralize(rest)


_THINK_OPEN = re.compile(r"^\s*<\s*(think|thinking|reasoning)\s*>", re.IGNORECASE)


class InlineReasoningSplitter:
    """Separates a leading `<think>...</think>` block (models without a reasoning parser) from the answer.

    `feed` returns (reasoning, answer) parts of the delta; reasoning is never shown as answer text.
    """

    def __init__(self) -> None:
        self._buffer = ""
        self._state = "start"  # start -> (inside ->) answer
        self._close: re.Pattern[str] | None = None

    def feed(self, delta: str) -> tuple[str, str]:
        if self._state == "answer":
            return "", delta
        self._buffer += delta
        if self._state == "start":
            stripped = self._buffer.lstrip()
            match = _THINK_OPEN.match(self._buffer)
            if match:
                self._close = re.compile(rf"<\s*/\s*{match.group(1)}\s*>", re.IGNORECASE)
                self._buffer = self._buffer[match.end():]
                self._state = "inside"
            elif len(stripped) < 12 and "<think"[: len(stripped)].lower() == stripped[:6].lower():
                return "", ""  # could still become an opening tag
            else:
                self._state = "answer"
                out, self._buffer = self._buffer, ""
                return "", out
        assert self._close is not None
        end = self._close.search(self._buffer)
        if end is None:
            keep = 16  # a closing tag may be split across deltas
            reasoning, self._buffer = self._buffer[:-keep], self._buffer[-keep:]
            return reasoning, ""
        reasoning, answer = self._buffer[: end.start()], self._buffer[end.end():].lstrip()
        self._buffer, self._state = "", "answer"
        return reasoning, answer

    def flush(self) -> tuple[str, str]:
        rest, self._buffer = self._buffer, ""
        if self._state == "inside":
            return rest, ""
        return "", rest


class LeakFilter:
    """Streaming filter that redacts verbatim lines of the system prompt from the model's answer.

    A planted instruction in a document may ask the model to reveal its instructions; whatever the model
    does, no prompt line of 30 characters or more reaches the user. A tail that may be the start of such a
    line is held back until the next delta decides it.
    """

    def __init__(self, prompt: str, min_len: int = 30) -> None:
        self.secrets = [line.strip(" -*") for line in prompt.splitlines() if len(line.strip(" -*")) >= min_len]
        self._longest = max((len(s) for s in self.secrets), default=0)
        self._firsts = {s[0] for s in self.secrets}
        self._pending = ""

    def _held(self, text: str) -> int:
        """Length of the longest tail of `text` that is a proper prefix of a secret line.

        Runs once per streamed token: only the positions whose character starts some secret are tried, from
        the earliest (longest tail) on, so a token costs about one pass over the short text."""
        n = len(text)
        for i in range(max(0, n - self._longest + 1), n):
            if text[i] in self._firsts:
                tail = text[i:]
                if any(len(tail) < len(s) and s.startswith(tail) for s in self.secrets):
                    return n - i
        return 0

    def feed(self, delta: str) -> str:
        text = self._pending + delta
        for secret in self.secrets:
            text = text.replace(secret, "[…]")
        held = self._held(text)
        self._pending = text[len(text) - held:] if held else ""
        return text[: len(text) - held] if held else text

    def flush(self) -> str:
        rest, self._pending = self._pending, ""
        return rest
