"""Heuristic routing: pure functions from a question to a query type and target collections."""

from __future__ import annotations

import re
from dataclasses import dataclass

from graph.collections import Collection
from graph.models import QueryType, Route
from textkit import STOPWORDS

_WORD = re.compile(r"[\w\-']+", re.UNICODE)

# Query types from scored evidence. Each signal is a phrase family (a regular expression, Dutch and English) with
# a weight; a question's type is the one with the highest total, and the route is "sure" when that total is
# strong and ahead of the next type by a margin (`SURE_SCORE`, `SURE_MARGIN`, chosen on the tuning half of
# eval/routing.jsonl). An opening interrogative is weak evidence for a factual question, never decisive alone.
# Written out by hand: no library classifies questions into these four types without a model.
Signal = tuple[QueryType, str, float, str]  # (type, pattern, weight, label shown in the think block)
_SIGNALS: list[Signal] = [
    # comparisons: differences, similarities, stricter/looser, deviation, A vs. B, what A requires that B does not
    ("comparative", r"\b(verschil\w*|verg[eo]?l[ie]{1,2}[jk]\w*|verhoud\w*|overeenkomst\w*|tegenover)\b", 2.0,
     "verschil"),
    ("comparative", r"\b(compar\w*|differ\w*|similarit\w*|versus|vs\.?|contrast\w*)(?=\W|$)", 2.0, "compare"),
    ("comparative", r"\b(strenger\w*|strengst\w*|ruimer\w*|soepeler\w*|stricter|strictest|more stringent|less strict|"
     r"looser|laxer|ga\w* (\S+ ){0,4}verder dan|verder gaan? dan|go\w* (\S+ ){0,3}(further|beyond))\b", 1.6,
     "stricter"),
    ("comparative", r"\b(wat|wie|welke?|which|what|who) (is|zijn|are|was) (het |de |the )?(strengst|strenger|stricter|"
     r"strictest|ouder|older|oudst|oldest|groter|larger|largest|grootst|hoger|higher)\w*", 2.0, "wat is strenger"),
    # "A is X-er than B" (not "higher than 1 mSv": a threshold is a fact)
    ("comparative", r"\b(strenger|ruimer|soepeler|lichter|zwaarder|hoger|lager|groter|kleiner|sterker|zwakker|"
     r"verder|ouder|nieuwer|stricter|looser|lighter|heavier|higher|lower|larger|bigger|smaller|stronger|weaker|"
     r"tougher|further|older|newer) "
     r"(dan|than)\b(?!\s*\d)", 1.2, "strenger dan"),
    ("comparative", r"\b(naast elkaar|side by side|tegen elkaar|stacks? up|measures? up|afgezet tegen|"
     r"ten opzichte van|t\.o\.v|compared (to|with)|relative to|(changed?|veranderd|gewijzigd|wijziging\w*) "
     r"(between|tussen))\b", 1.8, "naast elkaar"),
    # "which X, A or B?"
    ("comparative", r"\b(welk|welke|which|wie|who)\b.{3,100}\b[\w/.-]+,? (of|or) [\w/.-]+( [\w/.-]+)?\W*$", 1.2, "A of B"),
    ("comparative", r"\b(wijk\w* .{0,40}\baf|afwijk\w*|deviat\w*|in hoeverre|to what extent)\b", 1.4, "deviate"),
    ("comparative", r"\b(anders (aan|dan|om)|hetzelfde als|same as|in line with|relat\w* (to|tussen)|relatie tussen)\b",
     1.2, "anders dan"),
    ("comparative", r"\b(that|which|die|dat|wat)\b.{1,60}\b(does not|doesn'?t|do not|did not|niet)\b"
     r"(?!.{0,8}\b(zijn|is|are)\b)",
     1.4, "A maar niet B"),
    # overviews: which documents or rules exist, what is known or available, lists
    ("exploratory", r"\b(welke|which|what|wat voor|wat zijn|zijn er|are there|is there|bestaan er|alle|all|noem|"
     r"name)\b[^?]{0,60}?"
     r"\b\w*(documenten|documentatie|documentation|publicaties|publications|documents|bronnen|sources|verdragen|"
     r"conventions|richtlijnen|guides?|"
     r"guidelines?|guidance|leidraden|normen|standards|standaarden|wetten|besluiten|regels|regelgeving|regulations|"
     r"laws|rules|bepalingen|regelingen|verordeningen|rapporten|reports|richtsnoeren)\b",
     1.6, "documenten"),
    ("exploratory", r"\b(overzicht|overview|lijst(je)? van|list (of|the|all)|opsom\w*|inventaris\w*|"
     r"(give|geef)( me| mij)? (the|a|de|een) (list|lijst)|(lijst|lijstje|list)\W*$)", 1.8,
     "overzicht"),
    ("exploratory", r"\b(wat weten we|what do we know|wat hebben we|what do we have|heb je iets|hebben jullie iets|"
     r"(is|zijn) er (iets|stukken|documenten) (te vinden|beschikbaar)|wat is er (\w+ )?(bekend|te vinden)|"
     r"what is (\w+ )?known|"
     r"what'?s (out there|available)|(is|are) out there|wat is er aan \w+|alles wat (je|jullie|u) (hebt|heeft|hebben)|"
     r"everything you have|zoal|"
     r"is there anything|anything on|do you have anything|wat is er (beschikbaar|te vinden)|what is available|"
     r"(is|are) (there )?available|ik zoek (alle|documenten|informatie)|i am looking for|i'm looking for|looking for all|"
     r"waar (kan ik|vind ik)|where can i find|what has been (published|written)|wat is er (gepubliceerd|geschreven)|"
     r"informatie over|information (on|about)|materiaal over|material on|(beschikbaar|available) (over|on|about))\b",
     2.0, "wat weten we"),
    ("exploratory", r"\b(welke|which|what) (?!verschil|overeenkomst|differen|similarit)\w+ (\w+ )?(zijn er|gelden|"
     r"bestaan er|are there|exist|apply)\b", 1.4, "welke gelden er"),
    ("exploratory", r"\b(van toepassing|apply to|applicable|allemaal|gelden er)\b", 0.8, "van toepassing"),
    # deep dives: thorough explanations, walk-throughs, analyses, everything about one subject
    ("deep_dive", r"\b(leg\b.{1,80}\buit|licht\b.{1,80}\btoe|uitleg\w*|uitgelegd|full explanation|toelichting|"
     r"volledig (uitleggen|beschrijven)|gedetailleerd\w*|detailed|in detail|uitgebreid\w*|"
     r"diepgaand\w*|grondig\w*|thorough\w*|in[- ]depth|comprehensive\w*|uitvoerig\w*|uitwerken|breakdown|"
     r"deep (dive|explanation)|alle details|all (the )?details|wat houdt .{3,120}\bprecies in)\b",
     2.0, "uitgebreid"),
    ("deep_dive", r"\b(walk me through|walk-?through|neem (me|mij|ons) mee door|step by step|stap voor stap|"
     r"van (begin|voorbereiding|aanvraag|a) tot (eind|einde|z|follow-up|afronding)|from (start|beginning) to "
     r"(finish|end)|end to end|analy[sz]\w*|analyseer\w*|everything about|"
     r"alles (weten )?over|hoe (precies|exact|werkt)|how exactly|how does .{3,60} work|what exactly happens|"
     r"wat gebeurt er precies|hele (keten|proces|procedure|traject)|whole (process|procedure|chain)|"
     r"volledige achtergrond|how (?!long|often|much|many)\S.{2,60}\bworks|"
     r"hoe (?!lang|vaak|snel|laat|veel)(\S.{2,60}\b)?(verloopt|werkt)|ik wil .{0,30}begrijpen|"
     r"i (need|want) to understand|alles wat (ik|je|u|we) (\w+ )?(moet|moeten|wil|willen) weten|"
     r"everything (i|we) (need|should|want) to know|everything\W*$)\b",
     1.8, "walk me through"),
    ("deep_dive", r"^\W*(please |can you |could you |kun je |kunt u )?(explain|beschrijf|describe)\b", 1.2, "explain"),
    ("deep_dive", r"\b(doel|achtergrond|opbouw|structuur|inhoud|werking|purpose|background|structure|content|"
     r"contain)\b.{0,60}\b(en|and|,)\b.{0,60}\b(doel|achtergrond|opbouw|structuur|inhoud|werking|opgebouwd|staat er|"
     r"purpose|background|structure|content|why|waarom)\b", 1.6, "doel en achtergrond"),
    # factual: one number, date, name, definition or yes/no
    ("factual", r"\b(hoeveel|how many|how much|wanneer|sinds wanneer|when|welk jaar|which year|hoe vaak|how often|"
     r"hoe lang|how long|binnen welke|within (what|which)|tot welk|wie|who|"
     r"waar(?! (kan|vind) ik| sta\w* (ze|die|deze|dat)\b)|"
     r"where(?! (can|do|could) (i|we|you) find)|which organi[sz]ation|"
     r"welke? (instantie|organisatie|publicatie|minister|artikel|categorie|wet|datum|dag|titel|nummer|waarde)|"
     r"which (publication|body|authority|minister|article|category|law|date|title|number|value)|"
     r"(wat|what) (is|was) (de|het|the) (titel|naam|datum|waarde|nummer|title|name|date|value|number)|"
     r"(welk|welke|which) ([\w-]+ ){0,3}(document|publicatie|publication|code|norm|standaard|standard|verdrag|"
     r"convention|richtlijn|guide|report|rapport))\b(?!-)", 1.2,
     "hoeveel"),
    ("factual", r"\b(\w*limiet\w*|\w*limit|grenswaarde\w*|referentieniveau\w*|reference levels?|drempel\w*|"
     r"threshold|termijn|deadline|percentage|defined|gedefinieerd|vermogen|frequen\w*|capacit\w*)\b", 1.0,
     "limiet"),
    ("factual", r"\b(wat (betekent|verstaat|houdt)|what (does|is|are)\b.{0,40}\bmean|definitie|definition|"
     r"yes or no|ja of nee|toegestaan|allowed|verplicht|required|nodig|needed|mag|moet|must)\b", 0.9, "wat betekent"),
    ("factual", r"^\W*(to|for|in|on|from|op|voor|aan|van|sinds) (which|what|welke?|wat)\b(?! (extent|mate)\b)", 0.6,
     "in welk"),
    ("factual", r"^\W*(wat|wie|waar|wanneer|welk|welke|hoeveel|what|who|where|when|which|is|are|does|do|mag|moet|"
     r"kan|can)\b", 0.5, "vraagwoord"),
]
_COMPILED = [(kind, re.compile(pattern, re.IGNORECASE), weight, label) for kind, pattern, weight, label in _SIGNALS]
FACTUAL_PRIOR = 0.4  # the catch-all's head start: a question with no signal at all is factual, but not surely
SURE_SCORE, SURE_MARGIN = 1.0, 0.5  # tuning half: 71 of 80 sure, all right; an interrogative alone is not sure
# Terms that contain a signal word without being one ("defence-in-depth", a title in quotes)
_TERMS = re.compile(r"\b(defen[cs]e[- ]in[- ]depth|diepteverdediging)\b|'[^']{3,120}'|\"[^\"]{3,120}\"|"
                    r"“[^”]{3,120}”", re.IGNORECASE)
