"""HotpotQA (dev, distractor setting) as a pooled corpus that the pipeline has to search itself.

The questions live outside the repository (`$NEO_SHARED_DIR/eval/hotpotqa/dev_distractor_1000.jsonl`, default
`../shared`; CC BY-SA 4.0, never copied into the project). For a chosen set of questions, every paragraph of
their contexts (2 gold articles and 8 distractors each) becomes one document titled by its Wikipedia article,
and the documents are spread over `SHARDS` collections by a stable hash of the title, so that routing has
several collections to choose from and no collection gives the answer away.

The paragraphs are written as corpus-style Markdown, ingested (`docserver.ingest`) into a temporary SQLite index
and served by the embedded reference server. The server always adds the documents of its corpus directory, by
default the bundled nuclear-safety summaries; those would show up in `list_documents` (the explore step) under
collections the catalog does not know, so the server gets an empty corpus directory of its own whose
`collections.json` names the pooled collections with the catalog's display names.

    with tempfile.TemporaryDirectory() as tmp:
        pooled = build_corpus(select_questions(load_questions(), 30), Path(tmp))
        server = await pooled.serve()
        ...  # Context(catalog=pooled.catalog, docs=DocumentClient(server.url, ...), ...)
        await server.stop()
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import string
from collections import Counter, defaultdict
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from app.settings import ROOT
from docserver.embedded import EmbeddedServer, serve_in_background
from docserver.embeddings import EmbeddingSettings
from docserver.ingest import ingest, slug
from graph.collections import Catalog, load_catalog

SHARED_DIR = Path(os.environ.get("NEO_SHARED_DIR", ROOT.parent / "shared"))
HOTPOT_FILE = SHARED_DIR / "eval" / "hotpotqa" / "dev_distractor_1000.jsonl"
SHARDS = 4
T = TypeVar("T")


def load_questions(path: Path = HOTPOT_FILE) -> list[dict[str, Any]]:
    """The questions in file order (`id`, `question`, `answer`, `type`, `supporting_facts`, `context`)."""
    return [json.loads(line) for line in path.read_text("utf-8").splitlines() if line.strip()]


def stratified(items: Sequence[T], key: Callable[[T], Hashable], n: int) -> list[T]:
    """A deterministic sample of `n` items, stratified by `key`.

    Each stratum gets its proportional share (largest remainder; at least one item when `n` allows one per
    stratum), taken evenly spaced through the stratum in input order. The result interleaves the strata round by
    round, largest stratum first, so that any prefix of it (`--limit`) is itself spread over the strata."""
    strata: dict[Hashable, list[T]] = defaultdict(list)
    for item in items:
        strata[key(item)].append(item)
    order = sorted(strata, key=lambda k: (-len(strata[k]), str(k)))
    n = min(n, len(items))
    if n <= 0:
        return []
    exact = {k: n * len(strata[k]) / len(items) for k in order}
    floor = 1 if n >= len(order) else 0
    quota = {k: min(len(strata[k]), max(floor, int(exact[k]))) for k in order}
    for k in sorted(order, key=lambda k: (int(exact[k]) - exact[k], order.index(k))):
        if sum(quota.values()) >= n:
            break
        quota[k] += quota[k] < len(strata[k])
    while sum(quota.values()) > n:
        quota[max(order, key=lambda k: quota[k])] -= 1
    picks = {k: [strata[k][i * len(strata[k]) // quota[k]] for i in range(quota[k])] for k in order}
    return [picks[k][r] for r in range(max(quota.values())) for k in order if r < len(picks[k])]


def split_halves(items: Sequence[T], key: Callable[[T], Hashable]) -> tuple[list[T], list[T]]:
    """A deterministic (tuning, test) split: within each stratum of `key`, in input order, items alternate
    between the tuning half (1st, 3rd, ...) and the test half (2nd, 4th, ...); each half keeps input order."""
    seen: Counter[Hashable] = Counter()
    tune: list[T] = []
    test: list[T] = []
    for item in items:
        (tune if seen[key(item)] % 2 == 0 else test).append(item)
        seen[key(item)] += 1
    return tune, test


def select_questions(questions: Sequence[dict[str, Any]], n: int) -> list[dict[str, Any]]:
    """`n` questions stratified by HotpotQA type (`bridge`, `comparison`)."""
    return stratified(questions, lambda q: q["type"], n)


def gold_titles(question: dict[str, Any]) -> list[str]:
    """The supporting (gold) articles of a question."""
    return list(dict.fromkeys(title for title, _ in question["supporting_facts"]))


def gold_paragraphs(question: dict[str, Any]) -> dict[str, str]:
    """Title -> text of the question's gold paragraphs, from its own context and written as `paragraphs` pools
    them (in this file both are always there)."""
    gold = set(gold_titles(question))
    return {title: text for title, text in paragraphs([question]).items() if title in gold}


def normalize_answer(text: str) -> str:
    """HotpotQA's answer normalisation (`hotpot_evaluate_v1.py`): lower case, no punctuation, no articles."""
    text = "".join(ch for ch in text.lower() if ch not in set(string.punctuation))
    return " ".join(re.sub(r"\b(a|an|the)\b", " ", text).split())


