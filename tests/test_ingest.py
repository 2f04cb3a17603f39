"""Ingestion into the persisted index, compound-aware search, and the ingest CLI.

Tests marked ``needs_shared`` use the real law texts in the shared test corpus
(``../shared/corpus`` next to the repository, or ``$NEO_SHARED_DIR/corpus``)
and are skipped when it is absent; nothing from it is copied into the repo.
MCP tests run the real server on a loopback port (no mocks).
"""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import docserver.ingest
from docserver.chunking import ARTICLE_CHARS, TEXT_CHARS, parse_law, split_paragraphs
from docserver.compounds import Decompounder
from docserver.corpus import BUNDLED_CORPUS, load_collections, load_corpus
from docserver.documents import Chunk, Document
from docserver.embedded import serve_in_background
from docserver.index import Index
from docserver.ingest import ingest
from docserver.server import create_app
from docserver.store import DocumentStore, load_documents, resolve_index_path
from tests.test_docserver import call, connect, split_result

ROOT = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("NEO_SHARED_DIR") or Path(__file__).resolve().parents[2] / "shared") / "corpus"
KERNENERGIEWET = SHARED / "wetten_overheid" / "kernenergiewet.md"
needs_shared = pytest.mark.skipif(not KERNENERGIEWET.is_file(), reason=f"shared law corpus not found at {SHARED}")

ARTICLE_15A = "https://wetten.overheid.nl/jci1.3:c:BWBR0002402&artikel=15a"