_FOLLOW_UP_START = ("en ", "and ", "maar ", "but ", "ook ", "what about", "hoe zit het", "en wat", "and what")
_FOLLOW_UP_REFERENCE = {"daarover", "daarvan", "hierover", "hiervan", "daarbij", "daarin", "daarop", "hiermee", "daarmee",
                        "it", "that", "this", "they", "their", "them", "those"}


def words(text: str) -> list[str]:
    return [w.lower() for w in _WORD.findall(text)]


def mentioned_collections(question: str, collections: list[Collection]) -> list[str]:
    """Collections named or pointed at by a keyword, in configuration order."""
    tokens = set(words(question))
    tokens |= {part for token in tokens if "-" in token for part in token.split("-")}
    hits = []
    for c in collections:
        signals = {c.name.lower(), c.display_name.lower(), *c.keywords}
        if tokens & signals or any(" " in s and s in question.lower() for s in signals):
            hits.append(c.name)
    return hits


@dataclass(frozen=True, slots=True)
class TypeScore:
    kind: QueryType
    signal: str  # the strongest signal of the winning type ("" when none: the catch-all)
    confidence: float  # the winner's lead over the next type, 0..1
    words: str = ""  # the question's words that matched that signal (what the think block quotes)
    evidence: tuple[QueryType, ...] = ()  # the types with a signal in the question (the catch-all's prior is none)

    @property
    def sure(self) -> bool:
        return self.confidence >= 1.0


