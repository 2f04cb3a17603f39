"""Section 10: the document server past a sample corpus (`python -m bench --only scale`).

A generated corpus (seeded, so every run reads the same bytes) of multi-page PDFs, laid out here and written by
the tests' byte-level PDF writer (tests/fakes/pdf.py: Helvetica, no new dependency), plus plain-text documents that make up the chunk count, all in one
collection. Its sentences come from the bundled corpus (docserver/corpus/*/*.md, and ../shared/corpus/**/*.md
when that folder exists), shuffled into new paragraphs under headings taken from the same texts, so the
vocabulary and the BM25 statistics are those of real documents rather than of random words.

Measured, each in a process of its own pinned to one core:

* ingest: `python -m docserver ingest` of the PDFs (pages per second), then of the text documents;
* a server's index (`python -m bench.scale probe`): `LiveIndex.load` as `python -m docserver` starts, its resident
  memory, `SqliteIndex.search` (the index on disk) latency over a few hundred questions of eval/*.jsonl, and the time `LiveIndex.current()`
  takes to bring the index up to date after `python -m docserver ingest` added one more PDF, the code path of a
  running server's tool call;
* then, the words-only figures taken, search by meaning too: the probe writes a stand-in vector for every passage
  of the index (a seeded random unit vector of 384 float32s, the space ``VECTOR_KEY``) straight into the index
  file's ``vectors`` table, as an ingest with embeddings leaves it (the search's cost does not depend on what the
  vectors mean, and no embedding endpoint is needed); a new process (`python -m bench.scale probe --vectors`: no
  stem cache or heap left from the first) measures `SqliteIndex.load(vector_key=VECTOR_KEY)`, its resident memory, and
  `SqliteIndex.search(query_vector=...)` over the same questions, each with a random query vector made before the clock
  starts (embedding the query is timed apart);
* with ``EMBEDDINGS_URL`` set, the embedding endpoint itself (`python -m bench.scale embed`): `embed_chunks`, the
  ingest's embedding step, over a fixed sample of the corpus's passages (passages per second), and
  `Embedder.query` for a few questions (ms each). This client is pinned to one core like the rest; the endpoint is
  not (it runs wherever it was started).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import random
import re
import subprocess
import sys
import textwrap
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import numpy as np

from tests.fakes.pdf import build_pdf

ROOT = Path(__file__).resolve().parents[1]
# the bundled corpus, and the CC0 law texts of ../shared when they are there (as eval.run finds them)
SOURCES = (ROOT / "docserver" / "corpus", Path(os.environ.get("NEO_SHARED_DIR", ROOT.parent / "shared")) / "corpus")
QUESTION_FILES = tuple(ROOT / "eval" / name for name in ("gold.jsonl", "gold_laws.jsonl", "routing.jsonl"))
COLLECTION = "scale"
SEED = 20250
PAGE_WIDTH, PAGE_HEIGHT = 595, 842  # A4 in points
LEFT, TOP, BOTTOM = 60, 780, 60
BODY_PT, BODY_LEADING, LINE_CHARS = 9, 11.5, 100  # Helvetica 9 pt averages ~4.5 pt a character: 100 fit in 475 pt
HEADING_PT, TITLE_PT = 12, 16
PARAGRAPH_CHARS = (760, 1400)  # a PDF paragraph: two never share a chunk (ingest.TEXT_CHARS = 1500)
TEXT_PARAGRAPH_CHARS = (900, 1450)  # a text paragraph: one chunk each
VECTOR_KEY = "bench-random-384"  # the vector space of the stand-in passage vectors (no model makes it)
VECTOR_DIMENSION = 384  # multilingual-e5-small's, `make embeddings`


@dataclass(frozen=True)
class ScaleSize:
    """How big the generated corpus is and how much is measured on it."""

    pages: int  # PDF pages, at least
    chunks: int  # chunks in the collection, at least (text documents make up what the PDFs leave)
    queries: int  # distinct questions timed, each `passes` times
    passes: int
    additions: int  # documents added one at a time to the running index
    embed_passages: int  # passages embedded by a real endpoint (EMBEDDINGS_URL set), and
    embed_queries: int  # questions embedded one at a time


FULL = ScaleSize(pages=2000, chunks=20000, queries=300, passes=2, additions=3, embed_passages=256, embed_queries=20)
SMOKE = ScaleSize(pages=24, chunks=300, queries=30, passes=1, additions=1, embed_passages=16, embed_queries=5)


# ------------------------------------------------------------------------------------------ the texts


@dataclass(frozen=True)
class Pool:
    """Sentences and headings of the source texts, the material of every generated document."""

    sentences: tuple[str, ...]
    headings: tuple[str, ...]
    files: int


def _plain(line: str) -> str:
    """A Markdown line as text: list markers, emphasis and links gone."""
    line = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", line)
    line = re.sub(r"^\s*(?:[-*+]|\d+\.)\s+", "", line)
    return re.sub(r"[*_`]+", "", line).strip()


def read_pool(sources: Sequence[Path] = SOURCES) -> Pool:
    """Every sentence (30-500 characters) and short heading of the Markdown files under ``sources`` (the folders
    that exist), in sorted file order, so the same files always give the same pool."""
    from docserver.formats.markdown import split_front_matter

    files = sorted(f for source in sources if source.is_dir() for f in source.rglob("*.md")
                   if f.name.lower() != "readme.md")
    sentences: dict[str, None] = {}
    headings: dict[str, None] = {}
    for file in files:
        _, body = split_front_matter(file.read_text("utf-8"))
        for line in body.splitlines():
            if line.startswith("#"):
                heading = _plain(line.lstrip("#")).rstrip(".,;:")
                if 2 <= len(heading.split()) <= 10:
                    headings[heading] = None
            elif line.strip() and not line.lstrip().startswith((">", "|", "---")):
                for sentence in re.split(r"(?<=[.!?])\s+(?=[A-Z0-9(\"'])", _plain(line)):
                    if 30 <= len(sentence) <= 500:
                        sentences[sentence] = None
    if not sentences or not headings:
        raise RuntimeError(f"no source texts under {', '.join(map(str, sources))}")
    return Pool(tuple(sentences), tuple(headings), len(files))


def paragraph(rng: random.Random, pool: Pool, low: int, high: int) -> str:
    """Random sentences of the pool joined into ``low``..``high`` characters."""
    target = rng.randint(low, high)
    text = ""
    while len(text) < target:
        sentence = rng.choice(pool.sentences)
        if text and len(text) + 1 + len(sentence) > high:
            break
        text = f"{text} {sentence}" if text else sentence
    return text


# ------------------------------------------------------------------------------------------ a PDF writer


Line = tuple[str, int, float, str]  # (font resource, size, y, text) at x = LEFT


def _pdf_text(text: str) -> bytes:
    """A PDF string literal's content in WinAnsiEncoding (characters it lacks dropped), parentheses escaped."""
    raw = text.encode("cp1252", "ignore")
    return raw.replace(b"\\", b"\\\\").replace(b"(", b"\\(").replace(b")", b"\\)")


