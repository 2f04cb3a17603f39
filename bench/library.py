"""Section 12: the library in PostgreSQL at scale, and two document servers sharing it.

A local PostgreSQL 16 with pgvector from the `pgserver` package (skipped with a message when it is not installed)
holds a generated library of `LibrarySize.chunks` chunks: documents of 20-80 one-paragraph chunks made of the
sentences and headings of the scale section's source texts (`bench/scale.py`), saved in one transaction
(`PostgresStore.save`, as `python -m docserver ingest` saves a folder). Then:

* the search: the evaluation sets' questions searched in the library's one collection through
  `PostgresIndex.search` (what a `search_collection` call does), one at a time, after one uncounted pass; then
  again by words and meaning, every passage given a random 384-dimensional vector (an exact scan: what it costs
  does not depend on what the vectors say);
* two document servers (`python -m docserver --database URL`, separate processes) on that database: a new document
  saved by a third process (the CLI's ingest), and the seconds until a `search_collection` on the *other* server
  finds it, then the same for its removal (polled every 50 ms, `trials` times).
"""

from __future__ import annotations

import asyncio
import random
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.scale import SEED, paragraph, questions, read_pool

COLLECTION = "scale"
TERM = "xyzzyquux"


@dataclass(frozen=True)
class LibrarySize:
    chunks: int
    queries: int
    trials: int


FULL = LibrarySize(chunks=200_000, queries=300, trials=5)
SMOKE = LibrarySize(chunks=2_000, queries=30, trials=2)


def generate(chunks: int, seed: int = SEED) -> list[Any]:
    """Documents of 20-80 chunks of 600-1,200 characters until `chunks` chunks, seeded."""
    from docserver.documents import Chunk, Document

    rng, pool = random.Random(seed), read_pool()
    documents, made = [], 0
    while made < chunks:
        count, title = min(rng.randint(20, 80), chunks - made), rng.choice(pool.headings)
        doc_id = f"gen-{len(documents):06d}"
        documents.append(Document(doc_id, COLLECTION, title, tuple(
            Chunk(doc_id, COLLECTION, i, title, rng.choice(pool.headings), paragraph(rng, pool, 600, 1200))
            for i in range(count))))
        made += count
    return documents


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


def _searches(url: str, asked: list[str]) -> dict[str, Any]:
    from docserver.postgres.search import PostgresIndex

    started = time.perf_counter()
    library = PostgresIndex.load(url)
    load_s = time.perf_counter() - started
    for query in asked:  # uncounted: the database's caches warm
        library.search(query, COLLECTION)
    seconds = []
    for query in asked:
        started = time.perf_counter()
        library.search(query, COLLECTION)
        seconds.append(time.perf_counter() - started)
    return {"load_s": load_s, "search_s": seconds}


VECTOR_KEY, DIMENSIONS = "bench-random", 384  # multilingual-e5-small's width


def _hybrid(url: str, asked: list[str]) -> dict[str, Any]:
    """Search by words and meaning: every passage given a random vector of DIMENSIONS in the database (the scan's
    cost does not depend on what the vectors say), each question searched with a random query vector."""
    import numpy as np

    from docserver.postgres import schema
    from docserver.postgres.search import PostgresIndex

    started = time.perf_counter()
    with schema.connect(url, autocommit=True) as db:
        schema.prepare_vectors(db)
        db.execute("INSERT INTO vectors (key, text_sha, embedding) SELECT %s, c.text_sha, r.v::vector FROM "
                   "chunks c, LATERAL (SELECT array_agg(random() - 0.5) AS v FROM "
                   "generate_series(1, %s) WHERE c.id IS NOT NULL) r ON CONFLICT DO NOTHING", (VECTOR_KEY, DIMENSIONS))
        db.execute("VACUUM ANALYZE vectors")
    vectors_s = time.perf_counter() - started
    library = PostgresIndex.load(url, vector_key=VECTOR_KEY)
    rng = np.random.default_rng(SEED)
    queries = [(q, (v := rng.standard_normal(DIMENSIONS).astype(np.float32)) / np.linalg.norm(v)) for q in asked]
    for query, vector in queries:  # uncounted
        library.search(query, COLLECTION, query_vector=vector)
    seconds = []
    for query, vector in queries:
        started = time.perf_counter()
        library.search(query, COLLECTION, query_vector=vector)
        seconds.append(time.perf_counter() - started)
    return {"vectors_s": vectors_s, "hybrid_s": seconds}


