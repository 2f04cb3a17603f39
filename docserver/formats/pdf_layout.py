"""The layout of a PDF's pages, rebuilt from their fragments (`pdf_text.py`): a content stream's order is not the
reading order (the Federal Register draws its footnotes before its body text) and PDFium's own line breaks merge
columns.

* running headers and footers go: the top and bottom rows of the pages, digits normalised, that repeat on at least
  40% of the pages ("Pagina # van #");
* fragments -> blocks in reading order by a recursive XY cut: a vertical gap that runs through a region splits it
  into columns (left first) unless the two sides are rows of one table (their baselines line up and one side is
  not prose), otherwise the widest horizontal gaps split it into bands (top first);
* blocks -> lines (cells of one row joined with " | ") -> paragraphs (vertical gaps, indentation, bullets, sentence
  ends, a change of font size or weight), hyphenated words joined.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from .base import Deadline
from .pdf_text import CELL_GAP, Fragment

__all__ = [
    "Line", "Paragraph", "drop_running_lines", "font_mode", "lines_of", "paragraph_text", "paragraphs_of",
    "reading_order", "repeated_rows", "words_key",
]  # fmt: skip

_EDGE_ROWS = 3  # how many rows at the top and at the bottom of a page may be running headers or footers
_MAX_CUT_DEPTH = 60  # recursion guard of the XY cut
_BULLET = re.compile(r"^(?:[-–•▪●◦*·]|\(?\d{1,2}[.)]|\(?[a-z][.)]|\([ivx]{1,4}\)|[ivx]{1,4}\.)\s")
_MARKER = re.compile(r"[-–•▪●◦*·]|\(?(?:\d{1,2}|[A-Za-z]|[ivxIVX]{1,4})[.)]|\d{1,3}")  # a list item's mark or a footnote's
_SENTENCE_END = re.compile(r"[.!?:;]['’”\")]?$")
_HYPHENATED = re.compile(r"(\w+)[-\u00ad]$")
_KEEP_HYPHEN_BEFORE = frozenset({"en", "of", "tot", "and", "or", "to", "nor", "und", "oder", "et", "ou"})
_LETTERS = re.compile(r"[^\W\d_]+")


@dataclass(slots=True)
class Line:
    """One line of one block: its fragments joined, " | " between cells."""

    text: str
    x0: float
    x1: float
    base: float
    size: float
    bold: bool
    cells: int
    block: int


@dataclass(slots=True)
class Paragraph:
    lines: list[Line]

    @property
    def size(self) -> float:
        return max(line.size for line in self.lines)


def _rows(fragments: Sequence[Fragment]) -> list[list[Fragment]]:
    """A page's fragments grouped by baseline across the whole width, top row first."""
    rows: list[list[Fragment]] = []
    for fragment in sorted(fragments, key=lambda f: -f.base):
        if rows and abs(rows[-1][0].base - fragment.base) <= 0.4 * fragment.size:
            rows[-1].append(fragment)
        else:
            rows.append([fragment])
    return rows


def words_key(text: str) -> str:
    """A text's words in lower case without numbers or punctuation: how a row or a heading is compared."""
    return " ".join(_LETTERS.findall(text.lower()))


def _row_key(row: Sequence[Fragment]) -> str:
    """A row's words without its numbers ("Pagina 3 van 15" -> "pagina van"); "#" for a bare page number."""
    text = " ".join(f.text for f in sorted(row, key=lambda f: f.x0))
    key = words_key(text)
    return key or ("#" if any(c.isdigit() for c in text) and len(text) <= 12 else "")


def _edge_rows(fragments: Sequence[Fragment]) -> list[list[Fragment]]:
    """The top and bottom _EDGE_ROWS rows of a page: where running headers, footers and page numbers stand."""
    rows = [row for row in _rows(fragments) if any(f.text for f in row)]
    return rows[:_EDGE_ROWS] + rows[max(_EDGE_ROWS, len(rows) - _EDGE_ROWS):]


def repeated_rows(pages: Sequence[Sequence[Fragment]]) -> set[str]:
    """The keys (`_row_key`) of the edge rows that stand on at least 40% of `pages` (at least one): a heading of
    page 1 that is one of them is the running header of the other pages, not the document's title."""
    seen: Counter[str] = Counter()
    for fragments in pages:
        seen.update({_row_key(row) for row in _edge_rows(fragments)})
    needed = max(1, round(0.4 * len(pages)))
    return {key for key, n in seen.items() if n >= needed and key and key != "#"}


def drop_running_lines(pages: list[list[Fragment]]) -> list[list[Fragment]]:
    """Pages without the top and bottom rows that repeat (digits normalised) on at least 40% of the pages, and
    without a bare page number there."""
    if len(pages) < 2:
        return pages
    edges: list[list[list[Fragment]]] = []
    seen: Counter[str] = Counter()
    for fragments in pages:
        edge = _edge_rows(fragments)
        edges.append(edge)
        seen.update({_row_key(row) for row in edge})
    needed = max(2, round(0.4 * len(pages)))
    running = {key for key, n in seen.items() if n >= needed and key} | {"#"}
    kept = []
    for fragments, edge in zip(pages, edges, strict=True):
        drop = {id(f) for row in edge if _row_key(row) in running for f in row}
        kept.append([f for f in fragments if id(f) not in drop])
    return kept


