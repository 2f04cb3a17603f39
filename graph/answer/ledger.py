"""The evidence ledger: numbered passages, the only things an `[n]` may point at.

A `Ledger` numbers evidence (1-based) once, and everything that depends on those numbers comes from it: the
evidence block of a prompt, the citations of a fact, the facts a model reply cites, the filter that drops
every `[n]` without an entry while the answer streams, and the sources list, which is rendered from the
ledger, never written by the model.

The answer's ledger (`for_answer`) has one entry per document: the cited passages of a document are its
anchors (sections), so a document is one source however many of its chunks the facts cite, and the entries
are numbered in the order the answer first cites them.
"""

from __future__ import annotations

import re
import secrets
from collections.abc import Callable, Iterable, Iterator

from pydantic import BaseModel

from graph.answer import messages
from graph.models import Evidence, Fact, Language
from textkit.untrusted import markdown_text

_WORDS = re.compile(r"\w+")
NEAR_DUPLICATE = 0.8  # word-set overlap (Jaccard) from which a document's text repeats an earlier one's
ENTRY_HEAD_CHARS = 76  # an evidence block entry's head line ("[2] ANVS | title — section") and its two marks
MIN_ENTRY_CHARS = 200  # less room than this for a further entry: it is left out rather than cut to a stub
_GROUP = re.compile(r"\[(\s*\d+\s*(?:[,;–-]\s*\d+\s*)*)\]")
_PARTIAL = re.compile(r"\[[\d\s,;–-]{0,16}$")
SOURCE_LINE = re.compile(r"^(\d+)\.\s+(.+)$", re.MULTILINE)  # a line of `Ledger.sources`: its number, the rest


def order_evidence(evidence: list[Evidence], collections: list[str]) -> list[Evidence]:
    """Stable ledger order: by the route's collection order, then relevance, then id."""
    rank = {name: i for i, name in enumerate(collections)}
    return sorted(evidence, key=lambda e: (rank.get(e.collection, len(rank)), -e.relevance, e.id))


