"""Official publications in the `<officiele-publicatie>` XML of officielebekendmakingen.nl (KOOP).

Kamerstukken (a motie, a brief, a memorie van toelichting), Aanhangsels van de Handelingen (kamervragen with their
answers), Staatscourant and Staatsblad issues all come in this one dialect: a `<metadata>` block with a link to the
publication's metadata record, then one document element (`<kamerstuk>`, `<kamervragen>`, ...) with a head
(`<kamerstukkop>`, `<dossier>`, `<stuknr>`, `<datumtekst>`) and a body of `<al>` paragraphs in sections that carry a
`<kop>` or `<titel>`.

The reader returns the head as one unit (the lines a reader sees at the top: chamber, year, dossier, number, date),
then one unit per paragraph (`<al>`, a whole `<lijst>`, a table, a group of signatures) with `headings` from the
titles above it: the stuk's `<titel>` ("MOTIE VAN DE LEDEN ..."), a section's `<kop>`, or "Vraag 1" / "Antwoord 1"
for the questions and answers of kamervragen. An `<artikel>` (in a Staatsblad or Staatscourant text) gives its units
its number in `article`. Text is plain and readable, written like the law reader writes it (lists as "- a. text");
the XML parsing and the text rules are the law reader's (`bwb.py`), and so is its refusal of entity declarations,
external entities and malformed XML.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from xml.etree.ElementTree import Element

from .base import Deadline, Extracted, Limits, Refused, Unit
from .bwb import child_text, heading, inline, is_running_text, local, paragraphs, parse_xml, squash

__all__ = ["read"]

EXTERN_RECORD = "OVERHEIDop.externMetadataRecord"
PUBLICATION_URL = "https://zoek.officielebekendmakingen.nl/{identifier}.html"

_HEAD = frozenset({"kamerstukkop", "kamervraagkop", "dossier", "stuknr", "datumtekst", "kamervraagomschrijving"})
_SKIP = frozenset({"metadata", "meta-data", "kop", "titel", "kamervraagnummer"})
_HEAD_LINE_SKIP = frozenset({"kamernummer"})  # the chamber's number ("2"), already said in words
_QUESTION_ANSWER = frozenset({"vraag", "antwoord", "mededeling"})
_ONE_UNIT = frozenset({"lijst", "table", "al-groep", "lid"})
_RECORD_ID = re.compile(r"/([a-z][a-z0-9-]*-\d[a-z0-9-]*)/metadata\.xml$", re.IGNORECASE)
_YEARS = re.compile(r"\d{4}\s*-\s*\d{4}")


def read(data: bytes, limits: Limits, deadline: Deadline) -> Extracted:
    """An `<officiele-publicatie>`: its title, metadata and text units (see the module docstring)."""
    root = parse_xml(data, limits, deadline)
    if local(root.tag) != "officiele-publicatie":
        raise Refused(f"not an official publication: the XML's root element is <{local(root.tag)}>")
    document = next((child for child in root if local(child.tag) not in _SKIP), None)
    if document is None:
        raise Refused("the official publication has no document in it")
    head: list[str] = []
    units: list[Unit] = []
    _walk(list(document), (), None, head, units, deadline)
    if head:
        units.insert(0, Unit("\n".join(dict.fromkeys(head))))
    if not any(unit.text for unit in units):
        raise Refused("the official publication has no text")
    return Extracted(
        format="op", title=_title(document), units=tuple(units), metadata=_metadata(root, document), language="nl"
    )


def _walk(
    children: Iterable[Element],
    headings: tuple[str, ...],
    article: str | None,
    head: list[str],
    units: list[Unit],
    deadline: Deadline,
) -> None:
    """The head lines and paragraph units of a run of elements, in document order."""
    for child in children:
        deadline.check("reading the publication")
        name = local(child.tag)
        if name in _SKIP:
            continue
        if name in _HEAD:
            head += _head_lines(child)
        elif name in _ONE_UNIT:
            text = "\n".join(paragraphs([child], deadline))
            if text:
                units.append(Unit(text, headings=headings, article=article))
        elif name in _QUESTION_ANSWER:
            own = child_text(child, "nr") or name.capitalize()
            _walk([part for part in child if local(part.tag) != "nr"], (*headings, own), article, head, units, deadline)
        elif child.find("kop") is not None or child.find("titel") is not None:
            own = heading(child.find("kop")) or child_text(child, "titel")
            number = child_text(child.find("kop"), "nr").rstrip(".") if name == "artikel" else None
            _walk(list(child), (*headings, own) if own else headings, number or article, head, units, deadline)
        else:
            texts = paragraphs([child], deadline) if len(child) == 0 or is_running_text(child) else None
            if texts is None:
                _walk(list(child), headings, article, head, units, deadline)
            else:
                units.extend(Unit(text, headings=headings, article=article) for text in texts)


def _head_lines(element: Element) -> list[str]:
    """The lines of the document's head: a kop's text lines, "32 545 Wet- en regelgeving ...", "Nr. 143", a date."""
    if local(element.tag) in ("kamerstukkop", "kamervraagkop"):
        lines = (inline(line) for line in element if line.get("inhoud") not in _HEAD_LINE_SKIP)
        return [line for line in lines if line]
    text = inline(element)
    return [text] if text else []


def _title(document: Element) -> str | None:
    """The stuk's title, else the question's description (kamervragen), else the first section title."""
    for path in ("stuk/titel", "titel", "kamervraagomschrijving[@type='vraag']", ".//kop/titel", ".//titel"):
        found = document.find(path)
        if found is not None and (title := inline(found, marks=False).rstrip(".")):
            return title
    return None


def _metadata(root: Element, document: Element) -> dict[str, str]:
    """The metadata record's URL and every `<meta>`, plus what the head says: dossier, number, year, date, type."""
    metadata: dict[str, str] = {"soort": local(document.tag)}
    for meta in root.iter("meta"):
        name, content = meta.get("name", "").strip(), meta.get("content", "").strip()
        if name and content:
            metadata[name] = content
    record = metadata.get(EXTERN_RECORD, "")
    if record:
        metadata["metadata_record"] = record
        if match := _RECORD_ID.search(record):
            metadata["identifier"] = match.group(1)
            metadata["bron"] = PUBLICATION_URL.format(identifier=match.group(1))
    for line in document.iter("tekstregel"):
        kind, text = line.get("inhoud", ""), inline(line, marks=False)
        if kind == "vergaderjaar" and (years := _YEARS.search(text)):
            metadata["vergaderjaar"] = re.sub(r"\s", "", years.group(0))
        elif kind == "documenttype" and text:
            metadata["documenttype"] = text
        elif kind == "kameraanduiding" and text:
            metadata["kamer"] = text
    _put(metadata, "dossier", re.sub(r"\s", "", child_text(document.find("dossier/dossiernummer"), "dossiernr")))
    _put(metadata, "dossier_titel", child_text(document.find("dossier"), "titel"))
    stuknr = document.find("stuk/stuknr")
    _put(metadata, "stuknr", child_text(stuknr, "ondernummer") or (inline(stuknr) if stuknr is not None else ""))
    _put(metadata, "nummer", child_text(document, "kamervraagnummer"))
    dates = [date.get("isodatum", "") for date in document.iter("datum") if date.get("isodatum")]
    _put(metadata, "date", dates[0] if dates else "")
    answer = document.find("kamervraagomschrijving[@type='antwoord']/datum")
    _put(metadata, "date_answer", answer.get("isodatum", "") if answer is not None else "")
    onderwerp = document.find(".//kamervraagonderwerp")
    _put(metadata, "onderwerp", inline(onderwerp, marks=False) if onderwerp is not None else "")
    return metadata


def _put(metadata: dict[str, str], key: str, value: str) -> None:
    if squash(value):
        metadata[key] = squash(value)
