"""python -m docserver: serve the document corpus over MCP streamable HTTP at /mcp."""

import argparse
import logging
from collections.abc import Sequence

import uvicorn

from .corpus import BUNDLED_CORPUS
from .server import create_app


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m docserver", description=__doc__)
    parser.add_argument("--host", default="127.0.0.1", help="bind address (default: %(default)s)")
    parser.add_argument("--port", type=int, default=3434, help="port (default: %(default)s)")
    parser.add_argument("--corpus", default=str(BUNDLED_CORPUS), help="corpus directory (default: bundled corpus)")
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


def main(argv: Sequence[str] | None = None) -> None:
    args = parse_args(argv)
    level = "DEBUG" if args.log_level == "trace" else args.log_level.upper()
    logging.basicConfig(level=level, format="%(levelname)s:     %(name)s: %(message)s")
    allowed = [h.strip() for h in args.allowed_hosts.split(",") if h.strip()] if args.allowed_hosts else None
    app = create_app(args.corpus, read_document=args.read_document, host=args.host, allowed_hosts=allowed)
    uvicorn.run(app, host=args.host, port=args.port, log_level=args.log_level)


if __name__ == "__main__":
    main()
