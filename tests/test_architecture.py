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


PACKAGES = ("app", "bench", "docserver", "eval", "graph", "textkit")  # first-party code (tests/ aside)
ROOM_RULE = re.compile(r"(?:\b(frame|vocabulary) )?may import: ([^.;]+)", re.IGNORECASE)


def _edges(packages: tuple[str, ...]) -> dict[str, set[str]]:
    """Module -> the modules of `packages` it imports."""
    files = {_module(p): p for package in packages for p in (ROOT / package).rglob("*.py")}
    return {name: {m for m in _imports(path) if m in files and m != name} for name, path in files.items()}


def _docstring(init: Path) -> str:
    return " ".join((ast.get_docstring(ast.parse(init.read_text("utf-8"))) or "").split())


def _top_groups() -> dict[str, set[str]]:
    """The modules at graph/'s top by group, as graph/__init__.py names them: frame (...) and vocabulary (...)."""
    doc = _docstring(GRAPH / "__init__.py")
    return {group: {f"graph.{name.strip()}" for name in re.search(rf"{group} \(([^)]*)\)", doc).group(1).split(",")}
            for group in ("frame", "vocabulary")}


def _room(module: str, top: dict[str, set[str]]) -> str | None:
    """graph.text.hops -> "text/", graph.loop -> "frame", graph.models -> "vocabulary" (the graph package: None)."""
    parts = module.split(".")
    if parts[0] != "graph" or len(parts) == 1:
        return None
    if (GRAPH / parts[1]).is_dir():
        return parts[1] + "/"
    return next((group for group, members in top.items() if module in members), "unplaced")


def _rules() -> dict[str, set[str]]:
    """Each room's "May import:" list, read from its __init__.py docstring (graph/'s own names frame and vocabulary)."""
    rules: dict[str, set[str]] = {}
    for init in [GRAPH / "__init__.py", *sorted(GRAPH.glob("*/__init__.py"))]:
        for subject, targets in ROOM_RULE.findall(_docstring(init)):
            room = subject.lower() if subject else init.parent.name + "/"
            rules[room] = {t.strip() for t in re.split(r",|\band\b", re.sub(r"\([^)]*\)", "", targets)) if t.strip()}
    return rules


def test_graph_does_not_import_the_reference_server() -> None:
    offenders = {_module(p) for p in GRAPH.rglob("*.py") if any(m.split(".")[0] == "docserver" for m in _imports(p))}
    assert offenders == set()


def test_no_import_cycle() -> None:
    edges = _edges(PACKAGES)
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


def test_every_room_says_what_lives_there_and_what_it_may_import() -> None:
    top, rules = _top_groups(), _rules()
    rooms = {"frame", "vocabulary"} | {p.name + "/" for p in GRAPH.iterdir() if p.is_dir() and any(p.glob("*.py"))}
    assert set(rules) == rooms, "every folder of graph/ needs an __init__.py docstring with a 'May import:' line"
    for room, targets in rules.items():
        assert targets <= rooms | {"textkit"}, f"{room} may import unknown rooms: {targets - rooms - {'textkit'}}"
    top_level = {_module(p) for p in GRAPH.glob("*.py") if p.name != "__init__.py"}
    assert top["frame"] & top["vocabulary"] == set()
    assert top["frame"] | top["vocabulary"] == top_level, "graph/__init__.py names each top module frame or vocabulary"


def test_rooms_import_only_what_their_docstring_allows() -> None:
    top, rules = _top_groups(), _rules()
    offenders = [
        f"{name} ({_room(name, top)}) imports {other} ({_room(other, top)})"
        for name, imported in _edges(("graph",)).items() if _room(name, top)
        for other in sorted(imported) if _room(other, top) and _room(other, top) not in rules[_room(name, top)]
    ]
    assert offenders == []


def test_directions_no_docstring_can_loosen() -> None:
    """Text tools import no client, clients no node, nothing in graph/ imports app/ (or any first-party package but
    textkit); of the frame only build imports nodes/, and nothing in graph/ imports build or runner."""
    top = _top_groups()
    edges = _edges(PACKAGES)
    forbidden = {
        "text/": {"clients/", "nodes/", "frame"},
        "clients/": {"nodes/", "text/", "frame"},
        "answer/": {"clients/", "nodes/", "text/", "frame"},
        "vocabulary": {"clients/", "nodes/", "text/", "answer/", "frame"},
    }
    offenders = []
    for name, imported in edges.items():
        if name.split(".")[0] != "graph":
            continue
        for other in imported:
            room, target = _room(name, top), _room(other, top)
            if other.split(".")[0] not in ("graph", "textkit"):
                offenders.append(f"{name} imports {other}: graph/ uses no other package of this repository")
            elif target in forbidden.get(room, set()):
                offenders.append(f"{name} ({room}) imports {other} ({target})")
            elif target == "nodes/" and room == "frame" and name != "graph.build":
                offenders.append(f"{name} imports {other}: of the frame only build assembles the nodes")
            elif other in ("graph.build", "graph.runner"):
                offenders.append(f"{name} imports {other}: build and runner are the pipeline's entry, for app/")
    assert sorted(offenders) == []


def test_no_collection_is_named_in_code() -> None:
    """Collections are configuration: no string in graph/ or app/ code names a bundled collection (by its name;
    display names such as "Wetten" are ordinary words too; a part of a hyphenated word such as the header name
    Content-Security-Policy names none)."""
    raw = json.loads((GRAPH / "collections.json").read_text("utf-8"))
    names = {c["name"].lower() for c in raw["collections"]}
    pattern = re.compile(r"(?<![\w-])(" + "|".join(map(re.escape, sorted(names))) + r")(?![\w-])", re.IGNORECASE)
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


MAX_MODULE_LINES, MAX_FUNCTION_LINES = 450, 60  # issue 60: a module one role, a function one screen


def test_modules_and_functions_stay_a_size_a_newcomer_reads() -> None:
    """No module of the product packages over `MAX_MODULE_LINES` lines, no function over `MAX_FUNCTION_LINES`
    (from its `def` to its last line; the complexity limit is ruff's C901 in pyproject.toml)."""
    offenders = []
    for package in ("app", "graph", "docserver", "textkit"):
        for path in (ROOT / package).rglob("*.py"):
            text = path.read_text("utf-8")
            if text.count("\n") > MAX_MODULE_LINES:
                offenders.append(f"{path.relative_to(ROOT)}: {text.count(chr(10))} lines")
            for node in ast.walk(ast.parse(text)):
                if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                    length = node.end_lineno - node.lineno + 1  # type: ignore[operator]
                    if length > MAX_FUNCTION_LINES:
                        offenders.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.name}: {length} lines")
    assert offenders == []
