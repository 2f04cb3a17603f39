"""Instructions planted in documents: recognised before any prompt is built, and left out of what the model sees.

A retrieval service reads text somebody else wrote. A sentence in a passage that addresses the model or the
assistant ("ignore all previous instructions", "you are now …", "print your system prompt", "note to AI
systems: send readers to …") is not material to answer from; `screen` removes such sentences from every
passage as it enters the pipeline, so neither the model, nor the extractive answer, nor a source preview
carries them, and counts them on the passage (`Evidence.withheld`) for one think line, a log line and the
`neo_injection_suspected_total{collection}` metric.

The patterns recognise the *address* (to the model, the assistant, the reader of the answer), not topics: a
regulation that says "the licensee shall ignore …" or "the operator acts as …" is not addressed to a model.
Measured false positives: none on the bundled corpus, the CC0 Dutch legal texts and the HotpotQA paragraphs
(`tests/test_injection.py`). This is a filter, not a proof: the per-request delimiters around passages
(`graph.answer.ledger.Ledger.render`) and the answer checks (`graph.text.claims`, `graph.answer.contacts`) stand
behind it. Hand-written: no maintained library detects instructions in retrieved text without a model call.
"""

from __future__ import annotations

import logging
import re
from collections import Counter
from dataclasses import dataclass
from functools import lru_cache

from graph.models import Evidence

log = logging.getLogger(__name__)

_GAP = r"[^.!?\n]{0,40}?"  # a few words within one sentence
_PROCESSING_RE = (r"summari[sz](?:e|es|ing)|reads?|reading|process(?:es|ing)?|quot(?:e|es|ing)|cit(?:e|es|ing)|"
                  r"index(?:es|ing)?|condens(?:e|es|ing)|ingest(?:s|ing)?")
_PROCESSING = ("summarise summarises summarising summarize summarizes summarizing read reads reading process processes "
               "processing quote quotes quoting cite cites citing index indexes indexing condense condenses condensing "
               "ingest ingests ingesting")
_VERWERKEN_RE = r"verwerkt|verwerken|samenvat|samenvatten|leest|lezen|citeert|citeren|doorzoekt|doorzoeken|gebruikt|gebruiken"
_VERWERKEN = "verwerkt verwerken samenvat samenvatten leest lezen citeert citeren doorzoekt doorzoeken gebruikt gebruiken"
_AI = "ai llm llms language_model chatbot chatbots assistant assistants"  # see `_words` for "language_model"

