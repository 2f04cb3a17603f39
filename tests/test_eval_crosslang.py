"""The cross-language retrieval set (`eval/crosslang.jsonl`) and its evaluator (`eval/crosslang.py`).

The set's shape and the matching rules are checked everywhere; that every gold passage exists, and that the BM25
evaluation runs, needs the real documents of ../shared/formats (`$NEO_SHARED_DIR/formats`) and is skipped without.
"""

from __future__ import annotations

from collections import Counter
from types import SimpleNamespace

import pytest

from docserver.documents import Chunk
from eval import crosslang
from graph.glossary import Glossary
from graph.text.language import detect_language

QUESTIONS = crosslang.load_set()


def _chunk(page: int | None = None, page_end: int | None = None, section: str = "") -> Chunk:
    return Chunk("doc", "xl_en", 0, "Title", section, "text", page=page, page_end=page_end)


def _hit(doc_id: str = "doc", **chunk: object) -> SimpleNamespace:
    return SimpleNamespace(document=SimpleNamespace(doc_id=doc_id), chunk=_chunk(**chunk))  # type: ignore[arg-type]


@pytest.fixture(scope="module")
def index(tmp_path_factory: pytest.TempPathFactory):
    try:
        path = crosslang.build_index(tmp_path_factory.mktemp("crosslang"))
    except crosslang.SharedFilesMissing as exc:
        pytest.skip(str(exc))
    return crosslang.load_index(path)


def test_the_set_has_enough_questions_both_ways() -> None:
    directions = Counter(crosslang.DIRECTIONS[q["language"]] for q in QUESTIONS)
    assert len(QUESTIONS) >= 30
    assert directions["nl->en"] >= 12 and directions["en->nl"] >= 12
    assert len({q["id"] for q in QUESTIONS}) == len(QUESTIONS)
    assert len({q["question"] for q in QUESTIONS}) == len(QUESTIONS)


def test_every_question_is_complete_and_crosses_languages() -> None:
    languages = crosslang.collection_languages(crosslang.product_catalog())
    for q in QUESTIONS:
        assert set(q) >= {"id", "question", "language", "collection", "gold", "answer"}, q["id"]
        assert q["language"] in ("nl", "en") and q["answer"].strip() and q["gold"], q["id"]
        assert languages[q["collection"]] != q["language"], f"{q['id']}: not a cross-language question"
        for gold in q["gold"]:
            assert set(gold) <= {"doc_id", "pages", "sections"} and gold["doc_id"], q["id"]
            assert all(isinstance(p, int) and p >= 1 for p in gold.get("pages", [])), q["id"]
            assert all(s.strip() and s != "English summary" for s in gold.get("sections", [])), q["id"]


def test_questions_are_in_their_stated_language() -> None:
    wrong = {q["id"]: q["question"] for q in QUESTIONS if detect_language(q["question"], "?") != q["language"]}
    assert wrong == {}


@pytest.mark.parametrize(
    ("hit", "gold", "matches"),
    [
        (_hit(page=3), {"doc_id": "doc"}, True),
        (_hit("other", page=3), {"doc_id": "doc"}, False),
        (_hit(page=3), {"doc_id": "doc", "pages": [3]}, True),
        (_hit(page=3), {"doc_id": "doc", "pages": [4]}, False),
        (_hit(page=3, page_end=5), {"doc_id": "doc", "pages": [5]}, True),  # runs over onto the gold page
        (_hit(page=3, page_end=5), {"doc_id": "doc", "pages": [1, 6]}, False),
        (_hit(page=6, page_end=12), {"doc_id": "doc", "pages": [2, 9]}, True),
        (_hit(), {"doc_id": "doc", "pages": [1]}, False),  # no page: a paged gold cannot match
        (_hit(section="Artikel 4"), {"doc_id": "doc", "sections": ["artikel 4"]}, True),  # case-insensitive
        (_hit(section="Artikel 4a"), {"doc_id": "doc", "sections": ["Artikel 4"]}, False),  # another article
        (_hit(section="Artikel 44. Toekenning"), {"doc_id": "doc", "sections": ["Artikel 4"]}, False),
        (_hit(section="Artikel 13. Uitsluiting van bijstand (deel 2) — Hoofdstuk 2"),
         {"doc_id": "doc", "sections": ["Artikel 13"]}, True),
        (_hit(section="12.2 Sustainability"), {"doc_id": "doc", "sections": ["2.2 Sustainability"]}, False),
        (_hit(section="2.2 Sustainability"), {"doc_id": "doc", "sections": ["2.1 Fundamental rights", "2.2 sustain"]},
         False),  # a word cut short is not the section
        (_hit(section="7.2 Communication to parties involved"),
         {"doc_id": "doc", "sections": ["2.1 Fundamental rights", "7.2 Communication"]}, True),
        (_hit(page=2, section="Intro"), {"doc_id": "doc", "pages": [2], "sections": ["Annex"]}, False),  # both count
    ],
)
def test_hit_matches(hit: SimpleNamespace, gold: dict, matches: bool) -> None:
    assert crosslang.hit_matches(hit, gold) is matches


