"""`python -m app ask "..."`: stream one question to the terminal (think lines dimmed, answer, sources), with the
control characters of what the service sends written as escapes (`textkit.untrusted.terminal`).

Talks to a running service (`--url`, default http://HOST:PORT/v1). When nothing answers there it says so on
stderr (the URL tried, and how to start a service: `make run`, or `--local`) and exits 2. Only with `--local`
does it start the service in-process on a free port first (with the settings of this environment).

`python -m app.cli key-id`: the key id of each API key read from standard input (one per line; or given as
arguments), as the access file names keys (see "Collections per caller" under docs/).
"""

from __future__ import annotations

import argparse
import json
import socket
import sys
import threading
import time
from collections.abc import Iterable
from typing import TextIO

import httpx
import uvicorn
from httpx_sse import connect_sse

from graph.clients.cache import tenant_of
from textkit.untrusted import terminal

DIM, RESET = "\033[2m", "\033[0m"
SHUTDOWN_S = 15.0  # at most, for the in-process service to stop


def _start_local() -> tuple[str, uvicorn.Server, threading.Thread]:
    from app.main import create_app

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(create_app(), log_level="warning", lifespan="on"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 60
    while not server.started:
        if time.monotonic() > deadline:
            raise RuntimeError("the local service did not start")
        time.sleep(0.05)
    return f"http://127.0.0.1:{port}/v1", server, thread


def _reachable(url: str) -> bool:
    try:
        return httpx.get(url.rstrip("/") + "/models", timeout=2).status_code < 500
    except httpx.HTTPError:
        return False


NOT_RUNNING = 2  # the exit code when no service answers at the URL


def not_running(url: str) -> str:
    """What `ask` says when nothing answers at `url`: the URL tried and the two ways on."""
    return (f"no service answers at {url}.\n"
            "Start one in another terminal with `make run` (or pass --url to reach another one),\n"
            "or ask an in-process service with --local.")


def ask(question: str, *, url: str, api_key: str, model: str, local: bool, out: TextIO = sys.stdout,
        err: TextIO | None = None) -> int:
    server = thread = None
    if local:
        url, server, thread = _start_local()
    elif not _reachable(url):
        print(not_running(url), file=err or sys.stderr)
        return NOT_RUNNING
    color = out.isatty()
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    body = {"model": model, "stream": True, "messages": [{"role": "user", "content": question}]}
    state = "before"  # before -> think -> answer
    try:
        with httpx.Client(timeout=httpx.Timeout(30, read=300)) as client:
            with connect_sse(client, "POST", url.rstrip("/") + "/chat/completions", json=body, headers=headers) as sse:
                if sse.response.status_code != 200:
                    sse.response.read()
                    print(f"error {sse.response.status_code}: {terminal(sse.response.text)}", file=sys.stderr)
                    return 1
                for event in sse.iter_sse():
                    if event.data == "[DONE]":
                        break
                    chunk = json.loads(event.data)
                    if "error" in chunk:
                        print(f"\nerror: {terminal(str(chunk['error'].get('message')))}", file=sys.stderr)
                        return 1
                    for choice in chunk.get("choices") or []:
                        text = (choice.get("delta") or {}).get("content") or ""
                        if state == "before" and text.startswith("<think>"):
                            state, text = "think", text[len("<think>"):].lstrip("\n")
                            out.write(DIM if color else "")
                        if state == "think" and "</think>" in text:
                            thought, text = text.split("</think>", 1)
                            out.write(terminal(thought, lines=True) + (RESET if color else "") + "\n")
                            state, text = "answer", text.lstrip("\n")
                        out.write(terminal(text, lines=True))  # what a document holds never drives the terminal
                        out.flush()
        out.write("\n")
        return 0
    finally:
        if server is not None and thread is not None:
            # the service shuts down (its lifespan closes clients, the embedded document server, the reading pool)
            # before the interpreter does: a daemon thread still in C code while the interpreter finalises can crash
            server.should_exit = True
            thread.join(SHUTDOWN_S)


def key_ids(keys: Iterable[str]) -> list[str]:
    """The id of each key (blank lines skipped): what the access file names, since the key itself is a secret."""
    return [tenant_of(key.strip()) for key in keys if key.strip()]


def main(argv: list[str] | None = None, stdin: TextIO = sys.stdin, out: TextIO = sys.stdout) -> int:
    parser = argparse.ArgumentParser(prog="python -m app.cli")
    sub = parser.add_subparsers(dest="command", required=True)
    key_id = sub.add_parser("key-id", help="print the key id of API keys (for ACCESS_FILE)")
    key_id.add_argument("keys", nargs="*", help="the keys (default: one per line on standard input, which keeps "
                                                "them out of the shell history)")
    args = parser.parse_args(argv)
    for line in key_ids(args.keys or stdin):
        out.write(line + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