def layout(title: str, sections: Sequence[tuple[str, Sequence[str]]]) -> list[list[Line]]:
    """The lines of each page: the title on page 1, then numbered bold headings and wrapped body paragraphs, a
    paragraph gap of half a line, and a running footer with the page number."""
    pages: list[list[Line]] = [[]]
    y = float(TOP)

    def room(needed: float) -> None:
        nonlocal y
        if y - needed < BOTTOM:
            pages.append([])
            y = float(TOP)

    def put(font: str, size: int, text: str, leading: float) -> None:
        nonlocal y
        room(leading)
        pages[-1].append((font, size, y, text))
        y -= leading

    put("F2", TITLE_PT, title, TITLE_PT * 2)
    for number, (heading, paragraphs) in enumerate(sections, start=1):
        room(HEADING_PT * 2 + BODY_LEADING * 3)  # no heading alone at the foot of a page
        y -= HEADING_PT * 0.5
        put("F2", HEADING_PT, f"{number} {heading}", HEADING_PT * 1.5)
        for text in paragraphs:
            for line in textwrap.wrap(text, LINE_CHARS):
                put("F1", BODY_PT, line, BODY_LEADING)
            y -= BODY_LEADING * 0.6
    footer = title if len(title) <= 60 else title[:57] + "..."
    for n, page in enumerate(pages, start=1):
        page.append(("F1", 8, 30.0, f"{footer} | page {n} of {len(pages)}"))
    return pages