def score_types(question: str, mentioned: int, detailed: bool = False) -> TypeScore:
    """The query type with the highest total signal weight (pure; table-tested in tests/test_routing.py).
    `detailed`: the user asked for a detailed answer in an instruction of its own ("Graag uitgebreid.")."""
    text = " ".join(_TERMS.sub(" ", question).split())
    scores: dict[QueryType, float] = {"factual": FACTUAL_PRIOR, "exploratory": 0.0, "deep_dive": 0.0,
                                      "comparative": 0.0}
    best: dict[QueryType, tuple[float, str, str]] = {}  # type -> (weight, label, the words matched)
    if detailed:
        scores["deep_dive"], best["deep_dive"] = 2.0, (2.0, "uitgebreid", "uitgebreid")
    for kind, pattern, weight, label in _COMPILED:
        if match := pattern.search(text):
            scores[kind] += weight
            if weight > best.get(kind, (0.0, "", ""))[0]:
                best[kind] = (weight, label, " ".join(match.group(0).split()[:6]))
    if mentioned >= 2 and re.search(r"\b(en|and|of|or)\b", text, re.IGNORECASE):  # two named sources side by side
        scores["comparative"] += 0.8 if re.search(r"\b(hoe|how)\b", text, re.IGNORECASE) else 0.4
        best.setdefault("comparative", (0.4, "A en B", "A en B"))
    ranked = sorted(scores.items(), key=lambda kv: -kv[1])
    (kind, top), (_, second) = ranked[0], ranked[1]
    confidence = min(1.0, top / SURE_SCORE) * min(1.0, (top - second) / SURE_MARGIN)
    _, signal, words = best.get(kind, (0.0, "", ""))
    return TypeScore(kind, signal, round(confidence, 3), words, tuple(best))


