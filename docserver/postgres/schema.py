"""The library's tables in PostgreSQL, in their own schema (``docserver``) so a database shared with other
applications (Open WebUI keeps its own in PostgreSQL too) keeps them apart.

Documents and chunks as in the SQLite file (``docserver/schema.py``), plus what a search reads instead of an index
in memory (``docserver/postings.py``):

* ``postings``: per collection and stem, the chunks holding it with the weighted count and its impact, read best
  impact first (an index on (collection, stem, impact)), and deleted by chunk when a document goes;
* ``chunks.stems`` / ``chunks.tfs``: a chunk's own stems and counts, what scores a candidate exactly;
* ``stems`` (document frequency per collection and stem), ``collection_stats`` (chunks and total length: the
  average length), ``tokens`` (every token's count over the library: the compound splits, ``compounds.py``).

Counters (table ``meta``), bumped in the transaction of the change they count, as in the SQLite file:
``generation``, ``collection:<name>``, ``vocabulary`` (the tokens changed) and ``epoch`` (random, drawn once).
Every change also sends ``NOTIFY docserver_library`` with the new generation when it commits.

Writers take one transaction-scoped advisory lock (``WRITE_LOCK``): the statistics a save reads and updates stay
consistent with any number of writers on the database.
"""

import secrets
from collections.abc import Iterable

import psycopg

__all__ = ["CHANNEL", "SCHEMA", "WRITE_LOCK", "bump", "collection_versions", "connect", "generation", "prepare",
           "prepare_vectors"]

SCHEMA = "docserver"
CHANNEL = "docserver_library"
WRITE_LOCK = 0x6E656F6E6C  # pg_advisory_xact_lock key of every writer ("neonl")
VERSION = 1

_DDL = f"""
CREATE SCHEMA IF NOT EXISTS {SCHEMA};
SET search_path TO {SCHEMA}, public;
CREATE TABLE IF NOT EXISTS meta (
    key   text PRIMARY KEY,
    value bigint NOT NULL
);
CREATE TABLE IF NOT EXISTS documents (
    id          bigserial UNIQUE,
    collection  text NOT NULL,
    doc_id      text NOT NULL,
    title       text NOT NULL,
    year        integer,
    url         text,
    kind        text,
    language    text,
    disclaimer  text,
    metadata    jsonb NOT NULL,
    source      text,
    sha256      text,
    ingested_at text,
    file_id     text,
    source_name text,
    corpus      text,                        -- a bundled corpus document's fingerprint (kept in step with the
                                             -- corpus at start-up); NULL: ingested
    title_stems text[] NOT NULL,                 -- what a title look-up matches (list_documents)
    PRIMARY KEY (collection, doc_id)
);
CREATE INDEX IF NOT EXISTS documents_title_stems ON documents USING gin (title_stems);
CREATE TABLE IF NOT EXISTS chunks (
    id          bigserial PRIMARY KEY,
    document    bigint NOT NULL REFERENCES documents (id) ON DELETE CASCADE,
    collection  text NOT NULL,
    doc_id      text NOT NULL,
    chunk_index integer NOT NULL,
    title       text NOT NULL,
    section     text NOT NULL,
    text        text NOT NULL,
    url         text,
    page        integer,
    page_end    integer,
    article     text,              -- the article its section heading starts with (ranking.boost_articles)
    length      real NOT NULL,     -- as BM25 counts it (postings.ChunkTerms)
    stems       text[] NOT NULL,   -- its stems and their weighted counts: the exact score of a candidate
    tfs         real[] NOT NULL,
    text_sha    text NOT NULL,     -- sha256 of the text embedded (chunk_text): its vector's key (vectors.py)
    UNIQUE (collection, doc_id, chunk_index)
);
CREATE INDEX IF NOT EXISTS chunks_text_sha ON chunks (text_sha);
CREATE INDEX IF NOT EXISTS chunks_document ON chunks (document);
CREATE INDEX IF NOT EXISTS chunks_article ON chunks (collection, article) WHERE article IS NOT NULL;
CREATE TABLE IF NOT EXISTS postings (
    collection text NOT NULL,
    stem       text NOT NULL,
    impact     real NOT NULL,
    chunk      bigint NOT NULL,
    tf         real NOT NULL
);
CREATE INDEX IF NOT EXISTS postings_champions ON postings (collection, stem, impact DESC) INCLUDE (chunk);
CREATE INDEX IF NOT EXISTS postings_chunk ON postings (chunk);
CREATE TABLE IF NOT EXISTS stems (
    collection text NOT NULL,
    stem       text NOT NULL,
    df         integer NOT NULL,
    PRIMARY KEY (collection, stem)
);
CREATE TABLE IF NOT EXISTS collection_stats (
    collection text PRIMARY KEY,
    chunks     bigint NOT NULL,
    length     double precision NOT NULL
);
CREATE TABLE IF NOT EXISTS tokens (
    token text PRIMARY KEY,
    count bigint NOT NULL
);
CREATE TABLE IF NOT EXISTS collections (
    name         text PRIMARY KEY,
    display_name text NOT NULL,
    focus        text NOT NULL DEFAULT '',
    created_at   bigint NOT NULL,
    metadata     jsonb NOT NULL DEFAULT '{{}}',
    bundled      boolean NOT NULL DEFAULT false
);
"""


