"""Section 13: the embedded library on disk (the SQLite default) at scale.

The generated library of section 12 (`bench/library.py`: documents of 20-80 one-paragraph chunks, `OnDiskSize.chunks`
in all) saved into a SQLite file in one transaction (`DocumentStore.save`, as `python -m docserver ingest` saves a
folder: the documents and their search copy, `docserver/sqlite/words.py`), then one more document saved into the
full file (a note the CLI ingests). A fresh process then starts on the file as `python -m docserver` does
(`LiveIndex.load`: the index searched on disk, `docserver/sqlite/search.py`) and searches the evaluation sets'
questions one at a time after one uncounted pass; it reports how long the start took and its resident memory (peak
and after the searches, from /proc). Section 10 measures the index held in memory, for comparison.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.library import COLLECTION, TERM, _percentile, generate
from bench.scale import questions

TARGETS = {"start_s": 10.0, "rss_mb": 1024.0}  # the issue's: start-up and resident memory at 200,000 chunks


@dataclass(frozen=True)
class OnDiskSize:
    chunks: int
    queries: int


FULL = OnDiskSize(chunks=200_000, queries=300)
SMOKE = OnDiskSize(chunks=2_000, queries=30)


def _memory() -> dict[str, float]:
    """This process's resident memory now and at its peak, MB (Linux /proc)."""
    fields = dict(line.split(":", 1) for line in Path("/proc/self/status").read_text().splitlines() if ":" in line)
    return {"rss_mb": int(fields["VmRSS"].split()[0]) / 1024, "peak_mb": int(fields["VmHWM"].split()[0]) / 1024}


VECTOR_KEY, DIMENSIONS = "bench-random", 384  # multilingual-e5-small's width


def probe(path: Path, queries: int, meaning: bool) -> dict[str, Any]:
    """A server's start on the file at `path`, its searches and its memory (run in a fresh process); `meaning`:
    searched by words and meaning (random query vectors) in the space of `give_vectors`."""
    import numpy as np

    from docserver.live import LiveIndex
    from docserver.sqlite.search import SqliteIndex

    rng = np.random.default_rng(1)
    asked = [(q, (v := rng.standard_normal(DIMENSIONS).astype(np.float32)) / np.linalg.norm(v) if meaning else None)
             for q in questions(queries)]
    started = time.perf_counter()
    index = SqliteIndex.load(path, vector_key=VECTOR_KEY) if meaning else LiveIndex.load(index_path=path).index
    start_s = time.perf_counter() - started
    at_start = _memory()
    for query, vector in asked:  # uncounted: the file's pages come into the cache
        index.search(query, COLLECTION, query_vector=vector)
    seconds = []
    for query, vector in asked:
        started = time.perf_counter()
        index.search(query, COLLECTION, query_vector=vector)
        seconds.append(time.perf_counter() - started)
    return {"engine": type(index).__name__, "start_s": start_s, "start_rss_mb": at_start["rss_mb"],
            "search_s": seconds, **_memory(), "chunks_served": index.chunk_count,
            "tokens": len(index.vocabulary.counts) if hasattr(index, "vocabulary") else None}


def give_vectors(path: Path) -> float:
    """Every passage of the file a random unit vector of `DIMENSIONS` in space `VECTOR_KEY` (what an exact scan
    costs does not depend on what the vectors say); the seconds it took."""
    import numpy as np

    from docserver import schema
    from docserver.documents import Chunk, chunk_text
    from docserver.vectors import _write, passage_digest

    started, rng = time.perf_counter(), np.random.default_rng(2)
    with schema.connect(path) as db:
        rows = db.execute("SELECT collection, doc_id, chunk_index, title, section, text FROM word_chunks")
        while batch := rows.fetchmany(2000):
            vectors = rng.standard_normal((len(batch), DIMENSIONS)).astype(np.float32)
            vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
            with schema.connect(path) as writer:
                _write(writer, VECTOR_KEY, {passage_digest(VECTOR_KEY, chunk_text(Chunk(*row))): vector
                                            for row, vector in zip(batch, vectors, strict=True)})
    return time.perf_counter() - started


def _probe(path: Path, queries: int, meaning: bool) -> dict[str, Any]:
    run = subprocess.run([sys.executable, "-m", "bench.ondisk", str(path), str(queries), "meaning" if meaning else
                          "words"], capture_output=True, text=True, check=True, timeout=3600)
    return json.loads(run.stdout.splitlines()[-1])