def exact_match(prediction: str, answer: str) -> float:
    """`exact_match_score` of `hotpot_evaluate_v1.py`: the normalised strings are equal (1.0 or 0.0)."""
    return float(normalize_answer(prediction) == normalize_answer(answer))


def f1_score(prediction: str, answer: str) -> float:
    """Token F1 of `hotpot_evaluate_v1.py` over the normalised strings; a yes/no/noanswer on either side scores
    0 unless both sides are equal."""
    predicted, wanted = normalize_answer(prediction), normalize_answer(answer)
    if predicted != wanted and ({predicted, wanted} & {"yes", "no", "noanswer"}):
        return 0.0
    common = sum((Counter(predicted.split()) & Counter(wanted.split())).values())
    if not common:
        return 0.0
    precision, recall = common / len(predicted.split()), common / len(wanted.split())
    return 2 * precision * recall / (precision + recall)


def answer_found(answer: str, text: str) -> bool:
    """The normalised gold answer occurs in the normalised text as whole words."""
    wanted = normalize_answer(answer)
    return bool(wanted) and f" {wanted} " in f" {normalize_answer(text)} "


def unasked(question: str, answer: str) -> bool:
    """The answer is neither yes/no nor words of the question. "Who is older, A or B?" is answered "A": any text
    naming A contains that answer, so "answer present" says little there (nor for yes/no)."""
    return normalize_answer(answer) not in ("yes", "no") and not answer_found(answer, question)


def collection_of(title: str) -> str:
    """The pooled collection of an article: a stable hash of its title (`wiki_1` ... `wiki_4`)."""
    return f"wiki_{int(hashlib.sha1(title.encode()).hexdigest(), 16) % SHARDS + 1}"


def doc_id_of(title: str) -> str:
    """A readable, collision-free doc id (titles that slug alike differ in the hash)."""
    return f"{slug(title)[:60]}-{hashlib.sha1(title.encode()).hexdigest()[:8]}"


def paragraphs(questions: Sequence[dict[str, Any]]) -> dict[str, str]:
    """Every context paragraph of the questions, once per article title (the same title has the same text)."""
    pooled: dict[str, str] = {}
    for question in questions:
        for title, sentences in question["context"]:
            pooled.setdefault(title, "".join(sentences).strip())
    return pooled


def collections_config() -> dict[str, Any]:
    """The catalog of the pooled collections (the `COLLECTIONS_FILE` object form)."""
    return {
        "topic": {"nl": "Wikipedia (HotpotQA)", "en": "Wikipedia (HotpotQA)"},
        "collections": [
            {"name": f"wiki_{i}", "display_name": f"Wikipedia {i}/{SHARDS}",
             "focus": f"English Wikipedia article openings on any subject (part {i} of {SHARDS}, split by title)",
             "keywords": [], "high_stakes": False}
            for i in range(1, SHARDS + 1)
        ],
    }


@dataclass(frozen=True)
class PooledCorpus:
    """The ingested corpus: the index, the server's corpus directory, the catalog and where each title went."""

    index_path: Path
    corpus_dir: Path
    collections_file: Path
    catalog: Catalog
    titles: dict[str, str]  # title -> collection

    async def serve(self, embeddings: EmbeddingSettings | None = None) -> EmbeddedServer:
        """A reference server with only the pooled documents (with ``embeddings``: searched by meaning too)."""
        return await serve_in_background(corpus_dir=self.corpus_dir, index_path=self.index_path, embeddings=embeddings)


def build_corpus(questions: Sequence[dict[str, Any]], root: Path) -> PooledCorpus:
    """Write, ingest and describe the pooled corpus of `questions` under `root` (a temporary folder)."""
    config = collections_config()
    pooled = paragraphs(questions)
    titles = {title: collection_of(title) for title in pooled}
    for title, text in pooled.items():
        folder = root / "documents" / titles[title]
        folder.mkdir(parents=True, exist_ok=True)
        url = "https://en.wikipedia.org/wiki/" + title.replace(" ", "_")
        front = f"---\ndoc_id: {doc_id_of(title)}\ntitle: {json.dumps(title)}\nurl: {url}\nlanguage: en\n---\n"
        # a paragraph opening with ">" or "#" would parse as a disclaimer or heading
        (folder / f"{doc_id_of(title)}.md").write_text(f"{front}\n# {title}\n\n{text.lstrip('>#')}\n", "utf-8")
    index_path = root / "index.sqlite3"
    for collection in sorted(set(titles.values())):
        ingest([root / "documents" / collection], collection, index_path=index_path)
    corpus_dir = root / "server-corpus"
    corpus_dir.mkdir(exist_ok=True)
    (corpus_dir / "collections.json").write_text(json.dumps(config["collections"], indent=1), "utf-8")
    collections_file = root / "collections.json"
    collections_file.write_text(json.dumps(config, indent=1), "utf-8")
    return PooledCorpus(index_path, corpus_dir, collections_file, load_catalog(collections_file), titles)
