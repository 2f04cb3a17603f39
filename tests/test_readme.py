"""The README and the pages under docs/: the README stays short and narrow, every relative link resolves (to a
file, and for `#anchor` links into Markdown to a heading, slugged as GitHub does), and every command the README
shows in a shell block works as written on a fresh clone:

- `make X [VAR=value]`: X is a target of the Makefile and VAR a variable it reads;
- `.venv/bin/python -m M [SUB] [--flag ...]`: M is importable, `M [SUB] --help` exits 0 and names every flag;
- `curl URL`: the URL is on the service's documented port and names a route of the service, with that method;
- `docker compose ...`: the profiles and services it names are in docker-compose.yml.

Python blocks must compile. Nothing is run but `--help`."""

from __future__ import annotations

import importlib.util
import re
import shlex
import subprocess
import sys
import unicodedata
from concurrent.futures import ThreadPoolExecutor
from functools import cache
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
PAGES = [README, *sorted((ROOT / "docs").glob("*.md"))]
MAX_LINES, MAX_WIDTH = 200, 120
SHELL = {"bash", "sh", "shell", "console"}
VENV_PYTHON = ".venv/bin/python"

FENCE = re.compile(r"^\s*(`{3,}|~{3,})\s*([\w+-]*)")
HEADING = re.compile(r"^ {0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
CODE_SPAN = re.compile(r"(`+)(?!`).+?(?<!`)\1(?!`)", re.S)
LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]*)>?(?:\s+\"[^\"]*\")?\s*\)")
REFERENCE = re.compile(r"^ {0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s|$)", re.M)
SCHEME = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")


