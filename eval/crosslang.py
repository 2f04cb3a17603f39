"""Cross-language retrieval: Dutch questions over English documents and English questions over Dutch documents.

`eval/crosslang.jsonl` holds 40 questions, 20 each way, written the way a user would ask them (paraphrased, not
translated from the passage), each with the passage(s) that answer it. The yardstick is recall@5: the share of
questions with at least one gold passage among the first five hits of the collection searched. It compares BM25
alone, BM25 with the product's glossary expansion (`graph/nodes/plan.py: in_language`) and, once the document
server searches by meaning too, hybrid retrieval (`evaluate(..., embed=...)` passes the query's vector).

The documents are real files from `../shared/formats` (`$NEO_SHARED_DIR/formats`, never copied into the
repository), ingested by the product's own ingest into a temporary index: five English ones (three sections of the
US NRC Standard Review Plan NUREG-0800, a Federal Register airworthiness directive for the Boeing 737 MAX, the
English AI impact assessment template) as `xl_en`, and eight Dutch ones (the Wet op de zorgtoeslag and the
Participatiewet in BWB XML, the SZW Normenbrief 2026, Kamervragen on the Tozo, a motie on negative interest, a
Kamerbrief on surrogacy, the Dutch AI impact assessment template, a BNC-fiche on MiFIR) as `xl_nl`. Four English
questions go to the bundled Dutch collections `anvs` and `wetten_overheid`; those documents end in an "English
summary", so their gold is the Dutch section that answers, never that summary (a hit on the summary is a
same-language match, not what this set measures). Dutch questions over the bundled `iaea` and `security`
collections would not be cross-language: their documents are Dutch summaries of English publications.

The questions were written from the ingested chunks before any search was run and not changed after seeing a
ranking; a few share hardly a word with their passage (in either language). Gold pages are the pages the answering
text stands on (as the PDF reader places it); where two passages answer, both are gold.

A gold passage is `{"doc_id", "pages": [...]}` (a chunk whose page range overlaps them), `{"doc_id", "sections":
[...]}` (a chunk whose section names one of them, `hit_matches`) or `{"doc_id"}` (any chunk of the document).

    python -m eval.crosslang            # builds the index in a temporary folder, prints recall@5 and the top 5s

The hybrid column: `evaluate(index, questions, glossary=..., embed=embedder.query)` on an index whose passages
have vectors; each search then gets `query_vector=embed(query)`, the query being the one BM25 gets.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from app.settings import ROOT
from docserver.index import Index
from docserver.ingest import ingest
from graph.collections import Catalog, load_catalog
from graph.glossary import Glossary

SHARED_DIR = Path(os.environ.get("NEO_SHARED_DIR", ROOT.parent / "shared"))
FORMATS_DIR = SHARED_DIR / "formats"
SET_FILE = Path(__file__).with_name("crosslang.jsonl")
COLLECTIONS_FILE = ROOT / "graph" / "collections.json"  # the product's catalog, with the glossary
K = 5

# collection -> (language of its documents, the files of ../shared/formats it holds)
FILES: dict[str, tuple[str, tuple[str, ...]]] = {
    "xl_en": ("en", (
        "en-nureg0800-srp-5.2.3-rev3.pdf",
        "en-nureg0800-srp-5.2.5.pdf",
        "en-nureg0800-srp-5.4.11.pdf",
        "en-federal-register-2020-17221.pdf",
        "en-aiia-2.0-invultemplate.docx",
    )),
    "xl_nl": ("nl", (
        "nl-bwb-BWBR0018451-wet-op-de-zorgtoeslag-2025-01-01.xml",
        "nl-bwb-BWBR0015703-participatiewet-2026-01-01.xml",
        "nl-normenbrief-szw-2026.pdf",
        "nl-ah-tk-20202021-3235-kamervragen.pdf",
        "nl-kst-32545-143-motie.pdf",
        "nl-kamerbrief-draagmoederschap-2011.pdf",
        "nl-aiia-2.0-invultemplate.docx",
        "nl-bnc-fiche-5-mifir-mifid-2021.pdf",
    )),
}
DIRECTIONS = {"nl": "nl->en", "en": "en->nl"}  # question language -> direction

Embed = Callable[[str], Any]  # a query -> its vector (numpy array), e.g. `docserver.embeddings.Embedder.query`


class SharedFilesMissing(FileNotFoundError):
    """The real documents of `../shared/formats` are not on this machine (they never are in the repository)."""


def load_set(path: Path | str = SET_FILE) -> list[dict[str, Any]]:
    """The questions in file order: `id`, `question`, `language`, `collection`, `gold`, `answer`."""
    return [json.loads(line) for line in Path(path).read_text("utf-8").splitlines() if line.strip()]


def shared_files(formats_dir: Path = FORMATS_DIR) -> dict[str, list[Path]]:
    """Collection -> its files; `SharedFilesMissing` naming what is absent."""
    if not formats_dir.is_dir():
        raise SharedFilesMissing(f"{formats_dir} is absent: the cross-language documents (set NEO_SHARED_DIR)")
    files = {collection: [formats_dir / name for name in names] for collection, (_, names) in FILES.items()}
    missing = [path.name for paths in files.values() for path in paths if not path.is_file()]
    if missing:
        raise SharedFilesMissing(f"absent from {formats_dir}: {', '.join(missing)}")
    return files


def build_index(root: Path, *, formats_dir: Path = FORMATS_DIR) -> Path:
    """Ingest the shared files into `xl_en` and `xl_nl` of a new index under `root` (a temporary folder); returns
    the index path (`load_index` adds the bundled corpus). `SharedFilesMissing` without the files; `ValueError`
    (from `ingest`) naming any file the ingest refused."""
    files = shared_files(formats_dir)
    index_path = Path(root) / "crosslang.sqlite3"
    for collection, paths in files.items():
        ingest(paths, collection, index_path=index_path)
    return index_path


def load_index(index_path: Path, **options: Any) -> Index:
    """The bundled corpus plus what `build_index` ingested (`options` go to `Index.load`)."""
    return Index.load(None, index_path=index_path, **options)


def product_catalog(collections_file: Path = COLLECTIONS_FILE) -> Catalog:
    """The catalog the product uses by default (`Settings.collections_file`): collection languages and glossary."""
    return load_catalog(collections_file)


def collection_languages(catalog: Catalog) -> dict[str, str]:
    """Collection -> language of its documents: the catalog's, and this set's own collections."""
    languages = {c.name: c.language for c in catalog.collections if c.language}
    return languages | {collection: language for collection, (language, _) in FILES.items()}


def search_query(question: Mapping[str, Any], glossary: Glossary | None, languages: Mapping[str, str]) -> str:
    """The query the product sends for `question` (`graph.nodes.plan.in_language`): a collection whose documents
    are in another language than the question gets the glossary's wordings in that language."""
    text = question["question"]
    language = languages.get(question["collection"])
    if glossary is None or not language or language == question["language"]:
        return text
    return glossary.expand(text, language)