_VECTORS = f"""
SET search_path TO {SCHEMA}, public;
CREATE EXTENSION IF NOT EXISTS vector;
CREATE TABLE IF NOT EXISTS vectors (
    key       text NOT NULL,    -- the vector space (EmbeddingSettings.key)
    text_sha  text NOT NULL,    -- chunks.text_sha
    embedding vector NOT NULL,  -- L2-normalised
    PRIMARY KEY (key, text_sha)
);
"""


def prepare_vectors(connection: psycopg.Connection) -> None:
    """The table of the passages' vectors, and pgvector, created when missing (only a library searched by meaning
    needs them); ``RuntimeError`` naming what is missing when the database has no pgvector."""
    try:
        with connection.transaction():
            connection.execute("SELECT pg_advisory_xact_lock(%s)", (WRITE_LOCK,))
            connection.execute(_VECTORS)
    except psycopg.Error as exc:
        raise RuntimeError(f"search by meaning needs the pgvector extension in the database ({exc})") from exc


def connect(url: str, **options: object) -> psycopg.Connection:
    """A connection to the library's database with its schema first on the search path."""
    connection = psycopg.connect(url, **options)  # type: ignore[arg-type]
    connection.execute(f"SET search_path TO {SCHEMA}, public")
    if not connection.autocommit:
        connection.commit()
    return connection


def prepare(connection: psycopg.Connection) -> None:
    """The tables of this schema and an epoch, created when missing (under the write lock: two servers starting
    on one new database do not both create them); ``RuntimeError`` for tables of another version."""
    with connection.transaction():
        connection.execute("SELECT pg_advisory_xact_lock(%s)", (WRITE_LOCK,))
        connection.execute(_DDL)
        connection.execute("INSERT INTO meta (key, value) VALUES ('epoch', %s), ('schema', %s) "
                           "ON CONFLICT (key) DO NOTHING", (secrets.randbits(62), VERSION))
        found = connection.execute("SELECT value FROM meta WHERE key = 'schema'").fetchone()
    if found is None or found[0] != VERSION:
        raise RuntimeError(f"library schema version {found[0] if found else None} in the database, expected "
                           f"{VERSION}")


def bump(connection: psycopg.Connection, collections: Iterable[str], *, vocabulary: bool = False) -> int:
    """Count a change to what ``collections`` hold (and to the tokens, ``vocabulary``) in the caller's transaction;
    the new generation, also sent to the listeners of ``CHANNEL`` when the transaction commits."""
    keys = ["generation", *(f"collection:{name}" for name in sorted(set(collections)))]
    if vocabulary:
        keys.append("vocabulary")
    with connection.cursor() as cursor:
        cursor.executemany("INSERT INTO meta (key, value) VALUES (%s, 1) "
                           "ON CONFLICT (key) DO UPDATE SET value = meta.value + 1", [(key,) for key in keys])
    value = generation(connection)
    connection.execute("SELECT pg_notify(%s, %s)", (CHANNEL, str(value)))
    return value


def generation(connection: psycopg.Connection) -> int:
    row = connection.execute("SELECT value FROM meta WHERE key = 'generation'").fetchone()
    return int(row[0]) if row is not None else 0


def counters(connection: psycopg.Connection) -> dict[str, int]:
    return dict(connection.execute("SELECT key, value FROM meta").fetchall())


def collection_versions(values: dict[str, int]) -> dict[str, str]:
    """Per collection a change counted: ``"<count>.<epoch>"``, as the SQLite file gives it."""
    epoch = values.get("epoch", 0)
    return {key.removeprefix("collection:"): f"{value}.{epoch:x}" for key, value in values.items()
            if key.startswith("collection:")}
