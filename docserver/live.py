"""A running server answers from the documents ingested into its index file, without a restart.

``python -m docserver ingest`` (or the service's library, ``library.py``) is another process writing the SQLite
file (``store.py``) that a server read at start-up.  Every change to what a collection holds (a save, a removal, a
collection created or deleted) bumps a generation counter in that file, so tool calls look
at the file's version (a stat and one tiny query) at most every ``CHECK_INTERVAL_S`` seconds.  When
it changed, the documents are read again (bundled corpus plus the file) and a new index is made from
the one served (``Index.load(previous=...)``): only the documents added, changed or removed are
indexed, so one more document in a 20,000-chunk index is searchable well within a second instead of
after a full rebuild (``python -m bench --only scale``).  The new index is swapped in at once, so a
call answers from the old documents or the new ones, never a mix.  Both the check and the reload run
in a worker thread: an ingest holding the file's write lock, or a reload taking a second, must not
stall the event loop, which keeps serving other requests meanwhile (``textkit`` stems with per-thread
stemmers).

The default, the file with the bundled corpus, is searched on disk (``sqlite/search.py``): every search reads the
file, so a document is found as soon as its save commits, and a reload reads only what that index keeps between
searches (the vocabulary when the words changed, the vectors new since).  A server given another corpus, or a
read-only file whose search copy is behind, holds the index in memory as described above.

With an embedding endpoint (``embedder``) the index is searched by meaning too: every load reads the passages'
vectors of its space from the file, a search's query is embedded once (the embedder keeps recent queries) and a
query the endpoint cannot embed within ``QUERY_WAIT_S`` is searched by its words alone.  Passages that still wait for a
vector (ingested while the endpoint was down, the bundled corpus on first use, all of them after a model change)
are embedded by a catch-up task in a worker thread (``vectors.embed_chunks``), started by a call that finds them and
tried again ``RETRY_S`` after a failure; the vectors it writes bump the file's counters, so the reload after it
searches them.

With the library in PostgreSQL (``database_url``, ``postgres/``) the same loop looks at the database's generation row
instead of the file; a reload there reads only what is small (counters, collections, statistics, the vocabulary
when the words changed), since every search reads the database itself: a document is searchable on every server
as soon as its save commits, and the counters follow within ``CHECK_INTERVAL_S``.

Calls that arrive while a check or reload is under way wait for it, but no longer than ``RELOAD_WAIT_S`` after
it began: a small
change (one more document in a few thousand chunks) is in the answer of the call that noticed it, while a large
one (a 200-page PDF: seconds of indexing) does not stall every search behind it; those calls answer from the
documents served until then, and the ones after the reload from the new ones (``python -m bench --only upload``,
docs/BENCHMARKS.md section 11: chats that met a reload waited up to 1.8 s for it before this bound). A client that
must see a change waits until the version it reports (``list_collections``) changes, as the service does for an
upload.  Watching the file with inotify
would be quicker but platform-specific, and a poll piggybacked on the calls themselves costs nothing
while nobody asks anything.
"""

import asyncio
import logging
import sqlite3
import time
from pathlib import Path

import numpy as np

from .corpus import BUNDLED_CORPUS
from .documents import Chunk
from .embeddings import Embedder, EmbeddingError
from .index import Index
from .searchable import Searchable
from .sqlite.search import SqliteIndex
from .store import IndexSchemaError, index_version, resolve_index_path
from .vectors import Embedded, embed_chunks

try:
    from psycopg import Error as _DatabaseError
except ImportError:  # without the postgres extra there is no database to fail
    _DatabaseError = OSError  # type: ignore[assignment,misc]

__all__ = ["CHECK_INTERVAL_S", "LIBRARY_ERRORS", "QUERY_WAIT_S", "RELOAD_WAIT_S", "RETRY_S", "LiveIndex"]

logger = logging.getLogger("docserver")