def pdf_bytes(title: str, pages: Sequence[Sequence[Line]]) -> bytes:
    """A PDF 1.4 file of these pages (uncompressed content streams, the standard Helvetica fonts) with /Title."""
    kids = b" ".join(b"%d 0 R" % (6 + 2 * i) for i in range(len(pages)))
    fonts = b"/Font << /F1 3 0 R /F2 4 0 R >>"
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [%s] /Count %d >>" % (kids, len(pages)),
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>",
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica-Bold /Encoding /WinAnsiEncoding >>",
        b"<< /Title (%s) /Producer (bench.scale) >>" % _pdf_text(title),
    ]
    for i, lines in enumerate(pages):
        content = b"\n".join(b"BT /%s %d Tf %d %.1f Td (%s) Tj ET" % (font.encode(), size, LEFT, y, _pdf_text(text))
                             for font, size, y, text in lines)
        objects.append(b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 %d %d] /Resources << %s >> /Contents %d 0 R >>"
                       % (PAGE_WIDTH, PAGE_HEIGHT, fonts, 7 + 2 * i))
        objects.append(b"<< /Length %d >>\nstream\n%s\nendstream" % (len(content), content))
    return build_pdf(objects, trailer=b"/Info 5 0 R")


# ------------------------------------------------------------------------------------------ the corpus


@dataclass(frozen=True)
class Corpus:
    """The generated files: PDFs, text documents, the PDFs added one at a time later, and what they hold."""

    pdf_dir: Path
    text_dir: Path
    additions: tuple[Path, ...]
    pdf_files: int
    pages: int
    pdf_paragraphs: int  # about the chunks the PDFs give
    text_files: int
    text_chunks: int
    source_files: int


def _pdf_document(rng: random.Random, pool: Pool, number: int, page_goal: int) -> tuple[str, list[list[Line]], int]:
    """(title, pages, paragraphs) of one report of about ``page_goal`` pages: sections of 1-3 paragraphs."""
    title = f"Rapport {number:04d}: {rng.choice(pool.headings)}"
    sections: list[tuple[str, list[str]]] = []
    paragraphs = chars = 0
    while True:
        sections.append((rng.choice(pool.headings),
                         [paragraph(rng, pool, *PARAGRAPH_CHARS) for _ in range(rng.randint(1, 3))]))
        paragraphs += len(sections[-1][1])
        chars += sum(len(p) for p in sections[-1][1])
        # a page holds about 5,500 characters: lay out (the costly part) only once the text may fill the goal
        if chars >= page_goal * 5000 and len(pages := layout(title, sections)) >= page_goal:
            return title, pages, paragraphs


