"""python -m docserver: serve the document corpus over MCP streamable HTTP at /mcp.

    python -m docserver [--host H] [--port P] [--index FILE] ...   serve (bundled corpus + ingested documents)
    python -m docserver ingest PATH [PATH...] --collection NAME [--index FILE] [--quiet] [--force] [--max-pages N] ...
    python -m docserver remove DOC_ID [DOC_ID...] [--collection NAME] [--index FILE]
    python -m docserver list [--collection NAME] [--index FILE] [--json]
    python -m docserver embed [--index FILE] [--prune] [--quiet]   vectors for what waits (EMBEDDINGS_URL)

File names, titles, doc_ids and reasons come from files somebody else wrote: every one is printed through
``textkit.untrusted.terminal`` (``say``), so an escape sequence or a bidi override shows as ``\\x1b`` or ``\\u202e``
and a newline in a file name cannot print a line of its own.
"""

import argparse
import json
import logging
import sqlite3
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TextIO

from textkit.untrusted import terminal

from .corpus import BUNDLED_CORPUS
from .documents import Chunk, Document
from .embeddings import EmbeddingSettings
from .location import DATABASE_ENV, database_url, shown
from .store import INDEX_ENV, IndexSchemaError, StoredDocument, resolve_index_path

INDEX_HELP = (
    f"persisted index file (default: %(default)s, from ${INDEX_ENV}, else data/ in the source checkout, "
    "else the user cache folder); a running server picks up documents ingested into it within about a second"
)


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m docserver",
        description="Serve the document corpus over MCP streamable HTTP at /mcp.",
        epilog="Add documents with: python -m docserver ingest PATH [PATH...] --collection NAME; see what is stored "
        "with: python -m docserver list; remove documents with: python -m docserver remove DOC_ID",
    )
    parser.add_argument("--host", default="127.0.0.1", help="bind address (default: %(default)s)")
    parser.add_argument("--port", type=int, default=3434, help="port (default: %(default)s)")
    parser.add_argument("--corpus", default=str(BUNDLED_CORPUS), help="corpus directory (default: bundled corpus)")
    parser.add_argument("--index", default=str(resolve_index_path()), help=INDEX_HELP)
    _add_database(parser)
    parser.add_argument(
        "--no-read-document",
        dest="read_document",
        action="store_false",
        help="do not offer the read_document tool (as the production server once did)",
    )
    parser.add_argument(
        "--no-list-collections",
        dest="list_collections",
        action="store_false",
        help="do not offer the list_collections tool (an addition of this server the production one lacks: "
        "clients then learn the collections from list_documents)",
    )
    parser.add_argument(
        "--allowed-hosts",
        default=None,
        help="comma-separated Host header values to accept, e.g. 'docserver:3434'; '*' disables the check "
        "(default: localhost only when bound to loopback, no check otherwise)",
    )
    parser.add_argument(
        "--log-level", default="info", choices=["critical", "error", "warning", "info", "debug", "trace"]
    )
    return parser.parse_args(argv)


