"""OCR for PDF pages without a text layer (scans): each page rendered by PDFium, read by the Tesseract command line.

The PDF reader (`docserver/formats/pdf.py`) hands over the pages `page_needs_ocr` picks. A page is rendered in
grayscale at 300 dpi (less for a huge page: at most `_MAX_PIXELS` pixels, so a poster-sized page cannot take
gigabytes; such pages are listed by `OcrPages.reduced`), sent to `tesseract` as a PGM image on stdin, and its TSV
answer (words with their block, paragraph, line and confidence) is turned into paragraphs. Words Tesseract is
unsure of, and paragraphs of little confidence or almost no letters or digits (a signature, a stamp, specks), are
dropped rather than indexed; a line that repeats at the top or bottom of the pages ("Pagina 1 van 2") goes too.

Rendering needs PDFium, which is not thread-safe: it runs under the caller's lock. Tesseract runs outside it, one
page at a time, with the time left on the `Deadline` as its timeout, so a PDF of many scanned pages is refused
once its time is spent. No Python package is needed: Debian's `tesseract-ocr` with the `nld` and `eng` language
data (`tesseract-ocr-nld`, `tesseract-ocr-eng`). `DOCSERVER_OCR=off` turns OCR off (default `auto`: on when
Tesseract is installed); it is read each time a PDF has a page without text, so it costs nothing otherwise.
"""

from __future__ import annotations

import ctypes
import functools
import math
import os
import re
import shutil
import subprocess
import threading
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

import pypdfium2 as pdfium
import pypdfium2.raw as pdfium_c

from .base import Deadline, Refused

__all__ = ["INSTALL", "OcrPages", "Tesseract", "Unavailable", "read_pages", "tesseract"]

SETTING = "DOCSERVER_OCR"
INSTALL = "apt-get install tesseract-ocr tesseract-ocr-nld"
LANGUAGES = ("nld", "eng")  # the language data every OCR run needs; the document's own language goes first

_DPI = 300
_MAX_PIXELS = 25_000_000  # an A3 page at 300 dpi is 17.4 million; a larger page is rendered at a lower resolution
_MIN_WORD_CONFIDENCE = 30.0  # Tesseract's confidence (0-100) below which a word is taken for noise
_MIN_PARAGRAPH_CONFIDENCE = 60.0  # the mean confidence of a paragraph's characters below which it is dropped
_MIN_ALNUM = 3  # a paragraph needs this many letters or digits ...
_MIN_ALNUM_SHARE = 0.5  # ... and this share of its characters (spaces aside) must be letters or digits
_EDGE_PARAGRAPHS = 2  # how many paragraphs at the top and at the bottom of a page may be running headers or footers
_PROBE_SECONDS = 15.0  # `tesseract --version` and `--list-langs`

_BULLET = frozenset({"e", "o", "•", "*", "«", "»", "+", "®", "©", "-", "–"})  # how OCR reads a list item's bullet
_KEEP_HYPHEN_BEFORE = frozenset({"en", "of", "tot", "and", "or", "to", "nor", "und", "oder", "et", "ou"})
_LETTERS = re.compile(r"[^\W\d_]+")
_PAGE_NUMBER = re.compile(r"[-–\s]*\d{1,4}[-–\s]*")
_VERSION = re.compile(r"tesseract\s+v?(\d[\w.\-]*)", re.IGNORECASE)


class Unavailable(Exception):
    """OCR cannot run here; the message says why and how to change that."""


@dataclass(frozen=True, slots=True)
class Tesseract:
    """The `tesseract` command found on PATH, its version and the language data it has."""

    command: str
    version: str
    languages: frozenset[str]

    @property
    def name(self) -> str:
        """How documents read with it are marked ("tesseract 5.3.0")."""
        return f"tesseract {self.version}"


@dataclass(slots=True)
class OcrPages:
    """What OCR read: the paragraphs of each page (a page with nothing readable maps to []) and the pages that
    were rendered below 300 dpi because they are too large."""

    paragraphs: dict[int, list[str]] = field(default_factory=dict)
    reduced: list[int] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class _Image:
    pgm: bytes
    dpi: int


def tesseract() -> Tesseract:
    """The Tesseract to read scanned pages with, or `Unavailable` with the reason: OCR turned off by
    `DOCSERVER_OCR=off`, no `tesseract` on PATH, or its Dutch or English language data missing."""
    setting = os.environ.get(SETTING, "auto").strip().lower()
    if setting == "off":
        raise Unavailable(f"OCR is turned off ({SETTING}=off)")
    if setting not in ("auto", ""):
        raise Unavailable(f"{SETTING}={setting!r} is neither 'auto' nor 'off', so OCR is not run")
    command = shutil.which("tesseract")
    if command is None:
        raise Unavailable(f"OCR needs Tesseract ({INSTALL})")
    found = _probe(command)
    missing = [language for language in LANGUAGES if language not in found.languages]
    if missing:
        packages = " ".join(f"tesseract-ocr-{language}" for language in missing)
        raise Unavailable(f"OCR needs Tesseract's language data {'+'.join(missing)} (apt-get install {packages})")
    return found


