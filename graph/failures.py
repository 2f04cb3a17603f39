"""Names for transport failures, as they appear in logs, think lines and degraded answers."""

from __future__ import annotations


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