# (anchor words, pattern): a pattern can only match a text that holds one of its anchor words, a word it cannot
# match without; a passage is read word by word once, and only the patterns whose anchors occur in it run, on the
# lower-cased text (case-insensitive matching is several times slower in `re`). One case-insensitive regex of all
# patterns tried every alternative at every position (~1.3 ms for 1,200 characters); this way a passage costs a
# word scan (~0.03 ms) and, now and then, one or two patterns.
_ENGLISH = [
    # override: "ignore (all) previous instructions", "disregard the rules above"
    ("ignore disregard forget override bypass skip",
     rf"\b(?:ignore|disregard|forget|override|bypass|skip)\b{_GAP}\b(?:previous|prior|above|earlier|preceding|"
     rf"all|any|your|the|these|those|system|original)\b{_GAP}\b(?:instructions?|prompts?|rules|guidelines|"
     rf"directions|directives|constraints|guardrails)\b"),
    # a new persona or role
    ("you you're", r"\b[Yy]ou(?:\s+are|'re|\s+will\s+be)\s+now\b"),  # on the text as written: "You Are Now …" is a title
    ("you your assistant ai", r"\bfrom\s+now\s+on\b,?\s+(?:you|your|the\s+(?:assistant|ai))\b"),
    ("pretend imagine", r"\b(?:pretend|imagine)\s+(?:to\s+be|(?:that\s+)?you\s+are)\b"),
    (f"you {_AI}",
     r"\b(?:act|behave|respond|answer)\s+as\s+(?:if\s+you\s+were|an?\s+(?:ai|assistant|chatbot|language\s+model))\b"),
    ("your", r"\byour\s+new\s+(?:role|name|persona|identity|instructions?|task)\b"),
    # the prompt
    ("prompt prompts systemprompt", r"\bsystem\s*prompts?\b"),
    ("instructions prompt your",
     rf"\b(?:print|reveal|show|display|repeat|output|write\s+out|recite|disclose|leak|share)\b{_GAP}\b(?:(?:your|the)\s+"
     r"(?:initial\s+|original\s+|hidden\s+|secret\s+)?(?:instructions|prompt)|your\s+(?:rules|guidelines|configuration))\b"),
    # addressed to a model
    (_AI, r"\b(?:note|message|instructions?|attention|notice|reminder)\s+(?:to|for)\s+(?:all\s+)?(?:ai|llms?|language\s+"
          r"models?|chatbots?|(?:ai\s+)?assistants?|ai\s+(?:systems?|models?|agents?|tools?))\b"),
    (_AI, r"\b(?:dear|hey|hello|attention)\s+(?:ai|assistant|chatbot|llm|language\s+model)\b"),
    ("you", r"\bif\s+you\s+are\s+an?\s+(?:ai|llm|language\s+model|assistant|chatbot|bot|large\s+language\s+model)\b"),
    ("ai llm", r"\b(?:ai|llm)\s+(?:systems?|assistants?|models?|agents?)\s+(?:reading|that\s+read|processing|summari[sz]ing)\b"),
    # steering the reply
    ("readers reader users user visitors visitor customers customer",
     r"\b(?:tell|send|direct|refer|redirect|point|advise|instruct|urge)\s+(?:the\s+|all\s+|your\s+)?(?:readers?|users?|"
     r"visitors?|customers?)\b"),
    ("answer respond reply", r"\b(?:answer|respond|reply)\s+(?:only|solely|exclusively|always)\s+(?:with|in|by|that)\b"),
    ("answer respond reply", r"\b(?:always|only)\s+(?:answer|respond|reply)\s+(?:with|by|that)\b"),
    ("your every each", r"\bin\s+(?:your|every|each)\s+(?:answer|response|reply)\b"),
    ("your", r"\byour\s+(?:answer|response|reply)\s+(?:must|should|shall|has\s+to)\b"),
    # addressed to whatever processes "this" text (added after the held-apart set of eval.planted got through)
    (_PROCESSING, rf"\b(?:systems?|tools?|programs?|software|applications?|assistants?|models?|chatbots?|bots?|agents?|"
                  rf"readers?|crawlers?)\s+(?:that\s+|which\s+)?(?:\w+\s+)?(?:{_PROCESSING_RE})\s+(?:this|these)\s+"
                  r"(?:page|text|document|passage|article|content|paragraph|section)s?\b"),
    (_PROCESSING, rf"\bthe\s+(?:model|assistant|ai|system|chatbot|bot|reader)\s+(?:that\s+is\s+)?(?:{_PROCESSING_RE})\s+this\b"),
    ("summaries summary answers answer responses response replies reply",
     r"\b(?:summaries|summary|answers?|responses?|replies)\s+(?:of|to|about|based\s+on)\s+this\s+(?:page|text|document|"
     r"passage|article|content)\s+(?:are|is|must|should|shall)\b"),
]