@functools.cache
def _probe(command: str) -> Tesseract:
    """The version and the language data of the `tesseract` at `command` (asked once per process)."""
    try:
        version = subprocess.run([command, "--version"], capture_output=True, timeout=_PROBE_SECONDS, check=True)
        listing = subprocess.run([command, "--list-langs"], capture_output=True, timeout=_PROBE_SECONDS, check=True)
    except (OSError, subprocess.SubprocessError) as exc:
        raise Unavailable(f"OCR needs Tesseract, and {command} does not run ({exc})") from exc
    said = (version.stdout + version.stderr).decode("utf-8", "replace")
    match = _VERSION.search(said)
    lines = (listing.stdout + listing.stderr).decode("utf-8", "replace").splitlines()
    languages = frozenset(line.strip() for line in lines if line.strip() and not line.startswith("List of"))
    return Tesseract(command, match.group(1) if match else "(unknown version)", languages)


def read_pages(engine: Tesseract, document: pdfium.PdfDocument, numbers: Sequence[int], lock: threading.Lock,
               deadline: Deadline) -> OcrPages:
    """The paragraphs OCR reads on the pages `numbers` (1-based) of `document`. PDFium work is done under `lock`,
    Tesseract runs outside it; the deadline is checked before every page and bounds every Tesseract run."""
    with lock:
        languages = _languages(document)
    result = OcrPages()
    for number in numbers:
        deadline.check(f"OCR of page {number}")
        with lock:
            image = _render(document, number)
        if image is None:
            result.paragraphs[number] = []
            continue
        if image.dpi < _DPI:
            result.reduced.append(number)
        result.paragraphs[number] = _recognize(engine, image, languages, number, deadline)
    result.paragraphs = _drop_running(result.paragraphs)
    return result


