"""The document library over HTTP, the OpenAI way (docs/LIBRARY.md): `/v1/files` and `/v1/vector_stores`, where a
vector store is a collection. The official `openai` package's `files.*` and `vector_stores.*` calls work unchanged.

Every route but a file's content needs the API key (when API_KEYS is set) and keeps to the caller's collections: a
vector store or file the caller may not read does not exist for it (404); changing one needs a write grant (403).
A file's content also opens with a signed link instead of a key (`app.links`): the link a cited source carries.
"""

from __future__ import annotations

import mimetypes
import secrets
import time
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import FileResponse

from app.access import Caller
from app.auth import bearer_token, caller, check_api_key, require_api_key
from app.errors import APIError
from app.library import LibraryService, not_found
from app.library_protocol import (
    PURPOSES,
    AttachFile,
    CreateVectorStore,
    CursorPage,
    DeletedObject,
    FileCounts,
    FileObject,
    LastError,
    SearchContent,
    SearchHit,
    SearchResultsPage,
    SearchVectorStore,
    VectorStore,
    VectorStoreFile,
)
from app.links import valid
from app.protocol import RequestFilters
from app.ratelimit import rate_limit
from app.routes import ServicesDep, found_passages
from app.services import Services
from app.uploads import receive_upload
from graph.clients.cache import tenant_of
from textkit.untrusted import plain

router = APIRouter()
guarded = [Depends(check_api_key), Depends(rate_limit)]
CallerDep = Annotated[Caller, Depends(caller)]
Limit = Annotated[int, Query(ge=1, le=10_000)]
# What a browser may show in place from an uploaded file; anything else (HTML, SVG, ...) is downloaded, never run
# in the service's origin.
INLINE = {"application/pdf", "text/plain"}


def library(svc: Services) -> LibraryService:
    if svc.library is None:
        raise APIError(501, "this deployment's document server takes no uploads (an external MCP_SERVER_URL, or "
                       "UPLOADS=off): add documents where that server keeps them", code="uploads_unavailable",
                       headers={"x-should-retry": "false"})
    return svc.library


def visible(svc: Services, who: Caller) -> tuple[str, ...]:
    return svc.access.visible(who, svc.catalog.names)


def page(items: list[Any], limit: int, after: str | None, before: str | None = None) -> CursorPage:
    """`items` (in the order asked) from after the one with id `after` / before `before`, at most `limit`."""
    ids = [item.id for item in items]
    if after in ids:
        items = items[ids.index(after) + 1:]
    elif before in ids:
        items = items[:ids.index(before)]
    shown = items[:limit]
    return CursorPage(data=shown, first_id=shown[0].id if shown else None, last_id=shown[-1].id if shown else None,
                      has_more=len(items) > limit)


def file_object(stored: Any) -> FileObject:
    return FileObject(id=stored.id, bytes=stored.bytes, created_at=stored.created_at, filename=stored.filename,
                      purpose=stored.purpose)


# --- files -------------------------------------------------------------------------------------------------------


@router.post("/v1/files", response_model=FileObject, dependencies=guarded)
async def upload_file(request: Request, svc: ServicesDep, who: CallerDep) -> FileObject:
    """`client.files.create(file=..., purpose="assistants")`: the file is kept; attach it to a vector store to make
    its text searchable."""
    lib = library(svc)
    if not lib.may_upload(who):
        raise APIError(403, "this caller may not upload files", code="permission_denied")
    upload = await receive_upload(request, lib.library.incoming(), lib.max_upload_bytes)
    purpose = upload.fields.get("purpose", "")
    if purpose not in PURPOSES:
        upload.path.unlink(missing_ok=True)
        raise APIError(400, f"purpose must be one of {', '.join(PURPOSES)}", param="purpose")
    return file_object(await lib.call(lib.library.add_file, upload.path, upload.filename, purpose))


