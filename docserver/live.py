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

from .index import Index
from .store import IndexSchemaError, index_version, resolve_index_path

__all__ = ["CHECK_INTERVAL_S", "RELOAD_WAIT_S", "LiveIndex"]

logger = logging.getLogger("docserver")

CHECK_INTERVAL_S = 1.0
RELOAD_WAIT_S = 0.1  # at most, after a reload began, for the calls that find it under way (bench section 11)
# What reading a damaged, foreign or vanishing index file raises; the server keeps its previous index.
# (JSON errors in stored metadata are ValueErrors.)
_READ_ERRORS = (sqlite3.Error, OSError, ValueError, IndexSchemaError)
_UNREAD = object()  # the version, when reading it failed


class LiveIndex:
    """The index a server answers from; with an index file, reloaded when another process changes it."""

    def __init__(
        self,
        index: Index,
        *,
        corpus_dir: Path | str | None = None,
        index_path: Path | str | None = None,
        check_interval_s: float = CHECK_INTERVAL_S,
        reload_wait_s: float = RELOAD_WAIT_S,
    ) -> None:
        """``index`` as ``Index.load(corpus_dir, index_path=index_path)`` built it; without ``index_path``
        it is served as it is (an index built some other way cannot be rebuilt the same way)."""
        self._index = index
        self._corpus_dir = corpus_dir
        self._path = resolve_index_path(index_path) if index_path is not None else None
        self._interval = check_interval_s
        self._wait = reload_wait_s
        self._checked = time.monotonic()
        self._failed: tuple[object, str] | None = None  # (version, error) of the last failure, logged once
        self._refresh: asyncio.Task[None] | None = None

    @classmethod
    def load(
        cls,
        corpus_dir: Path | str | None = None,
        *,
        index_path: Path | str | None = None,
        check_interval_s: float = CHECK_INTERVAL_S,
        reload_wait_s: float = RELOAD_WAIT_S,
    ) -> "LiveIndex":
        """``corpus_dir`` (default: the bundled corpus) plus the index file (default: see ``store.py``), kept current."""
        path = resolve_index_path(index_path)
        index = Index.load(corpus_dir, index_path=path)
        return cls(index, corpus_dir=corpus_dir, index_path=path, check_interval_s=check_interval_s,
                   reload_wait_s=reload_wait_s)

    @property
    def index(self) -> Index:
        """The index as last loaded, without looking at the file."""
        return self._index

    @property
    def path(self) -> Path | None:
        """The index file watched, or None when the index is served as it is."""
        return self._path

    async def current(self) -> Index:
        """The index to answer from, reloaded first when the file changed since it was read.

        Looks at the file at most once per interval; calls arriving meanwhile wait for the same check, at most
        ``RELOAD_WAIT_S`` (a cancelled call, or one that stops waiting, does not cancel it for the others).
        """
        if self._path is None:
            return self._index
        task = self._refresh
        if task is None or task.done() or task.get_loop() is not asyncio.get_running_loop():
            now = time.monotonic()
            if now - self._checked < self._interval:
                return self._index
            self._checked = now
            task = self._refresh = asyncio.create_task(self._reload_if_changed(self._path), name="docserver-reload")
        # the wait is counted from when the check began: calls arriving later in a long reload do not wait again
        done, _ = await asyncio.wait({task}, timeout=max(0.0, self._checked + self._wait - time.monotonic()))
        if done:
            task.result()  # a failure other than an unreadable file (those are logged) is the caller's
        return self._index

    async def _reload_if_changed(self, path: Path) -> None:
        version: object = _UNREAD  # IndexVersion | None once read
        try:
            version = await asyncio.to_thread(index_version, path)
            if version == self._index.source_version or (self._failed is not None and version == self._failed[0]):
                return  # unchanged, or changed into a version that failed to load: wait for the next change
            started = time.perf_counter()
            index = await asyncio.to_thread(Index.load, self._corpus_dir, index_path=path, previous=self._index)
        except _READ_ERRORS as exc:  # an unreadable version is tried again only once the file changes again
            if (version, str(exc)) != self._failed:
                logger.warning("index %s changed but cannot be read (%s); serving the previous documents", path, exc)
            self._failed = (version, str(exc))
            return
        self._index, self._failed = index, None
        logger.info(
            "index %s changed: reloaded %d documents, %d chunks in %.2f s",
            path,
            len(index.documents()),
            index.chunk_count,
            time.perf_counter() - started,
        )
