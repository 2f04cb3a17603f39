"""Dutch laws in the BWB `<toestand>` XML of wetten.overheid.nl: one `Unit` per article, in the Markdown law style.

The consolidated text of a law ("toestand" on a date) comes from the BWB repository as XML: `<toestand bwb-id=...>`
holding the `<intitule>`, `<citeertitel>`, the `<aanhef>`, the articles (inside `<hoofdstuk>`, `<afdeling>`,
`<paragraaf>`, ...), annexes (`<bijlage>`) and the `<wetsluiting>`. The ingest turns law units into chunks with the
same code path as the wetten.overheid.nl Markdown law texts (`docserver/chunking.py`), so an article's text is written
exactly the way those Markdown files write it: each lid as "1. text", list items as "- a. text" (nested ones indented
by three spaces per level), paragraphs separated by a blank line, emphasis as `*cursief*` and `**vet**`, tables as
pipe tables, references as their plain text. Meta-data, jci links, images and editorial bookkeeping are left out;
what wetten.overheid.nl shows a reader stays: an editor's addition as "[Red: ...]", a repealed article's "Vervallen"
("[Vervallen per 01-01-2020]" when the file has no text for it), and an article that is in the file but not yet in
force starts with "[Treedt in werking per 01-01-2027]" (or "... op een nader te bepalen tijdstip").

Units, in document order:

* the preamble (`<aanhef>`): headings ("Aanhef",), article None;
* each `<artikel>`: article = its number ("1", "4a", "3.1"), headings = (chapter heading, article heading) inside a
  `<hoofdstuk>`, else (article heading,). Headings read like the Markdown ones: "Hoofdstuk 1. Algemeen",
  "Artikel 1. Begrippen", "Artikel 2" (label, number, then ". " and the caption when there is one). Sections between
  chapter and article (`<afdeling>`, `<paragraaf>`) do not appear: the chapter stays the outer heading;
* text outside articles inside a structure (a repealed chapter's "Vervallen"): headings = the chapter and the
  section around it, article None;
* each `<bijlage>`: headings ("Bijlage 1. behorende bij ...",), article None;
* the slotformulering ("Lasten en bevelen ..."): headings ("Slotformulering",), article None (the date and the
  signatures after it are left out, as the Markdown law texts leave them out).

The XML is parsed with defusedxml: a document that declares entities (the "billion laughs" bomb) or refers to
external ones is refused, as is XML that is malformed, cut off or nested absurdly deep. `parse_xml`, `inline` and
`paragraphs` are shared with the reader of official publications (`op.py`), which uses the same markup for text.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from xml.etree.ElementTree import Element, ParseError

from defusedxml import DefusedXmlException
from defusedxml.ElementTree import XMLParser

from .base import Deadline, Extracted, Limits, Refused, Unit, too_large
from .common import feed

__all__ = ["read"]

MAX_DEPTH = 200  # real BWB and OP documents nest about 20 deep; the readers recurse, so deeper is refused
LIST_INDENT = "   "  # a nested list item in the Markdown law texts: "   - 1°. text"

_SPACE = re.compile(r"\s+")
_BWB_ID = re.compile(r"^BWB[RV]\d{7}$")
_ISO_DATE = re.compile(r"^(\d{4})-(\d{2})-(\d{2})$")
_NOT_TEXT = frozenset({"meta-data", "lidnr", "li.nr", "plaatje", "illustratie", "redactionele-correcties"})
_PARAGRAPH = frozenset({"al", "considerans.al", "tussenkop", "tekstregel", "titel", "wij"})
_INLINE = frozenset(
    {"nadruk", "extref", "intref", "redactie", "sup", "inf", "naam", "voornaam", "achternaam", "datum", "noot"}
    | {"organisatie", "functie", "plaats", "ondernummer", "kamervraagonderwerp", "unl", "nr", "label"}
)
_EMPHASIS = {"cur": "*", "vet": "**"}
_LAW_SKIP = frozenset(
    {"intitule", "citeertitel", "meta-data", "kop", "redactionele-correcties", "bwb-inputbestand", "bwb-wijzigingen"}
)


# --- parsing, shared with op.py ------------------------------------------------------------------------------------


def parse_xml(data: bytes, limits: Limits, deadline: Deadline) -> Element:
    """The root element of untrusted XML; `Refused` for entity declarations, external entities, malformed or cut-off
    XML, absurd nesting, or a file over the size limit."""
    if len(data) > limits.max_bytes:
        raise too_large(len(data), limits.max_bytes)
    parser = XMLParser()  # defusedxml's: forbids entity declarations and external references
    try:
        feed(parser, data, deadline, "parsing the XML")
        root: Element = parser.close()
    except DefusedXmlException as exc:
        raise Refused(
            "the XML declares entities or refers to external ones, which are not read (an XML bomb?)"
        ) from exc
    except ParseError as exc:
        raise Refused(f"the XML is malformed or cut off ({exc})") from exc
    if _depth(root, deadline) > MAX_DEPTH:
        raise Refused(f"the XML nests elements more than {MAX_DEPTH} deep")
    return root


def _depth(root: Element, deadline: Deadline) -> int:
    """How deep the element tree goes (without recursion: the tree is not trusted yet; a deadline check per
    element, as the tree of a large file has millions)."""
    deepest, stack = 0, [(root, 1)]
    while stack:
        deadline.check("measuring the XML's depth")
        element, depth = stack.pop()
        deepest = max(deepest, depth)
        stack.extend((child, depth + 1) for child in element)
    return deepest


def local(tag: str) -> str:
    """An element's name without a namespace."""
    return tag.rsplit("}", 1)[-1]