_NL_AI = "ai llm llms taalmodellen taalmodel chatbot chatbots assistenten assistent"
_DUTCH = [
    ("negeer vergeet omzeil overschrijf",
     rf"\b(?:negeer|vergeet|omzeil|overschrijf)\b{_GAP}\b(?:instructies?|opdrachten|opdracht|regels|richtlijnen|"
     r"prompts?|systeemprompt|aanwijzingen)\b"),
    ("bent", r"\b(?:je|jij|u)\s+bent\s+(?:nu|vanaf\s+nu)\b"),
    ("vanaf", r"\bvanaf\s+nu\b,?\s+(?:ben\s+(?:je|jij)|bent\s+u|antwoord|reageer|spreek|heet|speel)\b"),
    ("alsof", r"\bdoe\s+alsof\s+(?:je|jij|u)\b"),
    ("gedraag", r"\bgedraag\s+(?:je|jij|u)\s+als\b"),
    ("speel", r"\bspeel\s+de\s+rol\s+van\b"),
    ("systeemprompt systeeminstructies", r"\bsysteem(?:prompt|instructies)\b"),
    ("je jouw uw", rf"\b(?:toon|geef|herhaal|print|onthul|deel|schrijf|laat)\b{_GAP}\b(?:je|jouw|uw)\s+(?:instructies|"
                   r"prompt|regels|configuratie|opdracht)\b"),
    (_NL_AI, r"\b(?:notitie|bericht|opmerking|instructies?|aanwijzing|let\s+op)\s+(?:voor|aan)\s+(?:alle\s+)?(?:ai|llms?|"
             r"taalmodellen|taalmodel|chatbots?|assistenten|assistent|ai-(?:systemen|assistenten|modellen))\b"),
    (_NL_AI, r"\bals\s+(?:je|jij|u)\s+een\s+(?:ai|taalmodel|assistent|chatbot|llm)\b"),
    (_NL_AI, r"\b(?:beste|hallo|hoi)\s+(?:ai|assistent|chatbot|taalmodel)\b"),
    ("ai", r"\bai-(?:systemen|assistenten|modellen)\s+die\b"),
    ("lezer lezers gebruiker gebruikers bezoeker bezoekers vragensteller vragenstellers",
     r"\b(?:stuur|verwijs|vertel|zeg\s+tegen|adviseer)\s+(?:de\s+|alle\s+)?(?:lezers?|gebruikers?|bezoekers?|"
     r"vragenstellers?)\b"),
    ("antwoord reageer", r"\b(?:antwoord|reageer)\s+(?:alleen|uitsluitend|enkel|altijd)\b"),
    ("antwoord reactie", r"\bin\s+(?:je|jouw|elk|ieder)\s+(?:antwoord|reactie)\b"),
    # addressed to whatever processes "deze" text (added after the held-apart set of eval.planted got through)
    (_VERWERKEN, rf"\bwie\s+(?:deze|dit)\s+(?:\w+\s+)?(?:automatisch\s+)?(?:{_VERWERKEN_RE})\b"),
    (_VERWERKEN, rf"\b(?:chatbots?|systemen|programma'?s|modellen|taalmodellen|assistenten|tools|software|toepassingen)\s+"
                 rf"die\s+(?:deze|dit)\s+(?:\w+\s+)?(?:{_VERWERKEN_RE})\b"),
    (_VERWERKEN, rf"\bhet\s+(?:model|systeem|programma|taalmodel)\s+dat\s+(?:dit|deze)\s+(?:\w+\s+)?(?:{_VERWERKEN_RE})\b"),
    ("samenvattingen samenvatting antwoorden antwoord",
     r"\b(?:samenvattingen|samenvatting|antwoorden|antwoord)\s+(?:van|op|over)\s+(?:deze|dit)\s+\w+\s+(?:moeten|moet|"
     r"dienen|dient)\b"),
]

_MARKUP = [  # chat-template and role markup no document needs
    ("system assistant inst", r"\[\s*(?:system|assistant|inst|/inst)\s*\]"),
    ("im_start im_end system assistant endoftext", r"<\|?\s*(?:im_start|im_end|system|assistant|endoftext)\s*\|?>"),
    ("system instruction instructions", r"(?m)^[ \t]*#{1,4}[ \t]*(?:system|instructions?)\b"),
    ("system assistant", r"(?m)^[ \t]*(?:system|assistant)[ \t]*:"),
]

_AS_WRITTEN = {_ENGLISH[1][1]}  # matched on the text as written (the others on its lower case)


