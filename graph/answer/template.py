"""The template answer: the key facts as a cited list, written by the service without a model (offline mode, an
upstream that failed or wrote nothing the reader keeps, an answer whose every claim the support check withdrew)."""

from __future__ import annotations

from collections.abc import Callable

from graph.answer import messages
from graph.answer.ledger import Ledger, answer_order
from graph.models import Fact, Language
from textkit.untrusted import markdown_text


def template_answer(
    facts: list[Fact],
    ledger: Ledger,
    language: Language,
    display: Callable[[str], str],
    banner: str,
    documents: list[dict] | None = None,
) -> str:
    """A cited answer built from facts (each sentence once): grouped per collection when more than one
    collection contributes, in the order that numbered the ledger (`answer_order`), so `[n]` rise as they
    are first cited. The passages' words and the documents' titles are written as text (`markdown_text`): what a
    document holds never becomes a link, an image or a tag in the answer."""
    groups: dict[str, list[str]] = {}
    written: set[str] = set()
    for fact in answer_order(facts, ledger.collection_of()):
        cites, entry = ledger.marks(fact), next(filter(None, map(ledger.entry, fact.evidence_ids)), None)
        if cites and entry and fact.text not in written:
            written.add(fact.text)
            groups.setdefault(entry.collection, []).append(f"- {markdown_text(fact.text)} {cites}")
    parts = [banner]
    if documents:
        parts += ["", messages.line("documents_intro", language)]
        for doc in documents:
            year = f" ({doc['year']})" if doc.get("year") else ""
            parts.append(f"- {markdown_text(display(doc['collection']))}: {markdown_text(doc['title'])}{year}")
    parts += ["", messages.line("intro", language)]
    if len(groups) == 1:
        parts += next(iter(groups.values()))
    else:
        for collection, lines in groups.items():
            parts += ["", f"**{display(collection)}**", *lines]
    return "\n".join(parts)
