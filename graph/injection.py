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
(`graph.ledger.Ledger.render`) and the answer checks (`graph.claims`, `graph.contacts`) stand behind it.
Hand-written: no maintained library detects instructions in retrieved text without a model call.
"""

from __future__ import annotations

import logging
import re
from collections import Counter
from functools import lru_cache

from graph.models import Evidence

log = logging.getLogger(__name__)

_GAP = r"[^.!?\n]{0,40}?"  # a few words within one sentence

_ENGLISH = [
    # override: "ignore (all) previous instructions", "disregard the rules above"
    rf"\b(?:ignore|disregard|forget|override|bypass|skip)\b{_GAP}\b(?:previous|prior|above|earlier|preceding|"
    rf"all|any|your|the|these|those|system|original)\b{_GAP}\b(?:instructions?|prompts?|rules|guidelines|"
    rf"directions|directives|constraints|guardrails)\b",
    # a new persona or role
    r"(?-i:\b[Yy]ou(?:\s+are|'re|\s+will\s+be)\s+now\b)",  # lower case: "You Are Now …" is a title
    r"\bfrom\s+now\s+on\b,?\s+(?:you|your|the\s+(?:assistant|ai))\b",
    r"\b(?:pretend|imagine)\s+(?:to\s+be|(?:that\s+)?you\s+are)\b",
    r"\b(?:act|behave|respond|answer)\s+as\s+(?:if\s+you\s+were|an?\s+(?:ai|assistant|chatbot|language\s+model))\b",
    r"\byour\s+new\s+(?:role|name|persona|identity|instructions?|task)\b",
    # the prompt
    r"\bsystem\s*prompts?\b",
    rf"\b(?:print|reveal|show|display|repeat|output|write\s+out|recite|disclose|leak|share)\b{_GAP}\b(?:(?:your|the)\s+"
    r"(?:initial\s+|original\s+|hidden\s+|secret\s+)?(?:instructions|prompt)|your\s+(?:rules|guidelines|configuration))\b",
    # addressed to a model
    r"\b(?:note|message|instructions?|attention|notice|reminder)\s+(?:to|for)\s+(?:all\s+)?(?:ai|llms?|language\s+models?|"
    r"chatbots?|(?:ai\s+)?assistants?|ai\s+(?:systems?|models?|agents?|tools?))\b",
    r"\b(?:dear|hey|hello|attention)\s+(?:ai|assistant|chatbot|llm|language\s+model)\b",
    r"\bif\s+you\s+are\s+an?\s+(?:ai|llm|language\s+model|assistant|chatbot|bot|large\s+language\s+model)\b",
    r"\b(?:ai|llm)\s+(?:systems?|assistants?|models?|agents?)\s+(?:reading|that\s+read|processing|summari[sz]ing)\b",
    # steering the reply
    r"\b(?:tell|send|direct|refer|redirect|point|advise|instruct|urge)\s+(?:the\s+|all\s+|your\s+)?(?:readers?|users?|"
    r"visitors?|customers?)\b",
    r"\b(?:answer|respond|reply)\s+(?:only|solely|exclusively|always)\s+(?:with|in|by|that)\b",
    r"\b(?:always|only)\s+(?:answer|respond|reply)\s+(?:with|by|that)\b",
    r"\bin\s+(?:your|every|each)\s+(?:answer|response|reply)\b",
    r"\byour\s+(?:answer|response|reply)\s+(?:must|should|shall|has\s+to)\b",
]

_DUTCH = [
    rf"\b(?:negeer|vergeet|omzeil|overschrijf)\b{_GAP}\b(?:instructies?|opdrachten|opdracht|regels|richtlijnen|"
    r"prompts?|systeemprompt|aanwijzingen)\b",
    r"\b(?:je|jij|u)\s+bent\s+(?:nu|vanaf\s+nu)\b",
    r"\bvanaf\s+nu\b,?\s+(?:ben\s+(?:je|jij)|bent\s+u|antwoord|reageer|spreek|heet|speel)\b",
    r"\bdoe\s+alsof\s+(?:je|jij|u)\b",
    r"\bgedraag\s+(?:je|jij|u)\s+als\b",
    r"\bspeel\s+de\s+rol\s+van\b",
    r"\bsysteem(?:prompt|instructies)\b",
    rf"\b(?:toon|geef|herhaal|print|onthul|deel|schrijf|laat)\b{_GAP}\b(?:je|jouw|uw)\s+(?:instructies|prompt|"
    r"regels|configuratie|opdracht)\b",
    r"\b(?:notitie|bericht|opmerking|instructies?|aanwijzing|let\s+op)\s+(?:voor|aan)\s+(?:alle\s+)?(?:ai|llms?|"
    r"taalmodellen|taalmodel|chatbots?|assistenten|assistent|ai-(?:systemen|assistenten|modellen))\b",
    r"\bals\s+(?:je|jij|u)\s+een\s+(?:ai|taalmodel|assistent|chatbot|llm)\b",
    r"\b(?:beste|hallo|hoi)\s+(?:ai|assistent|chatbot|taalmodel)\b",
    r"\bai-(?:systemen|assistenten|modellen)\s+die\b",
    r"\b(?:stuur|verwijs|vertel|zeg\s+tegen|adviseer)\s+(?:de\s+|alle\s+)?(?:lezers?|gebruikers?|bezoekers?|"
    r"vragenstellers?)\b",
    r"\b(?:antwoord|reageer)\s+(?:alleen|uitsluitend|enkel|altijd)\b",
    r"\bin\s+(?:je|jouw|elk|ieder)\s+(?:antwoord|reactie)\b",
]

_MARKUP = [  # chat-template and role markup no document needs
    r"\[\s*(?:system|assistant|inst|/inst)\s*\]",
    r"<\|?\s*(?:im_start|im_end|system|assistant|endoftext)\s*\|?>",
    r"(?:^|\n)\s*#{1,4}\s*(?:system|instruction|instructions)\b",
    r"(?:^|\n)\s*(?:system|assistant)\s*:",
]

PLANTED = re.compile("|".join(f"(?:{p})" for p in (*_ENGLISH, *_DUTCH, *_MARKUP)), re.IGNORECASE)
# Every pattern above needs one of these words (or "language model"): a passage without any of them is let
# through after one cheap word scan (~45 µs for 1,200 characters), where the patterns take ~1.3 ms.
TRIGGERS = frozenset("""
ignore disregard forget override bypass skip you you're your pretend imagine prompt prompts instructions instruction
ai llm llms chatbot chatbots assistant assistants readers reader users user visitors visitor customers customer
answer respond reply negeer vergeet omzeil overschrijf je jij u jouw uw vanaf alsof gedraag rol systeemprompt
systeeminstructies taalmodel taalmodellen assistent assistenten lezer lezers gebruiker gebruikers bezoeker bezoekers
vragensteller vragenstellers antwoord reageer system inst im_start im_end endoftext
""".split())
_WORD = re.compile(r"[\w']+")
_SENTENCES = re.compile(r"((?<=[.!?])\s+|\n+)")
WITHHELD = "[…]"


def _suspect(text: str) -> bool:
    lower = text.lower()
    return not TRIGGERS.isdisjoint(_WORD.findall(lower)) or "language model" in lower


def instruction(sentence: str) -> bool:
    """Whether a sentence addresses the model or the assistant rather than informing a reader."""
    return _suspect(sentence) and PLANTED.search(sentence) is not None


@lru_cache(maxsize=4096)
def screen_text(text: str) -> tuple[str, int]:
    """`text` without its sentences that address the model (each becomes `WITHHELD`), and how many there were.
    Memoised: the same passages come back in later research rounds and in other requests."""
    if not _suspect(text) or PLANTED.search(text) is None:  # the common case
        return text, 0
    parts = _SENTENCES.split(text)
    removed = 0
    for i in range(0, len(parts), 2):  # even indexes are sentences, odd ones the separators kept by the split
        if parts[i].strip() and instruction(parts[i]):
            parts[i] = WITHHELD
            removed += 1
    if not removed:  # the pattern spanned a sentence break: withhold the passage's matching stretch
        return PLANTED.sub(WITHHELD, text), 1
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
    """Passages that held planted instructions, per collection (each passage once)."""
    seen = {e.id: e.collection for e in evidence if e.withheld}
    return dict(Counter(seen.values()))


def log_suspected(evidence: list[Evidence]) -> None:
    """One warning naming the passages (never their text: the log is no place to replay an attack)."""
    ids = sorted({e.id for e in evidence if e.withheld})
    if ids:
        log.warning("instructions for the model withheld from %d passage(s): %s", len(ids), ", ".join(ids),
                    extra={"injection_passages": ids})
