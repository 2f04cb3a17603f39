"""OpenAI `url_citation` annotations: which words of the answer each `[n]` marker vouches for.

A marker cites the sentence (or clause) before it: from the end of the previous marker on the same line, or the
sentence's start, or the line's start after list and heading markup, to the marker itself (its spacing left out).
Several markers in a row ("[1][2]") cite the same words. Spans index the message's `content` as the client
assembles it, in Unicode code points (Python `str`), `end_index` exclusive: `content[start:end]` is the cited
text. Sentences the support check withdrew, and the correction a stream appends for them, carry none.

Clients key a cited source by its `url` (Open WebUI makes one source of every citation with one url and resolves
`[n]` to the n-th of them), so each source's link is its own: two sources at one address (two summaries pointing at
one law, two passages of one web page) are told apart by a text fragment of their own words, and a source with no
address gets its document's name (`urn:neo:<collection>/<document>`) instead of an empty string.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from urllib.parse import quote, urlsplit

from graph.answer.events import SourceFound
from textkit.sentences import BOUNDARY

_RUN = re.compile(r"\[\d+\](?:\[\d+\])*")  # markers as the citation filter leaves them: [1], [1][3]
_NUMBER = re.compile(r"\d+")
_LEAD = re.compile(r"[ \t]*(?:[-*•>]+[ \t]+|#+[ \t]+|\d+[.)][ \t]+)?")  # a list item's or heading's markup
_OPENING = " \t,;:.!?)"  # what separates a clause from the marker before it
_STOP = re.compile(r"[.!?]\s")  # where a sentence may end: the full rule is tried only there


@dataclass(frozen=True, slots=True)
class Span:
    start: int
    end: int  # exclusive
    numbers: tuple[int, ...]  # the markers citing it, in order


def cited_spans(text: str, withdrawn: Iterable[str] = (), skip: Iterable[tuple[int, int]] = ()) -> list[Span]:
    """Every marker run of `text` with the words it cites. `withdrawn`: sentences whose words carry no citation;
    `skip`: (start, end) regions of `text` whose markers count for nothing (a stream's correction)."""
    withdrawn = [w for w in withdrawn if w]
    skip = list(skip)
    out: list[Span] = []
    line_start = 0
    for line in text.split("\n"):
        floor = last = line_start + _LEAD.match(line).end()
        on_line = False  # whether out[-1] is a span of this line
        for run in _RUN.finditer(line):
            at, numbers = line_start + run.start(), _numbers(run.group())
            segment = text[last:at]
            cut = _last_boundary(segment)  # the sentence the marker closes
            lead = cut + len(segment[cut:]) - len(segment[cut:].lstrip(_OPENING))
            words = segment[lead:].rstrip()
            if words:
                out.append(Span(last + lead, last + lead + len(words), numbers))
                on_line = True
            elif on_line:  # "[1] [2]": the next marker of the same words
                out[-1] = Span(out[-1].start, out[-1].end, out[-1].numbers + numbers)
            last = max(floor, line_start + run.end())
        line_start += len(line) + 1
    return [s for s in out if not _excluded(s, text, withdrawn, skip)]


def _last_boundary(segment: str) -> int:
    """Where the last sentence of `segment` starts (`sentences.split`'s rule, tried from the end)."""
    for stop in reversed([m.end() - 1 for m in _STOP.finditer(segment)]):
        if match := BOUNDARY.match(segment, stop):
            return match.end()
    return 0


def _numbers(run: str) -> tuple[int, ...]:
    return tuple(int(n) for n in _NUMBER.findall(run))


def _excluded(span: Span, text: str, withdrawn: list[str], skip: list[tuple[int, int]]) -> bool:
    if any(a <= span.start < b for a, b in skip):
        return True
    words = text[span.start:span.end]
    return any(words in sentence for sentence in withdrawn)


def deep_link(url: str, page: int | None) -> str:
    """A source's address with its page for a paged document (`#page=N`, which PDF viewers open at), when the
    address names no place of its own."""
    if url and page is not None and not urlsplit(url).fragment:
        return f"{url}#page={page}"
    return url


def text_fragment(url: str, text: str, words: int = 8) -> str:
    """`url` with a text fragment (`#:~:text=`) of the first `words` words of `text`: browsers scroll to those words
    and mark them, and ignore the fragment where the page does not hold them."""
    start = " ".join(re.sub(r"[*_`#>\[\]]", " ", text).split()[:words])
    if not url or not start:
        return url
    return f"{url}{':~:' if '#' in url else '#:~:'}text={quote(start, safe='').replace('-', '%2D')}"


def source_links(sources: Iterable[SourceFound]) -> dict[int, str]:
    """Each source's link in its annotations, by number, no two alike (see the module's docstring)."""
    sources = list(sources)
    links = {s.number: deep_link(s.url, s.page) or f"urn:neo:{s.evidence_id.partition('#')[0]}" for s in sources}
    shared = Counter(links.values())
    for s in sources:
        link = links[s.number]
        if shared[link] > 1:
            links[s.number] = text_fragment(link, s.snippet or s.title) if s.url else f"urn:neo:{s.evidence_id}"
    # sources alike to the word (one passage twice): the later ones get their number, a parameter of the
    # fragment that browsers and PDF viewers ignore
    seen: set[str] = set()
    for s in sources:
        link = links[s.number]
        if link in seen:
            links[s.number] = link = f"{link}{'&' if '#' in link else '#'}bron={s.number}"
        seen.add(link)
    return links


def display_title(source: SourceFound) -> str:
    return f"{source.title}, {source.pages}" if source.pages else source.title


def url_citations(text: str, sources: list[SourceFound], offset: int = 0, withdrawn: Iterable[str] = (),
                  skip: Iterable[tuple[int, int]] = ()) -> list[dict]:
    """One `url_citation` per marker of `text` that names a cited source, its span moved by `offset` (what the
    message's content holds before `text`: a stream's think block)."""
    by_number = {s.number: s for s in sources}
    links = source_links(sources)
    out = []
    for span in cited_spans(text, withdrawn, skip):
        for n in span.numbers:
            source = by_number.get(n)
            if source is None:
                continue
            out.append({"type": "url_citation", "url_citation": {
                "url": links[n], "title": display_title(source),
                "start_index": span.start + offset, "end_index": span.end + offset}})
    return out