@router.get("/v1/files", response_model=CursorPage, dependencies=guarded)
async def list_files(svc: ServicesDep, who: CallerDep, limit: Limit = 10_000, after: str | None = None,
                     order: str = "desc", purpose: str | None = None) -> CursorPage:
    lib = library(svc)
    seen = visible(svc, who)
    shown = []
    for stored in await lib.call(lib.library.files):
        if purpose and stored.purpose != purpose:
            continue
        holders = await lib.call(lib.library.file_collections, stored.id)
        if any(name in seen for name in holders) or (not holders and lib.may_upload(who)):
            shown.append(file_object(stored))
    shown.sort(key=lambda f: (f.created_at, f.id), reverse=order != "asc")
    return page(shown, limit, after)


@router.get("/v1/files/{file_id}", response_model=FileObject, dependencies=guarded)
async def retrieve_file(file_id: str, svc: ServicesDep, who: CallerDep) -> FileObject:
    lib = library(svc)
    return file_object(await lib.readable(who, file_id, visible(svc, who)))


@router.get("/v1/files/{file_id}/content")
async def file_content(file_id: str, request: Request, svc: ServicesDep) -> FileResponse:
    """The original bytes: with the API key (and read access to a collection holding the file), or with the signed
    link a cited source carries (`?expires=…&signature=…`)."""
    lib = library(svc)
    expires, signature = request.query_params.get("expires"), request.query_params.get("signature")
    if expires is not None or signature is not None:
        if not valid(svc.link_key, file_id, expires or "", signature or ""):
            raise not_found("file", file_id)
        stored = await lib.call(lib.library.file, file_id)
        if stored is None:
            raise not_found("file", file_id)
    else:
        require_api_key(request)
        who = svc.access.identify(request.headers, tenant_of(bearer_token(request)))
        stored = await lib.readable(who, file_id, visible(svc, who))
    path = await lib.call(lib.library.file_path, file_id)
    if path is None:
        raise not_found("file", file_id)
    media = mimetypes.guess_type(stored.filename)[0] or "application/octet-stream"
    inline = media in INLINE
    headers = {"X-Content-Type-Options": "nosniff", "Cache-Control": "private, max-age=300"}
    if not inline:  # (a sandboxed page cannot show a PDF in Chrome's viewer: only what is downloaded gets it)
        headers["Content-Security-Policy"] = "sandbox"
    return FileResponse(path, media_type=media if inline else "application/octet-stream", filename=stored.filename,
                        content_disposition_type="inline" if inline else "attachment", headers=headers)


@router.delete("/v1/files/{file_id}", response_model=DeletedObject, dependencies=guarded)
async def delete_file(file_id: str, svc: ServicesDep, who: CallerDep) -> DeletedObject:
    """The file, and its documents in every collection: only for a caller who may change each of them."""
    lib = library(svc)
    await lib.readable(who, file_id, visible(svc, who))
    holders = await lib.call(lib.library.file_collections, file_id)
    for name in holders:
        lib.writable(who, name)
    if not lib.may_upload(who):
        raise APIError(403, "this caller may not delete files", code="permission_denied")
    await lib.change(holders, lib.library.delete_file, file_id)
    return DeletedObject(id=file_id, object="file")


# --- vector stores ----------------------------------------------------------------------------------------------


def new_store_name(name: str | None) -> str:
    """A collection name for a new vector store: its name made a slug ("Mijn documenten" -> "mijn-documenten"), or
    a random one."""
    from docserver.ingest import slug

    written = slug(plain(name or ""))[:64].strip("-_.") if name else ""
    return written or f"vs_{secrets.token_hex(12)}"


async def store_of(svc: Services, who: Caller, store_id: str) -> VectorStore:
    """The vector store `store_id` as the caller may see it, else a 404."""
    lib = svc.library
    info = await lib.call(lib.library.collection, store_id) if lib else None
    if (store_id not in svc.catalog.names and info is None) or not svc.access.visible(who, (store_id,)):
        raise not_found("vector store", store_id)
    attachments = await lib.call(lib.library.attachments, store_id) if lib and info else []
    counts = FileCounts(total=len(attachments))
    for attached in attachments:
        status = "in_progress" if lib and lib.reading(store_id, attached.file_id) else attached.status
        setattr(counts, status, getattr(counts, status) + 1)
    return VectorStore(
        id=store_id, created_at=info.created_at if info else 0, name=info.display_name if info else
        svc.catalog.display(store_id), usage_bytes=info.bytes if info else 0, file_counts=counts,
        status="in_progress" if counts.in_progress else "completed", last_active_at=int(time.time()),
        metadata=dict(info.metadata) if info else {})