def split_markdown(text: str) -> tuple[str, list[tuple[str, str]]]:
    """The text outside fenced code blocks (blocks as blank lines, so line numbers hold), and the blocks as
    (language, body)."""
    prose: list[str] = []
    blocks: list[tuple[str, str]] = []
    fence, lang, body = "", "", []
    for line in text.splitlines():
        match = FENCE.match(line)
        if not fence and match:
            fence, lang, body = match.group(1), match.group(2).lower(), []
            prose.append("")
        elif fence and line.strip().startswith(fence[0] * len(fence)) and not line.strip().strip(fence[0]):
            blocks.append((lang, "\n".join(body)))
            fence = ""
            prose.append("")
        elif fence:
            body.append(line)
            prose.append("")
        else:
            prose.append(line)
    return "\n".join(prose), blocks


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: the rendered text (links and code marks dropped) lower-cased, everything but
    letters, digits, `_`, `-` and spaces removed, spaces made hyphens."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading).replace("`", "")
    text = re.sub(r"<[^>]+>", "", text).lower()
    kept = "".join(c for c in text if c in " -" or unicodedata.category(c)[0] in "LMN" or unicodedata.category(c) == "Pc")
    return kept.replace(" ", "-")


@cache
def anchors(path: Path) -> frozenset[str]:
    prose, _ = split_markdown(path.read_text("utf-8"))
    seen: dict[str, int] = {}
    found = set()
    for line in prose.splitlines():
        match = HEADING.match(line)
        if not match:
            continue
        base = slug(match.group(2))
        count = seen.get(base, 0)
        seen[base] = count + 1
        found.add(base if count == 0 else f"{base}-{count}")
    return frozenset(found)


def links(path: Path) -> list[str]:
    prose, _ = split_markdown(path.read_text("utf-8"))
    prose = CODE_SPAN.sub("", prose)
    return LINK.findall(prose) + REFERENCE.findall(prose)


def broken_links(path: Path) -> list[str]:
    broken = []
    for target in links(path):
        if not target or SCHEME.match(target) or target.startswith("//"):
            continue  # a web address (or a mailto:) is not the repository's to check
        file_part, _, anchor = target.partition("#")
        resolved = (path.parent / file_part).resolve() if file_part else path
        if not resolved.exists():
            broken.append(f"{target}: no such file")
        elif anchor and resolved.suffix == ".md" and anchor not in anchors(resolved):
            broken.append(f"{target}: no heading #{anchor} in {resolved.name}")
    return broken


# --- (a) short and narrow ------------------------------------------------------------------------------------------

def test_readme_is_short_and_narrow() -> None:
    lines = README.read_text("utf-8").splitlines()
    assert len(lines) <= MAX_LINES, f"README.md has {len(lines)} lines, at most {MAX_LINES}: move detail to docs/"
    wide = [f"line {n}: {len(line)} characters" for n, line in enumerate(lines, 1) if len(line) > MAX_WIDTH]
    assert not wide, f"README.md lines over {MAX_WIDTH} characters: {wide}"


# --- (b) links -----------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("page", PAGES, ids=lambda page: str(page.relative_to(ROOT)))
def test_relative_links_resolve(page: Path) -> None:
    assert not broken_links(page), broken_links(page)


def test_the_link_check_can_fail(tmp_path: Path) -> None:
    """A link to a missing file, a missing heading, and one hidden in code (not a link) or on the web (not ours)."""
    (tmp_path / "other.md").write_text("# Other page\n\n## A `code` heading: with, punctuation\n\n## Twice\n## Twice\n")
    page = tmp_path / "page.md"
    page.write_text("[gone](missing.md) [bad](other.md#nope) [ok](other.md#a-code-heading-with-punctuation)\n"
                    "[twice](other.md#twice-1) [self](#top) `[code](nowhere.md)` [web](https://example.org/x)\n"
                    "\n```bash\ncat [x](nowhere.md)\n```\n\n# Top\n")
    assert broken_links(page) == ["missing.md: no such file", "other.md#nope: no heading #nope in other.md"]


def test_slugs_are_githubs() -> None:
    assert slug("3b. A comparison's sides written at once") == "3b-a-comparisons-sides-written-at-once"
    assert slug("Fresh set (`eval.planted.FRESH`: tuned)") == "fresh-set-evalplantedfresh-tuned"
    assert slug("Untrusted files, fields and clients") == "untrusted-files-fields-and-clients"
    assert slug("Scanned PDFs (OCR)") == "scanned-pdfs-ocr"


# --- (c) commands --------------------------------------------------------------------------------------------------

def shell_commands(text: str) -> list[list[str]]:
    """The commands of the shell blocks, as words: continuation lines joined, a quote open across lines read on,
    comments and a console's `$ ` prompt dropped, pipelines and `&&` lists split into their commands."""
    _, blocks = split_markdown(text)
    commands: list[list[str]] = []
    for lang, body in blocks:
        if lang not in SHELL:
            continue
        pending = ""
        for line in body.splitlines():
            if lang == "console" and not pending:
                if not line.startswith("$ "):
                    continue  # output, not a command
                line = line[2:]
            pending += line + "\n"
            if pending.rstrip().endswith("\\"):
                continue
            try:
                lexer = shlex.shlex(pending.replace("\\\n", " "), posix=True, punctuation_chars=";&|")
                lexer.whitespace_split = True
                words = list(lexer)
            except ValueError:  # a quote still open: the command goes on
                continue
            pending = ""
            command: list[str] = []
            for word in [*words, ";"]:
                if word in (";", "&&", "||", "|", "&"):
                    if command:
                        commands.append(command)
                    command = []
                else:
                    command.append(word)
        assert not pending, f"unterminated command in a shell block: {pending!r}"
    return commands


def without_env(words: list[str]) -> list[str]:
    """The command without its leading VAR=value assignments."""
    i = 0
    while i < len(words) and re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", words[i]):
        i += 1
    return words[i:]


@cache
def makefile() -> tuple[frozenset[str], str]:
    text = (ROOT / "Makefile").read_text("utf-8")
    targets = set()
    for line in text.splitlines():
        match = re.match(r"^([A-Za-z0-9_.\- ]+?)\s*::?(?!=)", line)
        if match and not line.startswith("\t"):
            targets.update(t for t in match.group(1).split() if not t.startswith("."))  # not .PHONY
    return frozenset(targets), text


def check_make(words: list[str]) -> list[str]:
    targets, text = makefile()
    problems = []
    goals = [w for w in words[1:] if not w.startswith("-") and "=" not in w]
    if not goals:
        problems.append("names no target")
    problems += [f"no target {goal!r} in the Makefile" for goal in goals if goal not in targets]
    for assignment in (w for w in words[1:] if "=" in w and not w.startswith("-")):
        name = assignment.split("=", 1)[0]
        if f"$({name})" not in text:
            problems.append(f"the Makefile reads no variable {name}")
    return problems


def help_text(module: str, sub: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", module, *sub, "--help"], cwd=ROOT, capture_output=True, text=True,
                          timeout=60)


def check_python(words: list[str]) -> list[str]:
    if words[1:2] != ["-m"] or len(words) < 3:
        return [f"run modules as `{VENV_PYTHON} -m MODULE`"]
    module, rest = words[2], words[3:]
    if importlib.util.find_spec(module) is None:
        return [f"{module} is not importable"]
    top = help_text(module, [])
    if top.returncode != 0:
        return [f"`{module} --help` exited {top.returncode}: {top.stderr[-500:]}"]
    sub: list[str] = []
    choices = re.search(r"\{([\w,-]+)\}", top.stdout)
    if rest and not rest[0].startswith("-") and choices and rest[0] in choices.group(1).split(","):
        sub = [rest[0]]
    shown = help_text(module, sub) if sub else top
    if shown.returncode != 0:
        return [f"`{module} {' '.join(sub)} --help` exited {shown.returncode}: {shown.stderr[-500:]}"]
    flags = {w.split("=", 1)[0] for w in rest if w.startswith("--")}
    return [f"`{module} {' '.join(sub)}` has no flag {flag}" for flag in sorted(flags)
            if not re.search(rf"(?<![\w-]){re.escape(flag)}(?![\w-])", shown.stdout)]


@cache
def routes() -> dict[str, re.Pattern[str]]:
    """method + path template of each route of the service -> a pattern for a concrete path."""
    from app.main import create_app

    found = {}
    for path, item in create_app().openapi()["paths"].items():
        pattern = re.compile("^" + re.sub(r"\\\{[^}]+\\\}", "[^/]+", re.escape(path)) + "$")
        for method in item:
            found[f"{method.upper()} {path}"] = pattern
    return found


def check_curl(words: list[str]) -> list[str]:
    port = re.search(r"^PORT\s*\?=\s*(\d+)", makefile()[1], re.M)
    assert port, "the Makefile sets the default PORT"
    urls = [w for w in words[1:] if re.match(r"^(https?://)?(localhost|127\.0\.0\.1)[:/]", w)]
    if not urls:
        return ["names no URL of the service"]
    explicit = next((words[i + 1] for i, w in enumerate(words[:-1]) if w in ("-X", "--request")), None)
    sends = any(w in ("-d", "--data", "--data-binary", "--json", "-F", "--form") for w in words)
    method = (explicit or ("POST" if sends else "GET")).upper()
    problems = []
    for url in urls:
        match = re.match(r"^(?:https?://)?[^/:]+(?::(\d+))?(/[^?#]*)?", url)
        assert match
        if match.group(1) != port.group(1):
            problems.append(f"{url}: not the service's port {port.group(1)}")
        path = match.group(2) or "/"
        if not any(key.startswith(method + " ") and pattern.match(path) for key, pattern in routes().items()):
            problems.append(f"{url}: the service has no route {method} {path}")
    return problems


COMPOSE_COMMANDS = {"up", "down", "exec", "run", "logs", "ps", "config", "build", "pull", "restart", "stop", "start"}


def check_docker(words: list[str]) -> list[str]:
    if words[1:2] != ["compose"]:
        return ["only `docker compose` commands are checked"]
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text("utf-8"))
    services = compose["services"]
    profiles = {p for service in services.values() for p in service.get("profiles", [])}
    problems = []
    rest = words[2:]
    i = 0
    while i < len(rest) and rest[i].startswith("-"):  # global options before the command
        if rest[i] == "--profile":
            if rest[i + 1] not in profiles:
                problems.append(f"no profile {rest[i + 1]!r} in docker-compose.yml")
            i += 1
        i += 1
    if i >= len(rest) or rest[i] not in COMPOSE_COMMANDS:
        return [*problems, f"no docker compose command in {words}"]
    command, args = rest[i], [w for w in rest[i + 1:] if not w.startswith("-")]
    named = args[:1] if command in ("exec", "run") else args if command in ("up", "logs", "build", "restart") else []
    problems += [f"no service {name!r} in docker-compose.yml" for name in named if name not in services]
    return problems


CHECKS = {"make": check_make, VENV_PYTHON: check_python, "curl": check_curl, "docker": check_docker}


def command_problems(words: list[str]) -> list[str]:
    command = without_env(words)
    if not command:
        return []
    check = CHECKS.get(command[0])
    if check is None:
        return [f"`{command[0]}` is not a command a fresh clone has: use make, {VENV_PYTHON} -m, curl or docker"]
    return [f"`{shlex.join(command)}`: {problem}" for problem in check(command)]


def test_every_readme_command_works_on_a_fresh_clone() -> None:
    commands = shell_commands(README.read_text("utf-8"))
    assert commands, "the README shows no command"
    with ThreadPoolExecutor(4) as pool:
        problems = [p for found in pool.map(command_problems, commands) for p in found]
    assert not problems, problems
    shown = {without_env(c)[0] for c in commands}
    assert {"make", VENV_PYTHON, "curl", "docker"} <= shown, shown  # each kind of check ran


def test_readme_python_blocks_compile() -> None:
    _, blocks = split_markdown(README.read_text("utf-8"))
    python = [body for lang, body in blocks if lang in ("python", "py")]
    assert python
    for body in python:
        compile(body, "README.md", "exec")


def test_the_command_check_can_fail() -> None:
    text = """```bash
make runn                                   # a typo
make run LMM=local
.venv/bin/python -m app ask --nope "x"
.venv/bin/python -m no_such_module
python -m app ask "x"                       # not the venv's python
curl -s localhost:9999/v1/models
curl -s localhost:8000/v1/nothing -d '{
  "a": 1}'
docker compose --profile nope up -d
docker compose exec nobody ls
```
"""
    problems = [p for words in shell_commands(text) for p in command_problems(words)]
    expected = ["no target 'runn'", "no variable LMM", "no flag --nope", "no_such_module is not importable",
                "`python` is not a command", "not the service's port", "no route POST /v1/nothing",
                "no profile 'nope'", "no service 'nobody'"]
    for fragment in expected:
        assert any(fragment in p for p in problems), (fragment, problems)
    assert len(problems) == len(expected), problems