def squash(text: str) -> str:
    """Runs of white space (newlines and indentation of the XML) as one space, none at either end."""
    return _SPACE.sub(" ", text).strip()


# --- text, shared with op.py ---------------------------------------------------------------------------------------


def inline(element: Element, *, marks: bool = True) -> str:
    """The running text of an element on one line; `marks` writes emphasis as Markdown (*cursief*, **vet**)."""
    return squash(_running_text(element, marks))


def _running_text(element: Element, marks: bool) -> str:
    parts = [element.text or ""]
    for child in element:
        name = local(child.tag)
        if name not in _NOT_TEXT:
            inner = _running_text(child, marks)
            if name == "nadruk" and marks:
                inner = _emphasis(inner, _EMPHASIS.get(child.get("type", ""), ""))
            elif name == "redactie" and child.get("type") == "extra":
                inner = f" [Red: {squash(inner)}] "  # an editor's addition, shown like this on wetten.overheid.nl
            elif name == "noot":
                inner = f" [noot {squash(inner)}] "
            parts.append(inner)
        parts.append(child.tail or "")
    return "".join(parts)


def _emphasis(text: str, mark: str) -> str:
    """`text` between Markdown emphasis marks, the white space around it kept outside the marks."""
    core = squash(text)
    if not core or not mark:
        return text
    before = " " if text[:1].isspace() else ""
    after = " " if text[-1:].isspace() else ""
    return f"{before}{mark}{core}{mark}{after}"


def heading(kop: Element | None) -> str:
    """A `<kop>` as the Markdown law texts write it: "Hoofdstuk 1. Algemeen", "Artikel 4a", "§ 1.1. Begrippen"."""
    if kop is None:
        return ""
    label, number, caption = (child_text(kop, tag) for tag in ("label", "nr", "titel"))
    head = " ".join(part for part in (label, number) if part)
    if caption:
        head = f"{head.rstrip('.')}. {caption}" if head else caption
    return head


def child_text(parent: Element | None, tag: str) -> str:
    """The plain running text of `parent`'s first `tag` child ("" when there is none)."""
    child = parent.find(tag) if parent is not None else None
    return inline(child, marks=False) if child is not None else ""


def is_running_text(element: Element) -> bool:
    """A paragraph-like element, or one holding text directly or only inline markup (not blocks)."""
    if local(element.tag) in _PARAGRAPH:
        return True
    if (element.text or "").strip() or any((child.tail or "").strip() for child in element):
        return True
    return len(element) > 0 and all(local(child.tag) in _INLINE | _NOT_TEXT for child in element)


