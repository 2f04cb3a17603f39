"""Run any ASGI app (the service, the reference document server) with uvicorn on 127.0.0.1 in a thread."""

from __future__ import annotations

import socket
import subprocess
import threading
import time

import uvicorn


class ServerThread:
    def __init__(self, app, *, port: int = 0, lifespan: str = "on") -> None:
        self.app, self.port, self.lifespan = app, port, lifespan
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> ServerThread:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", self.port))
        self.port = sock.getsockname()[1]
        config = uvicorn.Config(
            self.app, loop="asyncio", lifespan=self.lifespan, log_config=None, log_level="warning",
            access_log=False, timeout_graceful_shutdown=2,
        )
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run, kwargs={"sockets": [sock]}, daemon=True)
        self._thread.start()
        deadline = time.monotonic() + 30
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("server failed to start")
            time.sleep(0.01)
        return self

    def stop(self) -> None:
        if self._server is not None and self._thread is not None:
            self._server.should_exit = True
            self._thread.join(timeout=10)
            self._server = self._thread = None

    def __enter__(self) -> ServerThread:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def wait_until_serving(url: str, process: subprocess.Popen[bytes], seconds: float, what: str) -> None:
    """Poll ``url`` (a GET answering 200) until a server started as ``process`` serves it; fails the test when the
    process exits first or ``seconds`` pass (a model server loads its weights first)."""
    import httpx
    import pytest

    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            if httpx.get(url, timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        if process.poll() is not None:
            pytest.fail(f"{what} exited ({process.returncode})")
        time.sleep(0.3)
    pytest.fail(f"{what} did not serve {url} within {seconds:g} s")
