"""The OpenAI shapes of the library's endpoints: files and vector stores (a vector store is a collection).

As the `openai` package reads them (`types/file_object.py`, `types/vector_store.py`, `types/vector_stores/`); the
fields this service cannot honour are accepted where ignoring them changes nothing for the caller, and refused
(400) where it would (attribute filters on a search).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictInt

from app.protocol import TextOnly

PURPOSES = ("assistants", "user_data")  # what an uploaded document is for here; "batch", "fine-tune"... are not


class FileObject(BaseModel):
    id: str
    object: Literal["file"] = "file"
    bytes: int
    created_at: int
    filename: str
    purpose: str
    status: Literal["uploaded", "processed", "error"] = "processed"
    expires_at: int | None = None
    status_details: str | None = None


class DeletedObject(BaseModel):
    id: str
    object: str
    deleted: bool = True


class FileCounts(BaseModel):
    in_progress: int = 0
    completed: int = 0
    failed: int = 0
    cancelled: int = 0
    total: int = 0


class VectorStore(BaseModel):
    id: str  # the collection's name
    object: Literal["vector_store"] = "vector_store"
    created_at: int
    name: str  # its display name
    usage_bytes: int
    file_counts: FileCounts
    status: Literal["expired", "in_progress", "completed"]
    last_active_at: int | None = None
    metadata: dict[str, str] = {}
    expires_after: dict[str, Any] | None = None
    expires_at: int | None = None


class LastError(BaseModel):
    code: Literal["server_error", "unsupported_file", "invalid_file"]
    message: str


class VectorStoreFile(BaseModel):
    id: str  # the file's id
    object: Literal["vector_store.file"] = "vector_store.file"
    created_at: int
    usage_bytes: int
    vector_store_id: str
    status: Literal["in_progress", "completed", "cancelled", "failed"]
    last_error: LastError | None = None
    attributes: dict[str, str | float | bool] | None = None
    chunking_strategy: dict[str, Any] | None = None


class CursorPage(BaseModel):
    """A list the SDK pages through with `after` (`SyncCursorPage`)."""

    object: Literal["list"] = "list"
    data: list[Any]
    first_id: str | None = None
    last_id: str | None = None
    has_more: bool = False


class CreateVectorStore(TextOnly):
    model_config = ConfigDict(extra="forbid")
    name: str | None = Field(default=None, max_length=256)
    description: str | None = Field(default=None, max_length=512)  # kept as the collection's focus
    metadata: dict[str, str] | None = Field(default=None, max_length=16)
    file_ids: list[str] | None = Field(default=None, max_length=500)
    expires_after: dict[str, Any] | None = None  # a collection does not expire: accepted, not kept
    chunking_strategy: dict[str, Any] | None = None  # documents are cut by their own structure: accepted, not used


class AttachFile(TextOnly):
    model_config = ConfigDict(extra="forbid")
    file_id: str = Field(min_length=1, max_length=64)
    attributes: dict[str, str | float | bool] | None = None
    chunking_strategy: dict[str, Any] | None = None


class RankingOptions(BaseModel):
    model_config = ConfigDict(extra="forbid")
    ranker: str | None = None
    score_threshold: float | None = Field(default=None, ge=0, le=1)


class SearchVectorStore(TextOnly):
    model_config = ConfigDict(extra="forbid")
    query: str | list[str]
    max_num_results: StrictInt = Field(default=10, ge=1, le=50)
    filters: dict[str, Any] | None = None
    ranking_options: RankingOptions | None = None
    rewrite_query: bool = False


class SearchContent(BaseModel):
    type: Literal["text"] = "text"
    text: str


class SearchHit(BaseModel):
    file_id: str
    filename: str
    score: float
    attributes: dict[str, str | float | bool] | None = None
    content: list[SearchContent]


class SearchResultsPage(BaseModel):
    object: Literal["vector_store.search_results.page"] = "vector_store.search_results.page"
    search_query: list[str]
    data: list[SearchHit]
    has_more: bool = False
    next_page: str | None = None