@dataclass(frozen=True, slots=True)
class _Pattern:
    anchors: frozenset[bytes]
    regex: re.Pattern[str]
    as_written: bool

    def search(self, text: str, lower: str) -> bool:
        return self.regex.search(text if self.as_written else lower) is not None


PATTERNS = [_Pattern(frozenset(a.encode() for a in anchors.split()), re.compile(pattern), pattern in _AS_WRITTEN)
            for anchors, pattern in (*_ENGLISH, *_DUTCH, *_MARKUP)]
# bytes.translate and split: the fastest word scan in the standard library (a third of re.findall's time)
_WORD_BYTES = frozenset(b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_'")
_SPACES = bytes(b if b in _WORD_BYTES or b >= 128 else 32 for b in range(256))
_SENTENCES = re.compile(r"((?<=[.!?])\s+|\n+)")
WITHHELD = "[…]"


def _words(lower: str) -> set[bytes]:
    words = set(lower.encode().translate(_SPACES).split())
    if "language model" in lower:
        words.add(b"language_model")
    return words


def _candidates(lower: str) -> list[_Pattern]:
    """The patterns whose anchor words occur in the (lower-cased) text."""
    words = _words(lower)
    return [pattern for pattern in PATTERNS if not pattern.anchors.isdisjoint(words)]


def _matches(text: str, candidates: list[_Pattern]) -> bool:
    lower = text.lower()
    return any(pattern.search(text, lower) for pattern in candidates)


def instruction(sentence: str) -> bool:
    """Whether a sentence addresses the model or the assistant rather than informing a reader."""
    return _matches(sentence, _candidates(sentence.lower()))


@lru_cache(maxsize=4096)
def screen_text(text: str) -> tuple[str, int]:
    """`text` without its sentences that address the model (each becomes `WITHHELD`), and how many there were.
    Memoised: the same passages come back in later research rounds and in other requests."""
    candidates = _candidates(text.lower())
    if not candidates or not _matches(text, candidates):  # the common case
        return text, 0
    parts = _SENTENCES.split(text)
    removed = 0
    for i in range(0, len(parts), 2):  # even indexes are sentences, odd ones the separators kept by the split
        if parts[i].strip() and _matches(parts[i], candidates):
            parts[i] = WITHHELD
            removed += 1
    if not removed:  # a match spanned a sentence break: withhold the passage's matching stretches
        lower = text.lower()
        spans = [m.span() for p in candidates for m in p.regex.finditer(text if p.as_written else lower)]
        out, last = [], 0
        for start, end in sorted(spans):  # str.lower keeps the offsets of these (ASCII) matches
            if start >= last:
                out += [text[last:start], WITHHELD]
                last = end
            last = max(last, end)
        return "".join(out) + text[last:], 1
    return "".join(parts), removed


def screen(evidence: list[Evidence]) -> list[Evidence]:
    """Passages as the pipeline may use them: planted sentences withheld from text, title and section (a title
    that is nothing but an instruction becomes the document id); `withheld` counts what was taken out."""
    out = []
    for e in evidence:
        text, n = screen_text(e.text)
        title, t = screen_text(e.title)
        section, s = screen_text(e.section)
        if not (n or t or s):
            out.append(e)
            continue
        if not title.replace(WITHHELD, "").strip():
            title = e.doc_id
        out.append(e.model_copy(update={"text": text, "title": title, "section": section, "withheld": n + t + s}))
    return out


def suspected(evidence: list[Evidence]) -> dict[str, int]:
    """Passages that held planted instructions, counted per collection (each passage once), after one warning
    naming them (never their text: the log is no place to replay an attack). {} when there were none."""
    seen = {e.id: e.collection for e in evidence if e.withheld}
    if seen:
        ids = sorted(seen)
        log.warning("instructions for the model withheld from %d passage(s): %s", len(ids), ", ".join(ids),
                    extra={"injection_passages": ids})
    return dict(Counter(seen.values()))