def measure(work: Path, size: OnDiskSize) -> dict[str, Any]:
    from docserver.documents import Chunk, Document
    from docserver.store import DocumentStore

    documents = generate(size.chunks)
    path = work / "ondisk" / "docserver.sqlite3"
    started = time.perf_counter()
    with DocumentStore(path) as store:
        store.save([(d, None) for d in documents])
    save_s = time.perf_counter() - started
    count = len(documents)
    del documents
    note = Document("note", "notes", "Notitie", (Chunk("note", "notes", 0, "Notitie", "Notitie", f"{TERM} notitie"),))
    started = time.perf_counter()
    with DocumentStore(path) as store:
        store.save([(note, None)])
    one_s = time.perf_counter() - started
    file_mb = path.stat().st_size / 2**20
    log_mb = sum(p.stat().st_size for p in path.parent.glob(path.name + "-wal")) / 2**20
    words = _probe(path, size.queries, False)
    vectors_s = give_vectors(path)
    meaning = _probe(path, size.queries, True)
    return {"chunks": size.chunks, "documents": count, "save_s": save_s, "one_s": one_s, "file_mb": file_mb,
            "log_mb": log_mb,
            **words, "vectors_s": vectors_s, "meaning": meaning}


def checks(data: dict[str, Any]) -> list[tuple[str, str, str, bool | None]]:
    return [
        (f"Start-up, SQLite default on disk, {data['chunks']:,} chunks", f"≤ {TARGETS['start_s']:.0f} s",
         f"{data['start_s']:.2f} s", data["start_s"] <= TARGETS["start_s"]),
        (f"Resident memory, SQLite default on disk, {data['chunks']:,} chunks", f"≤ {TARGETS['rss_mb']:.0f} MB",
         f"{data['peak_mb']:.0f} MB peak", data["peak_mb"] <= TARGETS["rss_mb"]),
    ]


def section(data: dict[str, Any], table: Any, mark: Any) -> str:
    """Section 13 of the report (`table` and `mark`: the report's own)."""
    judged, seconds, meaning = checks(data), data["search_s"], data["meaning"]
    fused = meaning["search_s"]
    rows = [
        ["save (`DocumentStore.save`, one transaction)", f"{data['documents']:,} documents, {data['chunks']:,} chunks; "
         f"file {data['file_mb']:,.0f} MB after (its write-ahead log {data.get('log_mb', float('nan')):,.0f} MB)",
         f"{data['save_s']:.0f} s ({data['chunks'] / data['save_s']:.0f} "
         "chunks/s)", ""],
        ["one more document saved into it", "a one-chunk note, its words counted and split into the library's",
         f"{data['one_s']:.2f} s", ""],
        ["a server's start on it (`LiveIndex.load`)", f"a fresh process; searched as `{data['engine']}`; its "
         f"vocabulary {data.get('tokens') or 0:,} distinct words",
         f"{data['start_s']:.2f} s", mark(judged[0][3])],
        ["resident memory", f"{data['start_rss_mb']:.0f} MB after the start, {data['rss_mb']:.0f} MB after the "
         "searches", f"{data['peak_mb']:.0f} MB peak", mark(judged[1][3])],
        ["search (`SqliteIndex.search`)", f"{len(seconds)} questions one at a time, after one uncounted pass",
         f"p50 {statistics.median(seconds) * 1000:.1f} ms, p95 {_percentile(seconds, 0.95) * 1000:.1f} ms", ""],
        [f"start on it searched by meaning too ({DIMENSIONS}-dimensional vectors)", f"random vectors given in "
         f"{data['vectors_s']:.0f} s; {meaning['start_rss_mb']:.0f} MB after the start, {meaning['peak_mb']:.0f} "
         "MB peak", f"{meaning['start_s']:.2f} s", ""],
        ["search by words and meaning (an exact scan)", "the same questions, a random query vector each",
         f"p50 {statistics.median(fused) * 1000:.1f} ms, p95 {_percentile(fused, 0.95) * 1000:.1f} ms", ""],
    ]
    return "\n".join([
        "## 13. The embedded library on disk",
        "",
        "`bench/ondisk.py`: the generated library of section 12 in the embedded default's SQLite file "
        "(`docserver/sqlite/`: the postings, statistics and words a search reads kept in the file, brought up to date "
        "in each save's transaction); a fresh process starts on it as `python -m docserver` does and searches the "
        "evaluation sets' questions. Start-up and memory no longer grow with the library (the index held in memory "
        "took about 12 KB per chunk and 9 s of start-up per 20,000 chunks, section 10 before issue 61); what stays "
        "in memory is the vocabulary (the generated text reuses the bundled corpus's words: real text has more) and, "
        "searched by meaning, the vectors of the collections (1.5 KB a passage).",
        "",
        table(["", "what", "measured", "target"], rows),
    ])


if __name__ == "__main__":
    print(json.dumps(probe(Path(sys.argv[1]), int(sys.argv[2]), sys.argv[3] == "meaning")))