def generate(folder: Path, size: ScaleSize, seed: int = SEED, pool: Pool | None = None) -> Corpus:
    """Writes the corpus for ``size`` under ``folder``: PDFs of 4-40 pages until ``size.pages``, then text
    documents of 20-80 one-chunk paragraphs until the PDFs' paragraphs plus theirs reach ``size.chunks``, and
    ``size.additions`` more PDFs of about 10 pages, ingested one at a time during the measurement."""
    pool = pool or read_pool()
    rng = random.Random(seed)
    pdf_dir, text_dir, extra_dir = folder / "pdf", folder / "text", folder / "added"
    for d in (pdf_dir, text_dir, extra_dir):
        d.mkdir(parents=True, exist_ok=True)
    pages = paragraphs = files = 0
    while pages < size.pages:
        goal = min(rng.randint(4, 40), max(1, size.pages - pages))
        title, laid_out, count = _pdf_document(rng, pool, files + 1, goal)
        (pdf_dir / f"rapport-{files + 1:04d}.pdf").write_bytes(pdf_bytes(title, laid_out))
        pages, paragraphs, files = pages + len(laid_out), paragraphs + count, files + 1
    text_chunks = text_files = 0
    while paragraphs + text_chunks < size.chunks:
        count = min(rng.randint(20, 80), size.chunks - paragraphs - text_chunks)
        body = "\n\n".join(paragraph(rng, pool, *TEXT_PARAGRAPH_CHARS) for _ in range(count))
        (text_dir / f"notitie-{text_files + 1:04d}.txt").write_text(body + "\n", "utf-8")
        text_chunks, text_files = text_chunks + count, text_files + 1
    additions = []
    for n in range(size.additions):
        title, laid_out, _ = _pdf_document(rng, pool, 9000 + n, 10)
        path = extra_dir / f"toegevoegd-{n + 1}.pdf"
        path.write_bytes(pdf_bytes(title, laid_out))
        additions.append(path)
    return Corpus(pdf_dir, text_dir, tuple(additions), files, pages, paragraphs, text_files, text_chunks, pool.files)


def questions(count: int, seed: int = SEED) -> list[str]:
    """``count`` distinct questions (a seeded sample) of the evaluation sets: what users ask the server."""
    found: dict[str, None] = {}
    for file in QUESTION_FILES:
        for line in file.read_text("utf-8").splitlines():
            if line.strip():
                found[json.loads(line)["question"]] = None
    pool = list(found)
    return random.Random(seed).sample(pool, min(count, len(pool)))


# ------------------------------------------------------------------------------------------ the server's side


