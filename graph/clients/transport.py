"""What the upstream and MCP clients share about their HTTP connections: pool expiry, failure names and the
bearer header."""

from __future__ import annotations

# Idle pooled connections are dropped after this many seconds, before servers close theirs (uvicorn, and so vLLM and
# most MCP servers: 5 s). A call sent on a connection the server is closing at that moment fails with a read error:
# the upstream client then retries after a backoff, and in the MCP SDK it ends the whole session with every call in
# flight on it. The benchmark's sweep logged both at a 5 s expiry.
IDLE_EXPIRY_S = 4.0


def failure_name(exc: BaseException) -> str:
    """The name of what went wrong.

    The MCP SDK reports a failed connection as an exception group from its task group, and the aiohttp
    transport re-raises aiohttp's errors as httpx ones, not always aptly (a refused connection arrives as
    `ConnectTimeout`). So: the first error inside a group, and the aiohttp error behind a mapped one."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    cause = exc.__cause__
    if cause is not None and type(cause).__module__.split(".")[0] == "aiohttp":
        return type(cause).__name__
    return type(exc).__name__


def bearer_headers(token: str) -> dict[str, str]:
    """The default headers of a client that authenticates with `token` (none for a blank one).

    Given to the HTTP client itself, not to single requests, so that every request carries it: the MCP session's
    initialize, its GET stream and DELETE, and the direct tool calls. Keep them out of logs and span attributes."""
    token = token.strip()
    return {"Authorization": f"Bearer {token}"} if token else {}
