"""Collections per caller, attacked: a caller without the grant never learns that a restricted collection or any
of its documents exists, whatever it asks, whatever the caches hold and whatever headers it forges."""

from __future__ import annotations

import io
import json
import logging
import re
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import jwt
import pytest

from app.access import AccessFile, Caller, Grant, User, load_access, may_write, visible_collections
from app.errors import APIError
from docserver.corpus import BUNDLED_CORPUS, load_corpus
from graph.clients.cache import tenant_of
from tests.conftest import TORN, chunks, content_of, sse_events
from tests.fakes.fake_llm import FakeLLM, Reply

RESTRICTED = "security"  # the bundled collection this file restricts: need-to-know documents
OPEN = ["anvs", "iaea", "wetten_overheid"]
BOSS, PLEB, PROXY = "key-of-the-boss", "key-of-a-plain-user", "key-of-open-webui"
SECRET = "a-jwt-secret-only-these-tests-know-" + "0123456789" * 4  # 64 bytes: enough for HS512 too
DIRECT = "Welke categorieën nucleair materiaal onderscheidt NSS 13 en in welke beveiligingszones horen ze?"
FOLLOW_UP = "En wat zegt dat document over sabotage?"
ADMIN_HEADERS = {"X-OpenWebUI-User-Role": "admin", "X-OpenWebUI-User-Email": "chef@example.nl",
                 "X-OpenWebUI-User-Id": "u-1", "X-OpenWebUI-User-Groups": "beveiliging"}
ACCESS = {
    "restricted": [RESTRICTED],
    "trusted_proxies": [tenant_of(PROXY)],
    "grants": [
        {"key": tenant_of(BOSS), "collections": [RESTRICTED]},
        {"role": "admin", "collections": [RESTRICTED]},
        {"email": "Chef@Example.NL", "collections": [RESTRICTED]},
        {"group": "beveiliging", "collections": [RESTRICTED]},
    ],
}


def _hidden_strings() -> set[str]:
    """What names the restricted collection's documents (ids, titles, the distinctive half of a title, URLs) and
    its focus, minus anything the open collections also say (those may be shown to everyone)."""
    documents = load_corpus(BUNDLED_CORPUS)
    hidden = [d for d in documents if d.collection == RESTRICTED]
    said = "\n".join(f"{c.title}\n{c.text}\n{c.url}\n{d.url}" for d in documents if d.collection != RESTRICTED
                     for c in d.chunks)
    focus = next(c["focus"] for c in json.loads((BUNDLED_CORPUS / "collections.json").read_text("utf-8"))
                 if c["name"] == RESTRICTED)
    strings = {focus} | {d.doc_id for d in hidden} | {d.title for d in hidden}
    strings |= {d.title.split(" — ", 1)[1] for d in hidden if " — " in d.title}
    strings |= {url for d in hidden for url in (d.url, *(c.url for c in d.chunks)) if url}
    return {s for s in strings if s and s not in said}


HIDDEN = _hidden_strings()
# The collection's display name as the service writes it (a think line "Security: ...", "Collecties: ..., Security",
# a source's "(Security, 2011)"); the open documents only say it in "Nuclear Security Series"
LABEL = re.compile(r"(?<!Nuclear )\bSecurity\b")


def leaks(text: str) -> list[str]:
    found = sorted(s for s in HIDDEN if s in text)
    return found + LABEL.findall(text)


@pytest.fixture
def access_file(tmp_path: Path) -> Path:
    path = tmp_path / "access.json"
    path.write_text(json.dumps(ACCESS), "utf-8")
    return path


@pytest.fixture
def guarded(service, access_file: Path) -> str:
    return service(api_keys=[BOSS, PLEB, PROXY], access_file=access_file, user_jwt_secret=SECRET, response_cache=True)


@pytest.fixture
def audit(caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch) -> Iterator[pytest.LogCaptureFixture]:
    """Audit lines: caplog's handler on the audit logger itself, which the service's logging setup leaves alone
    (it replaces the root logger's handlers when a service starts), and only there (each record once)."""
    logger = logging.getLogger("neo_nl.audit")
    monkeypatch.setattr(logger, "propagate", False)
    logger.addHandler(caplog.handler)
    caplog.set_level(logging.INFO, logger="neo_nl.audit")
    yield caplog
    logger.removeHandler(caplog.handler)


