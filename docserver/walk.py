"""Which files an ingest may read, and reading one through a single file descriptor.

An operator names a folder, but what is in it was put there by others: a symbolic link in it can point at
``/etc/passwd`` or ``/proc/self/status`` (whose text would then be searchable), a FIFO blocks whoever opens it, a
device never ends. So an ingest reads only regular files inside the roots it was given:

- a folder walk does not follow a symbolic link (to a file or a folder) unless ``follow_symlinks``, and even then
  never to a target outside the folders given (resolved real paths are compared);
- a path named on the command line that is itself a symbolic link is refused unless ``follow_symlinks``; then its
  target is read only when it is a regular file (or walked when it is a folder);
- FIFOs, sockets and devices are never opened, nor is anything under ``/proc``, ``/sys`` or ``/dev``;
- a file is opened once (``O_NOFOLLOW``, ``O_NONBLOCK``) and its ``fstat`` compared with what the walk saw (and,
  where ``/proc/self/fd`` tells it, the path it was opened at with the real path checked), so a link, a FIFO or a
  folder swapped in between the check and the open is refused, never read; its bytes are hashed and read through
  that one descriptor.

What is not read is named with its reason (``Passed``), so the ingest summary can say why. Hidden entries and
README files (which describe a folder) are left out silently, as are links and special files whose names no
reader takes.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from .formats import Refused

__all__ = ["SYSTEM_FOLDERS", "Found", "Passed", "check_named", "discover", "opened"]

SYSTEM_FOLDERS = (Path("/proc"), Path("/sys"), Path("/dev"))  # kernel and device files: never read
NOT_FOLLOWED = "symbolic link, not followed"
OUTSIDE = "link to outside the folder"
# O_NOFOLLOW: a link swapped in for the file fails to open; O_NONBLOCK: a FIFO swapped in opens without waiting
# for a writer (and is then refused on its fstat); neither changes how a regular file reads.
_OPEN_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
_KINDS = ((stat.S_ISFIFO, "FIFO"), (stat.S_ISSOCK, "socket"), (stat.S_ISCHR, "character device"),
          (stat.S_ISBLK, "block device"), (stat.S_ISDIR, "folder"))


@dataclass(frozen=True, slots=True)
class Found:
    """A file to read. ``path`` as the walk met it (its name makes the doc_id and is shown), ``real`` the file that
    is opened (``path`` resolved: a followed link's target), ``identity`` its (st_dev, st_ino) when it was checked."""

    path: Path
    real: Path
    identity: tuple[int, int]


@dataclass(frozen=True, slots=True)
class Passed:
    """A path not read, and why ("symbolic link, not followed", "not a regular file (FIFO)", ...)."""

    path: Path
    reason: str


def _identity(status: os.stat_result) -> tuple[int, int]:
    return status.st_dev, status.st_ino


def _kind(mode: int) -> str:
    """What a non-regular file is, in words: "FIFO", "socket", "character device", ..."""
    return next((name for test, name in _KINDS if test(mode)), "special file")


def _system_folder(real: Path) -> Path | None:
    """The system folder (``/proc``, ``/sys``, ``/dev``) a resolved path lies in, if any."""
    return next((top for top in SYSTEM_FOLDERS if real.is_relative_to(top)), None)


def _inside(real: Path, roots: Iterable[Path]) -> bool:
    return any(real.is_relative_to(root) for root in roots)


def _regular(path: Path, real: Path, status: os.stat_result) -> Found | Passed:
    """``path`` (resolved: ``real``, whose stat is ``status``) as a file to read, or why it is not read."""
    system = _system_folder(real)
    if system is not None:
        return Passed(path, f"a system file under {system}, never read")
    if not stat.S_ISREG(status.st_mode):
        return Passed(path, f"not a regular file ({_kind(status.st_mode)})")
    return Found(path, real, _identity(status))


def check_named(path: Path, *, follow_symlinks: bool = False) -> Found | Passed | Path:
    """A path named by the operator: the file to read, why it is not read, or (a ``Path``) the real path of a
    folder to walk. Raises ``FileNotFoundError`` when nothing is there."""
    try:
        status = os.lstat(path)
    except FileNotFoundError:
        raise FileNotFoundError(f"no such file or directory: {path}") from None
    real = Path(os.path.realpath(path))  # links above the last component are the operator's own
    if stat.S_ISLNK(status.st_mode):
        if not follow_symlinks:
            return Passed(path, f"{NOT_FOLLOWED} (--follow-symlinks reads its target)")
        try:
            status = os.stat(real)
        except OSError:
            return Passed(path, "symbolic link to nothing")
    if stat.S_ISDIR(status.st_mode):
        system = _system_folder(real)
        return Passed(path, f"a system folder under {system}, never read") if system else real
    return _regular(path, real, status)


def discover(
    paths: Iterable[Path | str], *, wanted: Callable[[Path], bool], follow_symlinks: bool = False
) -> tuple[list[Found], list[Passed]]:
    """The files to read under ``paths`` (named files whatever their name, folders walked recursively for the
    files ``wanted`` takes), and the paths not read with their reasons, each once, in walk order."""
    named = [(Path(raw), check_named(Path(raw), follow_symlinks=follow_symlinks)) for raw in paths]
    roots = tuple(outcome for _, outcome in named if isinstance(outcome, Path))
    found: dict[Path, Found | Passed] = {}
    for path, outcome in named:
        if isinstance(outcome, Path):
            _walk(path, outcome, _Walk(roots, wanted, follow_symlinks, found, {_identity(os.stat(outcome))}))
        else:
            found.setdefault(path, outcome)
    return ([f for f in found.values() if isinstance(f, Found)], [p for p in found.values() if isinstance(p, Passed)])


@dataclass
class _Walk:
    """What a folder walk carries: the roots' real paths, which names to read, whether to follow links, what it
    found so far (by path), and the folders entered (by identity: a followed link cannot loop)."""

    roots: tuple[Path, ...]
    wanted: Callable[[Path], bool]
    follow: bool
    found: dict[Path, Found | Passed]
    entered: set[tuple[int, int]]


def _walk(folder: Path, real_folder: Path, walk: _Walk) -> None:
    """Every entry of ``folder`` (resolved: ``real_folder``) in name order, recursively, hidden ones left out."""
    try:
        entries = sorted(os.scandir(folder), key=lambda entry: entry.name)
    except OSError as exc:
        walk.found.setdefault(folder, Passed(folder, f"folder not readable ({exc.strerror})"))
        return
    for entry in entries:
        if entry.name.startswith("."):
            continue
        path, real = folder / entry.name, real_folder / entry.name
        try:
            status = entry.stat(follow_symlinks=False)
        except OSError:  # gone since the folder was listed
            continue
        if stat.S_ISLNK(status.st_mode):
            _link(path, walk)
        elif stat.S_ISDIR(status.st_mode):
            _folder(path, real, status, walk)
        elif walk.wanted(path):
            walk.found.setdefault(path, _regular(path, real, status))


def _folder(path: Path, real: Path, status: os.stat_result, walk: _Walk) -> None:
    """A folder met in a walk: walked once, unless it is a system folder (a walk of ``/`` meets ``/proc``)."""
    system = _system_folder(real)
    if system is not None:
        walk.found.setdefault(path, Passed(path, f"a system folder under {system}, never read"))
    elif _identity(status) not in walk.entered:
        walk.entered.add(_identity(status))
        _walk(path, real, walk)


def _link(path: Path, walk: _Walk) -> None:
    """A symbolic link met in a walk: named when it leads to a folder or has a name a reader takes; followed only
    when the walk follows links and its target lies inside the roots."""
    real = Path(os.path.realpath(path))
    try:
        target: os.stat_result | None = os.stat(real)
    except OSError:  # a link to nothing
        target = None
    to_folder = target is not None and stat.S_ISDIR(target.st_mode)
    if not (to_folder or walk.wanted(path)):
        return
    if not walk.follow:
        reason = f"{NOT_FOLLOWED} (--follow-symlinks reads it)"
        walk.found.setdefault(path, Passed(path, reason if target else "symbolic link to nothing"))
    elif not _inside(real, walk.roots):
        walk.found.setdefault(path, Passed(path, OUTSIDE))
    elif target is None:
        walk.found.setdefault(path, Passed(path, "symbolic link to nothing"))
    elif to_folder:
        _folder(path, real, target, walk)
    else:
        walk.found.setdefault(path, _regular(path, real, target))


@contextmanager
def opened(found: Found) -> Iterator[BinaryIO]:
    """``found`` open for reading, refused (``Refused``) when what is there now is not the regular file the walk
    checked: a link swapped in fails to open (``O_NOFOLLOW``), another file or a FIFO differs in its ``fstat``."""
    try:
        fd = os.open(found.real, _OPEN_FLAGS)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise Refused(f"{NOT_FOLLOWED} (it replaced the file during the ingest)") from exc
        raise
    try:
        status = os.fstat(fd)
        if not stat.S_ISREG(status.st_mode):
            raise Refused(f"not a regular file ({_kind(status.st_mode)})")
        if _identity(status) != found.identity:
            raise Refused("the file was replaced during the ingest: not read")
        if _opened_at(fd) not in (None, found.real):
            raise Refused("a folder on the file's path was replaced during the ingest: not read")
        stream = os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise
    with stream:
        yield stream


def _opened_at(fd: int) -> Path | None:
    """The real path the kernel opened ``fd`` at (Linux: ``/proc/self/fd``); None where it cannot tell."""
    try:
        return Path(os.readlink(f"/proc/self/fd/{fd}"))
    except OSError:
        return None