@router.post("/v1/vector_stores", response_model=VectorStore, dependencies=guarded)
async def create_store(body: CreateVectorStore, svc: ServicesDep, who: CallerDep) -> VectorStore:
    lib = library(svc)
    name = new_store_name(body.name)
    lib.writable(who, name)
    if name in svc.catalog.names or await lib.call(lib.library.collection, name) is not None:
        raise APIError(409, f"a vector store (collection) '{name}' exists: add files to it with "
                       f"POST /v1/vector_stores/{name}/files", param="name", code="already_exists",
                       headers={"x-should-retry": "false"})
    metadata = {**(body.metadata or {}), **({"description": plain(body.description)} if body.description else {})}
    try:
        await lib.change([name], lib.library.create_collection, name, plain(body.name) or name, metadata)
    except FileExistsError:
        raise APIError(409, f"a vector store (collection) '{name}' exists", param="name", code="already_exists",
                       headers={"x-should-retry": "false"}) from None
    for file_id in body.file_ids or ():
        await attach(svc, who, name, file_id)
    return await store_of(svc, who, name)


@router.get("/v1/vector_stores", response_model=CursorPage, dependencies=guarded)
async def list_stores(svc: ServicesDep, who: CallerDep, limit: Annotated[int, Query(ge=1, le=100)] = 20,
                      after: str | None = None, before: str | None = None, order: str = "desc") -> CursorPage:
    names = list(visible(svc, who))
    if svc.library:
        held = {info.name for info in await svc.library.call(svc.library.library.collections)}
        names += sorted(n for n in held - set(names) if svc.access.visible(who, (n,)))
    stores = [await store_of(svc, who, name) for name in names]
    stores.sort(key=lambda s: (s.created_at, s.id), reverse=order != "asc")
    return page(stores, limit, after, before)


@router.get("/v1/vector_stores/{store_id}", response_model=VectorStore, dependencies=guarded)
async def retrieve_store(store_id: str, svc: ServicesDep, who: CallerDep) -> VectorStore:
    return await store_of(svc, who, store_id)


@router.delete("/v1/vector_stores/{store_id}", response_model=DeletedObject, dependencies=guarded)
async def delete_store(store_id: str, svc: ServicesDep, who: CallerDep) -> DeletedObject:
    """The collection and its documents; its files stay (delete them with DELETE /v1/files/{id})."""
    lib = library(svc)
    await store_of(svc, who, store_id)
    lib.writable(who, store_id)
    if not await lib.change([store_id], lib.library.delete_collection, store_id):
        raise APIError(400, f"'{store_id}' is part of the bundled corpus and cannot be deleted", code="read_only")
    return DeletedObject(id=store_id, object="vector_store.deleted")


# --- a vector store's files ---------------------------------------------------------------------------------------


def store_file(attached: Any, reading: bool) -> VectorStoreFile:
    status = "in_progress" if reading else attached.status
    error = LastError(code="invalid_file" if attached.last_error and "crashed" not in attached.last_error
                      else "server_error", message=attached.last_error) if status == "failed" else None
    return VectorStoreFile(id=attached.file_id, created_at=attached.created_at, usage_bytes=attached.bytes,
                           vector_store_id=attached.collection, status=status, last_error=error)


async def attach(svc: Services, who: Caller, store_id: str, file_id: str) -> VectorStoreFile:
    lib = library(svc)
    await lib.readable(who, file_id, visible(svc, who))
    if await lib.call(lib.library.collection, store_id) is None:  # a collection of the bundled corpus or the file
        await lib.call(lib.library.create_collection, store_id, svc.catalog.display(store_id), {})
    attached = await lib.call(lib.library.attach, store_id, file_id)
    if attached.status == "in_progress" and not lib.reading(store_id, file_id):
        lib.read(store_id, file_id)
    return store_file(attached, lib.reading(store_id, file_id))