def audit_lines(caplog: pytest.LogCaptureFixture, count: int) -> list[dict]:
    """The audit records' fields once `count` have been logged (a stream logs its line after `[DONE]`)."""
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        lines = [r.audit for r in caplog.records if r.name == "neo_nl.audit"]
        if len(lines) >= count:
            time.sleep(0.2)  # and no more than that
            return [r.audit for r in caplog.records if r.name == "neo_nl.audit"]
        time.sleep(0.02)
    raise AssertionError("no audit line")


def user_jwt(secret: str = SECRET, *, algorithm: str = "HS256", expires_in: int = 300, **claims: str) -> str:
    now = int(time.time())
    payload = {"sub": "u-7", "email": "someone@example.nl", "name": "Some One", "role": "user", "iss": "open-webui",
               "iat": now, "exp": now + expires_in, **claims}
    return jwt.encode(payload, secret if algorithm != "none" else None, algorithm=algorithm)


def headers_of(key: str, **extra: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}", **extra}


def conversation(*turns: str) -> list[dict[str, str]]:
    return [{"role": "user" if i % 2 == 0 else "assistant", "content": text} for i, text in enumerate(turns)]


def ask(base: str, key: str, messages: list[dict[str, str]], *, stream: bool = True, **headers: str
        ) -> httpx.Response:
    body = {"model": "neo-nl-agent", "stream": stream, "messages": messages}
    if stream:
        body["stream_options"] = {"include_usage": True}
    response = httpx.post(base + "/v1/chat/completions", json=body, timeout=60,
                          headers={**headers_of(key), "X-OpenWebUI-Chat-Id": "chat-1", **headers})
    return response


def answer_of(response: httpx.Response) -> str:
    return content_of(chunks(sse_events(response))).partition("</think>")[2]


def sees_restricted(response: httpx.Response) -> bool:
    assert response.status_code == 200, response.text
    return bool(leaks(response.text))


# ---------------------------------------------------------------- the pure rules

GRANTS = AccessFile.model_validate(ACCESS)
ALL = [*OPEN, RESTRICTED]


@pytest.mark.parametrize(("access", "caller", "visible"), [
    (None, Caller(), ALL),  # no access file: everything open to everyone
    (GRANTS, Caller(), OPEN),
    (GRANTS, Caller(tenant_of(PLEB)), OPEN),
    (GRANTS, Caller(tenant_of(BOSS)), ALL),
    (GRANTS, Caller(tenant_of(PLEB), User("jwt", role="admin")), ALL),
    (GRANTS, Caller(tenant_of(PLEB), User("jwt", role="Admin")), ALL),
    (GRANTS, Caller(tenant_of(PLEB), User("jwt", role="user")), OPEN),
    (GRANTS, Caller(tenant_of(PLEB), User("jwt", email="chef@example.nl")), ALL),  # e-mails without case
    (GRANTS, Caller(tenant_of(PLEB), User("jwt", email="chef@example.nl.evil")), OPEN),
    (GRANTS, Caller(tenant_of(PROXY), User("trusted proxy headers", groups=("team", "beveiliging"))), ALL),
    (GRANTS, Caller(tenant_of(PROXY)), OPEN),  # a trusted proxy's own key holds no grant
    (GRANTS, Caller(tenant_of(PLEB), User("jwt", email="", role="")), OPEN),
    (AccessFile(restricted=ALL), Caller(tenant_of(BOSS)), []),
    (AccessFile(restricted=[RESTRICTED], grants=[Grant(group="x", collections=["iaea"])]),
     Caller(user=User("jwt", groups=("x",))), OPEN),  # a grant of an open collection changes nothing
])
def test_visible_collections(access: AccessFile | None, caller: Caller, visible: list[str]) -> None:
    assert visible_collections(ALL, access, caller) == tuple(visible)


@pytest.mark.parametrize(("content", "error"), [
    ({"default": "closed"}, "default"),
    ({"trusted_proxies": [PROXY]}, "trusted_proxies"),  # a raw key where its id belongs
    ({"grants": [{"key": BOSS, "collections": ["iaea"]}]}, "grants.0.key"),
    ({"grants": [{"role": "admin", "email": "a@b.nl", "collections": ["iaea"]}]}, "exactly one of"),
    ({"restricted": ["iaea"], "grant": []}, "Extra inputs"),
])
def test_a_wrong_access_file_stops_the_service_with_a_clear_message(tmp_path: Path, content: dict, error: str
                                                                     ) -> None:
    path = tmp_path / "access.json"
    path.write_text(json.dumps(content), "utf-8")
    with pytest.raises(ValueError, match=re.escape(error)):
        load_access(path, ALL)


