"""Collections per caller (docs/LIBRARY.md, "Who may read and write"): the access file (`ACCESS_FILE`) and who is asking.

Without an access file every collection the library holds is open to every caller, for reading and for writing
(uploads, attaching and deleting files: the single-user default). With one, a collection is open to read when the
file's `default` is "open" (the default) and the file does not list it as `restricted`; any other collection is
searched only for a caller holding a grant for it, and writing needs a grant with `"write": true`. A grant names
collections, or "*" for every one, those created later included. Grants go by API key (its key id,
`graph.clients.cache.tenant_of`, never the key itself) or, behind Open WebUI, by the user's e-mail, role or group.
Who the user is comes from the signed `X-OpenWebUI-User-Jwt` (HS256, `USER_JWT_SECRET`), or from the plain
`X-OpenWebUI-User-*` headers when the API key is a trusted proxy; from any other key those headers are ignored,
since any client can send them. Groups are not in Open WebUI's token: they come in a plain header (a custom
header `{{USER_GROUPS}}`), so they count from a trusted proxy only.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Literal
from urllib.parse import unquote

import jwt
from pydantic import BaseModel, ConfigDict, Field, StringConstraints, ValidationError, model_validator

from app.errors import APIError
from app.settings import Settings
from graph.clients.cache import tenant_of

log = logging.getLogger(__name__)

KeyId = Annotated[str, StringConstraints(pattern=r"^[0-9a-f]{16}$")]  # `python -m app.cli key-id`
# What Open WebUI 0.12 sends without a JWT secret (open_webui/utils/headers.py)
USER_HEADERS = {"sub": "x-openwebui-user-id", "email": "x-openwebui-user-email", "role": "x-openwebui-user-role",
                "name": "x-openwebui-user-name"}
JWT_ALGORITHMS = ["HS256"]  # pinned: a token may not choose its own algorithm ("none", or RS256 with the secret)


def _fold(value: str) -> str:
    return value.strip().casefold()


@dataclass(frozen=True, slots=True)
class User:
    """The person behind a forwarding client; `source` says how the service knows: a verified JWT, or the plain
    headers of a trusted proxy."""

    source: Literal["jwt", "trusted proxy headers"]
    sub: str = ""
    email: str = ""
    role: str = ""
    groups: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Caller:
    key_id: str = "anonymous"  # tenant_of(API key)
    user: User | None = None


class Grant(BaseModel):
    """Collections granted to one API key, e-mail address, role or group (exactly one of them)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    key: KeyId | None = None
    email: str | None = None
    role: str | None = None
    group: str | None = None
    collections: list[str] = Field(min_length=1)  # "*": every collection, those created later too
    write: bool = False  # may also upload files into these collections, attach and delete them

    @model_validator(mode="after")
    def _one_subject(self) -> Grant:
        if sum(v is not None for v in (self.key, self.email, self.role, self.group)) != 1:
            raise ValueError("a grant names exactly one of key, email, role or group")
        return self

    def holds(self, caller: Caller) -> bool:
        """Whether the grant is the caller's: its key, or its user's e-mail, role or group (all without case)."""
        if self.key is not None:
            return self.key == caller.key_id
        user = caller.user
        if user is None:
            return False
        if self.email is not None:
            return bool(user.email) and _fold(self.email) == _fold(user.email)
        if self.role is not None:
            return bool(user.role) and _fold(self.role) == _fold(user.role)
        return _fold(self.group or "") in {_fold(g) for g in user.groups}

    def covers(self, collection: str) -> bool:
        return collection in self.collections or ALL in self.collections