CHECK_INTERVAL_S = 1.0
RELOAD_WAIT_S = 0.1  # at most, after a reload began, for the calls that find it under way (bench section 11)
# What reading a damaged, foreign or vanishing index file raises; the server keeps its previous index.
# (JSON errors in stored metadata are ValueErrors.)
_READ_ERRORS = (sqlite3.Error, OSError, ValueError, IndexSchemaError, _DatabaseError)
# What a search of a library read on disk or in a database raises when it cannot be read (tools.py answers an error).
LIBRARY_ERRORS = (sqlite3.Error, OSError, _DatabaseError)
_UNREAD = object()  # the version, when reading it failed
QUERY_WAIT_S = 5.0  # at most, for a query's vector; then it is searched by its words alone
RETRY_S = 30.0  # after the embedding endpoint failed: neither queries nor waiting passages go to it for this long


def _bundled(corpus_dir: Path | str | None) -> bool:
    """Whether ``corpus_dir`` is the bundled corpus: the one corpus a library file holds (``sqlite/words.py``), so
    servers on one file never undo each other's.  A server given another (``--corpus``) holds its corpus and the
    file's documents in memory, as before the file was searched on disk."""
    return corpus_dir is None or Path(corpus_dir).resolve() == BUNDLED_CORPUS.resolve()


def _on_disk(path: Path, corpus_dir: Path | str | None, embedder: Embedder | None) -> SqliteIndex | None:
    """The library in the file at ``path`` searched on disk (``sqlite/search.py``); None when its search copy is
    behind and the file cannot be written (read-only, or damaged): then the index is held in memory, as before."""
    try:
        return SqliteIndex.load(path, corpus_dir, vector_key=embedder.settings.key if embedder else None,
                                sentences=embedder is not None and embedder.settings.sentences)
    except _READ_ERRORS as exc:
        logger.warning("index %s cannot be searched on disk (%s); holding it in memory", path, exc)
        return None