@pytest.mark.parametrize(("content", "named"), [
    ({"restricted": ["secret-stuff"]}, "secret-stuff"),
    ({"grants": [{"role": "admin", "collections": ["iaea", "nope", "*"]}]}, "nope"),
])
def test_a_collection_the_library_does_not_hold_yet_is_named_at_startup(
        tmp_path: Path, content: dict, named: str, caplog: pytest.LogCaptureFixture) -> None:
    """The library changes while the service runs (a collection may be created by an upload later), so a name it
    does not hold is no error; but a misspelt restriction would leave the real collection open, so it is named."""
    path = tmp_path / "access.json"
    path.write_text(json.dumps(content), "utf-8")
    with caplog.at_level(logging.WARNING, "app.access"):
        load_access(path, ALL)
    assert [r.getMessage() for r in caplog.records if named in r.getMessage() and "not in the library" in
            r.getMessage()], caplog.text
    assert "*" not in caplog.text.split("collections ", 1)[1].split(" are")[0]



@pytest.mark.parametrize(("access", "caller", "collection", "visible", "writes"), [
    (None, Caller(), "mijndocs", True, True),  # no access file: one user, who may do anything
    (AccessFile(), Caller(), "mijndocs", True, False),  # open to read, writing needs a grant
    (AccessFile(default="restricted"), Caller(), "mijndocs", False, False),
    (AccessFile(default="restricted", grants=[Grant(role="admin", collections=["*"], write=True)]),
     Caller(user=User("jwt", role="admin")), "mijndocs", True, True),  # "*": collections created later too
    (AccessFile(default="restricted", grants=[Grant(role="admin", collections=["*"], write=True)]),
     Caller(user=User("jwt", role="user")), "mijndocs", False, False),
    (AccessFile(grants=[Grant(key=tenant_of(BOSS), collections=["iaea"], write=True)]),
     Caller(tenant_of(BOSS)), "mijndocs", True, False),  # a write grant for one collection only
    (AccessFile(grants=[Grant(key=tenant_of(BOSS), collections=["mijndocs"])]),
     Caller(tenant_of(BOSS)), "mijndocs", True, False),  # a read grant does not write
    (AccessFile(restricted=["mijndocs"], grants=[Grant(key=tenant_of(BOSS), collections=["mijndocs"], write=True)]),
     Caller(tenant_of(PLEB)), "mijndocs", False, False),
])
def test_a_new_collection_follows_the_default_and_writing_needs_a_write_grant(
        access: AccessFile | None, caller: Caller, collection: str, visible: bool, writes: bool) -> None:
    assert (collection in visible_collections([*ALL, collection], access, caller)) is visible
    assert may_write(access, caller, collection) is writes


def test_the_example_access_file_fits_the_bundled_collections() -> None:
    example = load_access(Path(__file__).resolve().parents[1] / "docs" / "access.example.json", ALL)
    assert example.restricted == [RESTRICTED] and len(example.grants) == 4


def test_a_key_id_from_the_command_line() -> None:
    """`python -m app.cli key-id`: keys on standard input (out of the shell history) or as arguments."""
    from app.cli import main

    out = io.StringIO()
    assert main(["key-id"], stdin=io.StringIO(f"{BOSS}\n\n{PLEB}\n"), out=out) == 0
    assert out.getvalue().split() == [tenant_of(BOSS), tenant_of(PLEB)]
    out = io.StringIO()
    main(["key-id", PROXY], out=out)
    assert out.getvalue() == tenant_of(PROXY) + "\n"


