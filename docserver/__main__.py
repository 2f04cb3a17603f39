"""python -m docserver: serve the document corpus over MCP streamable HTTP at /mcp.

    python -m docserver [--host H] [--port P] [--index FILE] ...   serve (bundled corpus + ingested documents)
    python -m docserver ingest PATH [PATH...] --collection NAME [--index FILE] [--quiet] [--max-pages N] ...
"""

import argparse
import logging
import sys
from collections.abc import Sequence
from pathlib import Path

from .corpus import BUNDLED_CORPUS, Document
from .store import INDEX_ENV, resolve_index_path

INDEX_HELP = (
    f"persisted index file (default: %(default)s, from ${INDEX_ENV}, else data/ in the source checkout, "
    "else the user cache folder); a running server picks up documents ingested into it within about a second"
)


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m docserver",
        description="Serve the document corpus over MCP streamable HTTP at /mcp.",
        epilog="Add documents with: python -m docserver ingest PATH [PATH...] --collection NAME",
    )
    parser.add_argument("--host", default="127.0.0.1", help="bind address (default: %(default)s)")
    parser.add_argument("--port", type=int, default=3434, help="port (default: %(default)s)")
    parser.add_argument("--corpus", default=str(BUNDLED_CORPUS), help="corpus directory (default: bundled corpus)")
    parser.add_argument("--index", default=str(resolve_index_path()), help=INDEX_HELP)
    parser.add_argument(
        "--no-read-document",
        dest="read_document",
        action="store_false",
        help="do not offer the read_document tool (as the production server once did)",
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
        "texts) and plain text, recognised by their content. Directories are searched recursively. Re-ingesting "
        "a file replaces it. A file that cannot be read is reported with the reason; the others are stored.",
    )
    parser.add_argument("paths", nargs="+", metavar="PATH", help="file or directory")
    parser.add_argument("--collection", required=True, help="collection to add the documents to, e.g. wetten_overheid")
    parser.add_argument("--index", default=str(resolve_index_path()), help=INDEX_HELP)
    parser.add_argument("-q", "--quiet", action="store_true", help="no progress bar and no summary (refusals still)")
    limits = parser.add_argument_group("limits for untrusted files (a file beyond one is refused)")
    limits.add_argument("--max-mb", type=float, default=defaults.max_bytes / 2**20, help="file size (%(default)g)")
    limits.add_argument("--max-pages", type=int, default=defaults.max_pages, help="PDF pages (%(default)s)")
    limits.add_argument("--max-seconds", type=float, default=defaults.max_seconds,
                        help="time to read one file (%(default)g)")
    limits.add_argument("--max-unzipped-mb", type=float, default=defaults.max_unzipped_bytes / 2**20,
                        help="DOCX/ODT members decompressed together (%(default)g)")
    return parser.parse_args(argv)


def ingest_main(argv: Sequence[str]) -> int:
    from .formats import Limits
    from .ingest import ingest_files

    args = parse_ingest_args(argv)
    limits = Limits(max_bytes=int(args.max_mb * 2**20), max_pages=args.max_pages, max_seconds=args.max_seconds,
                    max_unzipped_bytes=int(args.max_unzipped_mb * 2**20))

    def tell(path: Path, document: Document | None, reason: str | None) -> None:  # a line per file as it is done
        if reason is not None:
            print(f"refused: {path}: {reason}", file=sys.stderr)
        elif not args.quiet:
            print(f"  {document.doc_id}: {document.title} ({len(document.chunks)} chunks) <- {path}")

    try:
        report = ingest_files(args.paths, args.collection, index_path=args.index, progress=not args.quiet,
                              limits=limits, on_file=tell)
    except (OSError, ValueError) as exc:
        print(f"ingest failed: {exc}", file=sys.stderr)
        return 1
    documents, failures = report.documents, report.failures
    if not args.quiet:
        chunks = sum(len(d.chunks) for d in documents)
        print(f"{len(documents)} documents, {chunks} chunks -> collection {args.collection!r} in {args.index}")
    if failures:
        print(f"{len(failures)} file(s) refused, see above", file=sys.stderr)
        return 1
    if not documents:
        print("ingest failed: no files to ingest were found", file=sys.stderr)
        return 1
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["ingest"]:
        return ingest_main(argv[1:])

    import uvicorn

    from .server import KEEPALIVE_S, create_app

    args = parse_args(argv)
    level = "DEBUG" if args.log_level == "trace" else args.log_level.upper()
    logging.basicConfig(level=level, format="%(levelname)s:     %(name)s: %(message)s")
    allowed = [h.strip() for h in args.allowed_hosts.split(",") if h.strip()] if args.allowed_hosts else None
    app = create_app(
        args.corpus, read_document=args.read_document, host=args.host, allowed_hosts=allowed, index_path=args.index
    )
    uvicorn.run(app, host=args.host, port=args.port, log_level=args.log_level, timeout_keep_alive=KEEPALIVE_S)
    return 0


if __name__ == "__main__":
    sys.exit(main())