@pytest.fixture(autouse=True)
def no_default_index(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Never read or write the per-user index of the machine running the tests."""
    monkeypatch.setenv("DOCSERVER_INDEX", str(tmp_path / "default-index.sqlite3"))


@pytest.fixture
def index_file(tmp_path: Path) -> Path:
    return tmp_path / "index" / "docserver.sqlite3"


@pytest.fixture
def empty_corpus(tmp_path: Path) -> Path:
    (tmp_path / "empty-corpus").mkdir()
    return tmp_path / "empty-corpus"


def article_chunks(doc: Document) -> list[Chunk]:
    return [c for c in doc.chunks if c.url and "&artikel=" in c.url]


# --- law text parsing without the shared corpus ----------------------------------------------

SAMPLE_LAW = """\
---
title: "Voorbeeldwet"
identifier: "BWBR0099999"
bron: "https://wetten.overheid.nl/BWBR0099999"
laatste_update: 2024-07-01
---

# Voorbeeldwet

Wij hebben goedgevonden en verstaan.

### Hoofdstuk I. Algemeen

#### Artikel 1

In deze wet wordt verstaan onder [kerncentrale](https://example.org/x): een inrichting.

### Afdeling 1. Vergunningen

####Artikel 2a

1. Het is verboden zonder vergunning een kerncentrale in werking te hebben.

2. De vergunning vervalt op 31 december 2033.

##### Article 3. Scope

This Convention shall apply to nuclear installations.

#### Artikel 4.2. (lang artikel)

{long}

## Bijlage 1. Tabel

Een tabel met waarden.
"""


def sample_law() -> Document:
    long = "\n\n".join(f"{n}. " + f"Lid {n} van een lang artikel over stralingsbescherming. " * 12 for n in range(1, 9))
    return parse_law(SAMPLE_LAW.format(long=long), collection="wetten", default_id="voorbeeldwet")


def test_parse_law_sample() -> None:
    doc = sample_law()
    assert (doc.doc_id, doc.title, doc.kind, doc.year, doc.language) == (
        "bwbr0099999",
        "Voorbeeldwet",
        "official",
        2024,
        "nl",
    )
    assert doc.url == "https://wetten.overheid.nl/BWBR0099999"
    titles = [c.title for c in doc.chunks]
    assert titles[:4] == [
        "Voorbeeldwet",
        "Voorbeeldwet, artikel 1",
        "Voorbeeldwet, artikel 2a",
        "Voorbeeldwet, article 3",
    ]
    assert [c.chunk_index for c in doc.chunks] == list(range(len(doc.chunks)))
    preamble, art1, art2a, art3 = doc.chunks[:4]
    assert (preamble.section, preamble.text, preamble.url) == (
        "Aanhef",
        "Wij hebben goedgevonden en verstaan.",
        doc.url,
    )
    assert art1.section == "Artikel 1 — Hoofdstuk I. Algemeen"
    assert art1.text == "In deze wet wordt verstaan onder kerncentrale: een inrichting."  # link target dropped
    assert art2a.section == "Artikel 2a — Hoofdstuk I. Algemeen"  # "Afdeling" stays inside the chapter
    assert art2a.url == "https://wetten.overheid.nl/jci1.3:c:BWBR0099999&artikel=2a"
    assert art2a.text.startswith("1. Het is verboden") and art2a.text.endswith("31 december 2033.")
    assert art3.section == "Article 3. Scope — Hoofdstuk I. Algemeen"
    parts = [c for c in doc.chunks if ", artikel 4.2" in c.title]
    assert len(parts) > 1
    assert [c.title for c in parts] == [f"Voorbeeldwet, artikel 4.2 (deel {n})" for n in range(1, len(parts) + 1)]
    assert all(c.section.startswith(f"Artikel 4.2. (lang artikel) (deel {n})") for n, c in enumerate(parts, 1))
    assert all(len(c.text) <= ARTICLE_CHARS and re.match(r"\d+\. Lid", c.text) for c in parts)
    assert all(c.url == "https://wetten.overheid.nl/jci1.3:c:BWBR0099999&artikel=4.2" for c in parts)
    annex = doc.chunks[-1]
    assert (annex.title, annex.section, annex.text) == ("Voorbeeldwet", "Bijlage 1. Tabel", "Een tabel met waarden.")


@pytest.mark.parametrize(
    ("paragraphs", "limit", "expected"),
    [
        (["a" * 10], 100, [["a" * 10]]),
        # lids are packed greedily and only cut where a lid starts
        (
            ["1. " + "a" * 40, "- x", "2. " + "b" * 40, "- y", "3. " + "c" * 40],
            100,
            [["1. " + "a" * 40, "- x", "2. " + "b" * 40, "- y"], ["3. " + "c" * 40]],
        ),
        # a lid longer than the limit is cut between its own paragraphs
        (
            ["1. " + "a" * 60, "- " + "x" * 60, "- " + "y" * 60],
            100,
            [["1. " + "a" * 60], ["- " + "x" * 60], ["- " + "y" * 60]],
        ),
    ],
)
def test_split_paragraphs(paragraphs: list[str], limit: int, expected: list[list[str]]) -> None:
    parts = split_paragraphs("\n\n".join(paragraphs), limit)
    assert parts == ["\n\n".join(p) for p in expected]


def test_split_paragraphs_cuts_a_long_paragraph_between_lines() -> None:
    paragraph = "\n".join(f"{n}.  line {n} " + "z" * 40 for n in range(1, 6))
    parts = split_paragraphs(paragraph, 120)
    assert all(len(p) <= 120 for p in parts) and len(parts) > 1
    assert "".join(parts).replace("\n", "") == paragraph.replace("\n", "")


# --- plain text and corpus-style Markdown ----------------------------------------------------------


def test_plain_text_and_corpus_markdown(tmp_path: Path, index_file: Path, empty_corpus: Path) -> None:
    folder = tmp_path / "notes"
    (folder / "sub").mkdir(parents=True)
    paragraphs = [f"Alinea {n} over de periodieke veiligheidsevaluatie van kerncentrales. " * 5 for n in range(12)]
    (folder / "sub" / "Inspectie Notities.txt").write_text("\n\n".join(paragraphs), encoding="utf-8")
    (folder / "README.md").write_text("# Over deze map\n", encoding="utf-8")  # describes the folder: skipped
    (folder / ".hidden.md").write_text("# Verborgen\n", encoding="utf-8")
    (folder / "samenvatting.md").write_text(
        "---\ndoc_id: eigen-samenvatting\ntitle: Eigen samenvatting\nyear: 2021\nkind: summary\n---\n\n"
        "# Eigen samenvatting\n\n## Toezicht\n\nDe ANVS houdt toezicht.\n",
        encoding="utf-8",
    )
    docs = {d.doc_id: d for d in ingest([folder], "notities", index_path=index_file)}
    # the id of a file in a sub-folder names the folder; front matter's doc_id stands
    assert set(docs) == {"sub/inspectie-notities-txt", "eigen-samenvatting"}
    assert {d.doc_id: d for d in load_documents(index_file)} == docs  # stored and read back exactly
    text = docs["sub/inspectie-notities-txt"]
    assert (text.title, text.collection, text.language, text.kind) == ("Inspectie Notities", "notities", "nl", None)
    assert len(text.chunks) > 1
    assert all(len(c.text) <= TEXT_CHARS for c in text.chunks)
    assert [c.section for c in text.chunks] == [f"deel {n}" for n in range(1, len(text.chunks) + 1)]
    assert "\n\n".join(c.text for c in text.chunks) == "\n\n".join(p.rstrip() for p in paragraphs)
    summary = docs["eigen-samenvatting"]
    assert (summary.kind, summary.year, [c.section for c in summary.chunks]) == ("summary", 2021, ["Toezicht"])

    index = Index.load(empty_corpus, index_path=index_file)
    hits = index.search("veiligheidsevaluatie kerncentrale", "notities")
    assert hits[0].document.doc_id == "sub/inspectie-notities-txt"
    assert hits[0].matched_terms == 1.0


def test_ingest_rejects_bad_input(tmp_path: Path, index_file: Path) -> None:
    with pytest.raises(FileNotFoundError):
        ingest([tmp_path / "missing.md"], "x", index_path=index_file)
    with pytest.raises(ValueError, match="collection"):
        ingest([tmp_path], "bad name!", index_path=index_file)
    (tmp_path / "empty.txt").write_text("\n\n", encoding="utf-8")
    with pytest.raises(ValueError, match="no text"):
        ingest([tmp_path / "empty.txt"], "x", index_path=index_file)
    assert not index_file.exists()  # nothing is stored when a file fails


def test_index_path_resolution(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    assert resolve_index_path(tmp_path / "a.sqlite3") == tmp_path / "a.sqlite3"
    monkeypatch.setenv("DOCSERVER_INDEX", str(tmp_path / "env.sqlite3"))
    assert resolve_index_path() == tmp_path / "env.sqlite3"
    monkeypatch.delenv("DOCSERVER_INDEX")
    assert resolve_index_path() == ROOT / "data" / "docserver.sqlite3"  # this checkout's own (more in test_docserver_reload)
    assert load_documents(tmp_path / "nothing.sqlite3") == [] and not (tmp_path / "nothing.sqlite3").exists()


# --- decompounding -------------------------------------------------------------------------------

VOCABULARY = """
vergunning vergunningen verlenen vergunningverlening veiligheid cultuur veiligheidscultuur straling
bescherming stralingsbescherming kern centrale kerncentrale kernenergie energie kernenergiecentrale
onder nemer ondernemer reactor onderzoek onderzoeksreactoren reactoren bestuur 15a dosis dosislimieten
""".split()


@pytest.mark.parametrize(
    ("token", "split", "parts"),
    [
        ("vergunningverlening", ("vergunning", "verlening"), ("vergunning", "verlening")),  # "verlening" ~ verlenen
        ("veiligheidscultuur", ("veiligheid", "cultuur"), ("veiligheid", "cultuur")),  # linking -s-
        ("stralingsbescherming", ("straling", "bescherming"), ("straling", "bescherming")),
        ("kerncentrale", ("kern", "centrale"), ("kern", "centrale")),
        ("kernenergiecentrale", ("kernenergie", "centrale"), ("kernenergie", "kern", "energie", "centrale")),
        ("onderzoeksreactoren", ("onderzoek", "reactoren"), ("onderzoek", "reactoren")),
        ("veiligheidscentrale", ("veiligheid", "centrale"), ("veiligheid", "centrale")),  # not in the vocabulary
        ("ondernemer", (), ()),  # "onder" is a particle, not a part
        ("vergunning", (), ()),
        ("bestuur", (), ()),  # too short to be a compound
        ("dosislimieten", (), ()),  # "limiet" never occurs on its own
        ("15a", (), ()),
    ],
)
def test_decompounder(token: str, split: tuple[str, ...], parts: tuple[str, ...]) -> None:
    decompounder = Decompounder(VOCABULARY)
    assert decompounder.split(token) == split
    assert decompounder.parts(token) == parts


def test_decompounder_uses_query_words() -> None:
    decompounder = Decompounder(VOCABULARY)
    assert decompounder.compounds_with("limiet", frozenset({"limiet", "dosis"})) == ["dosislimieten"]
    assert decompounder.compounds_with("xyzzy", frozenset({"xyzzy"})) == []


@pytest.mark.parametrize("word", ["centrale", "kern", "energie", "straling", "limiet", "cultuur", "reactor", "15a", "e"])
def test_compounds_with_matches_a_scan_of_the_whole_vocabulary(word: str) -> None:
    """The substring index finds exactly the compounds a plain scan over every vocabulary word finds."""
    from docserver.compounds import MIN_PART
    from textkit import stems

    decompounder = Decompounder(VOCABULARY)
    extra = frozenset({word, "dosis"})
    fragments = [s for s in stems(word) if len(s) >= MIN_PART]
    scan = [w for w in sorted(decompounder._words) if len(w) >= 2 * MIN_PART and w != word
            and any(f in w for f in fragments)
            and any(stems(p) & stems(word) for p in decompounder.parts(w, extra | {word}))]
    assert decompounder.compounds_with(word, extra) == scan


def compound_index(decompound: bool) -> Index:
    texts = {
        "a-verlening": "De vergunningverlening duurt lang.",
        "b-cultuur": "Een sterke veiligheidscultuur is nodig.",
        "c-straling": "Bescherming tegen straling van werknemers.",
        "d-centrale": "De kerncentrale staat in Borssele.",
        "e-dosis": "De dosislimieten gelden per jaar.",
        "f-anders": "De kern: een centrale rol voor de cultuur van het bestuur. Ontheffingen verlenen; de dosis telt.",
    }
    docs = [
        Document(doc_id, "c", "Notitie", (Chunk(doc_id, "c", 0, "Notitie", "Notitie", text),))
        for doc_id, text in texts.items()
    ]
    return Index(docs, decompound=decompound)


@pytest.mark.parametrize(
    ("query", "doc_id"),
    [
        ("vergunning", "a-verlening"),  # "vergunning" is only known from the query, "verlening" from "verlenen"
        ("veiligheid", "b-cultuur"),
        ("stralingsbescherming", "c-straling"),
        ("limiet", "e-dosis"),
    ],
)
def test_search_matches_compound_parts(query: str, doc_id: str) -> None:
    assert doc_id not in [h.document.doc_id for h in compound_index(decompound=False).search(query, "c")]
    hits = compound_index(decompound=True).search(query, "c")
    assert hits[0].document.doc_id == doc_id
    assert hits[0].matched_terms == 1.0


def test_whole_word_outranks_compound_part() -> None:
    hits = compound_index(decompound=True).search("centrale", "c")
    assert [h.document.doc_id for h in hits] == ["f-anders", "d-centrale"]
    assert hits[1].score < hits[0].score


# The same hand-labelled queries with and without decompounding; the numbers are in the report.
RECALL_CASES = [
    ("cultuur van veiligheid", "iaea", {"iaea-insag-4", "iaea-gsr-part-2"}),
    ("verlening van vergunningen voor kerninstallaties", "anvs", {"anvs-vergunningverlening-kerninstallaties"}),
    ("bescherming tegen straling", "iaea", {"iaea-gsr-part-3"}),
    ("centrale Borssele", "anvs", {"anvs-kerncentrale-borssele"}),
    ("beheersing van een nucleaire crisis", "anvs", {"anvs-stralingsincidenten-en-crisisbeheersing"}),
    ("evaluatie van de veiligheid elke tien jaar", "anvs", {"anvs-periodieke-veiligheidsevaluatie"}),
    ("verdediging in de diepte", "iaea", {"iaea-insag-10", "iaea-ssr-2-1-rev-1"}),
    ("reactoren voor onderzoek", "anvs", {"anvs-onderzoeksreactoren-hor-hfr-pallas"}),
    ("dreiging als basis voor het ontwerp", "security", {"security-nss-10-g-rev-1"}),
    ("cultuur van beveiliging", "security", {"security-nss-7"}),
    ("zones voor planning bij noodsituaties", "iaea", {"iaea-gsr-part-7"}),
    ("veiligheidsbeoordeling", "iaea", {"iaea-gsr-part-4-rev-1"}),
    ("afvalbeleid", "anvs", {"anvs-radioactief-afval-covra"}),
    ("computerbeveiligingsmaatregelen", "security", {"security-nss-17"}),
]


def recall(index: Index, cases: list[tuple[str, str, set[str]]], k: int) -> float:
    """Mean share of the relevant documents among the first ``k`` distinct documents hit."""
    total = 0.0
    for query, collection, relevant in cases:
        ranked = list(dict.fromkeys(h.document.doc_id for h in index.search(query, collection, limit=None)))
        total += len(relevant & set(ranked[:k])) / len(relevant)
    return round(total / len(cases), 3)


def test_decompounding_improves_recall_on_bundled_corpus() -> None:
    docs, collections = load_corpus(BUNDLED_CORPUS), load_collections(BUNDLED_CORPUS)
    if not docs:
        pytest.skip("bundled corpus is empty")
    plain, compound = Index(docs, collections, decompound=False), Index(docs, collections)
    results = {k: (recall(plain, RECALL_CASES, k), recall(compound, RECALL_CASES, k)) for k in (1, 3, 5)}
    print(f"\nrecall@k without -> with decompounding ({len(RECALL_CASES)} queries): {results}")
    assert all(after >= before for before, after in results.values())
    assert results[3][1] > results[3][0]


# --- the real Kernenergiewet (shared corpus) --------------------------------------------------------


@needs_shared
def test_kernenergiewet_one_chunk_per_article(index_file: Path) -> None:
    (doc,) = ingest([KERNENERGIEWET], "wetten_overheid", index_path=index_file)
    assert (doc.doc_id, doc.title, doc.kind, doc.language) == ("bwbr0002402", "Kernenergiewet", "official", "nl")
    assert doc.url == "https://wetten.overheid.nl/BWBR0002402"
    source = KERNENERGIEWET.read_text(encoding="utf-8")
    headings = re.findall(r"^#+\s*Artikel\s+(\w+)\s*$", source, flags=re.MULTILINE)
    articles = article_chunks(doc)
    first_parts = [c for c in articles if "(deel" not in c.title or "(deel 1)" in c.title]
    assert len(first_parts) == len(headings) >= 100  # one chunk (or one first part) per article heading
    assert [(c.url or "").rsplit("=", 1)[1] for c in first_parts] == headings
    assert all(len(c.text) <= ARTICLE_CHARS for c in doc.chunks)
    assert all("](" not in c.text and not c.text.startswith("#") for c in doc.chunks)

    (art15a,) = [c for c in doc.chunks if c.title == "Kernenergiewet, artikel 15a"]
    assert art15a.url == ARTICLE_15A
    assert art15a.section == "Artikel 15a — Hoofdstuk III. Splijtstoffen, ertsen en inrichtingen"
    assert "Met ingang van 31 december 2033 vervalt" in art15a.text and "Borssele" in art15a.text

    split = [c for c in articles if "(deel" in c.title]
    assert split, "the Kernenergiewet has articles longer than the limit"
    for chunk in split:
        if not chunk.title.endswith("(deel 1)"):
            assert re.match(r"(\d+[a-z]?\.|- )", chunk.text), chunk.title  # cut where a lid or list item starts


@needs_shared
def test_restart_reads_the_index_without_reingesting(
    index_file: Path, empty_corpus: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ingest([KERNENERGIEWET], "wetten_overheid", index_path=index_file)
    stamp = index_file.stat().st_mtime_ns

    def fail(*args: object, **kwargs: object) -> None:
        raise AssertionError("the server must not parse source files")

    for name in ("parse_file", "parse_bytes", "ingest"):
        monkeypatch.setattr(docserver.ingest, name, fail)
    index = Index.load(empty_corpus, index_path=index_file)
    hits = index.search("artikel 15a Borssele", "wetten_overheid")
    assert hits[0].chunk.url == ARTICLE_15A and hits[0].document.kind == "official"
    assert create_app(empty_corpus, index_path=index_file) is not None
    assert index_file.stat().st_mtime_ns == stamp  # only read


@needs_shared
def test_reingest_is_idempotent(index_file: Path, tmp_path: Path) -> None:
    ingested = ingest([KERNENERGIEWET], "wetten_overheid", index_path=index_file)
    with DocumentStore(index_file) as store:
        first = store.documents()
    assert first == ingested and first[0].metadata == ingested[0].metadata  # stored exactly
    ingest([KERNENERGIEWET], "wetten_overheid", index_path=index_file)
    with DocumentStore(index_file) as store:
        assert store.documents() == first
        assert [c for d in store.documents() for c in d.chunks] == [c for d in first for c in d.chunks]

    # a changed file with the same doc_id replaces every chunk of the old version
    edited = tmp_path / "kernenergiewet.md"
    text = KERNENERGIEWET.read_text(encoding="utf-8")
    edited.write_text(text[: text.index("#### Artikel 16\n")], encoding="utf-8")
    ingest([edited], "wetten_overheid", index_path=index_file)
    (doc,) = load_documents(index_file)
    assert doc.doc_id == "bwbr0002402" and len(doc.chunks) < len(first[0].chunks)
    assert doc.chunks[-1].title == "Kernenergiewet, artikel 15e"


@needs_shared
@pytest.mark.asyncio
async def test_search_collection_finds_article_15a_over_mcp(index_file: Path, empty_corpus: Path) -> None:
    ingest([KERNENERGIEWET], "wetten_overheid", index_path=index_file)
    server = await serve_in_background(corpus_dir=empty_corpus, index_path=index_file)
    try:
        async with connect(server.url, server.token) as client:
            result = await call(
                client, "search_collection", {"query": "artikel 15a Borssele", "collection": "wetten_overheid"}
            )
            listing = await call(client, "list_documents", {"query": "Kernenergiewet"})
    finally:
        await server.stop()
    texts, sources = split_result(result)
    first = sources[0]
    assert texts[0] == first["chunk_content"]
    assert first["chunk_content"].startswith("[Kernenergiewet, artikel 15a — Artikel 15a — Hoofdstuk III.")
    assert "31 december 2033" in first["chunk_content"]
    assert set(first) == {"fileName", "fileId", "relevance", "metadata", "chunk_content"}
    assert (first["fileId"], first["fileName"], first["relevance"]) == ("bwbr0002402", "Kernenergiewet", 1.0)
    meta = first["metadata"]
    assert meta["url"] == ARTICLE_15A and meta["kind"] == "official" and meta["year"] == 2024
    assert (meta["doc_id"], meta["collection"]) == ("bwbr0002402", "wetten_overheid")
    assert meta["matched_terms"] == 1.0 and meta["score"] > sources[1]["metadata"]["score"] > 0
    assert all(0 <= s["metadata"]["matched_terms"] <= 1 for s in sources)
    assert "Doc ID: bwbr0002402" in listing["content"][0]["text"]


@needs_shared
def test_ingested_laws_join_the_bundled_corpus(index_file: Path) -> None:
    ingest([KERNENERGIEWET], "wetten_overheid", index_path=index_file)
    index = Index.load(index_path=index_file)  # bundled corpus + the index
    doc_ids = {d.doc_id for d in index.documents("wetten_overheid")}
    assert "bwbr0002402" in doc_ids and len(doc_ids) > 1
    hits = index.search("artikel 15a Borssele", "wetten_overheid")
    assert ARTICLE_15A in [h.chunk.url for h in hits]  # among the summaries of the same article


@needs_shared
def test_all_shared_files_ingest(index_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    expected = {
        "wetten_overheid": {"bwbr0002402", "bwbr0002667", "bwbr0040179", "bwbr0002668"},
        "anvs": {"bwbr0050489"},
        "iaea": {"bwbv0001256"},
        "security": {"cppnm"},
    }
    for collection, doc_ids in expected.items():
        docs = ingest([SHARED / collection], collection, index_path=index_file, progress=True)
        assert {d.doc_id for d in docs} == doc_ids
        for doc in docs:
            assert doc.kind == "official" and len(article_chunks(doc) or doc.chunks) >= 20, doc.doc_id
            assert all(c.text and len(c.text) <= ARTICLE_CHARS for c in doc.chunks), doc.doc_id
    assert capsys.readouterr().err == ""  # no progress bar when stderr is not a terminal
    stored = load_documents(index_file)
    assert {(d.collection, d.doc_id) for d in stored} == {(c, i) for c, ids in expected.items() for i in ids}

    index = Index.load(index_path=index_file)
    (art42,) = [h for h in index.search("artikel 4.2", "wetten_overheid", limit=1)]
    assert art42.chunk.title == "Besluit basisveiligheidsnormen stralingsbescherming, artikel 4.2"
    assert art42.chunk.url == "https://wetten.overheid.nl/jci1.3:c:BWBR0040179&artikel=4.2"
    assert "INFCIRC/225" in index.search("INFCIRC/225", "anvs")[0].chunk.text


BBS = "Besluit basisveiligheidsnormen stralingsbescherming, artikel "
LAW_RECALL_CASES = [  # (query, relevant article chunks) over the four laws of wetten_overheid
    ("vergunning kerncentrale Borssele vervalt", {"Kernenergiewet, artikel 15a"}),  # text: "kernenergiecentrale"
    ("erkenning deskundige stralingsbescherming", {BBS + "5.5"}),  # "stralingsbeschermingsdeskundige"
    ("limiet voor de dosis van leden van de bevolking", {BBS + "9.1", BBS + "9.2"}),  # "dosislimiet(en)"
    ("financiele zekerheid voor de kosten van ontmanteling", {"Kernenergiewet, artikel 15f"}),
]


@needs_shared
def test_decompounding_recall_on_law_articles(index_file: Path) -> None:
    docs = ingest([SHARED / "wetten_overheid"], "wetten_overheid", index_path=index_file)

    def article_recall(index: Index, k: int) -> float:
        found = [
            len(relevant & {h.chunk.title for h in index.search(query, "wetten_overheid", limit=k)}) / len(relevant)
            for query, relevant in LAW_RECALL_CASES
        ]
        return round(sum(found) / len(found), 3)

    plain, compound = Index(docs, decompound=False), Index(docs)
    results = {k: (article_recall(plain, k), article_recall(compound, k)) for k in (1, 3, 5)}
    print(f"\narticle recall@k without -> with decompounding ({len(LAW_RECALL_CASES)} queries): {results}")
    assert all(after >= before for before, after in results.values())


@needs_shared
def test_cppnm_headings_without_space(index_file: Path) -> None:
    (doc,) = ingest([SHARED / "security" / "cppnm.md"], "security", index_path=index_file)
    assert doc.title == "Verdrag inzake de fysieke beveiliging van kernmateriaal"
    assert doc.url is None  # no front matter, so no BWB id and no deep links
    titles = [c.title for c in doc.chunks]
    for n in range(1, 24):
        assert f"{doc.title}, article {n}" in titles  # "### Article  1  "
        assert f"{doc.title}, artikel {n}" in titles  # "###Artikel 1  "
    assert "Convention on the physical protection of nuclear material" in [c.section for c in doc.chunks]
    assert all("#" not in c.text for c in doc.chunks)


# --- CLI ------------------------------------------------------------------------------------------


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "-m", "docserver", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_cli_ingest(tmp_path: Path, index_file: Path) -> None:
    note = tmp_path / "notitie.txt"
    note.write_text("Een notitie over vergunningverlening.\n\nTweede alinea.", encoding="utf-8")
    sources = [note, KERNENERGIEWET] if KERNENERGIEWET.is_file() else [note]
    quiet = run_cli("ingest", *map(str, sources), "--collection", "cli", "--index", str(index_file), "--quiet")
    assert quiet.returncode == 0, quiet.stderr
    assert quiet.stdout == "" and quiet.stderr == ""
    assert {d.doc_id for d in load_documents(index_file)} >= {"notitie"}

    loud = run_cli("ingest", str(note), "--collection", "cli", "--index", str(index_file))
    assert loud.returncode == 0 and "1 documents, 1 chunks -> collection 'cli'" in loud.stdout

    missing = run_cli("ingest", str(tmp_path / "nope.md"), "--collection", "cli", "--index", str(index_file))
    assert missing.returncode == 1 and "nope.md" in missing.stderr
    assert run_cli("ingest", str(note)).returncode == 2  # --collection is required


def test_naming_an_article_ranks_that_article_first(tmp_path) -> None:
    """Summaries that quote "artikel 15a" must not outrank the article itself when the query names it."""
    from docserver.chunking import parse_law
    from docserver.index import Index

    law = parse_law(
        "---\ntitle: \"Testwet\"\nidentifier: \"BWBR0000001\"\n---\n\n# Testwet\n\n"
        "#### Artikel 15a\n\n1. De vergunning vervalt op een datum.\n\n"
        "#### Artikel 16\n\n1. Artikel 15a vergunning Borssele vergunning Borssele vergunning: zie artikel 15a.\n",
        collection="wetten_overheid", default_id="testwet",
    )
    index = Index([law])
    hits = index.search("artikel 15a vergunning Borssele", "wetten_overheid")
    assert hits[0].chunk.section.startswith("Artikel 15a")