def test_identity_rules(access_file: Path, caplog: pytest.LogCaptureFixture) -> None:
    from app.access import Access
    from app.settings import Settings

    def settings(**values: object) -> Settings:
        return Settings(_env_file=None, access_file=access_file, **values)

    access = Access(settings(user_jwt_secret=SECRET), ALL)
    who = access.identify({"x-openwebui-user-jwt": user_jwt(role="admin")}, tenant_of(PLEB))
    assert who.user == User("jwt", sub="u-7", email="someone@example.nl", role="admin")
    # groups are unsigned: from a trusted proxy only, percent-encoded beyond ASCII as Open WebUI sends them
    groups = {"x-openwebui-user-groups": "team,%C3%A9quipe"}
    assert access.identify({"x-openwebui-user-jwt": user_jwt(), **groups}, tenant_of(PLEB)).user.groups == ()
    proxied = access.identify({"x-openwebui-user-jwt": user_jwt(), **groups}, tenant_of(PROXY)).user
    assert proxied.groups == ("team", "équipe") and proxied.source == "jwt"
    forged = {k.lower(): v for k, v in ADMIN_HEADERS.items()}
    assert access.identify(forged, tenant_of(PLEB)).user is None
    assert access.identify(forged, tenant_of(PROXY)).user == User(
        "trusted proxy headers", sub="u-1", email="chef@example.nl", role="admin", groups=("beveiliging",))
    caplog.set_level(logging.WARNING, logger="app.access")
    for token in (user_jwt(expires_in=-60), user_jwt("another-secret-" + "x" * 64),
                  user_jwt(algorithm="none"), "not.a.jwt", user_jwt(algorithm="HS512")):
        with pytest.raises(APIError) as refused:
            access.identify({"x-openwebui-user-jwt": token}, tenant_of(PROXY))
        assert refused.value.status == 401 and refused.value.code == "invalid_user_token"
        assert token not in caplog.text
    assert caplog.text.count(f"user token refused (key {tenant_of(PROXY)})") == 5
    without_exp = jwt.encode({"sub": "u-7", "role": "admin"}, SECRET, algorithm="HS256")
    with pytest.raises(APIError, match="exp"):
        access.identify({"x-openwebui-user-jwt": without_exp}, tenant_of(PLEB))
    # no secret configured: the token is ignored (one warning, however often it comes), the plain headers too
    unsigned = Access(settings(), ALL)
    for _ in range(3):
        assert unsigned.identify({"x-openwebui-user-jwt": user_jwt(role="admin"), **forged}, tenant_of(PROXY)).user \
            is None
    assert len([r for r in caplog.records if "USER_JWT_SECRET" in r.getMessage()]) == 1


# ---------------------------------------------------------------- over HTTP

def test_a_restricted_caller_learns_nothing_after_a_privileged_one_warmed_the_caches(guarded: str, audit) -> None:
    """Behind one Open WebUI key, an admin asks (directly, then by follow-up) and the answers land in the response
    cache; a plain user of the same key asks the same, streamed and not, and by follow-up on the admin's own
    answer: nothing of the restricted collection in think lines, answer, sources, `citations` / `search_results`
    or Open WebUI's event lines. The key is the same: only the visible collections tell the cache entries apart."""
    admin = {"X-OpenWebUI-User-Jwt": user_jwt(role="admin")}
    user = {"X-OpenWebUI-User-Jwt": user_jwt(role="user")}
    first = ask(guarded, PROXY, conversation(DIRECT), **admin)
    assert sees_restricted(first)  # the privileged caller still gets the restricted sources
    named = answer_of(first)
    assert sees_restricted(ask(guarded, PROXY, conversation(DIRECT), **admin))  # now from the cache
    follow_up = conversation(DIRECT, named, FOLLOW_UP)
    assert sees_restricted(ask(guarded, PROXY, follow_up, **admin))
    assert "cache" in ask(guarded, PROXY, follow_up, **admin).text

    for messages in (conversation(DIRECT), follow_up):
        streamed = ask(guarded, PROXY, messages, **user)
        assert streamed.status_code == 200 and sse_events(streamed)[-1] == "[DONE]"
        assert leaks(streamed.text) == [], messages[-1]
        assert "cache" not in content_of(chunks(sse_events(streamed))).partition("</think>")[0]
        whole = ask(guarded, PROXY, messages, stream=False, **user)  # the user's own answer, from the cache
        assert whole.status_code == 200 and leaks(whole.text) == []
        assert "cache" in whole.json()["choices"][0]["message"]["reasoning_content"]
        assert sees_restricted(ask(guarded, BOSS, messages))  # the boss's key holds the grant itself
        assert leaks(ask(guarded, PLEB, messages).text) == []
    lines = audit_lines(audit, 12)
    assert len(lines) == 12  # one per request
    admin_line, cached = lines[0], lines[1]
    assert admin_line["key_id"] == tenant_of(PROXY) and admin_line["identity"] == "jwt"
    assert admin_line["user"] == {"sub": "u-7", "email": "someone@example.nl", "role": "admin", "groups": []}
    assert RESTRICTED in admin_line["collections_searched"] and not admin_line["from_cache"]
    assert any(d["collection"] == RESTRICTED for d in admin_line["documents_cited"])
    assert cached["from_cache"] and cached["documents_cited"] == admin_line["documents_cited"]
    plain = [line for line in lines[4:] if line["key_id"] != tenant_of(BOSS)]
    assert len(plain) == 6
    for line in plain:
        assert line["collections_visible"] == OPEN and RESTRICTED not in line["collections_searched"]
        assert all(d["collection"] != RESTRICTED for d in line["documents_cited"])
    assert not any(key in json.dumps(line) for line in lines for key in (BOSS, PLEB, PROXY))  # key ids, never keys
    assert not any(admin["X-OpenWebUI-User-Jwt"] in r.getMessage() for r in audit.records)