@router.post("/v1/vector_stores/{store_id}/files", response_model=VectorStoreFile, dependencies=guarded)
async def attach_file(store_id: str, body: AttachFile, svc: ServicesDep, who: CallerDep) -> VectorStoreFile:
    """Read an uploaded file into the collection, in the background: `in_progress`, then `completed` (searchable)
    or `failed` with `last_error` saying why (the reason `python -m docserver ingest` gives)."""
    await store_of(svc, who, store_id)
    library(svc).writable(who, store_id)
    return await attach(svc, who, store_id, body.file_id)


@router.get("/v1/vector_stores/{store_id}/files", response_model=CursorPage, dependencies=guarded)
async def list_store_files(store_id: str, svc: ServicesDep, who: CallerDep,
                           limit: Annotated[int, Query(ge=1, le=100)] = 20, after: str | None = None,
                           before: str | None = None, order: str = "desc", filter: str | None = None) -> CursorPage:
    lib = library(svc)
    await store_of(svc, who, store_id)
    files = [store_file(a, lib.reading(store_id, a.file_id)) for a in await lib.call(lib.library.attachments, store_id)]
    files = [f for f in files if filter is None or f.status == filter]
    files.sort(key=lambda f: (f.created_at, f.id), reverse=order != "asc")
    return page(files, limit, after, before)


@router.get("/v1/vector_stores/{store_id}/files/{file_id}", response_model=VectorStoreFile, dependencies=guarded)
async def retrieve_store_file(store_id: str, file_id: str, svc: ServicesDep, who: CallerDep) -> VectorStoreFile:
    lib = library(svc)
    await store_of(svc, who, store_id)
    attached = await lib.call(lib.library.attachment, store_id, file_id)
    if attached is None:
        raise not_found("file", file_id)
    return store_file(attached, lib.reading(store_id, file_id))


@router.delete("/v1/vector_stores/{store_id}/files/{file_id}", response_model=DeletedObject, dependencies=guarded)
async def detach_file(store_id: str, file_id: str, svc: ServicesDep, who: CallerDep) -> DeletedObject:
    """The file's document leaves the collection; the file stays (DELETE /v1/files/{id} removes it)."""
    lib = library(svc)
    await store_of(svc, who, store_id)
    lib.writable(who, store_id)
    if not await lib.change([store_id], lib.library.detach, store_id, file_id):
        raise not_found("file", file_id)
    return DeletedObject(id=file_id, object="vector_store.file.deleted")


@router.post("/v1/vector_stores/{store_id}/search", response_model=SearchResultsPage, dependencies=guarded)
async def search_store(store_id: str, body: SearchVectorStore, svc: ServicesDep, who: CallerDep
                       ) -> SearchResultsPage:
    """The passages `/v1/search` finds in this one collection, in OpenAI's shape."""
    if body.filters:
        raise APIError(400, "attribute filters are not supported: a vector store here is a collection of documents",
                       param="filters", code="unsupported_value")
    await store_of(svc, who, store_id)
    queries = [body.query] if isinstance(body.query, str) else list(body.query)
    if not queries or not all(q.strip() for q in queries):
        raise APIError(400, "query must hold text", param="query")
    found = await found_passages(svc, who, " ".join(queries), RequestFilters(collections=[store_id]))
    threshold = body.ranking_options.score_threshold if body.ranking_options else None
    names = await file_names(svc, {e.file_id for e in found if e.file_id})
    hits = [SearchHit(file_id=e.file_id, filename=names.get(e.file_id, e.title), score=round(e.relevance, 4),
                      attributes={"collection": e.collection, "document": e.doc_id, "title": e.title,
                                  **({"page": e.page} if e.page is not None else {}),
                                  **({"url": e.url} if e.url else {})},
                      content=[SearchContent(text=e.text)])
            for e in found if threshold is None or e.relevance >= threshold]
    return SearchResultsPage(search_query=queries, data=hits[: body.max_num_results])


async def file_names(svc: Services, ids: set[str]) -> dict[str, str]:
    lib = svc.library
    if lib is None:
        return {}
    names = {}
    for file_id in ids:
        stored = await lib.call(lib.library.file, file_id)
        if stored is not None:
            names[file_id] = stored.filename
    return names
