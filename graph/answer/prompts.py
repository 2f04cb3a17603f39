"""Prompt templates live as files in `prompts/<language>/<name>.md` (`$placeholders`, string.Template)."""

from __future__ import annotations

import re
from pathlib import Path
from string import Template

from graph.models import Language

_CLAUSE_END = re.compile(r"(?<=[,;:.!?])[ \t]+")  # a clause's punctuation and the space after it
CLAUSE_WORDS = 4  # a shorter clause that labels nothing is a phrase an answer may well use itself


def clauses(text: str) -> list[str]:
    """The clauses of `text`'s lines a model may copy instead of answering: split after , ; : . ! ? and a space,
    the labels ("Vorm:", "Bronnen van $source:") and those of CLAUSE_WORDS words or more. A small model copies
    part of an instruction as its answer's opening, under punctuation of its own: the local 1.5B model answered
    "Begin met het directe antwoord in één of twee zinnen: <de vraag>" from the style line "Vorm: begin met het
    directe antwoord in één of twee zinnen, geef daarna de relevante details." (issue 58). A shorter clause is
    left out: the headings a style asks for ("kernbepalingen,", "obligations and powers,") and a wrapped line's
    last words ("on,") are answer text as often."""
    parts = (c.strip() for line in text.splitlines() for c in _CLAUSE_END.split(line))
    return [c for c in parts if c.endswith(":") or len(c.split()) >= CLAUSE_WORDS]


class Prompts:
    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        self._cache: dict[tuple[str, str], Template] = {}
        for path in sorted(self.root.glob("*/*.md")):
            self._cache[(path.parent.name, path.stem)] = Template(path.read_text("utf-8"))
        if not self._cache:
            raise FileNotFoundError(f"no prompt templates under {self.root}")

    def _template(self, name: str, language: Language) -> Template:
        return self._cache.get((language, name)) or self._cache[("en", name)]

    def render(self, name: str, language: Language, **values: object) -> str:
        return self._template(name, language).substitute({k: str(v) for k, v in values.items()})

    def fixed_lines(self, name: str, language: Language, blocks: tuple[str, ...], **values: object) -> list[str]:
        """The lines of a rendered prompt that are the template's own (with `values`), without the lines of its
        variable `blocks` (evidence, facts, ...): what a model copies when it repeats its prompt."""
        mark = "\x00"
        text = self.render(name, language, **values, **{block: mark for block in blocks})
        return [line for line in (raw.replace(mark, "").strip() for raw in text.splitlines()) if line]

    def fixed_clauses(self, name: str, language: Language, blocks: tuple[str, ...], **values: object) -> list[str]:
        """The clauses (`clauses`) of the template's own text, without its variable `blocks`: split before the
        `values` are filled in, so that a value (the question, an organisation's name) is never cut into clauses
        of its own (an answer line "<organisatie>: ..." is no copy of "... tussen <organisatie>, <andere>"), then
        filled in."""
        filled = {k: str(v) for k, v in values.items()} | dict.fromkeys(blocks, "")
        return [c for c in (Template(part).substitute(filled).strip()
                            for part in clauses(self._template(name, language).template)) if c]

    @property
    def version(self) -> str:
        """Changes whenever a template changes (used in cache keys)."""
        import hashlib

        digest = hashlib.sha1()
        for key in sorted(self._cache):
            digest.update(repr(key).encode() + self._cache[key].template.encode())
        return digest.hexdigest()[:12]