@pytest.mark.parametrize("question", [
    "Welke documenten zijn er over fysieke beveiliging van nucleair materiaal?",  # explore: list_documents
    "Leg uitgebreid uit hoe een ontwerpbasisdreiging (DBT) wordt opgesteld en gebruikt",  # deep read
    "Wat zeggen de security-documenten over insider threats?",  # names the collection (in words of its own)
])
def test_every_route_keeps_to_the_visible_collections(guarded: str, question: str) -> None:
    assert sees_restricted(ask(guarded, BOSS, conversation(question)))
    assert leaks(ask(guarded, PLEB, conversation(question)).text) == []


async def test_the_document_view_searches_lists_and_reads_nothing_hidden(docserver_url: str) -> None:
    """The per-caller view of the document server, whatever a node asks of it."""
    from graph.clients.mcp_client import DocumentClient, VisibleDocuments

    client = DocumentClient(docserver_url, timeout_s=10)
    try:
        view = VisibleDocuments(client, OPEN)
        everything = await client.list_documents("physical protection")
        assert {r.collection for r in everything} == {"iaea", RESTRICTED}  # the server lists every collection
        assert {r.collection for r in await view.list_documents("physical protection")} == {"iaea"}
        hidden = next(r for r in everything if r.collection == RESTRICTED)
        assert await client.read_document(RESTRICTED, hidden.doc_id)
        assert await view.read_document(RESTRICTED, hidden.doc_id) == []
        assert await view.search(RESTRICTED, "sabotage") == []
        assert await view.search("iaea", "sabotage")
    finally:
        await client.aclose()


def test_background_tasks_suggest_nothing_restricted(guarded: str) -> None:
    """Open WebUI's title and follow-up tasks on a conversation that holds the boss's answer: the boss's
    suggestions may name its documents, a plain user's never."""
    named = answer_of(ask(guarded, BOSS, conversation(DIRECT)))
    history = (f"### Task:\nSuggest follow-up questions.\n<chat_history>\nUSER: {DIRECT}\nASSISTANT: {named}\n"
               "</chat_history>")
    suggestions = {}
    for key in (BOSS, PLEB):
        for task in ("follow_up_generation", "title_generation", "tags_generation"):
            response = ask(guarded, key, [{"role": "user", "content": history}], stream=False,
                           **{"X-OpenWebUI-Task": task})
            assert response.status_code == 200
            suggestions[key, task] = response.json()["choices"][0]["message"]["content"]
    assert "Wat staat er verder in" in suggestions[BOSS, "follow_up_generation"]
    for task in ("follow_up_generation", "title_generation", "tags_generation"):
        assert leaks(suggestions[PLEB, task]) == [], suggestions[PLEB, task]
    assert "Wat staat er verder in" not in suggestions[PLEB, "follow_up_generation"]


def test_forged_user_headers_count_only_from_a_trusted_proxy(guarded: str, audit) -> None:
    assert not sees_restricted(ask(guarded, PLEB, conversation(DIRECT), **ADMIN_HEADERS))
    assert sees_restricted(ask(guarded, PROXY, conversation(DIRECT), **ADMIN_HEADERS))
    assert not sees_restricted(ask(guarded, PROXY, conversation(DIRECT)))  # the proxy's key alone holds no grant
    group_only = {"X-OpenWebUI-User-Id": "u-2", "X-OpenWebUI-User-Role": "user",
                  "X-OpenWebUI-User-Groups": "beveiliging"}
    assert sees_restricted(ask(guarded, PROXY, conversation(DIRECT), **group_only))
    forged, proxied = audit_lines(audit, 4)[:2]
    assert forged["user"] is None and forged["identity"] is None
    assert proxied["identity"] == "trusted proxy headers" and proxied["user"]["email"] == "chef@example.nl"