def is_ambiguous(route: Route) -> bool:
    """The heuristics are not sure of the type."""
    return route.confidence < 1.0


def asks_model(route: Route) -> bool:
    """Whether the fast model may classify the question (when one is configured and MODEL_ROUTE is on): the
    heuristics are not sure, and the question holds a signal of a type other than the catch-all for the model to
    weigh. Without one the catch-all stands: on the 25 such questions among the routing sets' unsure ones, the
    1.5B model was right 17 times where the catch-all was right 16 times, at one call of ~380 prompt tokens each
    (2-3 s on 2 cores), and 57 of the 1,000 HotpotQA questions are such."""
    return is_ambiguous(route) and any(kind != "factual" for kind in route.evidence)


def model_type_plausible(kind: QueryType, heuristic: Route) -> bool:
    """Whether the model's type for a question the heuristics were unsure of can stand: a comparison needs
    something compared, some comparison signal or two named sources. The local 1.5B model called 11 of 48 such
    questions of eval/routing.jsonl comparative, overviews and facts among them, 10 with no comparison signal."""
    return kind != "comparative" or "comparative" in heuristic.evidence


def is_follow_up(question: str, history_has_user_turn: bool) -> bool:
    if not history_has_user_turn:
        return False
    tokens = words(question)
    lowered = question.lower().strip()
    return len(tokens) <= 12 and (lowered.startswith(_FOLLOW_UP_START) or bool(set(tokens) & _FOLLOW_UP_REFERENCE))


def standalone(question: str, previous: str, collections: list[Collection]) -> str:
    """Deterministic follow-up rewrite: the new question plus the topic words of the previous one."""
    topic = [w for w in focus_terms(previous, collections).split() if w.lower() not in _STOP_TOPIC]
    return f"{question.rstrip('?. ')} ({' '.join(topic)})?" if topic else question


_STOP_TOPIC = {"hoe", "wat", "wie", "welke", "waar", "wanneer", "en", "de", "het", "een", "van", "voor", "over", "in",
               "op", "is", "zijn", "how", "what", "who", "which", "the", "a", "an", "of", "for", "about", "and", "are", "do", "does"}