def _names(section: str, wanted: str) -> bool:
    """`wanted` occurs in `section` (case-insensitive) as a whole: "Artikel 4" names "Artikel 4", not "Artikel 4a"
    or "Artikel 44"."""
    pattern = r"(?<![0-9a-z])" + re.escape(wanted.lower()) + r"(?![0-9a-z])"
    return re.search(pattern, section.lower()) is not None


def chunk_matches(doc_id: str, chunk: Any, gold: Mapping[str, Any]) -> bool:
    """A chunk (`.page`, `.page_end`, `.section`) of document `doc_id` holds the gold passage."""
    if doc_id != gold["doc_id"]:
        return False
    if gold.get("pages"):
        if chunk.page is None:
            return False
        first, last = chunk.page, chunk.page_end or chunk.page
        if not any(first <= page <= last for page in gold["pages"]):
            return False
    if gold.get("sections"):
        return any(_names(chunk.section or "", wanted) for wanted in gold["sections"])
    return True


def hit_matches(hit: Any, gold: Mapping[str, Any]) -> bool:
    """The hit's document is the gold one and, where the gold names pages, its chunk's page range [page, page_end
    or page] overlaps them; where it names sections, its chunk's section names one of them."""
    return chunk_matches(hit.document.doc_id, hit.chunk, gold)


def first_match(hits: Sequence[Any], question: Mapping[str, Any]) -> int | None:
    """1-based rank of the first hit holding a gold passage of `question`, else None."""
    return next((rank for rank, hit in enumerate(hits, 1) if any(hit_matches(hit, g) for g in question["gold"])), None)


def recall_at(hits_per_question: Sequence[Sequence[Any]], questions: Sequence[Mapping[str, Any]], k: int = K) -> float:
    """Share of questions with at least one gold hit in their first `k` hits (0.0 for no questions)."""
    if not questions:
        return 0.0
    found = sum(first_match(hits[:k], q) is not None for hits, q in zip(hits_per_question, questions, strict=True))
    return found / len(questions)


def evaluate(
    index: Index,
    questions: Sequence[Mapping[str, Any]] | None = None,
    *,
    glossary: Glossary | None = None,
    embed: Embed | None = None,
    languages: Mapping[str, str] | None = None,
    k: int = K,
) -> dict[str, Any]:
    """Search every question in its collection: `index.search(query, collection, limit=k)`, the query expanded by
    `glossary` as the product does (None: the question as asked), and with `embed` the hybrid search,
    `query_vector=embed(query)`. Recall@k per direction, over all, and per collection; per question the query
    sent, the rank of the first gold hit and the top k."""
    questions = load_set() if questions is None else questions
    languages = collection_languages(product_catalog()) if languages is None else languages
    results, hits_per_question = [], []
    for question in questions:
        query = search_query(question, glossary, languages)
        extra = {"query_vector": embed(query)} if embed is not None else {}
        hits = index.search(query, question["collection"], limit=k, **extra)
        hits_per_question.append(hits)
        results.append({
            "id": question["id"], "direction": DIRECTIONS[question["language"]], "collection": question["collection"],
            "query": query, "rank": first_match(hits[:k], question),
            "top": [{"doc_id": h.document.doc_id, "page": h.chunk.page, "page_end": h.chunk.page_end,
                     "section": h.chunk.section} for h in hits[:k]],
        })

    def recall(keep: Callable[[Mapping[str, Any]], bool]) -> float:
        chosen = [i for i, q in enumerate(questions) if keep(q)]
        return recall_at([hits_per_question[i] for i in chosen], [questions[i] for i in chosen], k)

    by_direction = {d: recall(lambda q, d=d: DIRECTIONS[q["language"]] == d) for d in DIRECTIONS.values()}
    by_collection = {c: recall(lambda q, c=c: q["collection"] == c) for c in dict.fromkeys(q["collection"] for q in questions)}
    return {"k": k, "recall": by_direction | {"all": recall(lambda q: True)}, "by_collection": by_collection,
            "questions": results}