def _status_mb(field_name: str) -> float:
    """A /proc/self/status memory field (VmRSS, VmHWM) in MiB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(f"{field_name}:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def _ingest_command(path: Path, index: Path) -> list[str]:
    return [sys.executable, "-m", "docserver", "ingest", str(path), "--collection", COLLECTION, "--index", str(index),
            "--quiet"]


async def _probe(index: Path, queries: list[str], passes: int, additions: list[Path]) -> dict[str, Any]:
    """What a server process holding the index sees: start-up, memory, search latency, catching up with ingests."""
    from docserver.live import LiveIndex

    gc.collect()
    base_mb = _status_mb("VmRSS")
    started = time.perf_counter()
    live = LiveIndex.load(index_path=index, check_interval_s=0.0, reload_wait_s=3600.0)  # wait for every reload
    load_s = time.perf_counter() - started
    gc.collect()
    loaded_mb = _status_mb("VmRSS")
    index_now = await live.current()
    chunks = index_now.outline(COLLECTION, 0).chunks
    for query in queries[:10]:  # warm-up: the stem cache and the decompounder's memo
        index_now.search(query, COLLECTION)
    latencies = []
    for _ in range(passes):
        for query in queries:
            t0 = time.perf_counter()
            index_now.search(query, COLLECTION)
            latencies.append(time.perf_counter() - t0)
    searched_mb = _status_mb("VmRSS")
    reloads = []
    for path in additions:
        subprocess.run(_ingest_command(path, index), check=True, cwd=ROOT)  # another process, as in production
        t0 = time.perf_counter()
        index_now = await live.current()
        reload_s = time.perf_counter() - t0
        t1 = time.perf_counter()
        index_now.search(queries[0], COLLECTION)
        reloads.append({"reload_s": reload_s, "first_search_s": time.perf_counter() - t1,
                        "chunks": index_now.outline(COLLECTION, 0).chunks,
                        "documents": index_now.outline(COLLECTION, 0).documents})
    result = {"load_s": load_s, "chunks": chunks, "documents": live.index.outline(COLLECTION, 0).documents
              - len(additions), "engine": type(live.index).__name__,
              "base_mb": base_mb, "loaded_mb": loaded_mb, "searched_mb": searched_mb, "final_mb": _status_mb("VmRSS"),
              "peak_mb": _status_mb("VmHWM"), "search_s": latencies, "queries": len(queries), "reloads": reloads,
              "index_mb": index.stat().st_size / 2**20}
    # the stand-in vectors, once the words-only figures are taken (a process of its own searches with them)
    started = time.perf_counter()
    stored = write_vectors(index)
    result["vectors"] = {"key": VECTOR_KEY, "dimension": VECTOR_DIMENSION, "stored": stored,
                         "write_s": time.perf_counter() - started, "index_mb": index.stat().st_size / 2**20}
    return result


def _unit_vectors(count: int, seed: int) -> np.ndarray:
    """``count`` seeded random unit vectors of ``VECTOR_DIMENSION`` float32s (rows)."""
    matrix = np.random.default_rng(seed).standard_normal((count, VECTOR_DIMENSION)).astype(np.float32)
    return matrix / np.linalg.norm(matrix, axis=1, keepdims=True)


def write_vectors(path: Path) -> int:
    """A stand-in vector of space ``VECTOR_KEY`` for every passage a server of the index file ``path`` searches (its
    documents and the bundled corpus, as an ingest with embeddings leaves the file), written into the file's
    ``vectors`` table; how many.  Deterministic: the digests in sorted order take the rows of one seeded matrix."""
    from docserver.corpus import BUNDLED_CORPUS
    from docserver.documents import chunk_text
    from docserver.schema import connect, prepare
    from docserver.vectors import library_passages, passage_digest

    digests = sorted({passage_digest(VECTOR_KEY, chunk_text(c)) for c in library_passages(path, BUNDLED_CORPUS)})
    matrix = _unit_vectors(len(digests), SEED)
    connection = connect(path)
    try:
        prepare(connection, path)
        with connection:
            connection.executemany("INSERT OR REPLACE INTO vectors (key, digest, vector) VALUES (?, ?, ?)",
                                   [(VECTOR_KEY, d, row.astype("<f4").tobytes()) for d, row in zip(digests, matrix,
                                                                                                    strict=True)])
    finally:
        connection.close()
    return len(digests)


def _probe_hybrid(index: Path, queries: list[str], passes: int) -> dict[str, Any]:
    """What a server process searching by meaning too sees, measured as ``_probe`` measures the words-only one but
    in a new process (no stem cache or memory left from that one): ``SqliteIndex.load`` with the passages' vectors
    of ``VECTOR_KEY``, its resident memory, and ``SqliteIndex.search`` of each question with a random query vector made
    before timing (the embedding of the query is timed apart)."""
    from docserver.sqlite.search import SqliteIndex

    gc.collect()
    base_mb = _status_mb("VmRSS")
    started = time.perf_counter()
    hybrid = SqliteIndex.load(index, vector_key=VECTOR_KEY)
    load_s = time.perf_counter() - started
    gc.collect()
    loaded_mb = _status_mb("VmRSS")
    if not hybrid.searches_by_meaning(COLLECTION) or hybrid.waiting():
        raise RuntimeError(f"the index loaded with {VECTOR_KEY} lacks vectors: {len(hybrid.waiting())} waiting")
    vectors = _unit_vectors(len(queries), SEED + 1)  # the query embeddings' stand-ins
    pairs = list(zip(queries, vectors, strict=True))
    for query, vector in pairs[:10]:  # warm-up, as for the words-only search
        hybrid.search(query, COLLECTION, query_vector=vector)
    latencies = []
    for _ in range(passes):
        for query, vector in pairs:
            t0 = time.perf_counter()
            hybrid.search(query, COLLECTION, query_vector=vector)
            latencies.append(time.perf_counter() - t0)
    return {"base_mb": base_mb, "load_s": load_s, "loaded_mb": loaded_mb, "searched_mb": _status_mb("VmRSS"),
            "peak_mb": _status_mb("VmHWM"), "search_s": latencies,
            "chunks": hybrid.outline(COLLECTION, 0).chunks}


def probe_main(argv: Sequence[str] | None = None) -> int:
    """`python -m bench.scale probe --index FILE --queries FILE --passes N --out FILE [--add PDF ...] [--vectors]`."""
    parser = argparse.ArgumentParser(prog="python -m bench.scale probe")
    parser.add_argument("--index", type=Path, required=True)
    parser.add_argument("--queries", type=Path, required=True, help="a JSON list of questions")
    parser.add_argument("--passes", type=int, default=1)
    parser.add_argument("--add", type=Path, nargs="*", default=[])
    parser.add_argument("--vectors", action="store_true",
                        help=f"search by meaning too, with the vectors of {VECTOR_KEY} (written by a probe before)")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    queries = json.loads(args.queries.read_text("utf-8"))
    if args.vectors:
        result = _probe_hybrid(args.index, queries, args.passes)
    else:
        result = asyncio.run(_probe(args.index, queries, args.passes, list(args.add)))
    args.out.write_text(json.dumps(result), "utf-8")
    return 0


def _embed(index: Path, scratch: Path, queries: list[str], passages: int) -> dict[str, Any]:
    """The embedding endpoint of ``EMBEDDINGS_*``: ``embed_chunks`` (the ingest's embedding step) of a seeded sample
    of ``passages`` of the collection's passages into ``scratch``, a new file, then ``Embedder.query`` of each of
    ``queries`` (distinct: none from the cache) after one warm-up query."""
    from docserver.embeddings import Embedder, EmbeddingSettings
    from docserver.store import read_snapshot
    from docserver.vectors import embed_chunks

    settings = EmbeddingSettings.from_env()
    if settings is None:
        raise RuntimeError("EMBEDDINGS_URL is not set")
    chunks = sorted((c for d in read_snapshot(index).documents if d.collection == COLLECTION for c in d.chunks),
                    key=lambda c: (c.doc_id, c.chunk_index))
    sample = random.Random(SEED).sample(chunks, min(passages, len(chunks)))
    for stale in (scratch, *(scratch.with_name(scratch.name + end) for end in ("-wal", "-shm", "-journal"))):
        stale.unlink(missing_ok=True)
    with Embedder(settings) as embedder:
        cpu, started = time.process_time(), time.perf_counter()
        done = embed_chunks(scratch, embedder, sample)
        embed_s, embed_cpu_s = time.perf_counter() - started, time.process_time() - cpu
        embedder.query("warm-up: " + queries[0])
        latencies = []
        for query in queries:
            t0 = time.perf_counter()
            embedder.query(query)
            latencies.append(time.perf_counter() - t0)
        dimension = embedder.dimension
    parts = urlsplit(settings.url)
    return {"model": settings.model or "(unnamed)", "endpoint": f"{parts.scheme}://{parts.hostname}:{parts.port or ''}",
            "batch_size": settings.batch_size, "concurrency": settings.concurrency, "dimension": dimension,
            "passages": len(sample), "embedded": done.embedded, "error": done.error, "embed_s": embed_s,
            "sentences": settings.sentences,  # each passage's sentences embedded too (EMBEDDINGS_SENTENCE_MATCH)
            "embed_cpu_s": embed_cpu_s, "query_s": latencies}


def embed_main(argv: Sequence[str] | None = None) -> int:
    """`python -m bench.scale embed --index FILE --scratch FILE --queries FILE --passages N --out FILE`."""
    parser = argparse.ArgumentParser(prog="python -m bench.scale embed")
    parser.add_argument("--index", type=Path, required=True)
    parser.add_argument("--scratch", type=Path, required=True, help="a new index file the sample's vectors go to")
    parser.add_argument("--queries", type=Path, required=True, help="a JSON list of questions")
    parser.add_argument("--passages", type=int, required=True)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    queries = json.loads(args.queries.read_text("utf-8"))
    args.out.write_text(json.dumps(_embed(args.index, args.scratch, queries, args.passages)), "utf-8")
    return 0


# ------------------------------------------------------------------------------------------ the section


def _one_core() -> int:
    """The core the measured processes are pinned to: the last one this process may use."""
    return max(os.sched_getaffinity(0))


def _run_pinned(name: str, cmd: list[str], work: Path, core: int,
                env: dict[str, str] | None = None) -> tuple[float, float]:
    """Runs ``cmd`` as a benchmark child pinned to ``core``, with ``env`` added to its environment; (wall seconds,
    CPU seconds). Fails loudly."""
    from bench.harness import Proc, child_env, set_cpus

    proc = Proc(name, cmd, child_env(env or {}), ROOT, work)
    set_cpus([proc.pid], {core})
    started = time.perf_counter()
    while proc.popen.poll() is None:
        proc.cpu_s()  # read while it lives: the CPU clock of a reaped process is gone
        try:
            proc.popen.wait(timeout=0.2)
        except subprocess.TimeoutExpired:
            continue
    wall = time.perf_counter() - started
    proc.stop()
    if proc.popen.returncode != 0:
        tail = proc.log_path.read_text("utf-8", "replace")[-3000:]
        raise RuntimeError(f"{name} failed ({proc.popen.returncode}):\n{tail}")
    return wall, proc.cpu_s()


def _ingest_pinned(work: Path, name: str, path: Path, index: Path, core: int) -> dict[str, float]:
    """`python -m docserver ingest` of ``path`` on ``core``: its wall and CPU seconds."""
    wall, cpu = _run_pinned(name, _ingest_command(path, index), work, core)
    return {"wall_s": wall, "cpu_s": cpu}


def measure(work: Path, size: ScaleSize) -> dict[str, Any]:
    """Generates the corpus under ``work``, ingests it on one core and probes a server's index of it."""
    folder = work / "scale"
    started = time.perf_counter()
    corpus = generate(folder, size)
    generate_s = time.perf_counter() - started
    core = _one_core()
    index = folder / "index.sqlite3"
    ingest_pdf = _ingest_pinned(work, "scale-ingest-pdf", corpus.pdf_dir, index, core)
    ingest_text = _ingest_pinned(work, "scale-ingest-text", corpus.text_dir, index, core)
    queries_file = folder / "queries.json"
    queries = questions(size.queries)
    queries_file.write_text(json.dumps(queries), "utf-8")
    out = folder / "probe.json"
    _run_pinned("scale-probe", [sys.executable, "-m", "bench.scale", "probe", "--index", str(index), "--queries",
                                str(queries_file), "--passes", str(size.passes), "--out", str(out), "--add",
                                *map(str, corpus.additions)], work, core)
    probe = json.loads(out.read_text("utf-8"))
    out = folder / "probe-vectors.json"
    _run_pinned("scale-probe-vectors", [sys.executable, "-m", "bench.scale", "probe", "--vectors", "--index",
                                        str(index), "--queries", str(queries_file), "--passes", str(size.passes),
                                        "--out", str(out)], work, core)
    probe["vectors"].update(json.loads(out.read_text("utf-8")))
    embedding = _measure_embedding(work, folder, index, size, core)
    corpus_data = {k: str(v) if isinstance(v, Path) else v for k, v in asdict(corpus).items() if k != "additions"}
    return {"size": asdict(size), "corpus": corpus_data, "generate_s": generate_s, "core": core,
            "ingest_pdf": ingest_pdf, "ingest_text": ingest_text, "index_mb": probe["index_mb"],  # before vectors
            "probe": probe, "embedding": embedding}


def _measure_embedding(work: Path, folder: Path, index: Path, size: ScaleSize, core: int) -> dict[str, Any] | None:
    """`python -m bench.scale embed` on ``core`` against the endpoint of this process's ``EMBEDDINGS_*`` (which
    the other steps never see); None when ``EMBEDDINGS_URL`` is unset."""
    if not os.environ.get("EMBEDDINGS_URL", "").strip():
        return None
    queries_file = folder / "embed-queries.json"
    queries_file.write_text(json.dumps(questions(size.embed_queries, seed=SEED + 1)), "utf-8")
    out = folder / "embed.json"
    env = {k: v for k, v in os.environ.items() if k.upper().startswith("EMBEDDINGS_")}
    _run_pinned("scale-embed", [sys.executable, "-m", "bench.scale", "embed", "--index", str(index), "--scratch",
                                str(folder / "embed-sample.sqlite3"), "--queries", str(queries_file), "--passages",
                                str(size.embed_passages), "--out", str(out)], work, core, env)
    return json.loads(out.read_text("utf-8"))


def summary(data: dict[str, Any]) -> dict[str, float]:
    """The section's headline figures from ``measure``'s data (seconds, MiB, pages or passages per second; NaN for
    what did not run: the hybrid search in data from before it, the embedding endpoint without EMBEDDINGS_URL)."""
    from bench.harness import percentile

    probe, corpus = data["probe"], data["corpus"]
    reloads = [r["reload_s"] for r in probe["reloads"]]
    hybrid = probe.get("vectors", {}).get("search_s", [])
    nan = float("nan")
    figures = {
        "pages_per_s": corpus["pages"] / data["ingest_pdf"]["wall_s"],
        "pages_per_cpu_s": corpus["pages"] / data["ingest_pdf"]["cpu_s"],
        "reload_s": max(reloads) if reloads else nan,
        "search_p50": percentile(probe["search_s"], 50),
        "search_p95": percentile(probe["search_s"], 95),
        "search_max": max(probe["search_s"]),
        "rss_mb": probe["final_mb"],
        "peak_mb": probe["peak_mb"],
        "hybrid_p50": percentile(hybrid, 50),
        "hybrid_p95": percentile(hybrid, 95),
        "hybrid_max": max(hybrid, default=nan),
        "hybrid_rss_mb": probe.get("vectors", {}).get("searched_mb", nan),
        "embed_per_s": nan,
        "ingest_embed_per_s": nan,
        "embed_query_p50": nan,
    }
    embedding = data.get("embedding")
    if embedding and embedding["embedded"]:
        text_per_s = corpus["text_chunks"] / data["ingest_text"]["wall_s"]
        # passages made searchable per second (each with its sentences when those are embedded too)
        figures["embed_per_s"] = (embedding["passages"] if embedding.get("sentences") else embedding["embedded"]) \
            / embedding["embed_s"]
        # an ingest stores a file's passages, then embeds them: one after the other
        figures["ingest_embed_per_s"] = 1 / (1 / text_per_s + 1 / figures["embed_per_s"])
        figures["embed_query_p50"] = percentile(embedding["query_s"], 50)
    return figures


def main(argv: Sequence[str] | None = None) -> int:
    """`python -m bench.scale probe ...` (the measured server process), `python -m bench.scale embed ...` (the
    embedding endpoint, with EMBEDDINGS_URL) or `python -m bench.scale run [--smoke]` (this section alone, printing
    its figures; `python -m bench --only scale` writes the report)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["probe"]:
        return probe_main(argv[1:])
    if argv[:1] == ["embed"]:
        return embed_main(argv[1:])
    parser = argparse.ArgumentParser(prog="python -m bench.scale run")
    parser.add_argument("command", choices=["run"])
    parser.add_argument("--smoke", action="store_true")
    parser.add_argument("--work", type=Path, required=True, help="a scratch folder for the corpus and the index")
    args = parser.parse_args(argv)
    data = measure(args.work, SMOKE if args.smoke else FULL)
    print(json.dumps({k: v for k, v in data.items() if k != "probe"}, indent=1))
    print(json.dumps(summary(data), indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