def test_a_signed_user_token_grants_by_role_or_email_and_a_bad_one_is_refused(guarded: str, audit) -> None:
    for claims in ({"role": "admin"}, {"email": "CHEF@example.nl"}):
        assert sees_restricted(ask(guarded, PLEB, conversation(DIRECT), **{"X-OpenWebUI-User-Jwt": user_jwt(**claims)}))
    assert not sees_restricted(ask(guarded, PLEB, conversation(DIRECT), **{"X-OpenWebUI-User-Jwt": user_jwt()}))
    line = audit_lines(audit, 3)[0]
    assert line["identity"] == "jwt" and line["user"]["sub"] == "u-7" and line["user"]["role"] == "admin"
    assert line["key_id"] == tenant_of(PLEB) and RESTRICTED in line["collections_searched"]
    for token in (user_jwt(role="admin", expires_in=-60), user_jwt("another-secret-" + "x" * 64, role="admin"),
                  user_jwt(algorithm="none", role="admin"), "garbage"):
        for stream in (True, False):
            refused = ask(guarded, PLEB, conversation(DIRECT), stream=stream, **{"X-OpenWebUI-User-Jwt": token})
            assert refused.status_code == 401 and refused.headers["x-should-retry"] == "false"
            error = refused.json()["error"]
            assert error["type"] == "authentication_error" and error["code"] == "invalid_user_token"
            assert token not in refused.text


def test_readiness_lists_only_the_collections_the_key_may_see(guarded: str) -> None:
    def listed(key: str) -> list[str]:
        return httpx.get(guarded + "/health/ready", headers=headers_of(key)).json()["collections"]

    assert listed(BOSS) == ALL
    assert listed(PLEB) == OPEN
    assert listed(PROXY) == OPEN


def test_a_caller_who_may_see_nothing_is_told_so_without_names(service, tmp_path: Path) -> None:
    path = tmp_path / "access.json"
    path.write_text(json.dumps({"restricted": ALL, "grants": [{"key": tenant_of(BOSS), "collections": ALL}]}), "utf-8")
    base = service(api_keys=[BOSS, PLEB], access_file=path)
    for stream in (True, False):
        refused = ask(base, PLEB, conversation(DIRECT), stream=stream)
        assert refused.status_code == 403
        assert refused.json()["error"]["code"] == "permission_denied"
        assert not any(name.lower() in refused.text.lower() for name in ("anvs", "iaea", "wetten", RESTRICTED))
    assert ask(base, BOSS, conversation(DIRECT), stream=False).status_code == 200


def test_no_prompt_mentions_a_hidden_collection(service, access_file: Path, fake_llm: FakeLLM) -> None:
    """LLM mode: the routing prompt lists only the collections the caller may see, and the model is offered no
    passage of another. An admin's route naming the restricted collection sits in the plan cache; a plain user
    of the same key gets a routing call of their own, and a model that names the hidden collection anyway
    does not make it searched."""
    fake_llm.when_contains("Classificeer de vraag", Reply(text=json.dumps(
        {"query_type": "exploratory", "collections": [RESTRICTED]})))
    base = service(llm_base_url=fake_llm.base_url, llm_model="big", llm_fast_model="small", llm_timeout_s=5.0,
                   model_route=True, api_keys=[PLEB], access_file=access_file, user_jwt_secret=SECRET)
    assert sees_restricted(ask(base, PLEB, conversation(TORN), **{"X-OpenWebUI-User-Jwt": user_jwt(role="admin")}))
    routing = [r for r in fake_llm.requests if "Classificeer" in r["messages"][-1]["content"]]
    assert f"- {RESTRICTED}:" in routing[0]["messages"][-1]["content"]  # what the check below would catch
    seen = len(fake_llm.requests)
    plain = ask(base, PLEB, conversation(TORN), **{"X-OpenWebUI-User-Jwt": user_jwt(role="user")})
    assert plain.status_code == 200 and leaks(plain.text) == []
    prompts = fake_llm.requests[seen:]
    assert any("Classificeer" in r["messages"][-1]["content"] for r in prompts)  # not the admin's cached route
    for request in prompts:
        text = json.dumps(request["messages"], ensure_ascii=False)
        assert f"- {RESTRICTED}:" not in text and leaks(text) == []