class AccessFile(BaseModel):
    """`{"default": "open" | "restricted", "restricted": [...], "trusted_proxies": [<key id>], "grants": [{"key" |
    "email" | "role" | "group": ..., "collections": [...], "write": false}]}`."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    default: Literal["open", "restricted"] = "open"  # a collection the file does not list (one created later too)
    restricted: list[str] = []
    trusted_proxies: list[KeyId] = []
    grants: list[Grant] = []

    def named(self) -> set[str]:
        return (set(self.restricted) | {name for grant in self.grants for name in grant.collections}) - {ALL}

    def open(self, collection: str) -> bool:
        return self.default == "open" and collection not in self.restricted


ALL = "*"


def visible_collections(held: Sequence[str], access: AccessFile | None, caller: Caller) -> tuple[str, ...]:
    """The collections a caller may search, in catalog order: the open ones and those granted to its key
    or its user (e-mail, role, groups). No access file: all of them."""
    if access is None:
        return tuple(held)
    grants = [grant for grant in access.grants if grant.holds(caller)]
    return tuple(name for name in held if access.open(name) or any(grant.covers(name) for grant in grants))


def may_write(access: AccessFile | None, caller: Caller, collection: str) -> bool:
    """Whether a caller may upload into `collection`, attach files to it and delete them: a write grant of
    its own for it (or "*"). No access file: everyone may (the single-user default)."""
    if access is None:
        return True
    return any(grant.write and grant.covers(collection) for grant in access.grants if grant.holds(caller))


def may_upload(access: AccessFile | None, caller: Caller) -> bool:
    """Whether a caller may upload files at all: a write grant of its own for some collection. No access file:
    everyone may."""
    if access is None:
        return True
    return any(grant.write for grant in access.grants if grant.holds(caller))


def load_access(path: Path, held: Iterable[str]) -> AccessFile:
    """The access file; a collection it names that the library does not hold (yet) is logged at startup, since
    a misspelt restriction would leave the collection open (a `default` of "restricted" leaves nothing open
    by mistake)."""
    try:
        access = AccessFile.model_validate(json.loads(Path(path).read_text("utf-8")))
    except (OSError, ValueError, ValidationError) as exc:
        raise ValueError(f"access file {path}: {exc}") from None
    unknown = sorted(access.named() - set(held))
    if unknown:
        log.warning("access file %s: collections %s are not in the library (yet; held: %s)", path,
                    ", ".join(unknown), ", ".join(held))
    return access


def user_from_jwt(token: str, secret: str) -> User:
    """The user of a token Open WebUI signed (HS256 with `secret`, `exp` required); 401 when it is expired, signed
    with another secret or algorithm, or malformed."""
    try:
        claims = jwt.decode(token, secret, algorithms=JWT_ALGORITHMS, options={"require": ["exp"]})
    except jwt.PyJWTError as exc:
        raise APIError(401, f"invalid user token: {exc}", code="invalid_user_token",
                       headers={"WWW-Authenticate": "Bearer"}) from None
    return User("jwt", sub=str(claims.get("sub") or ""), email=str(claims.get("email") or ""),
                role=str(claims.get("role") or ""))


def user_from_headers(headers: Mapping[str, str]) -> User | None:
    """The user a trusted proxy names in Open WebUI's plain headers; None when it names none."""
    values = {field: headers.get(name, "").strip() for field, name in USER_HEADERS.items()}
    if not (values["sub"] or values["email"] or values["role"]):
        return None
    return User("trusted proxy headers", sub=values["sub"], email=values["email"], role=values["role"])


def groups_of(header: str) -> tuple[str, ...]:
    """Open WebUI's `{{USER_GROUPS}}`: group names joined by commas, each percent-encoded beyond ASCII."""
    return tuple(name for part in header.split(",") if (name := unquote(part).strip()))


class Access:
    """The access file and the user-identity settings, built once per process; per request `identify` then
    `visible`."""

    def __init__(self, settings: Settings, held: Sequence[str]) -> None:
        self.file = load_access(settings.access_file, held) if settings.access_file else None
        self.jwt_secret = settings.user_jwt_secret
        self.jwt_header = settings.user_jwt_header.lower()
        self.groups_header = settings.user_groups_header.lower()
        self._warned = False
        known = {tenant_of(key) for key in settings.api_keys}
        if self.file and known:  # with API_KEYS, a key id that is none of them is most likely a mistake
            ids = {g.key for g in self.file.grants if g.key} | set(self.file.trusted_proxies)
            for key_id in sorted(ids - known):
                log.warning("access file: key id %s is none of API_KEYS", key_id)

    def identify(self, headers: Mapping[str, str], key_id: str) -> Caller:
        trusted = self.file is not None and key_id in self.file.trusted_proxies
        user: User | None = None
        token = headers.get(self.jwt_header, "").strip()
        if token and self.jwt_secret:
            try:
                user = user_from_jwt(token, self.jwt_secret)
            except APIError as exc:  # a forged or replayed token is worth an operator's attention; never the token
                log.warning("user token refused (key %s): %s", key_id, exc.message)
                raise
        elif token and not self._warned:
            self._warned = True  # once: every request of that client carries it
            log.warning("%s received but USER_JWT_SECRET is not set: the user identity is ignored", self.jwt_header)
        elif not token and trusted:
            user = user_from_headers(headers)
        if user is not None and trusted:
            user = User(user.source, user.sub, user.email, user.role, groups_of(headers.get(self.groups_header, "")))
        return Caller(key_id, user)

    def visible(self, caller: Caller, held: Sequence[str]) -> tuple[str, ...]:
        """The collections of `held` (the library's, in catalog order) that `caller` may search."""
        return visible_collections(held, self.file, caller)

    def may_write(self, caller: Caller, collection: str) -> bool:
        return may_write(self.file, caller, collection)

    def may_upload(self, caller: Caller) -> bool:
        return may_upload(self.file, caller)
