"""Where the library is kept: in PostgreSQL when ``DOCSERVER_DATABASE_URL`` (or ``--database``) names a database,
else in the SQLite file (``DOCSERVER_INDEX``, ``store.py``).  The database wins when both are set.

Both are written through the same calls (``save``, ``remove``, ``list_stored``: ``open_store``); the database
engine needs the ``postgres`` extra (psycopg), the file nothing.
"""

import os
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from .store import DocumentStore, StoredDocument, list_stored, resolve_index_path

__all__ = ["DATABASE_ENV", "database_url", "open_store", "shown", "stored_documents"]

DATABASE_ENV = "DOCSERVER_DATABASE_URL"
_SCHEMES = ("postgresql", "postgres")


def database_url(url: str | None = None) -> str | None:
    """``url``, else ``$DOCSERVER_DATABASE_URL``; None (the SQLite file) when neither is set.  ``ValueError`` for
    a URL that names no PostgreSQL database."""
    url = url if url else os.environ.get(DATABASE_ENV, "").strip()
    if not url:
        return None
    if urlsplit(url).scheme not in _SCHEMES:
        raise ValueError(f"{DATABASE_ENV} must be a postgresql:// URL, not {shown(url)!r}")
    return url


def shown(url: str) -> str:
    """``url`` without its password: what logs and messages may say."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    host = parts.hostname or ""
    netloc = f"{parts.username}:***@{host}" + (f":{parts.port}" if parts.port else "")
    return urlunsplit(parts._replace(netloc=netloc))


def _postgres() -> Any:
    try:
        from .postgres import store
    except ImportError as exc:  # psycopg is the postgres extra's
        raise RuntimeError(f"{DATABASE_ENV} needs psycopg: pip install '.[postgres]' ({exc})") from exc
    return store


def open_store(index_path: Path | str | None = None, url: str | None = None) -> Any:
    """A writer of the library: the database at ``url`` when given, else the SQLite file at ``index_path``."""
    if url is not None:
        return _postgres().PostgresStore(url)
    return DocumentStore(index_path)


def stored_documents(index_path: Path | str | None = None, url: str | None = None,
                     collection: str | None = None) -> list[StoredDocument]:
    """The documents stored from files (of ``collection``, else all), by collection and doc_id."""
    if url is None:
        return list_stored(resolve_index_path(index_path), collection)
    with open_store(url=url) as store:
        return store.list_stored(collection)