def _languages(document: pdfium.PdfDocument) -> str:
    """Tesseract's -l: Dutch and English, English first when the PDF's catalog says it is in English (/Lang)."""
    get_language = getattr(pdfium_c, "FPDFCatalog_GetLanguage", None)  # newer PDFium builds only
    if get_language is None:
        return "+".join(LANGUAGES)
    size = get_language(document.raw, None, 0)
    if size <= 2:
        return "+".join(LANGUAGES)
    buffer = (ctypes.c_ushort * (size // 2))()  # UTF-16LE code units, the last one 0
    get_language(document.raw, buffer, size)
    language = bytes(buffer)[: size - 2].decode("utf-16-le", "replace").strip().lower()
    return "eng+nld" if language.startswith("en") else "+".join(LANGUAGES)


def _render(document: pdfium.PdfDocument, number: int) -> _Image | None:
    """Page `number` as a grayscale PGM image at 300 dpi, or at the resolution that keeps it within `_MAX_PIXELS`;
    None for a page with nothing on it. The caller holds the PDFium lock."""
    try:
        page = document[number - 1]
    except pdfium.PdfiumError as exc:
        raise Refused(f"the PDF is damaged: page {number} cannot be loaded") from exc
    try:
        width, height = page.get_size()
        if pdfium_c.FPDFPage_CountObjects(page.raw) == 0 or width <= 0 or height <= 0:
            return None
        scale = min(_DPI / 72, math.sqrt(_MAX_PIXELS / (width * height)))
        bitmap = page.render(scale=scale, grayscale=True, force_bitmap_format=pdfium_c.FPDFBitmap_Gray)
        try:
            return _Image(_pgm(bitmap), max(1, round(scale * 72)))
        finally:
            bitmap.close()
    except pdfium.PdfiumError as exc:
        raise Refused(f"the PDF is damaged: page {number} cannot be rendered for OCR") from exc
    finally:
        page.close()


def _pgm(bitmap: pdfium.PdfBitmap) -> bytes:
    """A one-byte-per-pixel bitmap as a binary PGM file (rows of a PDFium bitmap may be padded to `stride`)."""
    width, height, stride = bitmap.width, bitmap.height, bitmap.stride
    pixels = memoryview(bitmap.buffer).cast("B")
    rows = bytes(pixels) if stride == width else b"".join(pixels[r * stride: r * stride + width] for r in range(height))
    return b"P5\n%d %d\n255\n" % (width, height) + rows


def _recognize(engine: Tesseract, image: _Image, languages: str, number: int, deadline: Deadline) -> list[str]:
    """The paragraphs Tesseract reads in one page image, within the time left on the deadline."""
    left = deadline.remaining()
    if left <= 0:
        raise Refused(f"took longer than {deadline.seconds:g} s to read (OCR of page {number})")
    command = [engine.command, "stdin", "stdout", "-l", languages, "--dpi", str(image.dpi), "--psm", "3", "tsv"]
    # OpenMP threads make Tesseract 2-3 times slower on a small machine (measured 11 s against 4 s a page on 2
    # cores); a caller who wants them sets OMP_THREAD_LIMIT
    environment = {"OMP_THREAD_LIMIT": "1", **os.environ}
    try:
        done = subprocess.run(command, input=image.pgm, capture_output=True, timeout=left, env=environment)
    except subprocess.TimeoutExpired as exc:
        raise Refused(f"took longer than {deadline.seconds:g} s to read (OCR of page {number})") from exc
    except OSError as exc:
        raise Refused(f"OCR of page {number} failed: {engine.command} does not run ({exc})") from exc
    if done.returncode != 0:
        said = done.stderr.decode("utf-8", "replace").strip().splitlines()
        raise Refused(f"OCR of page {number} failed (tesseract exit {done.returncode}: {said[-1] if said else ''})")
    return _paragraphs(done.stdout.decode("utf-8", "replace"))


def _paragraphs(tsv: str) -> list[str]:
    """Tesseract's TSV (one row per word: level 5, with block, paragraph and line numbers and a confidence) as the
    paragraphs worth indexing."""
    paragraphs: dict[tuple[str, str], list[tuple[str, list[tuple[str, float]]]]] = {}
    for row in tsv.splitlines()[1:]:
        cells = row.split("\t")
        if len(cells) < 12 or cells[0] != "5" or not cells[11].strip():
            continue
        confidence = float(cells[10])
        if confidence < _MIN_WORD_CONFIDENCE:
            continue
        lines = paragraphs.setdefault((cells[2], cells[3]), [])
        if not lines or lines[-1][0] != cells[4]:
            lines.append((cells[4], []))
        lines[-1][1].append((cells[11].strip(), confidence))
    kept = []
    for lines in paragraphs.values():
        words = [word for _, line in lines for word in line]
        if _worth_indexing(words):
            kept.append(_join([" ".join(text for text, _ in line) for _, line in lines]))
    return kept


def _worth_indexing(words: list[tuple[str, float]]) -> bool:
    """A paragraph OCR is fairly sure of, made mostly of letters and digits (not a stamp, signature or specks)."""
    chars = sum(len(text) for text, _ in words)
    if not chars:
        return False
    confidence = sum(len(text) * conf for text, conf in words) / chars
    alnum = sum(c.isalnum() for text, _ in words for c in text)
    return confidence >= _MIN_PARAGRAPH_CONFIDENCE and alnum >= _MIN_ALNUM and alnum >= _MIN_ALNUM_SHARE * chars


def _join(lines: list[str]) -> str:
    """The lines of a paragraph as one text: a word broken at a line end joined ("regel-" + "geving"), a compound
    kept ("Noord-" + "Brabant", "klei-" + "en"), and a bullet OCR read as a letter ("e Het ...") made "- "."""
    text = lines[0]
    for line in lines[1:]:
        first = line.split(" ", 1)[0]
        if not text.endswith("-"):
            text += " " + line
        elif first.lower().strip(",.;:") in _KEEP_HYPHEN_BEFORE:
            text += " " + line
        elif len(text) >= 3 and text[-2].islower() and first[:1].islower():
            text = text[:-1] + line
        else:
            text += line
    head, _, rest = text.partition(" ")
    return f"- {rest}" if head in _BULLET and rest[:1].isupper() else text


def _drop_running(pages: dict[int, list[str]]) -> dict[int, list[str]]:
    """The pages without a bare page number at their top or bottom, and without the paragraphs there that repeat
    (digits aside: "Pagina 1 van 2") on at least 40% of the pages."""
    seen: Counter[str] = Counter()
    for paragraphs in pages.values():
        seen.update({_words(paragraphs[i]) for i in _edges(paragraphs)})
    needed = max(2, round(0.4 * len(pages)))
    running = {words for words, n in seen.items() if n >= needed and words}
    cleaned: dict[int, list[str]] = {}
    for number, paragraphs in pages.items():
        drop = {i for i in _edges(paragraphs) if _words(paragraphs[i]) in running or _PAGE_NUMBER.fullmatch(paragraphs[i])}
        cleaned[number] = [p for i, p in enumerate(paragraphs) if i not in drop]
    return cleaned


def _edges(paragraphs: list[str]) -> set[int]:
    """The indexes of the first and the last `_EDGE_PARAGRAPHS` paragraphs of a page."""
    count = len(paragraphs)
    return set(range(min(_EDGE_PARAGRAPHS, count))) | set(range(max(0, count - _EDGE_PARAGRAPHS), count))


def _words(paragraph: str) -> str:
    """A paragraph's words without its numbers, lower-cased ("Pagina 3 van 15" -> "pagina van")."""
    return " ".join(_LETTERS.findall(paragraph.lower()))