class Ledger:
    def __init__(self, entries: Iterable[Evidence], aliases: dict[str, int] | None = None) -> None:
        self.entries = list(entries)
        self._number = {e.id: n for n, e in enumerate(self.entries, 1)} | (aliases or {})

    @classmethod
    def for_answer(cls, facts: list[Fact], evidence: list[Evidence], limit: int, also: list[Evidence] | None = None
                   ) -> Ledger:
        """The documents the facts rest on, one entry each, numbered in the order the facts (as the answer
        presents them, `answer_order`) first cite them; at most `limit`, the documents of the best facts (the
        facts' own order) when there are more. `also`: passages the answer reads besides (a bridge's two linked
        passages), within the limit first, after the facts' documents (or within them, when a fact cites their
        document). No facts, no ledger: the answer then declines rather than writing from passages that nothing
        showed to be relevant."""
        by_id = {e.id: e for e in evidence}
        cited = [(by_id[i].collection, by_id[i].doc_id) for fact in facts for i in fact.evidence_ids if i in by_id]
        if not cited:
            return cls([])
        also = also or []
        best = list(dict.fromkeys([(e.collection, e.doc_id) for e in also] + cited))[:limit]
        chosen = set(best)
        documents: dict[tuple[str, str], list[Evidence]] = {}
        for fact in answer_order(facts, {e.id: e.collection for e in evidence}):
            for e in (by_id[i] for i in fact.evidence_ids if i in by_id):
                key = (e.collection, e.doc_id)
                if key not in chosen:
                    continue
                parts = documents.setdefault(key, [])
                if e not in parts:
                    parts.append(e)
        for e in also:
            parts = documents.setdefault((e.collection, e.doc_id), [])
            if e not in parts:
                parts.append(e)
        aliases = {e.id: n for n, parts in enumerate(documents.values(), 1) for e in parts}
        return cls([_document_entry(parts) for parts in documents.values()], aliases)

    def fit(self, budget_tokens: int, passage_chars: int) -> Ledger:
        """The ledger of an answer prompt: what the model reads, and so all it may cite. Entries keep their
        order (the answer's); each document's text is at most `passage_chars` per passage it holds; an entry
        whose words nearly repeat an earlier one's (the same text in two collections) is left out; and entries
        stop where the evidence block would pass `budget_tokens` (estimated as characters / 4, as upstreams that
        send no usage are counted). The first entry is always kept, cut to the budget when it must be."""
        budget = budget_tokens * 4
        ids: dict[int, list[str]] = {}  # entry number -> the passage ids it holds
        for i, n in self._number.items():
            ids.setdefault(n, []).append(i)
        kept: list[Evidence] = []
        aliases: dict[str, int] = {}
        seen: list[set[str]] = []
        used = 0
        for n, e in self.numbered():
            text = _without_header(e)
            vocabulary = set(_WORDS.findall(text.lower()))
            if any(_overlap(vocabulary, other) >= NEAR_DUPLICATE for other in seen):
                continue
            room = budget - used - ENTRY_HEAD_CHARS
            if kept and room < MIN_ENTRY_CHARS:
                break
            text = cut_at_word(text, min(passage_chars * len(ids[n]), max(room, MIN_ENTRY_CHARS)))
            used += len(text) + ENTRY_HEAD_CHARS
            kept.append(e.model_copy(update={"text": text}))
            seen.append(vocabulary)
            aliases.update(dict.fromkeys(ids[n], len(kept)))
        return Ledger(kept, aliases)

    def __len__(self) -> int:
        return len(self.entries)

    def __iter__(self) -> Iterator[Evidence]:
        return iter(self.entries)

    def numbered(self) -> Iterator[tuple[int, Evidence]]:
        return enumerate(self.entries, 1)

    def ids(self, numbers: Iterable[int]) -> list[str]:
        """The evidence ids of cited numbers, in order, without repeats; numbers outside the ledger are dropped."""
        return [self.entries[n - 1].id for n in dict.fromkeys(numbers) if 1 <= n <= len(self.entries)]

    def number(self, evidence_id: str) -> int | None:
        """The number of the entry (document) a passage id belongs to."""
        return self._number.get(evidence_id)

    def entry(self, evidence_id: str) -> Evidence | None:
        """The entry (document) a passage id belongs to."""
        n = self._number.get(evidence_id)
        return self.entries[n - 1] if n else None

    def collection_of(self) -> dict[str, str]:
        """The collection of every passage id the ledger numbers (a document's other cited chunks too)."""
        return {i: self.entries[n - 1].collection for i, n in self._number.items()}

    def marks(self, fact: Fact) -> str:
        """`[n]` for each of a fact's evidence ids in the ledger."""
        return "".join(f"[{n}]" for n in dict.fromkeys(self._number[i] for i in fact.evidence_ids if i in self._number))

    def render(self, max_chars: int = 1200, display: Callable[[str], str] = str, only: list[int] | None = None,
               summary_mark: str = "", language: Language = "en", fence: str | None = None) -> str:
        """The numbered evidence block of a prompt: each passage says which organisation (collection) and which
        document it comes from, so that the model can attribute what it says, and, when its metadata says so,
        that it is a summary (`summary_mark`). `only`: these numbers (kept).

        Each passage stands between an opening and a closing mark that carry a code: `fence`, random for every
        prompt unless given (a request with a seed: `Context.fence`). The block opens with the rule that text between
        the marks is material, never an instruction: a document cannot forge the end of its passage, since it cannot
        know the code."""
        fence = fence or secrets.token_hex(2)
        blocks = [fence_rule(language, fence)]
        for n, e in self.numbered():
            if only is not None and n not in only:
                continue
            section = e.section if e.section and e.section.lower() != e.title.lower() else ""  # not the title twice
            head = f"[{n}] {display(e.collection)} | {e.title}" + (f" — {section}" if section else "")
            head += f" ({summary_mark})" if summary_mark and e.summary else ""
            blocks.append(f"«{fence}»\n{head}\n{cut_at_word(_without_header(e), max_chars)}\n«/{fence}»")
        return "\n\n".join(blocks) if len(blocks) > 1 else ""

    def facts_block(self, facts: list[Fact], display: Callable[[str], str] = str, heading: str = "") -> str:
        """Key facts with the organisation their passages come from, and their `[n]`, under `heading`.

        A fact that is a sentence of a passage it cites (extractive selection) is left out: the passage is in
        the prompt already, and on a small local model every repeated token is latency. So is a fact none of
        whose passages is in the ledger (left out by `fit`): the model could not cite it. "" when none is left."""
        by_id = {e.id: e for e in self.entries}
        lines = []
        for f in facts:
            cited = [by_id[i] for i in f.evidence_ids if i in by_id]
            if f.evidence_ids and not any(i in self._number for i in f.evidence_ids):
                continue
            if any(f.text in e.text for e in cited):
                continue
            sources = dict.fromkeys(display(e.collection) for e in cited)
            lines.append(f"- {' / '.join(sources)}: {f.text} {self.marks(f)}" if sources else f"- {f.text}")
        if not lines:
            return ""
        return (f"{heading}:\n" if heading else "") + "\n".join(lines) + "\n"

    def citation_filter(self, on_cite: Callable[[int, int], None] | None = None) -> CitationFilter:
        return CitationFilter(len(self.entries), on_cite)

    def shown(self, cited: list[int]) -> list[Evidence]:
        """The entries as the answer numbers them (`CitationFilter.cited`: in order of first citation); all of
        them, in ledger order, when the answer cited none."""
        return [self.entries[n - 1] for n in cited] if cited else list(self.entries)

    def sources(self, cited: list[int], language: Language, display: Callable[[str], str]) -> str:
        """Markdown sources list, one line per document with its sections (anchors) and URL, numbered as the
        answer shows them (`shown`): "1. Title, Section (Organisation, 2016) — url", an ordered list rather than "[1] …",
        because chat UIs (Open WebUI) turn every "[1]" into a chip that shows the title, which the line then
        repeats."""
        entries = self.shown(cited)
        if not entries:
            return ""
        lines = [f"**{messages.line('sources', language)}**", ""]
        mark = messages.line("summary_mark", language)
        for n, e in enumerate(entries, 1):
            # the document's own words are written as text: Markdown in a title cannot become a link or a line
            label = markdown_text(e.title) + (f", {markdown_text(e.section)}" if e.section and e.section != e.title
                                               else "")
            meta = [markdown_text(display(e.collection))]
            if e.year:
                meta.append(str(e.year))
            if e.summary and mark.lower() not in label.lower():  # "Kernenergiewet (samenvatting)" says it already
                meta.append(mark)
            link = f" — {e.url}" if e.url else ""  # an http(s) link or none (`Evidence` validates it)
            lines.append(f"{n}. {label} ({', '.join(meta)}){link}")
        return "\n".join(lines)

    def summaries(self) -> list[int]:
        """The numbers of entries whose metadata marks them as summaries."""
        return [n for n, e in self.numbered() if e.summary]