def reading_order(fragments: Sequence[Fragment], body: float, deadline: Deadline, where: str
                   ) -> list[list[Fragment]]:
    """The fragments of a page as blocks in reading order; footnotes (print smaller than the document's `body` size
    in the lower 60% of the page) go last, so that a paragraph running on in the next column is not cut by them."""
    fragments = [f for f in fragments if f.text]
    if not fragments:
        return []
    blocks = _cut(fragments, 0, deadline, where)
    low, high = min(f.bottom for f in fragments), max(f.top for f in fragments)
    small = [b for b in blocks if font_mode(b) < 0.88 * body and max(f.top for f in b) < low + 0.6 * (high - low)]
    return [b for b in blocks if not any(b is s for s in small)] + small


def font_mode(fragments: Sequence[Fragment]) -> float:
    """The font height most characters of the fragments are set in."""
    sizes: Counter[float] = Counter()
    for fragment in fragments:
        sizes[round(fragment.size, 1)] += len(fragment.text)
    return sizes.most_common(1)[0][0] if sizes else 0.0


def _cut(fragments: list[Fragment], depth: int, deadline: Deadline, where: str) -> list[list[Fragment]]:
    """A region's blocks in reading order; the deadline is checked per region, as a page of many thousands of
    fragments is cut in many steps of a cost that grows with the square of them."""
    if len(fragments) <= 1 or depth >= _MAX_CUT_DEPTH:
        return [fragments] if fragments else []
    deadline.check(where)
    columns = _column_cut(fragments, deadline, where)
    if columns:
        return [block for side in columns for block in _cut(side, depth + 1, deadline, where)]
    bands = _band_cut(fragments)
    if len(bands) > 1:
        return [block for band in bands for block in _cut(band, depth + 1, deadline, where)]
    return [fragments]


def _column_cut(fragments: list[Fragment], deadline: Deadline, where: str
                ) -> tuple[list[Fragment], list[Fragment]] | None:
    """The region split at its widest vertical gap that separates columns (not the cells of a table); each gap tried
    costs a pass over the region, so the deadline is checked per gap."""
    size = _median([f.size for f in fragments])
    spans = sorted((f.x0, f.x1) for f in fragments)
    gaps: list[tuple[float, float]] = []
    right = spans[0][1]
    for x0, x1 in spans[1:]:
        if x0 - right >= max(4.0, 0.4 * size):
            gaps.append((right, x0))
        right = max(right, x1)
    for start, _ in sorted(gaps, key=lambda g: g[0] - g[1]):
        deadline.check(where)
        left = [f for f in fragments if f.x1 <= start + 0.01]
        rest = [f for f in fragments if f.x1 > start + 0.01]
        if _are_columns(left, rest):
            return left, rest
    return None


def _are_columns(left: list[Fragment], right: list[Fragment]) -> bool:
    """Two sides of a vertical gap are columns when both are prose, or when their lines do not line up in rows."""
    if _is_prose(left) and _is_prose(right):
        return True
    small, other = (left, right) if len(left) <= len(right) else (right, left)
    bases = sorted(f.base for f in other)
    aligned = sum(1 for f in small if _has_near(bases, f.base, 1.0))
    return aligned < 0.5 * len(small)


def _is_prose(fragments: list[Fragment]) -> bool:
    wordy = sum(1 for f in fragments if sum(c.isalpha() for c in f.text) >= 15)
    return len(fragments) >= 3 and wordy >= 0.6 * len(fragments)


def _has_near(sorted_values: list[float], value: float, tolerance: float) -> bool:
    low, high = 0, len(sorted_values)
    while low < high:
        middle = (low + high) // 2
        if sorted_values[middle] < value - tolerance:
            low = middle + 1
        else:
            high = middle
    return low < len(sorted_values) and sorted_values[low] <= value + tolerance


def _band_cut(fragments: list[Fragment]) -> list[list[Fragment]]:
    """The region split at its widest horizontal gaps (those at least half as wide as the widest), top band first."""
    spans = sorted(((f.top - 0.15 * f.size, f.bottom + 0.15 * f.size) for f in fragments), reverse=True)
    gaps: list[tuple[float, float]] = []  # (upper edge of the gap, lower edge)
    low = spans[0][1]
    for top, bottom in spans[1:]:
        if top < low:
            gaps.append((low, top))
        low = min(low, bottom)
    if not gaps:
        return [fragments]
    widest = max(upper - lower for upper, lower in gaps)
    cuts = sorted((lower + upper) / 2 for upper, lower in gaps if upper - lower >= 0.5 * widest)
    bands: list[list[Fragment]] = [[] for _ in range(len(cuts) + 1)]
    for fragment in fragments:
        middle = (fragment.top + fragment.bottom) / 2
        bands[len(cuts) - sum(1 for cut in cuts if middle > cut)].append(fragment)
    return [band for band in bands if band]


