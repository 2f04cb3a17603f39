"""The question apart from instructions about the answer ("Answer briefly.", "Antwoord in JSON.", "in een tabel").

An instruction says how to answer, not what to find: its words must not reach the search queries or the
relevance test of fact selection (they are topic words of nothing), and synthesis honours it. `split` is a
pure function from the user's text to the question and the instructions; it recognises whole trailing or
leading sentences that are about the answer's length, format, language or tone, and a few trailing phrases
("..., in bullet points?"). A sentence that also asks something ("Explain X briefly") stays the question.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from graph.models import Language

# Families of answer instructions, Dutch and English. Each pattern must match a whole sentence's *purpose*:
# it is only tried on sentences that `_is_instruction` also finds to have no topic words left over.
_LENGTH = (r"\b(kort|korte|beknopt|beknopte|bondig|in het kort|samengevat|uitgebreid|uitgebreide|brief|briefly|short|"
           r"concise|concisely|succinct|tl;?dr|(?:in |max(?:imaal|imum)? |at most |hooguit )+"
           r"(?:een|één|twee|drie|vier|vijf|\d+|one|two|three|four|five|a few) "
           r"(?:zin|zinnen|woorden|alinea'?s?|sentences?|words|paragraphs?|lines?))\b")
_FORMAT = (r"\b(json|yaml|markdown|tabel|table|lijst|list|opsommingstekens|opsomming|bullet ?points?|bullets?|"
           r"genummerde|numbered|stappen|steps)\b")
_LANGUAGE = r"\b(in het|in)\s+(engels|nederlands|english|dutch)\b"
_TONE = r"\b(formeel|informeel|eenvoudig|simpel|simple|plain|formal|informal|for a layman|voor een leek)\b"
_VERBS = (r"^(please |graag |alsjeblieft |a\.?u\.?b\.? )?(answer|respond|reply|write|give|keep|format|return|output|"
          r"use|make|be|antwoord|beantwoord|geef|schrijf|houd|hou|gebruik|maak|formuleer|in)\b")
_FILLER = set(
    "please graag alsjeblieft aub a.u.b. answer respond reply write give keep format return output use make be it the "
    "answer your response reply antwoord beantwoord geef schrijf houd hou gebruik maak formuleer het een je jouw uw "
    "a an as in with of met als van and en or of only alleen just gewoon form vorm format formaat style stijl "
    "please thanks thank you dank bedankt to into op zo so very zeer heel erg zin zinnen woorden words sentences "
    "sentence paragraph paragraphs lines alinea alinea's mode modus object keys fields velden sleutels sources bronnen "
    "citations".split()
)
_INSTRUCTION = re.compile("|".join((_LENGTH, _FORMAT, _LANGUAGE, _TONE)), re.IGNORECASE)
_TRAILING = re.compile(  # "..., in bullet points?" / "... in het kort?" / "... (kort)"
    r"[,;:\s]*\(?\b(in het kort|kort(?: en bondig)?|briefly|in short|in (?:a |een )?(?:table|tabel|list|lijst)|"
    r"in bullet ?points|in json|as json|in het (?:engels|nederlands)|in (?:english|dutch))\)?\s*(?=[?.!]*\s*$)",
    re.IGNORECASE,
)
_LEAD = re.compile(r"^([^:?]{3,80}):\s+(\S.*)$", re.DOTALL)
_SENTENCES = re.compile(r"(?<=[.!?])\s+|\n+")
_WORD = re.compile(r"[\w.'-]+", re.UNICODE)


@dataclass(frozen=True)
class Instructions:
    """What the user asked about the answer itself."""

    texts: list[str] = field(default_factory=list)  # the instructions as the user wrote them
    brief: bool = False
    detailed: bool = False
    format: str = ""  # json | table | list | ""
    language: Language | None = None  # an answer language asked for explicitly

    def __bool__(self) -> bool:
        return bool(self.texts)


def _is_instruction(sentence: str) -> bool:
    """An instruction family matches and, without it and filler words, no topic word is left."""
    text = sentence.strip().rstrip("?.!").strip()
    if not text or not _INSTRUCTION.search(text):
        return False
    rest = _INSTRUCTION.sub(" ", text.lower())
    leftover = [w for w in _WORD.findall(rest) if w.strip(".'-") not in _FILLER and not w.isdigit()]
    return not leftover or (bool(re.match(_VERBS, text, re.IGNORECASE)) and len(leftover) <= 1)


def _describe(texts: list[str]) -> Instructions:
    joined = " ".join(texts).lower()
    language: Language | None = None
    if m := re.search(_LANGUAGE, joined):
        language = "en" if m.group(2) in ("engels", "english") else "nl"
    fmt = next((name for name, pattern in (("json", r"\bjson\b"), ("table", r"\b(tabel|table)\b"),
                                           ("list", r"\b(lijst|list|opsomming\w*|bullet\w*|genummerde|numbered)\b"))
                if re.search(pattern, joined)), "")
    brief = bool(re.search(r"\b(kort|korte|beknopt\w*|bondig|in het kort|brief\w*|short|concise\w*|succinct|tl;?dr|"
                           r"(een|één|twee|drie|one|two|three|\d+) (zin|zinnen|sentences?|lines?)|max\w* \w+ "
                           r"(woorden|words|zinnen|sentences))\b", joined))
    detailed = bool(re.search(r"\b(uitgebreid\w*|in detail|detailed|thorough\w*)\b", joined))
    return Instructions(texts, brief=brief, detailed=detailed and not brief, format=fmt, language=language)


def split(text: str) -> tuple[str, Instructions]:
    """The question without its answer instructions, and the instructions. When everything reads as an
    instruction, the text stays the question (nothing would be left to search for)."""
    parts = [p for p in _SENTENCES.split(text.strip()) if p.strip()]
    if parts and (m := _LEAD.match(parts[0])) and _is_instruction(m.group(1)):  # "Answer in English: ..."
        parts[:1] = [m.group(1), m.group(2)]
    kept = [p for p in parts if not _is_instruction(p)]
    texts = [p.strip() for p in parts if _is_instruction(p)]
    if not kept:
        return text.strip(), Instructions()
    question = " ".join(p.strip() for p in kept)
    if m := _TRAILING.search(question):
        if len(question[: m.start()].split()) >= 3:
            texts.append(m.group(1))
            question = question[: m.start()].rstrip(" ,;:") + question[m.end():].strip()
    return question.strip(), _describe(texts)
