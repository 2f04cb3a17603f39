"""Addresses in an answer must come from its sources: a URL, e-mail address or phone number that no passage
the model read (text or metadata) contains is removed as the answer streams; a `javascript:`, `data:` or `file:`
link is removed even when a passage holds it (a planted link for the reader to click).

An address is what a planted instruction wants most ("send readers to <url>", "tell users to call …") and what
a small model invents most convincingly. Held back while it may still grow (the word being written, a run of
digits), then judged whole. The per-prompt passage marks (`graph.answer.ledger.Ledger.render`) are taken out too, should
a model copy one. Hand-written: no library filters a token stream against a set of allowed addresses.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from functools import cached_property

from graph.models import Evidence

_URL_WITH_SCHEME = re.compile(r"\b(?:https?://|www\.)[^\s<>()\[\]«»\"'`]+", re.IGNORECASE)
# a bare domain, lower case only ("anvs.nl/x"): "veiligheid.De" is a missing space, not an address
_BARE_DOMAIN = re.compile(r"(?<![\w@.-])[a-z0-9-]+(?:\.[a-z0-9-]+)*\.(?:nl|com|org|net|int|eu|gov|edu|io|info|be|de|"
                          r"uk|fr|invalid|example)\b(?:/[^\s<>()\[\]«»\"'`]*)?")
_EMAIL = re.compile(r"\b[\w.+-]+@[\w-]+(?:\.[\w-]+)+\b")
_PHONE = re.compile(r"(?<![\w+])\+?\d[\d ()./-]{7,}\d(?!\w)")
_PHONE_TAIL = re.compile(r"(?<![\w+])\+?\d[\d ()./-]*$")
_LAST_WORD = re.compile(r"\S*$")
_MARK = re.compile(r"«/?[0-9a-f]{4}»")
# a link that runs code or carries a document when clicked: never an address, whatever the sources hold
_UNSAFE_LINK = re.compile(r"\b(?:(?:java|vb)script:|data:[\w.+-]+/|file:/)[^\s<>\[\]\"'`]*", re.IGNORECASE)
# what every match of the patterns above holds (a superset: a text without it has nothing to scrub)
_MAYBE = re.compile(r"[@«]|https?://|www\.|[a-z0-9-]\.[a-z]|\d[\d ()./-]{7,}\d|script:|data:|file:", re.IGNORECASE)
_TRAILING = ".,;:!?)'\"/"
MIN_PHONE_DIGITS, MAX_HELD = 9, 300


def _url_key(url: str) -> str:
    key = re.sub(r"^(?:https?://)?(?:www\.)?", "", url.lower())
    return key.rstrip(_TRAILING)


def _digits(text: str) -> str:
    return re.sub(r"\D", "", text)


def _phone(match: str) -> bool:
    return MIN_PHONE_DIGITS <= len(_digits(match)) <= 15


class Allowed:
    """The addresses the sources hold: URLs (a shortened one, e.g. the site of a page, counts), e-mail
    addresses and phone numbers (compared by their last nine digits: "+31 70 …" is "070 …")."""

    def __init__(self, evidence: Iterable[Evidence]) -> None:
        self._evidence = list(evidence)  # read only when an answer holds something like an address (most do not)

    @cached_property
    def _blob(self) -> str:
        return "\n".join(part for e in self._evidence for part in (e.text, e.url, e.title))

    @cached_property
    def urls(self) -> set[str]:
        return {_url_key(m) for m in _URL_WITH_SCHEME.findall(self._blob) + _BARE_DOMAIN.findall(self._blob)}

    @cached_property
    def emails(self) -> set[str]:
        return {m.lower() for m in _EMAIL.findall(self._blob)}

    @cached_property
    def phones(self) -> set[str]:
        return {_digits(m)[-9:] for m in _PHONE.findall(self._blob) if _phone(m)}

    def url(self, url: str) -> bool:
        key = _url_key(url)
        return bool(key) and any(known.startswith(key) for known in self.urls)

    def email(self, address: str) -> bool:
        return address.lower() in self.emails

    def phone(self, number: str) -> bool:
        return _digits(number)[-9:] in self.phones


def scrub(text: str, allowed: Allowed, removed: str) -> tuple[str, int]:
    """`text` with every address the sources do not hold replaced by `removed`, and how many there were."""
    count = 0

    def check(ok: bool, match: re.Match[str]) -> str:
        nonlocal count
        if ok:
            return match.group(0)
        count += 1
        found = match.group(0)
        tail = len(found) - len(found.rstrip(_TRAILING))  # sentence punctuation after an address stays
        return removed + (found[len(found) - tail:] if tail else "")

    if not _MAYBE.search(text):  # nothing an address (or a passage mark) could start with: the common case
        return text, 0
    text = _MARK.sub("", text)
    text = _UNSAFE_LINK.sub(lambda m: check(False, m), text)
    text = _EMAIL.sub(lambda m: check(allowed.email(m.group(0)), m), text)
    text = _URL_WITH_SCHEME.sub(lambda m: check(allowed.url(m.group(0)), m), text)
    text = _BARE_DOMAIN.sub(lambda m: check(allowed.url(m.group(0)), m), text)
    text = _PHONE.sub(lambda m: check(not _phone(m.group(0)) or allowed.phone(m.group(0)), m), text)
    return text, count


_PHONE_CHARS = frozenset("0123456789 ()./-")  # what follows a phone number's first digit (`_PHONE_TAIL`)


def _not_phone(char: str) -> bool:
    return char not in _PHONE_CHARS


def _run_start(text: str, end: int, stops: Callable[[str], bool]) -> int:
    """The start of the run of characters before `end` (or before a newline just there, as `$` reads it) none of
    which `stops`: no match of `_LAST_WORD` or `_PHONE_TAIL` ending at `end` starts earlier (but for a `+` just
    before it), so they are searched from there, not from the start of a text that may be a whole answer."""
    if text[end - 1:end] == "\n":
        end -= 1
    start = end
    while start and not stops(text[start - 1]):
        start -= 1
    return start


class ContactFilter:
    """The streaming form of `scrub`: the word being written (and a run of digits before it, a phone number
    with spaces) waits for the next delta; `removed` counts what was taken out."""

    def __init__(self, allowed: Allowed, marker: str) -> None:
        self.allowed, self.marker = allowed, marker
        self.removed = 0
        self._pending = ""

    def feed(self, delta: str) -> str:
        text = self._pending + delta
        cut = _LAST_WORD.search(text, _run_start(text, len(text), str.isspace)).start()  # type: ignore[union-attr]
        if tail := _PHONE_TAIL.search(text, max(_run_start(text, cut, _not_phone) - 1, 0), cut):
            cut = tail.start()
        if len(text) - cut > MAX_HELD:
            cut = len(text)
        ready, self._pending = text[:cut], text[cut:]
        return self._clean(ready)

    def flush(self) -> str:
        rest, self._pending = self._pending, ""
        return self._clean(rest)

    def _clean(self, text: str) -> str:
        if not text:
            return text
        text, n = scrub(text, self.allowed, self.marker)
        self.removed += n
        return text
