"""The service's own document library (docs/LIBRARY.md): files uploaded, collections made, files read into them.

The library is the index the bundled document server serves (`docserver/library.py` writes it); the service writes
to it when it runs that server itself (no MCP_SERVER_URL) or when DOCSERVER_INDEX names an index it shares with a
standalone one (docker-compose). Reading a file into a collection costs seconds of CPU (a 200-page PDF), so it runs
in a pool of worker processes (INGEST_WORKERS), never on the event loop and never holding the GIL that chats need.
An attached file is reported `in_progress` until the document server searches it (`settle`): a client that saw
`completed` and asks at once gets answers from it.

Who may do what, beside the access file's collection rules (`app.access`): a file is readable by a caller who may
read a collection holding it, or, while it is in none, by one who may upload; a caller who may not read a file is told
it does not exist (404, as for an unknown id).
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import Awaitable, Callable
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from multiprocessing import get_context
from pathlib import Path
from typing import Any, TypeVar

from app.access import Access, Caller
from app.errors import APIError
from app.links import link_key
from app.settings import Settings
from graph.clients.mcp_client import DocumentClient, DocumentError

log = logging.getLogger(__name__)
T = TypeVar("T")
SETTLE_S = 10.0  # at most, after a file was read, for the document server to search it
SETTLE_POLL_S = 0.25


def not_found(what: str, name: str) -> APIError:
    return APIError(404, f"No {what} found with id '{name}'.", code="not_found")


class LibraryService:
    """The library's write side for one service process: `docserver.library.Library` calls off the event loop, the
    pool that reads files, the access rules for files."""

    def __init__(self, settings: Settings, index_path: Path | str, access: Access, docs: DocumentClient,
                 changed: Callable[[], Awaitable[None]]) -> None:
        """`index_path`: the index file, or the database's URL (`library_index`); `changed()`: the service looks at
        the library again (its catalog follows what it holds)."""
        from docserver.formats import Limits
        from docserver.library import open_library

        self.library = open_library(index_path)
        self.index_path = index_path
        self.access = access
        self.docs, self.changed = docs, changed
        self.limits = Limits(max_bytes=settings.max_upload_bytes)
        self.max_upload_bytes = settings.max_upload_bytes
        self._pool = ProcessPoolExecutor(max_workers=settings.ingest_workers, mp_context=get_context("spawn"))
        self._reading: set[tuple[str, str]] = set()  # (collection, file id) being read or not yet searchable
        self._tasks: set[asyncio.Task[None]] = set()

    async def call(self, method: Callable[..., T], *args: Any) -> T:
        """A library call (SQLite, file moves) in a worker thread: the event loop keeps serving chats."""
        return await asyncio.to_thread(method, *args)

    # --- access ---------------------------------------------------------------------------------------------

    def may_upload(self, caller: Caller) -> bool:
        return self.access.may_upload(caller)

    async def readable(self, caller: Caller, file_id: str, visible: tuple[str, ...]) -> Any:
        """The stored file `file_id` if `caller` may read it, else a 404 (whether it exists or not)."""
        stored = await self.call(self.library.file, file_id)
        if stored is None:
            raise not_found("file", file_id)
        holders = await self.call(self.library.file_collections, file_id)
        if any(name in visible for name in holders) or (not holders and self.may_upload(caller)):
            return stored
        raise not_found("file", file_id)

    def writable(self, caller: Caller, collection: str) -> None:
        if not self.access.may_write(caller, collection):
            raise APIError(403, f"this caller may not change collection '{collection}'", code="permission_denied")

    # --- reading files into collections -------------------------------------------------------------------------

    def reading(self, collection: str, file_id: str) -> bool:
        return (collection, file_id) in self._reading

    def read(self, collection: str, file_id: str) -> None:
        """Read an attached file into its collection in the background."""
        self._reading.add((collection, file_id))
        task = asyncio.create_task(self._read(collection, file_id), name=f"ingest {file_id}")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _read(self, collection: str, file_id: str) -> None:
        from docserver.library import ingest_attached

        started = time.perf_counter()
        try:
            before = await self.version(collection)
            loop = asyncio.get_running_loop()
            attached = await loop.run_in_executor(self._pool, ingest_attached, self.index_path, collection, file_id,
                                                  self.limits)
            log.info("file %s read into %s: %s (%.1f s)", file_id, collection, attached.status,
                     time.perf_counter() - started)
            if attached.status == "completed":
                await self.settle(collection, before)
        except BrokenProcessPool:  # the reader died (a file that crashed the parser): the file failed, the pool is new
            log.error("reading file %s crashed its worker process", file_id)
            await self.call(self.library.fail, collection, file_id, "the file could not be read (the reader crashed)")
            self._pool = ProcessPoolExecutor(max_workers=self._pool._max_workers, mp_context=get_context("spawn"))
        finally:
            self._reading.discard((collection, file_id))

    async def versions(self) -> dict[str, str | None]:
        """What the document server says each collection holds now ({}: it is not reachable)."""
        try:
            held, _ = await self.docs.collections()
        except DocumentError:
            return {}
        return {h.name: h.version for h in held}

    async def version(self, collection: str) -> str | None:
        """What the document server says `collection` holds now (None: it does not say, or is not reachable)."""
        return (await self.versions()).get(collection)

    async def settle(self, collection: str, before: str | None) -> None:
        """Wait (at most SETTLE_S) until the document server's version of `collection` is no longer `before` (None:
        it did not hold it): it reloaded its index and searches what the collection holds now; then the catalog
        follows. A change made over HTTP is seen by the next request, on every route."""
        deadline = time.monotonic() + SETTLE_S
        while time.monotonic() < deadline:
            now = await self.version(collection)
            if now is not None and now != before:
                break
            await asyncio.sleep(SETTLE_POLL_S)
        await self.changed()

    async def change(self, names: list[str], method: Callable[..., T], *args: Any) -> T:
        """`method(*args)`, a library call that may change what the collections `names` hold; returns when the
        document server searches what they hold after it (`settle`), so the caller's next request sees it."""
        held = {name: await self._held(name) for name in names}
        served = await self.versions()  # one look for them all
        result = await self.call(method, *args)
        for name in names:
            if await self._held(name) != held[name]:
                await self.settle(name, served.get(name))
        return result

    async def _held(self, name: str) -> str | None:
        """The library's own version of a collection (None: it holds no such collection)."""
        info = await self.call(self.library.collection, name)
        return info.version if info is not None else None

    async def resume(self) -> None:
        """Attachments left `in_progress` by a service that stopped while reading them are read again."""
        for info in await self.call(self.library.collections):
            for attached in await self.call(self.library.attachments, info.name):
                if attached.status == "in_progress":
                    self.read(info.name, attached.file_id)

    async def aclose(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        self._pool.shutdown(wait=False, cancel_futures=True)
        self.library.close()


def library_index(settings: Settings, embedded: bool) -> Path | str | None:
    """The library the service writes uploads to: the database DOCSERVER_DATABASE_URL names (its URL; shared by
    every replica), else the embedded server's index file (DOCSERVER_INDEX, else its default), or with an external
    MCP server the one DOCSERVER_INDEX names (shared with a standalone reference server, as in docker-compose);
    None: uploads are off, or the document server is one the service cannot write to."""
    from docserver.location import database_url
    from docserver.store import INDEX_ENV, resolve_index_path

    url = database_url()
    if settings.uploads == "off" or not (embedded or url or os.environ.get(INDEX_ENV, "").strip()):
        return None
    return url or resolve_index_path()


def library_link_key(settings: Settings, location: Path | str) -> bytes:
    """The key that signs source links: LINK_SECRET, else one kept with the library (beside the index file, or in
    the database: the same for every replica on it)."""
    if isinstance(location, str) and not settings.link_secret:
        from docserver.postgres.library import PostgresLibrary

        library = PostgresLibrary(location)
        try:
            return library.key("link")
        finally:
            library.close()
    return link_key(settings.link_secret, Path(location).parent)