class LiveIndex:
    """The index a server answers from; with an index file, reloaded when another process changes it."""

    def __init__(
        self,
        index: Searchable,
        *,
        corpus_dir: Path | str | None = None,
        index_path: Path | str | None = None,
        database_url: str | None = None,
        check_interval_s: float = CHECK_INTERVAL_S,
        reload_wait_s: float = RELOAD_WAIT_S,
        embedder: Embedder | None = None,
    ) -> None:
        """``index`` as ``Index.load(corpus_dir, index_path=index_path, vector_key=...)`` built it, or as
        ``PostgresIndex.load(database_url)`` read it; without ``index_path`` or ``database_url`` it is served as it
        is (an index built some other way cannot be rebuilt the same way)."""
        self._index = index
        self._corpus_dir = corpus_dir
        self._path = resolve_index_path(index_path) if index_path is not None and database_url is None else None
        self._database = database_url
        self._interval = check_interval_s
        self._wait = reload_wait_s
        self._checked = time.monotonic()
        self._failed: tuple[object, str] | None = None  # (version, error) of the last failure, logged once
        self._refresh: asyncio.Task[None] | None = None
        self.embedder = embedder
        self._catching_up: asyncio.Task[None] | None = None
        self._waiting_in: Searchable | None = None  # the index whose waiting passages were last looked for
        self._endpoint_down_until = 0.0  # monotonic: while the embedding endpoint is given a rest after a failure
        self._endpoint_error: str | None = None  # the last failure logged (of the endpoint, or storing vectors)
        self._catch_up_after = 0.0  # monotonic: when waiting passages are looked for again after a run fell short

    @classmethod
    def load(
        cls,
        corpus_dir: Path | str | None = None,
        *,
        index_path: Path | str | None = None,
        check_interval_s: float = CHECK_INTERVAL_S,
        reload_wait_s: float = RELOAD_WAIT_S,
        embedder: Embedder | None = None,
        database_url: str | None = None,
    ) -> "LiveIndex":
        """``corpus_dir`` (default: the bundled corpus) plus the index file (default: see ``store.py``), kept current;
        with ``embedder``, searched by meaning too.  With ``database_url`` the library in that database instead
        (``postgres/``), the corpus kept in step with it first."""
        if database_url is not None:
            from .postgres.search import open_library

            if embedder is not None and embedder.settings.sentences:
                logger.warning("EMBEDDINGS_SENTENCE_MATCH is not used with a library in PostgreSQL: hits name no "
                               "matching sentences")
            library = open_library(database_url, corpus_dir, embedder.settings.key if embedder else None)
            return cls(library, corpus_dir=corpus_dir, database_url=database_url, check_interval_s=check_interval_s,
                       reload_wait_s=reload_wait_s, embedder=embedder)
        path = resolve_index_path(index_path)
        index = _on_disk(path, corpus_dir, embedder) if _bundled(corpus_dir) else None
        if index is None:
            index = Index.load(corpus_dir, index_path=path, vector_key=embedder.settings.key if embedder else None,
                               sentences=embedder is not None and embedder.settings.sentences)
        return cls(index, corpus_dir=corpus_dir, index_path=path, check_interval_s=check_interval_s,
                   reload_wait_s=reload_wait_s, embedder=embedder)

    @property
    def index(self) -> Searchable:
        """The index as last loaded, without looking at the file."""
        return self._index

    @property
    def sentence_match(self) -> float | None:
        """The cosine from which a search names the sentences of its hits that match the query
        (``EmbeddingSettings.sentence_match``); None: it names none."""
        return self.embedder.settings.sentence_match if self.embedder is not None else None

    @property
    def path(self) -> Path | None:
        """The index file watched, or None when the index is served as it is."""
        return self._path

    async def current(self) -> Searchable:
        """The index to answer from, reloaded first when the file (or the database) changed since it was read.

        Looks at the file at most once per interval; calls arriving meanwhile wait for the same check, at most
        ``RELOAD_WAIT_S`` (a cancelled call, or one that stops waiting, does not cancel it for the others).
        """
        if self._path is None and self._database is None:
            return self._index
        self._catch_up_if_waiting()
        task = self._refresh
        if task is None or task.done() or task.get_loop() is not asyncio.get_running_loop():
            now = time.monotonic()
            if now - self._checked < self._interval:
                return self._index
            self._checked = now
            task = self._refresh = asyncio.create_task(self._reload_if_changed(), name="docserver-reload")
        # the wait is counted from when the check began: calls arriving later in a long reload do not wait again
        done, _ = await asyncio.wait({task}, timeout=max(0.0, self._checked + self._wait - time.monotonic()))
        if done:
            task.result()  # a failure other than an unreadable file (those are logged) is the caller's
        return self._index

    def _version(self) -> object:
        if self._database is not None:
            from .postgres.search import generation

            return generation(self._database)
        return index_version(self._path)

    def _load(self) -> Searchable:
        if self._database is not None:
            from .postgres.search import PostgresIndex

            return PostgresIndex.load(self._database, self._index, self._index.vector_key)  # type: ignore[arg-type]
        if isinstance(self._index, SqliteIndex):
            return SqliteIndex.load(self._path, self._corpus_dir, self._index,  # type: ignore[arg-type]
                                    vector_key=self._index.vector_key, sentences=self.sentence_match is not None)
        return Index.load(self._corpus_dir, index_path=self._path, previous=self._index,  # type: ignore[arg-type]
                          vector_key=self._index.vector_key, sentences=self.sentence_match is not None)

    async def _reload_if_changed(self) -> None:
        version: object = _UNREAD  # IndexVersion | None once read
        where = self._path if self._path is not None else "library database"
        try:
            version = await asyncio.to_thread(self._version)
            if version == self._index.source_version or (self._failed is not None and version == self._failed[0]):
                return  # unchanged, or changed into a version that failed to load: wait for the next change
            started = time.perf_counter()
            index = await asyncio.to_thread(self._load)
        except _READ_ERRORS as exc:  # an unreadable version is tried again only once the file changes again
            if (version, str(exc)) != self._failed:
                logger.warning("index %s changed but cannot be read (%s); serving the previous documents", where, exc)
            self._failed = (version, str(exc))
            return
        self._index, self._failed = index, None
        logger.info(
            "index %s changed: reloaded %d documents, %d chunks in %.2f s",
            where,
            index.document_count,
            index.chunk_count,
            time.perf_counter() - started,
        )

    async def query_vector(self, query: str) -> np.ndarray | None:
        """``query`` embedded for a search by meaning; None (search by words alone) without an embedder, while
        the endpoint rests after a failure, or when it fails or takes longer than ``QUERY_WAIT_S`` now."""
        if self.embedder is None or time.monotonic() < self._endpoint_down_until:
            return None
        try:
            return await asyncio.wait_for(self.embedder.aquery(query), QUERY_WAIT_S)
        except (EmbeddingError, TimeoutError) as exc:
            self._endpoint_failed(str(exc) or f"no vector within {QUERY_WAIT_S:g} s")
            return None

    def _endpoint_failed(self, error: str) -> None:
        self._endpoint_down_until = time.monotonic() + RETRY_S
        if error != self._endpoint_error:
            logger.warning("embedding endpoint: %s; searching by words alone, trying again in %.0f s", error, RETRY_S)
        self._endpoint_error = error

    def _catch_up_if_waiting(self) -> None:
        """Start embedding the passages that wait for a vector, unless that is under way, the endpoint rests, or
        the index served was already looked at (without an index file or database: nothing to store them in)."""
        if self._path is None and self._database is None:
            return
        if self.embedder is None or time.monotonic() < max(self._endpoint_down_until, self._catch_up_after):
            return
        if self._catching_up is not None and not self._catching_up.done():
            return
        if self._waiting_in is self._index:
            return
        self._waiting_in = self._index
        self._catching_up = asyncio.create_task(self._catch_up(self._index, self.embedder), name="docserver-embed")

    def _embed(self, embedder: Embedder, waiting: list[Chunk]) -> Embedded:
        if self._database is not None:
            from .postgres.vectors import embed_chunks as embed_in_database

            return embed_in_database(self._database, embedder, waiting)
        return embed_chunks(self._path, embedder, waiting)  # type: ignore[arg-type]

    async def _catch_up(self, index: Searchable, embedder: Embedder) -> None:
        started = time.perf_counter()
        where = self._path if self._path is not None else "the library database"
        try:
            waiting = await asyncio.to_thread(index.waiting)
            if not waiting:
                return
            outcome = await asyncio.to_thread(self._embed, embedder, waiting)
        except _READ_ERRORS as exc:  # a read-only or damaged file: the passages stay searched by words
            self._catch_up_after, self._waiting_in = time.monotonic() + RETRY_S, None
            if str(exc) != self._endpoint_error:  # said once, not every RETRY_S
                logger.warning("cannot store vectors in %s (%s); its waiting passages are searched by their words",
                               where, exc)
            self._endpoint_error = str(exc)
            return
        if outcome.error == "busy":  # another process embeds this file's passages: look again later
            self._catch_up_after = time.monotonic() + RETRY_S
        elif outcome.error is not None:
            self._endpoint_failed(outcome.error)
        else:
            self._endpoint_error = None
        if outcome.waiting:
            self._waiting_in = None  # look for them again once the endpoint has rested
        if outcome.embedded or outcome.cached:
            logger.info("embedded %d waiting texts (%d from the cache) in %.1f s; %d still wait", outcome.embedded,
                        outcome.cached, time.perf_counter() - started, outcome.waiting)
        self._checked = 0.0  # the next call looks at the file: its vectors are searched from then on