def parse_ingest_args(argv: Sequence[str]) -> argparse.Namespace:
    from .formats import Limits

    defaults = Limits()
    parser = argparse.ArgumentParser(
        prog="python -m docserver ingest",
        description="Add files to the persisted index: PDF, DOCX, ODT, HTML, BWB law XML and official-publication "
        "XML (wetten.overheid.nl, officielebekendmakingen.nl), Markdown (including wetten.overheid.nl-style law "
        "texts) and plain text, recognised by their content. Directories are searched recursively; a file's doc_id is "
        "its path relative to the directory given, each part slugged (2023/bijlage-1-pdf), or the slug of its name "
        "when named directly. Re-ingesting a file replaces it; a file stored before from the same path with the "
        "same content (sha256) is skipped as unchanged. A copy of each file read is kept beside the index (files/) "
        "for the service to serve. A file that cannot be read is reported with the reason; the others are stored.",
    )
    parser.add_argument("paths", nargs="+", metavar="PATH", help="file or directory")
    parser.add_argument("--collection", required=True, help="collection to add the documents to, e.g. wetten_overheid")
    parser.add_argument("--index", default=str(resolve_index_path()), help=INDEX_HELP)
    _add_database(parser)
    parser.add_argument("-q", "--quiet", action="store_true",
                        help="no progress bar, no line per document and no summary (refusals still)")
    parser.add_argument("--force", action="store_true",
                        help="read unchanged files again too (say, after a reader improved)")
    parser.add_argument("--follow-symlinks", action="store_true",
                        help="read the files symbolic links point at, but only inside the folders given (a link "
                        "named as a PATH: a regular file anywhere but /proc, /sys, /dev); default: links are refused")
    parser.add_argument("--base-url", metavar="URL",
                        help="where these files are published (e.g. an intranet folder): a document without a URL of "
                        "its own links to URL/<file name>, a PDF passage to its page (#page=N); answers cite it")
    limits = parser.add_argument_group("limits for untrusted files (a file beyond one is refused)")
    limits.add_argument("--max-mb", type=float, default=defaults.max_bytes / 2**20, help="file size (%(default)g)")
    limits.add_argument("--max-pages", type=int, default=defaults.max_pages, help="PDF pages (%(default)s)")
    limits.add_argument("--max-seconds", type=float, default=defaults.max_seconds,
                        help="time to read one file (%(default)g)")
    limits.add_argument("--max-unzipped-mb", type=float, default=defaults.max_unzipped_bytes / 2**20,
                        help="DOCX/ODT members decompressed together (%(default)g)")
    return parser.parse_args(argv)


# What opening or reading an index file can raise: it is unreadable, damaged, not SQLite, or of another schema.
_INDEX_ERRORS: tuple[type[Exception], ...] = (OSError, ValueError, RuntimeError, sqlite3.Error, IndexSchemaError)
try:
    from psycopg import Error as _DatabaseError

    _INDEX_ERRORS += (_DatabaseError,)
except ImportError:  # the postgres extra is not installed: no database to fail
    pass
DATABASE_HELP = (f"the library in this PostgreSQL database (postgresql://...; default: ${DATABASE_ENV}); wins over "
                 "--index")


