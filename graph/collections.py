"""Document collections are deployment configuration: loaded from a JSON file, never hard-wired."""

from __future__ import annotations

import json
from pathlib import Path

from pydantic import BaseModel, TypeAdapter


class Collection(BaseModel):
    name: str
    display_name: str
    focus: str = ""
    keywords: list[str] = []  # lower-case words that point the router at this collection


def load_collections(path: Path) -> list[Collection]:
    items = TypeAdapter(list[Collection]).validate_python(json.loads(Path(path).read_text("utf-8")))
    if not items:
        raise ValueError(f"{path}: no collections configured")
    names = [c.name for c in items]
    if len(set(names)) != len(names):
        raise ValueError(f"{path}: duplicate collection names")
    return items