def test_recall_at_counts_questions_with_a_gold_hit_in_the_top_k() -> None:
    questions = [{"gold": [{"doc_id": "a"}]}, {"gold": [{"doc_id": "b", "pages": [2]}, {"doc_id": "c"}]},
                 {"gold": [{"doc_id": "d"}]}]
    hits = [[_hit("x"), _hit("a")], [_hit("b", page=1), _hit("x"), _hit("c")], []]
    assert crosslang.recall_at(hits, questions, k=5) == pytest.approx(2 / 3)
    assert crosslang.recall_at(hits, questions, k=2) == pytest.approx(1 / 3)  # "c" is third
    assert crosslang.recall_at(hits, questions, k=1) == 0.0
    assert crosslang.recall_at([], [], k=5) == 0.0


def test_the_query_is_expanded_as_the_product_does() -> None:
    glossary = Glossary([{"nl": ["kerncentrale"], "en": ["nuclear power plant"]}])
    languages = {"xl_en": "en", "xl_nl": "nl"}
    dutch = {"question": "Wat doet een kerncentrale?", "language": "nl", "collection": "xl_en"}
    assert crosslang.search_query(dutch, glossary, languages) == "Wat doet een kerncentrale? nuclear power plant"
    assert crosslang.search_query(dutch, None, languages) == dutch["question"]
    same = dutch | {"collection": "xl_nl"}  # same language: the product leaves the query alone
    assert crosslang.search_query(same, glossary, languages) == dutch["question"]


def test_evaluate_passes_the_query_vector_only_with_an_embedder() -> None:
    calls: list[dict] = []

    class FakeIndex:
        def search(self, query: str, collection: str, **options: object) -> list:
            calls.append({"query": query, "collection": collection} | options)
            return [_hit("doc", page=1)]

    questions = [{"id": "q1", "question": "Wat?", "language": "nl", "collection": "xl_en",
                  "gold": [{"doc_id": "doc", "pages": [1]}], "answer": "-"}]
    plain = crosslang.evaluate(FakeIndex(), questions, languages={"xl_en": "en"})  # type: ignore[arg-type]
    assert calls == [{"query": "Wat?", "collection": "xl_en", "limit": 5}]
    assert plain["recall"] == {"nl->en": 1.0, "en->nl": 0.0, "all": 1.0}
    assert plain["questions"][0]["rank"] == 1
    calls.clear()
    crosslang.evaluate(FakeIndex(), questions, embed=lambda text: f"vector of {text}",  # type: ignore[arg-type]
                       languages={"xl_en": "en"})
    assert calls == [{"query": "Wat?", "collection": "xl_en", "limit": 5, "query_vector": "vector of Wat?"}]


def test_every_gold_document_and_place_exists_in_the_index(index) -> None:
    for q in QUESTIONS:
        for gold in q["gold"]:
            document = index.document(q["collection"], gold["doc_id"])
            assert document is not None, f"{q['id']}: {q['collection']}/{gold['doc_id']} is not in the index"
            assert any(crosslang.chunk_matches(document.doc_id, chunk, gold) for chunk in document.chunks), \
                f"{q['id']}: no chunk of {gold['doc_id']} holds {gold}"
            assert document.language in (None, "nl", "en")
            assert document.language != q["language"], f"{q['id']}: {gold['doc_id']} is in the question's language"


def test_bm25_evaluation_runs(index) -> None:
    catalog = crosslang.product_catalog()
    plain = crosslang.evaluate(index, QUESTIONS)
    expanded = crosslang.evaluate(index, QUESTIONS, glossary=catalog.glossary)
    for result in (plain, expanded):
        assert set(result["recall"]) == {"nl->en", "en->nl", "all"}
        assert all(0.0 <= v <= 1.0 for v in [*result["recall"].values(), *result["by_collection"].values()])
        assert len(result["questions"]) == len(QUESTIONS)
        assert all(len(r["top"]) <= crosslang.K for r in result["questions"])
    assert any(r["query"] != q["question"] for r, q in zip(expanded["questions"], QUESTIONS, strict=True))
    assert all(r["query"] == q["question"] for r, q in zip(plain["questions"], QUESTIONS, strict=True))
