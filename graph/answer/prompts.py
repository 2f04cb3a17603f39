"""Prompt templates live as files in `prompts/<language>/<name>.md` (`$placeholders`, string.Template)."""

from __future__ import annotations

from pathlib import Path
from string import Template

from graph.models import Language


class Prompts:
    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        self._cache: dict[tuple[str, str], Template] = {}
        for path in sorted(self.root.glob("*/*.md")):
            self._cache[(path.parent.name, path.stem)] = Template(path.read_text("utf-8"))
        if not self._cache:
            raise FileNotFoundError(f"no prompt templates under {self.root}")

    def render(self, name: str, language: Language, **values: object) -> str:
        template = self._cache.get((language, name)) or self._cache[("en", name)]
        return template.substitute({k: str(v) for k, v in values.items()})

    def fixed_lines(self, name: str, language: Language, blocks: tuple[str, ...], **values: object) -> list[str]:
        """The lines of a rendered prompt that are the template's own (with `values`), without the lines of its
        variable `blocks` (evidence, facts, ...): what a model copies when it repeats its prompt."""
        mark = "\x00"
        text = self.render(name, language, **values, **{block: mark for block in blocks})
        return [line for line in (raw.replace(mark, "").strip() for raw in text.splitlines()) if line]

    @property
    def version(self) -> str:
        """Changes whenever a template changes (used in cache keys)."""
        import hashlib

        digest = hashlib.sha1()
        for key in sorted(self._cache):
            digest.update(repr(key).encode() + self._cache[key].template.encode())
        return digest.hexdigest()[:12]