_RESTRICT = r"\b(alleen|uitsluitend|enkel|slechts|only|solely|exclusively|just)\b"


def restricted_to(question: str, collections: list[Collection], named: list[str]) -> list[str]:
    """The collections the user explicitly limits the search to ("alleen in de X-documenten", "only the X
    guidance"): a restricting word a few words before the collection's name."""
    lowered = question.lower()
    if not named or not re.search(_RESTRICT, lowered):
        return []
    return [c.name for c in collections if c.name in named and any(
        re.search(rf"{_RESTRICT}\W+(?:[\w-]+\W+){{0,3}}{re.escape(s)}(?![\w])", lowered)
        for s in {c.name.lower(), c.display_name.lower()})]


def search_scope(kind: QueryType, named: list[str], restricted: list[str], everything: list[str]) -> list[str]:
    """Which collections research searches, named ones first. Every collection, in parallel (a search costs
    milliseconds), and the evidence decides which ones the answer draws on; a named collection only goes first
    (its prior is raised in fact selection). Narrower only when the user restricts the scope explicitly, or for
    a comparison of two or more named sources: those are its sides (`side_by_side`)."""
    if restricted:
        return restricted
    if kind == "comparative" and len(named) >= 2:
        return named
    return named + [name for name in everything if name not in named]


def heuristic_route(question: str, collections: list[Collection], detailed: bool = False) -> Route:
    named = mentioned_collections(question, collections)
    typed = score_types(question, len(named), detailed)
    scope = search_scope(typed.kind, named, restricted_to(question, collections, named), [c.name for c in collections])
    return Route(
        query_type=typed.kind,
        collections=scope,
        preferred=[name for name in named if name in scope],
        reason=typed.signal,
        signal_words=typed.words,
        confidence=typed.confidence,
        search_query=focus_terms(question, collections),
        evidence=list(typed.evidence),
    )


_GENERIC = {"documenten", "document", "publicaties", "bronnen", "gaan", "gaat", "geef", "graag", "over", "documents",
            "publications", "sources", "give", "about", "tell", "me", "please", "zeggen", "zegt", "say", "says", "staat",
            "stand", "kun", "kunt", "can", "could", "you", "mij", "ik", "wil", "want", "know", "weten", "alles",
            "everything", "precies", "exactly", "eigenlijk", "actually", "allemaal", "all", "alle", "er", "there",
            "any", "iets", "anything", "we", "hebben", "have", "our", "onze", "collectie", "collection", "beschikbaar",
            "available", "looking", "zoek", "zoeken", "search"}
# The words of type signals: they say what kind of answer is wanted, not what it is about
_SIGNAL_WORD = re.compile(
    r"^(verschil\w*|vergelijk\w*|verhoud\w*|overeenkomst\w*|tegenover|compar\w*|differ\w*|similarit\w*|versus|vs|"
    r"contrast\w*|strenger|ruimer|stricter|stringent|afwijk\w*|wijk\w*|deviat\w*|hoeverre|extent|leg|uit|uitleg\w*|"
    r"toelichting|gedetailleerd\w*|detail\w*|uitgebreid\w*|diepgaand\w*|grondig\w*|thorough\w*|depth|"
    r"comprehensive\w*|uitvoerig\w*|explain\w*|beschrijf|describe|analy[sz]\w*|analyseer\w*|walk|through|"
    r"overzicht|overview|lijst\w*|list|opsomming|inventaris\w*)$", re.IGNORECASE)


def focus_terms(question: str, collections: list[Collection]) -> str:
    """What to search for: the question's content words and names, in their order, without collection names,
    question-type signal words, question words and other stop words ("How do A and B differ in their safety
    culture requirements?" -> "safety culture requirements"). Terms such as "defence-in-depth" stay whole."""
    drop = {c.name.lower() for c in collections} | {c.display_name.lower() for c in collections} | _GENERIC
    terms = {m.group(0).lower() for m in _TERMS.finditer(question) if m.group(0)[:1] not in "'\"“"}
    kept = []
    for w in _WORD.findall(question):
        lowered = w.lower().strip("'-")
        if lowered in terms or not (lowered in drop or lowered in STOPWORDS or _SIGNAL_WORD.match(lowered)):
            kept.append(w.strip("'"))
    return " ".join(kept) or question