def _median(values: Sequence[float]) -> float:
    ordered = sorted(values)
    return ordered[len(ordered) // 2] if ordered else 0.0


def lines_of(blocks: list[list[Fragment]]) -> list[Line]:
    """The lines of the blocks in reading order; fragments of one baseline in one block are one line."""
    lines: list[Line] = []
    for number, block in enumerate(blocks):
        for row in _rows(block):
            row.sort(key=lambda f: f.x0)
            text, cells = row[0].text, 1
            for before, fragment in zip(row, row[1:], strict=False):
                gap = fragment.x0 - before.x1
                if gap > CELL_GAP * fragment.size and not (cells == 1 and _MARKER.fullmatch(text)):
                    text, cells = f"{text} | {fragment.text}", cells + 1
                else:
                    text += ("" if gap < 0.1 * fragment.size else " ") + fragment.text
            size = max(f.size for f in row)
            bold = all(f.bold for f in row)
            lines.append(Line(text, row[0].x0, max(f.x1 for f in row), row[0].base, size, bold, cells, number))
    return lines


def paragraphs_of(lines: list[Line]) -> list[Paragraph]:
    """Lines joined into paragraphs (a table's consecutive rows are one row group)."""
    pitch = _line_pitch(lines)
    paragraphs: list[Paragraph] = []
    for line in lines:
        if paragraphs and not _breaks(paragraphs[-1], line, pitch):
            paragraphs[-1].lines.append(line)
        else:
            paragraphs.append(Paragraph([line]))
    return paragraphs


def _line_pitch(lines: list[Line]) -> float:
    """The most common distance between the baselines of consecutive lines, as a multiple of their font height."""
    ratios = Counter(
        round((a.base - b.base) / b.size, 1)
        for a, b in zip(lines, lines[1:], strict=False)
        if abs(a.size - b.size) < 0.5 and 0.8 * b.size < a.base - b.base < 3 * b.size and a.x0 < b.x1 and b.x0 < a.x1
    )
    return ratios.most_common(1)[0][0] if ratios else 1.1


def _breaks(paragraph: Paragraph, line: Line, pitch: float) -> bool:
    """Whether `line` starts a new paragraph after `paragraph`."""
    last = paragraph.lines[-1]
    ends_sentence = bool(_SENTENCE_END.search(last.text))
    if re.fullmatch(r"\d{1,3}|[*†]", last.text) and len(paragraph.lines) == 1 and 0 < last.base - line.base < 2 * line.size:
        return False  # a footnote's number, raised above its text
    if line.cells > 1 or last.cells > 1:
        return not (line.cells > 1 and last.cells > 1 and line.block - last.block <= 1)
    if abs(line.size - last.size) > 0.15 * max(line.size, last.size):
        return True
    if line.bold != last.bold and last.x1 < line.x1 - line.size:  # a heading's line is shorter than the text's
        return True
    if _BULLET.match(line.text) or (ends_sentence and re.match(r"\d{1,3}\s", line.text)):
        return True  # a list item, or the next footnote
    if line.base >= last.base or line.x0 >= last.x1:  # the next column: the paragraph may go on there
        return ends_sentence
    if last.base - line.base > (pitch + 0.35) * line.size:
        return True
    if ends_sentence and abs(line.x0 - last.x0) > 0.8 * line.size:
        return True  # a first-line indent, or the end of an indented item
    right = max(x.x1 for x in (*paragraph.lines, line))
    left = min(x.x0 for x in (*paragraph.lines, line))
    if last.x1 - left < 0.6 * (right - left) and (line.text[:1].isupper() or line.text[:1].isdigit()):
        return True  # a short line ends its paragraph (or is a heading), unless a new one starts in lower case
    return ends_sentence and last.x1 < right - 4 * line.size


def paragraph_text(lines: Sequence[Line]) -> str:
    """The lines of a paragraph as one text: words broken over a line end joined, rows of a table one per line."""
    text = lines[0].text
    for before, line in zip(lines, lines[1:], strict=False):
        if before.cells > 1 and line.cells > 1:
            text += "\n" + line.text
            continue
        hyphenated = _HYPHENATED.search(text[-80:])
        first = line.text.split(" ", 1)[0]
        if re.search(r"\S[–/@]$", text[-2:]):  # "2018–" + "23–51", "https://" + "www.nrc.gov"
            text += line.text
        elif hyphenated and _joins_hyphen(hyphenated.group(1), first):
            text = text[:-1] + line.text
        elif hyphenated:
            text = text[:-1] + "-" + (" " if first.lower().strip(",") in _KEEP_HYPHEN_BEFORE else "") + line.text
        else:
            text += " " + line.text
    return text


def _joins_hyphen(before: str, after: str) -> bool:
    """A word broken at a line end ("regel-" + "geving"), not a compound ("Noord-" + "Brabant", "EU-" + "landen")."""
    if len(before) < 2 or (before.isupper() and len(before) >= 2) or not before[-1].isalpha():
        return False
    if not after or not after[0].islower():
        return False
    return after.lower().strip(",.;:") not in _KEEP_HYPHEN_BEFORE
