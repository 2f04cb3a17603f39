"""Where the pipeline's pieces may live: checked on the source, so a change that breaks a boundary fails here."""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
GRAPH = ROOT / "graph"


def _module(path: Path) -> str:
    return ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")


def _imports(path: Path) -> set[str]:
    """Every module a file imports, at any depth (TYPE_CHECKING blocks and function bodies included)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text("utf-8"))):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
            found |= {f"{node.module}.{alias.name}" for alias in node.names}
    return found


def _graph_modules() -> dict[str, set[str]]:
    files = {_module(p): p for p in GRAPH.rglob("*.py")}
    return {name: {m for m in _imports(path) if m in files and m != name} for name, path in files.items()}


def test_graph_does_not_import_the_reference_server() -> None:
    offenders = {_module(p) for p in GRAPH.rglob("*.py") if any(m.split(".")[0] == "docserver" for m in _imports(p))}
    assert offenders == set()


def test_no_import_cycle_in_graph() -> None:
    edges = _graph_modules()
    done: set[str] = set()

    def visit(name: str, path: list[str]) -> None:
        if name in path:
            pytest.fail("import cycle: " + " -> ".join(path[path.index(name):] + [name]))
        if name in done:
            return
        for other in sorted(edges[name]):
            visit(other, path + [name])
        done.add(name)

    for name in sorted(edges):
        visit(name, [])


def test_no_collection_is_named_in_code() -> None:
    """Collections are configuration: no string in graph/ or app/ code names a bundled collection (by its name;
    display names such as "Wetten" are ordinary words too)."""
    raw = json.loads((GRAPH / "collections.json").read_text("utf-8"))
    names = {c["name"].lower() for c in raw["collections"]}
    pattern = re.compile(r"\b(" + "|".join(map(re.escape, sorted(names))) + r")\b", re.IGNORECASE)
    offenders = []
    for path in [*GRAPH.rglob("*.py"), *(ROOT / "app").rglob("*.py")]:
        for node in ast.walk(ast.parse(path.read_text("utf-8"))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and pattern.search(node.value):
                offenders.append(f"{path.relative_to(ROOT)}:{node.lineno}: {pattern.search(node.value).group(0)}")
    assert offenders == []


def test_model_replies_are_parsed_in_one_place() -> None:
    """JSON is read from model text only by graph/structured.py."""
    offenders = [
        str(p.relative_to(ROOT)) for p in [*GRAPH.rglob("*.py"), *(ROOT / "app").rglob("*.py")]
        if p.name != "structured.py" and re.search(r"re\.search\(r[\"']\\\{|raw_decode", p.read_text("utf-8"))
    ]
    assert offenders == []