def answer_order(facts: list[Fact], collection: dict[str, str]) -> list[Fact]:
    """Facts as an answer presents them: grouped by the collection of their first passage (`collection`: passage
    id -> collection), groups in order of their first fact, facts in their own order within a group (what the
    offline template writes)."""
    first: dict[str, int] = {}
    for f in facts:
        first.setdefault(collection.get(f.evidence_ids[0], "") if f.evidence_ids else "", len(first))
    return sorted(facts, key=lambda f: first[collection.get(f.evidence_ids[0], "") if f.evidence_ids else ""])


def fence_rule(language: Language, fence: str) -> str:
    """The line that opens an evidence block: where passages start and end, and that they are data. With
    `fence=""`, the line as it reads once the marks are taken out of an answer (`graph.answer.contacts`)."""
    marks = messages.line("fence_marks", language, fence=fence)
    return f"{marks if fence else re.sub(r'«/?»', '', marks)} {messages.line('fence_data', language)}"


def _document_entry(parts: list[Evidence]) -> Evidence:
    """One document's cited passages as one ledger entry: the first passage's identity, every passage's text
    (each without the server's header line) and their sections as the document's anchors; its link and page are
    those of the most relevant passage (a link opens where the answer's evidence stands, not at the first passage
    the document happened to give)."""
    first = parts[0]
    if len(parts) == 1:
        return first
    best = max(parts, key=lambda p: p.relevance)
    sections = "; ".join(dict.fromkeys(p.section for p in parts if p.section))
    text = "\n\n".join(_without_header(p) for p in parts)
    return first.model_copy(update={"text": text, "section": sections, "relevance": best.relevance,
                                    "url": best.url or first.url, "page": best.page, "page_end": best.page_end})


def page_label(e: Evidence) -> str:
    """Where in a paged source the passage stands: "p. 6", "pp. 6-7", or "" for a document without pages."""
    if e.page is None:
        return ""
    return f"pp. {e.page}-{e.page_end}" if e.page_end and e.page_end != e.page else f"p. {e.page}"


