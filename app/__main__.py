"""`python -m app [serve]` starts the service; `python -m app graph` prints the pipeline as Mermaid;
`python -m app ask "..."` streams one question from a running service (`--local`: from one started in-process)."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

import uvicorn

if TYPE_CHECKING:
    from app.settings import Settings


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m app", description="NEO NL Agent")
    sub = parser.add_subparsers(dest="command")
    serve = sub.add_parser("serve", help="run the HTTP service (default)")
    serve.add_argument("--host")
    serve.add_argument("--port", type=int)
    serve.add_argument("--workers", type=int, help="worker processes (default: WORKERS, 1)")
    sub.add_parser("graph", help="print the compiled LangGraph pipeline as a Mermaid diagram")
    ask = sub.add_parser(
        "ask", help="stream one question to the terminal from a running service",
        description="Stream one question to the terminal from a running service (start one with `make run`). "
                    "When nothing answers at --url, says so and exits 2; --local starts the service in-process.")
    ask.add_argument("question")
    ask.add_argument("--url", help="service base URL (default http://HOST:PORT/v1)")
    ask.add_argument("--model", default="neo-nl-agent")
    ask.add_argument("--api-key", default="", help="bearer key (default: the first of API_KEYS)")
    ask.add_argument("--local", action="store_true",
                     help="start the service in-process for this question instead (offline unless LLM_BASE_URL "
                          "is set; its settings come from this environment)")
    args = parser.parse_args(argv)

    if args.command == "ask":
        from app.cli import ask as run_ask
        from app.settings import Settings

        settings = Settings()
        url = args.url or f"http://{settings.host}:{settings.port}/v1"
        key = args.api_key or (settings.api_keys[0] if settings.api_keys else "")
        raise SystemExit(run_ask(args.question, url=url, api_key=key, model=args.model, local=args.local))

    if args.command == "graph":
        from graph.build import mermaid

        print(mermaid())
        return
    from app.settings import Settings

    uvicorn.run("app.main:create_app", **server_options(Settings(), args))


def server_options(settings: Settings, args: argparse.Namespace) -> dict[str, Any]:
    """uvicorn's options for `serve`: command-line flags over settings. `http`: uvicorn's HTTP protocol with a
    deadline for receiving each request and a bound on open connections (`app.server`), per worker process."""
    from app.server import ConnectionGuard

    return {
        "host": getattr(args, "host", None) or settings.host,
        "port": getattr(args, "port", None) or settings.port,
        "log_level": settings.log_level.lower(),
        "workers": getattr(args, "workers", None) or settings.workers,
        "timeout_keep_alive": settings.http_idle_timeout_s,
        "http": ConnectionGuard(settings.request_header_timeout_s, settings.max_connections),
        "factory": True,  # each worker builds its app (and reads its settings) when it starts
    }


if __name__ == "__main__":
    main()