def _add_database(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--database", default=None, metavar="URL", help=DATABASE_HELP)


def _embed_database(settings: EmbeddingSettings, url: str, args: argparse.Namespace) -> int:
    """``embed`` for a library in the database: what waits embedded; ``--prune``: vectors no passage needs dropped."""
    from .postgres import vectors

    complete = embed_waiting(settings, Path(args.index), vectors.all_waiting(url, settings.key),
                             bar=not args.quiet and sys.stderr.isatty(), quiet=args.quiet, database=url)
    if args.prune:
        removed = vectors.prune(url, settings.key)
        if not args.quiet:
            say(f"{removed} vectors no passage needs deleted")
    return 0 if complete else 1


def _database(args: argparse.Namespace) -> str | None:
    """The database URL given or in the environment (None: the SQLite file); a bad one raises ValueError."""
    return database_url(args.database)


def say(line: str, stream: TextIO | None = None) -> None:
    """Print one line (to stdout unless ``stream``) with every control character, line break and bidi control in it
    escaped (``terminal``)."""
    print(terminal(line), file=stream or sys.stdout)


def _writer(bar: bool) -> Callable[[str, TextIO], None]:
    """How to print a line (escaped, as ``say``): past the progress bar when one is drawn (``tqdm.write`` redraws it
    below the line), else plainly."""
    if not bar:
        return say
    from tqdm import tqdm

    return lambda line, stream: tqdm.write(terminal(line), file=stream)


def ingest_main(argv: Sequence[str]) -> int:
    from .formats import Limits
    from .ingest import Failure, Skipped, ingest_files

    args = parse_ingest_args(argv)
    embeddings = _embedding_settings()
    limits = Limits(max_bytes=int(args.max_mb * 2**20), max_pages=args.max_pages, max_seconds=args.max_seconds,
                    max_unzipped_bytes=int(args.max_unzipped_mb * 2**20))
    bar = not args.quiet and sys.stderr.isatty()
    lines = not args.quiet and not (bar and sys.stdout.isatty())  # on a terminal the bar says it
    write = _writer(bar)

    def tell(path: Path, outcome: Document | Skipped | Failure) -> None:  # a line per file as it is done
        if isinstance(outcome, Failure):
            write(f"refused: {path}: {outcome.reason}", sys.stderr)
        elif lines and isinstance(outcome, Skipped):
            write(f"unchanged: {path}", sys.stdout)
        elif lines:
            write(f"  {outcome.doc_id}: {outcome.title} ({len(outcome.chunks)} chunks) <- {path}", sys.stdout)

    try:
        database = _database(args)
        report = ingest_files(args.paths, args.collection, index_path=args.index, progress=bar, limits=limits,
                              force=args.force, base_url=args.base_url, on_file=tell,
                              follow_symlinks=args.follow_symlinks, database_url=database)
    except _INDEX_ERRORS as exc:
        say(f"ingest failed: {exc}", sys.stderr)
        return 1
    documents = len(report.documents) + len(report.skipped)
    if not args.quiet:
        chunks = sum(len(d.chunks) for d in report.documents) + sum(s.chunks for s in report.skipped)
        unchanged = f" ({len(report.skipped)} unchanged)" if report.skipped else ""
        where = shown(database) if database else args.index
        say(f"{documents} documents, {chunks} chunks -> collection {args.collection!r} in {where}{unchanged}")
    if report.failures:
        say(f"{len(report.failures)} file(s) refused, see above", sys.stderr)
        return 1
    if not documents:
        say("ingest failed: no files to ingest were found", sys.stderr)
        return 1
    if report.documents and embeddings is not None and database is not None:  # a failure leaves them waiting
        from .postgres import vectors

        embed_waiting(embeddings, Path(args.index), vectors.all_waiting(database, embeddings.key), bar=bar,
                      quiet=args.quiet, database=database)
    if report.documents and embeddings is not None and database is None:  # a failure leaves them waiting
        from .vectors import library_passages

        index_path = Path(args.index)
        embed_waiting(embeddings, index_path, library_passages(index_path, BUNDLED_CORPUS), bar=bar, quiet=args.quiet)
    return 0


def _embedding_settings() -> EmbeddingSettings | None:
    """``EMBEDDINGS_*`` from the environment (None: not configured); a bad value is said and exits with 2."""
    try:
        return EmbeddingSettings.from_env()
    except ValueError as exc:
        say(f"embedding settings: {exc}", sys.stderr)
        raise SystemExit(2) from exc


def embed_waiting(settings: EmbeddingSettings, index_path: Path, chunks: Sequence[Chunk], *, bar: bool,
                  quiet: bool, database: str | None = None) -> bool:
    """Embed those of ``chunks`` (the library's passages) that wait for a vector of ``settings``' space in the index
    file (or the ``database``); False when some still wait (the endpoint failed: said on stderr, with what to do)."""
    from .embeddings import Embedder
    from .vectors import embed_chunks

    embedder = Embedder(settings)
    progress = None
    if bar:
        from tqdm import tqdm

        progress = tqdm(desc="embedding", unit="text", leave=False, total=0)
    try:
        if database is not None:
            from .postgres.vectors import embed_chunks as embed_in_database

            outcome = embed_in_database(database, embedder, chunks, progress=progress.update if progress else None)
        else:
            outcome = embed_chunks(index_path, embedder, chunks, progress=progress.update if progress else None,
                                   total=(lambda n: progress.reset(total=n)) if progress else None)
    finally:
        embedder.close()
        if progress is not None:
            progress.close()
    if not quiet and (outcome.embedded or outcome.cached):
        say(f"{outcome.embedded} texts embedded ({settings.model or settings.url})")
    if outcome.waiting:
        why = "another process is embedding them" if outcome.error == "busy" else f"the endpoint failed: {outcome.error}"
        say(f"{outcome.waiting} texts wait for a vector ({why}); they are searched by their words until a running "
            "server, or `python -m docserver embed`, embeds them", sys.stderr)
    return not outcome.waiting


def parse_embed_args(argv: Sequence[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m docserver embed",
        description="Embed every passage of the index file and the bundled corpus that has no vector of the configured "
        "embedding space yet (EMBEDDINGS_URL, EMBEDDINGS_MODEL and the prefixes: after a model change, all of them). "
        "Ingest does this by itself when EMBEDDINGS_URL is set, and a running server catches up with what waits.",
    )
    parser.add_argument("--index", default=str(resolve_index_path()), help=INDEX_HELP)
    parser.add_argument("--corpus", default=str(BUNDLED_CORPUS), help="corpus directory (default: bundled corpus)")
    parser.add_argument("--prune", action="store_true",
                        help="also delete the vectors no passage needs (other models', removed passages')")
    parser.add_argument("-q", "--quiet", action="store_true", help="no progress bar and no summary")
    return parser.parse_args(argv)


def embed_main(argv: Sequence[str]) -> int:
    args = parse_embed_args(argv)
    settings = _embedding_settings()
    if settings is None:
        say("embed: EMBEDDINGS_URL is not set (an OpenAI-compatible /v1/embeddings endpoint; see docs/RETRIEVAL.md)",
            sys.stderr)
        return 2
    from .vectors import library_passages, prune

    index_path = Path(args.index)
    try:
        database = database_url()
        if database is not None:
            return _embed_database(settings, database, args)
        chunks = library_passages(index_path, args.corpus)
        complete = embed_waiting(settings, index_path, chunks, bar=not args.quiet and sys.stderr.isatty(),
                                 quiet=args.quiet)
        if args.prune:
            removed = prune(index_path, settings.key, chunks)
            if not args.quiet:
                say(f"{removed} vectors no passage needs deleted")
    except _INDEX_ERRORS as exc:
        say(f"embed failed: {exc}", sys.stderr)
        return 1
    return 0 if complete else 1


def parse_remove_args(argv: Sequence[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m docserver remove",
        description="Remove documents and their chunks from the persisted index; a running server drops them "
        "within about a second. Nothing is removed when a doc_id is unknown, or in several collections and no "
        "--collection says which.",
    )
    parser.add_argument("doc_ids", nargs="+", metavar="DOC_ID", help="as `python -m docserver list` shows it")
    parser.add_argument("--collection", help="the collection to remove from (default: the one holding the doc_id)")
    parser.add_argument("--index", default=str(resolve_index_path()), help=INDEX_HELP)
    _add_database(parser)
    return parser.parse_args(argv)


def remove_main(argv: Sequence[str]) -> int:
    from .location import open_store

    args = parse_remove_args(argv)
    path = resolve_index_path(args.index)
    try:
        database = _database(args)
        if database is None and not path.is_file():  # not created just to say that it holds nothing
            say(f"remove failed: no document {', '.join(map(repr, args.doc_ids))}: no index file {path}", sys.stderr)
            return 1
        with open_store(path, database) as store:
            removed = store.remove(args.doc_ids, args.collection)
    except _INDEX_ERRORS as exc:
        say(f"remove failed: {exc}", sys.stderr)
        return 1
    for collection, doc_id in removed:
        say(f"removed: {doc_id} from collection {collection!r}")
    return 0


def parse_list_args(argv: Sequence[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m docserver list",
        description="The documents in the persisted index, one a line, tab-separated: collection, doc_id, title, "
        "kind, pages (of a PDF), chunks, ingested at (UTC); '-' where there is none. Prints nothing when the "
        "index is empty or missing (and never creates it).",
    )
    parser.add_argument("--collection", help="only this collection")
    parser.add_argument("--index", default=str(resolve_index_path()), help=INDEX_HELP)
    _add_database(parser)
    parser.add_argument("--json", action="store_true", help="a JSON list of objects with those fields (null for none)")
    return parser.parse_args(argv)


def listing(document: StoredDocument) -> dict[str, str | int | None]:
    """The fields ``list`` shows of a stored document, as ``--json`` prints them."""
    return {
        "collection": document.collection,
        "doc_id": document.doc_id,
        "title": document.title,
        "kind": document.kind,
        "pages": document.pages,
        "chunks": document.chunks,
        "ingested_at": document.ingested_at,
    }


def listing_line(document: StoredDocument) -> str:
    """A stored document as one tab-separated line for a terminal: a title's own tabs and line breaks become
    spaces, other control characters in any field escapes (``terminal``)."""
    fields = listing(document) | {"title": " ".join(document.title.split())}
    return "\t".join(terminal("-" if value is None else str(value)) for value in fields.values())


def json_for_terminal(value: object) -> str:
    """``value`` as indented JSON whose strings show every character ``terminal`` would escape as a JSON escape
    (``\\u001b``, ``\\u202e``): still JSON for a script, never a control sequence for the terminal."""
    text = json.dumps(value, ensure_ascii=False, indent=1)  # a raw newline in it is the indentation's
    return "".join(ch if ch == "\n" or terminal(ch) == ch else f"\\u{ord(ch):04x}" for ch in text)


def list_main(argv: Sequence[str]) -> int:
    from .location import stored_documents

    args = parse_list_args(argv)
    try:
        stored = stored_documents(args.index, _database(args), args.collection)
    except _INDEX_ERRORS as exc:
        say(f"list failed: {exc}", sys.stderr)
        return 1
    if args.json:  # "[]" when there is nothing: still JSON for a script to read
        print(json_for_terminal([listing(d) for d in stored]))
    else:
        for document in stored:
            print(listing_line(document))
    return 0


def copy_main(argv: Sequence[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m docserver copy",
        description="Copy the library of the SQLite file into a PostgreSQL database: documents (with the files they "
        "were read from), original files, created collections and attachments; the bundled corpus is not copied. "
        "Copying again replaces what an earlier copy wrote.",
    )
    parser.add_argument("--index", default=str(resolve_index_path()), help=INDEX_HELP)
    parser.add_argument("--to", required=True, metavar="URL", help="the database (postgresql://...)")
    args = parser.parse_args(argv)
    try:
        from .postgres.copy import copy_library

        copied = copy_library(args.index, database_url(args.to) or "")
    except _INDEX_ERRORS as exc:
        say(f"copy failed: {exc}", sys.stderr)
        return 1
    say(f"copied {copied.documents} documents, {copied.files} files, {copied.collections} created collections and "
        f"{copied.attachments} attachments from {args.index} to {shown(args.to)}")
    return 0


_COMMANDS: dict[str, Callable[[Sequence[str]], int]] = {"ingest": ingest_main, "remove": remove_main, "copy": copy_main,
                                                         "list": list_main, "embed": embed_main}


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] in _COMMANDS:
        return _COMMANDS[argv[0]](argv[1:])

    import uvicorn

    from .server import KEEPALIVE_S, create_app

    args = parse_args(argv)
    level = "DEBUG" if args.log_level == "trace" else args.log_level.upper()
    logging.basicConfig(level=level, format="%(levelname)s:     %(name)s: %(message)s")
    allowed = [h.strip() for h in args.allowed_hosts.split(",") if h.strip()] if args.allowed_hosts else None
    try:
        database = _database(args)
    except ValueError as exc:
        say(str(exc), sys.stderr)
        return 2
    try:
        app = create_app(
            args.corpus, read_document=args.read_document, list_collections=args.list_collections, host=args.host,
            allowed_hosts=allowed, index_path=args.index, embeddings=_embedding_settings(), database_url=database,
        )
    except _INDEX_ERRORS as exc:  # a database that cannot be reached, a library that cannot be read
        where = shown(database) if database else args.index
        say(f"cannot serve the library in {where}: {exc}", sys.stderr)
        return 1
    uvicorn.run(app, host=args.host, port=args.port, log_level=args.log_level, timeout_keep_alive=KEEPALIVE_S)
    return 0


if __name__ == "__main__":
    sys.exit(main())
