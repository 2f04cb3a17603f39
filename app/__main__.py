"""`python -m app [serve]` starts the service; `python -m app graph` prints the pipeline as Mermaid."""

from __future__ import annotations

import argparse

import uvicorn


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m app", description="NEO NL Agent")
    sub = parser.add_subparsers(dest="command")
    serve = sub.add_parser("serve", help="run the HTTP service (default)")
    serve.add_argument("--host")
    serve.add_argument("--port", type=int)
    sub.add_parser("graph", help="print the compiled LangGraph pipeline as a Mermaid diagram")
    args = parser.parse_args(argv)

    if args.command == "graph":
        from graph.build import mermaid

        print(mermaid())
        return
    from app.settings import Settings

    settings = Settings()
    uvicorn.run(
        "app.main:app",
        host=args.host if getattr(args, "host", None) else settings.host,
        port=args.port if getattr(args, "port", None) else settings.port,
        log_level=settings.log_level.lower(),
    )


if __name__ == "__main__":
    main()