def paragraphs(elements: Iterable[Element], deadline: Deadline, depth: int = 0) -> list[str]:
    """The Markdown-law paragraphs of a run of block elements (al, lid, lijst, table, kop, containers of them)."""
    out: list[str] = []
    for element in elements:
        out += _block(element, deadline, depth)
    return out


def _block(element: Element, deadline: Deadline, depth: int) -> list[str]:
    name = local(element.tag)
    if name in _NOT_TEXT:
        return []
    deadline.check()
    if name == "kop":
        text = heading(element)
        return [text] if text else []
    if name == "lid":
        return _lid(element, deadline, depth)
    if name == "lijst":
        return _list(element, deadline, depth)
    if name == "table":
        table = _table(element, deadline)
        return [table] if table else []
    if is_running_text(element):
        text = inline(element)
        return [text] if text else []
    return paragraphs(element, deadline, depth)


def _lid(lid: Element, deadline: Deadline, depth: int) -> list[str]:
    """A numbered paragraph of an article: "1. text", then its lists and further paragraphs."""
    number = child_text(lid, "lidnr")
    content = [child for child in lid if local(child.tag) not in _NOT_TEXT]
    out = paragraphs(content, deadline, depth)
    if not number:
        return out
    label = number if number.endswith(".") else f"{number}."
    if out and content and local(content[0].tag) in _PARAGRAPH:
        out[0] = f"{label} {out[0]}"
    else:
        out.insert(0, label)
    return out


def _list(lijst: Element, deadline: Deadline, depth: int) -> list[str]:
    """A `<lijst>` as "- a. text" items, one paragraph each; nested lists indented by LIST_INDENT per level."""
    indent = LIST_INDENT * depth
    out: list[str] = []
    for item in lijst:
        if local(item.tag) != "li":
            out += _block(item, deadline, depth)
            continue
        number = child_text(item, "li.nr")
        marker = f"{indent}- {number} " if number else f"{indent}- "
        first = True
        for child in item:
            name = local(child.tag)
            if name in _NOT_TEXT:
                continue
            if name == "lijst":
                if first:
                    out.append(marker.rstrip())
                    first = False
                out += _list(child, deadline, depth + 1)
                continue
            for text in _block(child, deadline, depth + 1):
                out.append(marker + text if first else indent + LIST_INDENT + text)
                first = False
        if first and number:
            out.append(marker.rstrip())
    return out


def _table(table: Element, deadline: Deadline) -> str:
    """A CALS table (tgroup, thead/tbody, row, entry) as a Markdown pipe table, its first row as the header."""
    rows: list[list[str]] = []
    for group in (child for child in table if local(child.tag) == "tgroup"):
        for part in group:
            for row in (child for child in part if local(child.tag) == "row"):
                cells = [child for child in row if local(child.tag) == "entry"]
                rows.append([" ".join(_block(cell, deadline, 0)).replace("|", "\\|") for cell in cells])
    rows = [row for row in rows if any(row)]
    if not rows:
        return ""
    width = max(len(row) for row in rows)
    lines = ["| " + " | ".join(row + [""] * (width - len(row))) + " |" for row in rows]
    return "\n".join([lines[0], "| " + " | ".join(["---"] * width) + " |", *lines[1:]])


# --- laws ----------------------------------------------------------------------------------------------------------


def read(data: bytes, limits: Limits, deadline: Deadline) -> Extracted:
    """A BWB `<toestand>`: the law's citeertitel, its metadata and its text as units (see the module docstring)."""
    root = parse_xml(data, limits, deadline)
    if local(root.tag) != "toestand":
        raise Refused(f"not a BWB law text: the XML's root element is <{local(root.tag)}>, not <toestand>")
    units: list[Unit] = []
    _walk(root, None, None, units, deadline)
    if not units:
        raise Refused("the law has no articles and no text")
    metadata = _metadata(root)
    return Extracted(format="bwb", title=metadata.get("title"), units=tuple(units), metadata=metadata, language="nl")


