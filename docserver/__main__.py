"""python -m docserver: serve the document corpus over MCP streamable HTTP at /mcp.

    python -m docserver [--host H] [--port P] [--index FILE] ...   serve (bundled corpus + ingested documents)
    python -m docserver ingest PATH [PATH...] --collection NAME [--index FILE] [--quiet]
"""

import argparse
import logging
import sys
from collections.abc import Sequence

from .corpus import BUNDLED_CORPUS
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
    parser = argparse.ArgumentParser(
        prog="python -m docserver ingest",
        description="Add Markdown (.md, including wetten.overheid.nl law texts) and plain-text (.txt) files "
        "to the persisted index; directories are searched recursively. Re-ingesting a file replaces it.",
    )
    parser.add_argument("paths", nargs="+", metavar="PATH", help="file or directory")
    parser.add_argument("--collection", required=True, help="collection to add the documents to, e.g. wetten_overheid")
    parser.add_argument("--index", default=str(resolve_index_path()), help=INDEX_HELP)
    parser.add_argument("-q", "--quiet", action="store_true", help="no progress bar and no summary")
    return parser.parse_args(argv)


def ingest_main(argv: Sequence[str]) -> int:
    from .ingest import ingest

    args = parse_ingest_args(argv)
    try:
        documents = ingest(args.paths, args.collection, index_path=args.index, progress=not args.quiet)
    except (OSError, ValueError) as exc:
        print(f"ingest failed: {exc}", file=sys.stderr)
        return 1
    if not args.quiet:
        chunks = sum(len(d.chunks) for d in documents)
        print(f"{len(documents)} documents, {chunks} chunks -> collection {args.collection!r} in {args.index}")
        for doc in documents:
            print(f"  {doc.doc_id}: {doc.title} ({len(doc.chunks)} chunks)")
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
