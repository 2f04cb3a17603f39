"""Links that open a library file in a browser: `/v1/files/{id}/content?expires=…&signature=…#page=N`.

A source the answer cites must open where it is read (Open WebUI's source chips, a Markdown link, a browser tab),
and none of these sends the caller's API key. So the service signs the link for the one file it names: HMAC-SHA256
with the deployment's link key over the file id and an expiry. The link is only made for a passage the caller was
shown, that is for a file of a collection it may read (the same access check as `GET /v1/files/{id}/content` with
a key); whoever holds the link may read that one file until it expires. The expiry is rounded up to a whole day, so
the same answer made twice in a day links alike (cached answers replay the links they were made with).

The key: LINK_SECRET, else a random one kept beside the library's index (`link.key`, mode 0600), so that the links
of every worker and of the next start of the service verify; rotating it revokes every link made with it.
"""

from __future__ import annotations

import hashlib
import hmac
import math
import os
import secrets
import time
from pathlib import Path
from urllib.parse import urlencode

LINK_TTL_S = 7 * 24 * 3600
DAY_S = 24 * 3600


def content_path(file_id: str) -> str:
    return f"/v1/files/{file_id}/content"


def expiry(now: float, ttl_s: float = LINK_TTL_S) -> int:
    """When a link made at `now` stops opening: at least `ttl_s` later, at the end of that day (UTC)."""
    return int(math.ceil((now + ttl_s) / DAY_S) * DAY_S)


def signature(key: bytes, file_id: str, expires: int) -> str:
    return hmac.new(key, f"{file_id}:{expires}".encode(), hashlib.sha256).hexdigest()[:32]


def signed_link(base_url: str, key: bytes, file_id: str, page: int | None, now: float | None = None) -> str:
    """The absolute link to the file's original (at `page`, a PDF viewer's `#page=N`)."""
    expires = expiry(time.time() if now is None else now)
    query = urlencode({"expires": expires, "signature": signature(key, file_id, expires)})
    fragment = f"#page={page}" if page is not None else ""
    return f"{base_url.rstrip('/')}{content_path(file_id)}?{query}{fragment}"


def valid(key: bytes, file_id: str, expires: str, given: str, now: float | None = None) -> bool:
    """Whether a link's `expires` and `signature` are the service's own for `file_id` and not yet expired."""
    if not expires.isdigit() or int(expires) < (time.time() if now is None else now):
        return False
    return hmac.compare_digest(signature(key, file_id, int(expires)), given)


def link_key(secret: str, folder: Path | None) -> bytes:
    """LINK_SECRET, else the key kept in `folder` (created at first use, readable by its owner only), else (no
    folder: no library of the service's own) a random key for this process."""
    if secret:
        return secret.encode()
    if folder is None:
        return secrets.token_bytes(32)
    path = folder / "link.key"
    folder.mkdir(parents=True, exist_ok=True)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return _read_key(path)
    with os.fdopen(fd, "w", encoding="ascii") as out:
        key = secrets.token_bytes(32)
        out.write(key.hex())
    return key


def _read_key(path: Path) -> bytes:
    """The key another process wrote; it may be writing it at this moment (a few milliseconds)."""
    for _ in range(50):
        written = path.read_text("ascii").strip()
        if len(written) == 64:
            return bytes.fromhex(written)
        time.sleep(0.01)
    raise ValueError(f"{path}: not a link key (64 hex digits); delete it to make a new one")