def _metadata(root: Element) -> dict[str, str]:
    """identifier, bron, toestand (the date of this consolidated text), title, citeertitel, intitule, soort."""
    metadata: dict[str, str] = {}
    identifier = root.get("bwb-id", "").strip()
    if _BWB_ID.match(identifier):
        metadata["identifier"] = identifier
        metadata["bron"] = f"https://wetten.overheid.nl/{identifier}"
    if _ISO_DATE.match(root.get("inwerkingtreding", "").strip()):
        metadata["toestand"] = root.get("inwerkingtreding", "").strip()
    citeertitels = list(root.iter("citeertitel"))
    official = [element for element in citeertitels if element.get("status") == "officieel"] or citeertitels
    citeertitel = inline(official[0], marks=False) if official else ""
    intitule = next((inline(element, marks=False) for element in root.iter("intitule")), "")
    if citeertitel:
        metadata["citeertitel"] = citeertitel
    if intitule:
        metadata["intitule"] = intitule
    if citeertitel or intitule:
        metadata["title"] = citeertitel or intitule
    wetgeving = root.find("wetgeving")
    if wetgeving is not None and wetgeving.get("soort"):
        metadata["soort"] = wetgeving.get("soort", "")
    return metadata


def _walk(element: Element, chapter: str | None, section: str | None, units: list[Unit], deadline: Deadline) -> None:
    """The units of a structural element's children: articles, preamble, annexes, and loose text."""
    for child in element:
        deadline.check("reading the articles")
        name = local(child.tag)
        if name in _LAW_SKIP:
            continue
        if name == "artikel":
            _add(units, _article(child, chapter, deadline))
        elif name == "aanhef":
            _add(units, Unit(_text(child, deadline), headings=("Aanhef",)))
        elif name == "wetsluiting":
            closing = [part for part in child if local(part.tag) == "slotformulering"]
            _add(units, Unit("\n\n".join(paragraphs(closing, deadline)), headings=("Slotformulering",)))
        elif name == "bijlage":
            _add(units, Unit(_text(child, deadline), headings=(heading(child.find("kop")) or "Bijlage",)))
        elif child.find(".//artikel") is not None or child.find(".//bijlage") is not None:
            own = heading(child.find("kop")) or None
            if name == "hoofdstuk":
                _walk(child, own or chapter, None, units, deadline)
            else:
                _walk(child, chapter, own or section, units, deadline)
        else:  # text outside articles: a repealed chapter's "Vervallen", a loose paragraph
            own = heading(child.find("kop"))
            text = _text(child, deadline) if own else "\n\n".join(_block(child, deadline, 0))
            path = (own or chapter,) if name == "hoofdstuk" else (chapter, own or section)
            _add(units, Unit(text, headings=tuple(head for head in path if head)))


def _add(units: list[Unit], unit: Unit) -> None:
    if unit.text.strip():
        units.append(unit)


def _text(element: Element, deadline: Deadline) -> str:
    """An element's content (without its `<kop>`) as blank-line separated paragraphs."""
    return "\n\n".join(paragraphs((child for child in element if local(child.tag) != "kop"), deadline))


def _article(artikel: Element, chapter: str | None, deadline: Deadline) -> Unit:
    """One article: its leden, lists and paragraphs, with its number and heading path."""
    kop = artikel.find("kop")
    number = child_text(kop, "nr").rstrip(".")
    head = heading(kop) or "Artikel"
    body = paragraphs((child for child in artikel if local(child.tag) != "kop"), deadline)
    since = _dutch_date(artikel.get("inwerking", ""))
    if artikel.get("status") == "nogniet":  # in the file, but not yet in force on the toestand's date
        body.insert(
            0, f"[Treedt in werking per {since}]" if since else "[Treedt in werking op een nader te bepalen tijdstip]"
        )
    if not body and artikel.get("status") == "vervallen":
        body = [f"[Vervallen per {since}]" if since else "Vervallen"]
    headings = (chapter, head) if chapter else (head,)
    return Unit("\n\n".join(body), headings=headings, article=number or None)


def _dutch_date(iso: str) -> str:
    """ "2027-01-01" as wetten.overheid.nl writes it, "01-01-2027" ("" when it is no date)."""
    match = _ISO_DATE.match(iso.strip())
    return f"{match.group(3)}-{match.group(2)}-{match.group(1)}" if match else ""