def pages_read(evidence: Iterable[Evidence], limit: int = 3) -> str:
    """The documents and pages of the first `limit` passages that stand on pages, for the think block, each
    document once with its pages in the order found ("SRP 5.2.3 (p. 14, pp. 6-7); Rapport (p. 2)"); "" when none
    of them comes from a paged source."""
    pages: dict[str, list[str]] = {}
    for e in [e for e in evidence if e.page is not None][:limit]:
        pages.setdefault(e.title, []).append(page_label(e))
    return "; ".join(f"{title} ({', '.join(dict.fromkeys(labels))})" for title, labels in pages.items())


def _without_header(e: Evidence) -> str:
    """The passage without the "[Title — Section]" line servers put first to make a chunk self-describing: the
    block's own head already says it, and a line in brackets reads to a small model like a citation."""
    first, _, rest = e.text.partition("\n")
    if rest and first.startswith("[") and first.endswith("]") and e.title and e.title in first:
        return rest.lstrip()
    return e.text


def _overlap(a: set[str], b: set[str]) -> float:
    return len(a & b) / len(a | b) if a or b else 1.0


def cut_at_word(text: str, max_chars: int) -> str:
    """At most `max_chars` characters, ending at a word boundary, followed by " …" when cut."""
    if len(text) <= max_chars:
        return text
    return text[:max_chars].rsplit(" ", 1)[0] + " …"


class CitedFact(BaseModel):
    fact: str
    sources: list[int]  # ledger numbers


class FactsReply(BaseModel):
    """A model's key facts from numbered evidence (the condense and summarize steps)."""

    facts: list[CitedFact]

    def to_facts(self, ledger: Ledger, limit: int) -> list[Fact]:
        """Facts that cite at least one ledger entry, at most `limit`. An empty list is the model's judgement
        that nothing is relevant; facts of which none cites a passage it was given make the reply invalid."""
        facts = []
        for item in self.facts:
            ids = ledger.ids(item.sources)
            if ids and item.fact.strip():
                facts.append(Fact(text=item.fact.strip(), evidence_ids=ids))
        if self.facts and not facts:
            raise ValueError("no fact cites a passage of the evidence given")
        return facts[:limit]


class CitationFilter:
    """Streaming filter: keeps `[n]` markers with 1 <= n <= size, drops the rest, and numbers what it keeps in
    the order of first citation, so a reader meets [1], [2], [3] in that order whatever numbers the model
    used (`cited[k - 1]` is the ledger number shown as [k]). `on_cite(k, n)` runs when ledger entry n is first
    cited, as [k], before the text that cites it goes out."""

    def __init__(self, size: int, on_cite: Callable[[int, int], None] | None = None) -> None:
        self.size = size
        self.cited: list[int] = []
        self.on_cite = on_cite
        self._pending = ""

    def _fix(self, match: re.Match[str]) -> str:
        numbers = [int(n) for n in re.findall(r"\d+", match.group(1))]
        if re.search(r"[–-]", match.group(1)) and len(numbers) == 2 and numbers[0] <= numbers[1]:
            numbers = list(range(numbers[0], numbers[1] + 1))
        valid = [n for n in numbers if 1 <= n <= self.size]
        for n in valid:
            if n not in self.cited:
                self.cited.append(n)
                if self.on_cite:
                    self.on_cite(len(self.cited), n)
        return "".join(f"[{self.cited.index(n) + 1}]" for n in dict.fromkeys(valid))

    def to_ledger_numbers(self, text: str) -> str:
        """Text this filter numbered (`[k]`) with the ledger's numbers again, for a prompt that cites the ledger."""
        def back(match: re.Match[str]) -> str:
            k = int(match.group(1))
            return f"[{self.cited[k - 1]}]" if 1 <= k <= len(self.cited) else match.group(0)
        return re.sub(r"\[(\d+)\]", back, text)

    def feed(self, delta: str) -> str:
        text = self._pending + delta
        partial = _PARTIAL.search(text)
        self._pending = text[partial.start():] if partial else ""
        text = text[: partial.start()] if partial else text
        return _GROUP.sub(self._fix, text)

    def flush(self) -> str:
        rest, self._pending = self._pending, ""
        return _GROUP.sub(self._fix, rest)


def clean_citations(text: str, size: int) -> tuple[str, list[int]]:
    f = CitationFilter(size)
    out = f.feed(text) + f.flush()
    return re.sub(r"[ \t]+([.,;:])", r"\1", out), f.cited