def _server(url: str, port: int) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-m", "docserver", "--database", url, "--port", str(port),
                             "--log-level", "warning"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


async def _found(docs: Any, expected: bool) -> bool:
    """Whether the server's `search_collection` (through the service's own MCP client) finds the note."""
    from graph.clients.mcp_client import DocumentError

    try:
        hits = await docs.search("notes", TERM)
    except DocumentError:  # no collection "notes" (any more)
        hits = []
    return bool(hits) == expected


async def _healthy(url: str, timeout_s: float) -> None:
    import httpx

    deadline = time.monotonic() + timeout_s
    async with httpx.AsyncClient() as client:
        while True:
            try:
                if (await client.get(url, timeout=2.0)).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise TimeoutError(f"{url} did not answer within {timeout_s} s")
            await asyncio.sleep(0.2)


async def _replicas(url: str, work: Path, trials: int) -> dict[str, list[float]]:
    """Seconds from a save (or removal) by a third process until the other server's search shows it."""
    from bench.harness import free_port
    from graph.clients.mcp_client import DocumentClient

    ports = [free_port(), free_port()]
    servers = [_server(url, port) for port in ports]
    note = work / "note.md"
    added: list[float] = []
    removed: list[float] = []
    try:
        for port in ports:
            await _healthy(f"http://127.0.0.1:{port}/health", 120)
        other = DocumentClient(f"http://127.0.0.1:{ports[1]}/mcp", timeout_s=30)
        for trial in range(trials):
            note.write_text(f"---\ndoc_id: note\ntitle: Notitie {trial}\n---\n\n# Notitie\n\n{TERM} {trial}\n", "utf-8")
            for command, seconds, expected in ((["ingest", str(note), "--collection", "notes", "--quiet"], added, True),
                                               (["remove", "note", "--collection", "notes"], removed, False)):
                subprocess.run([sys.executable, "-m", "docserver", *command, "--database", url], check=True,
                               capture_output=True, timeout=300)
                saved = time.perf_counter()
                while not await _found(other, expected):
                    await asyncio.sleep(0.05)
                seconds.append(time.perf_counter() - saved)
        await other.aclose()
    finally:
        for server in servers:
            server.terminate()
            server.wait(timeout=10)
    return {"added_s": added, "removed_s": removed}


def measure(work: Path, size: LibrarySize) -> dict[str, Any]:
    """The section's figures; {"skipped": reason} without pgserver."""
    try:
        from eval.engines import local_postgres
    except ImportError as exc:
        return {"skipped": f"pgserver not installed ({exc})"}
    from docserver.postgres.store import PostgresStore

    documents = generate(size.chunks)
    asked = questions(size.queries)
    with local_postgres() as database:
        url = database()
        started = time.perf_counter()
        with PostgresStore(url) as store:
            store.save([(d, None) for d in documents])
        ingest_s = time.perf_counter() - started
        import psycopg

        with psycopg.connect(url, autocommit=True) as connection:
            connection.execute("VACUUM ANALYZE")
            database_mb = connection.execute("SELECT pg_database_size(current_database())").fetchone()[0] / 2**20
        searched = _searches(url, asked)
        replicas = asyncio.run(_replicas(url, work, size.trials))
        hybrid = _hybrid(url, asked)
    return {"chunks": size.chunks, "documents": len(documents), "ingest_s": ingest_s, "database_mb": database_mb,
            **searched, **replicas, **hybrid}


def summary(data: dict[str, Any]) -> dict[str, float]:
    seconds = data["search_s"]
    hybrid = data.get("hybrid_s") or [float("nan")]
    return {"search_p50": statistics.median(seconds), "search_p95": _percentile(seconds, 0.95),
            "hybrid_p50": statistics.median(hybrid), "hybrid_p95": _percentile(hybrid, 0.95),
            "chunks_per_s": data["chunks"] / data["ingest_s"], "added_max": max(data["added_s"]),
            "removed_max": max(data["removed_s"])}