def _counts(questions: Sequence[Mapping[str, Any]]) -> dict[str, dict[str, int]]:
    """Direction -> gold document -> number of questions."""
    counts: dict[str, dict[str, int]] = {}
    for q in questions:
        per = counts.setdefault(DIRECTIONS[q["language"]], {})
        for doc in dict.fromkeys(g["doc_id"] for g in q["gold"]):
            per[doc] = per.get(doc, 0) + 1
    return counts


def hit_matches_top(top: Mapping[str, Any], gold: Mapping[str, Any]) -> bool:
    """`hit_matches` for a row of `evaluate`'s `top`."""
    chunk = SimpleNamespace(page=top["page"], page_end=top["page_end"], section=top["section"])
    return chunk_matches(top["doc_id"], chunk, gold)


def _place(top: Mapping[str, Any]) -> str:
    if top["page"] is not None:
        end = top["page_end"] if top["page_end"] not in (None, top["page"]) else None
        return f"p{top['page']}" + (f"-{end}" if end else "")
    return (top["section"] or "").split(" — ")[0][:24]


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(prog="python -m eval.crosslang", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--set", type=Path, default=SET_FILE, help="the question set (default: %(default)s)")
    parser.add_argument("--collections-file", type=Path, default=COLLECTIONS_FILE,
                        help="catalog with the glossary (default: %(default)s)")
    parser.add_argument("--json", type=Path, help="also write the full results here")
    args = parser.parse_args(argv)
    questions = load_set(args.set)
    catalog = product_catalog(args.collections_file)
    languages = collection_languages(catalog)
    with tempfile.TemporaryDirectory(prefix="crosslang-") as tmp:
        started = time.perf_counter()
        try:
            index_path = build_index(Path(tmp))
        except SharedFilesMissing as exc:
            print(exc, file=sys.stderr)
            raise SystemExit(2) from None
        built = time.perf_counter() - started
        index = load_index(index_path)
        loaded = time.perf_counter() - started - built
        runs = {"bm25": evaluate(index, questions, languages=languages),
                "bm25+glossary": evaluate(index, questions, glossary=catalog.glossary, languages=languages)}
    names = list(runs)
    print(f"{len(questions)} questions; index built in {built:.1f} s (ingest), loaded in {loaded:.1f} s")
    for direction, docs in _counts(questions).items():
        print(f"  {direction}: " + ", ".join(f"{doc} {n}" for doc, n in docs.items()))
    print(f"\nrecall@{K}".ljust(24) + "".join(name.rjust(16) for name in names))
    for key in [*DIRECTIONS.values(), "all"]:
        n = len(questions) if key == "all" else sum(DIRECTIONS[q["language"]] == key for q in questions)
        print(f"  {key} ({n})".ljust(23) + "".join(f"{runs[name]['recall'][key]:16.3f}" for name in names))
    for collection in runs[names[0]]["by_collection"]:
        print(f"  {collection}".ljust(23) + "".join(f"{runs[name]['by_collection'][collection]:16.3f}" for name in names))
    print(f"\nper question: rank of the first gold hit ({' / '.join(names)}; - = not in the top {K}), "
          "top 5 with the glossary (* = gold)")
    by_id = {q["id"]: q for q in questions}
    for row in zip(*(runs[name]["questions"] for name in names), strict=True):
        last = row[-1]
        ranks = " / ".join(str(r["rank"] or "-") for r in row)
        tops = ", ".join(f"{t['doc_id']} {_place(t)}" + ("*" if any(hit_matches_top(t, g) for g in by_id[last["id"]]["gold"])
                                                          else "") for t in last["top"])
        print(f"  {last['id']} {last['direction']} {ranks:>7}  {by_id[last['id']]['question']}\n      {tops}")
    result = {"questions": len(questions), "build_s": round(built, 2), "load_s": round(loaded, 2),
              "runs": runs}
    if args.json:
        args.json.write_text(json.dumps(result, indent=1, ensure_ascii=False) + "\n", "utf-8")
    return result


if __name__ == "__main__":
    main()
