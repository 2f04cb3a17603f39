"""OpenAI `url_citation` annotations: which words each `[n]` marker vouches for, on a whole message and on a
stream, read by openai-python as typed `message.annotations`."""

from __future__ import annotations

import json

import httpx
import openai
import pytest

from app.annotations import cited_spans, deep_link, display_title, source_links, text_fragment, url_citations
from graph.answer.events import SourceFound
from tests.conftest import QUESTION, chunks, content_of, sse_events
from tests.fakes.fake_llm import FakeLLM, Reply
from tests.test_api import post
from tests.test_llm_mode import script


@pytest.mark.parametrize(("text", "cited"), [
    # a marker cites its sentence; the next sentence starts after the boundary
    ("De vergunning vervalt op 31 december 2033 [1]. De ANVS houdt toezicht [2][3].",
     [("De vergunning vervalt op 31 december 2033", (1,)), ("De ANVS houdt toezicht", (2, 3))]),
    ("The licence lapses on 31 December 2033 [1]. The regulator supervises [2].",
     [("The licence lapses on 31 December 2033", (1,)), ("The regulator supervises", (2,))]),
    # a marker after the full stop (extractive answers): the sentence with its stop
    ("- Artikel 15a bepaalt dat de vergunning vervalt. [1]\n- Een aanvraag wordt niet behandeld. [2]",
     [("Artikel 15a bepaalt dat de vergunning vervalt.", (1,)), ("Een aanvraag wordt niet behandeld.", (2,))]),
    # clauses: the words since the previous marker
    ("A houdt dit in [1], terwijl B iets anders zegt [2].", [("A houdt dit in", (1,)), ("terwijl B iets anders zegt", (2,))]),
    ("IAEA requires it [1], whereas the ANVS does not [2].", [("IAEA requires it", (1,)), ("whereas the ANVS does not", (2,))]),
    # an uncited sentence before the cited one is not cited; two markers apart on the same words
    ("Eerste zin zonder bron. Tweede zin met bron [1] [2].", [("Tweede zin met bron", (1, 2))]),
    # list and heading markup is not cited text; an abbreviation does not end the sentence
    ("**ANVS**\n1. Tekst over art. 15 van de wet [1]\n## Kop met bron [2]",
     [("Tekst over art. 15 van de wet", (1,)), ("Kop met bron", (2,))]),
    # a marker with no words before it on its line cites nothing
    ("[1] losse verwijzing", []),
    ("Geen bronnen hier.", []),
])
def test_a_marker_cites_the_words_before_it(text: str, cited: list[tuple[str, tuple[int, ...]]]) -> None:
    assert [(text[s.start:s.end], s.numbers) for s in cited_spans(text)] == cited


def test_withdrawn_sentences_and_the_correction_carry_no_citation() -> None:
    claim = "De exploitant betaalt een boete van 99 miljoen euro [1]."
    text = f"De vergunning vervalt op 31 december 2033 [1]. {claim}\n\n**Ingetrokken:** ~~{claim}~~"
    correction = (text.index("\n\n"), len(text))
    spans = cited_spans(text, withdrawn=[claim], skip=[correction])
    assert [text[s.start:s.end] for s in spans] == ["De vergunning vervalt op 31 december 2033"]
    # without the withdrawal both the claim and its quote in the correction would be cited
    assert len(cited_spans(text)) == 3


@pytest.mark.parametrize(("url", "page", "pages", "link", "title"), [
    ("https://www.iaea.org/gsr-2.pdf", 6, "p. 6", "https://www.iaea.org/gsr-2.pdf#page=6", "GSR Part 2, p. 6"),
    ("https://wetten.overheid.nl/BWBR0002402#Artikel15a", 3, "p. 3", "https://wetten.overheid.nl/BWBR0002402#Artikel15a",
     "GSR Part 2, p. 3"),
    ("https://www.anvs.nl/borssele", None, "", "https://www.anvs.nl/borssele", "GSR Part 2"),
    ("", 2, "p. 2", "", "GSR Part 2, p. 2"),  # no address: none is made up
])
def test_a_citation_links_to_its_page(url: str, page: int | None, pages: str, link: str, title: str) -> None:
    source = SourceFound(1, "GSR Part 2", "iaea", url, "e1", page=page, pages=pages)
    assert (deep_link(source.url, source.page), display_title(source)) == (link, title)


LAW = "https://wetten.overheid.nl/BWBR0002402"


@pytest.mark.parametrize(("sources", "links"), [
    # distinct addresses stay as they are (a paged one with its page)
    ([(LAW, None, "Artikel 15a"), ("https://www.iaea.org/gsr-2.pdf", 6, "Requirement 12")],
     [LAW, "https://www.iaea.org/gsr-2.pdf#page=6"]),
    # two summaries pointing at one law: each gets a text fragment of its own words
    ([(LAW, None, "Artikel 15a, eerste lid: de vergunning vervalt"), (LAW, None, "De Kernenergiewet regelt - in hoofdlijnen")],
     [LAW + "#:~:text=Artikel%2015a%2C%20eerste%20lid%3A%20de%20vergunning%20vervalt",
      LAW + "#:~:text=De%20Kernenergiewet%20regelt%20%2D%20in%20hoofdlijnen"]),
    # two passages on one page of one PDF: the fragment follows the page
    ([("https://x.nl/a.pdf", 3, "Eerste passage"), ("https://x.nl/a.pdf", 3, "Tweede passage")],
     ["https://x.nl/a.pdf#page=3:~:text=Eerste%20passage", "https://x.nl/a.pdf#page=3:~:text=Tweede%20passage"]),
    # alike to the word: the later one gets its number
    ([(LAW, None, "Artikel 15a"), (LAW, None, "Artikel 15a")], [LAW + "#:~:text=Artikel%2015a", LAW + "#:~:text=Artikel%2015a&bron=2"]),
    ([("https://x.nl/a.pdf", 3, ""), ("https://x.nl/a.pdf", 3, "")],
     ["https://x.nl/a.pdf#page=3:~:text=Bron%201", "https://x.nl/a.pdf#page=3:~:text=Bron%202"]),  # the titles
    # no address: the document's name, never an empty url (clients would merge every such source into one)
    ([("", None, "Uploaded memo"), ("", None, "Another memo")], ["urn:neo:uploads/d1", "urn:neo:uploads/d2"]),
])
def test_every_source_has_a_link_of_its_own(sources: list[tuple[str, int | None, str]], links: list[str]) -> None:
    found = [SourceFound(n, f"Bron {n}", "uploads", url, f"uploads/d{n}#c1", snippet=snippet, page=page)
             for n, (url, page, snippet) in enumerate(sources, 1)]
    assert list(source_links(found).values()) == links


def test_two_passages_of_one_document_without_an_address_stay_apart() -> None:
    found = [SourceFound(1, "Memo", "uploads", "", "uploads/memo#c1"), SourceFound(2, "Memo", "uploads", "", "uploads/memo#c7")]
    assert list(source_links(found).values()) == ["urn:neo:uploads/memo#c1", "urn:neo:uploads/memo#c7"]


@pytest.mark.parametrize(("text", "link"), [
    ("**Artikel 15a**\n> eerste  lid, `b`", "https://a.nl/p#:~:text=Artikel%2015a%20eerste%20lid%2C%20b"),
    ("", "https://a.nl/p"),  # nothing to point at: the page itself
])
def test_a_text_fragment_holds_plain_words(text: str, link: str) -> None:
    assert text_fragment("https://a.nl/p", text) == link


def test_markers_without_a_cited_source_get_no_annotation_and_offsets_move_the_spans() -> None:
    text = "Zin een [1]. Zin twee [2]."
    notes = url_citations(text, [SourceFound(1, "Kernenergiewet", "wetten", "https://wetten.nl/k", "e1")], offset=10)
    assert notes == [{"type": "url_citation", "url_citation": {
        "url": "https://wetten.nl/k", "title": "Kernenergiewet", "start_index": 10, "end_index": 17}}]


def _assert_spans_cut_cited_words(content: str, annotations: list) -> None:
    """Each span is the text just before a marker of its source's number (after optional spacing and stops)."""
    assert annotations
    for note in annotations:
        cite = note.url_citation if hasattr(note, "url_citation") else note["url_citation"]
        start, end = (cite.start_index, cite.end_index) if hasattr(cite, "start_index") else (
            cite["start_index"], cite["end_index"])
        words = content[start:end]
        assert words and words == words.strip() and "[" not in words and "\n" not in words
        assert content[end:].lstrip(" .").startswith("[")


def test_openai_python_reads_typed_annotations_and_a_stream_gives_the_same(offline: str) -> None:
    client = openai.OpenAI(base_url=offline + "/v1", api_key="none", max_retries=0)
    message = client.chat.completions.create(model="neo-nl-agent",
                                             messages=[{"role": "user", "content": QUESTION}]).choices[0].message
    annotations = message.annotations
    assert annotations and all(a.type == "url_citation" for a in annotations)
    _assert_spans_cut_cited_words(message.content, annotations)
    assert any("31 december 2033" in message.content[a.url_citation.start_index:a.url_citation.end_index]
               for a in annotations)
    assert all(a.url_citation.url.startswith("http") and a.url_citation.title for a in annotations)
    # a stream whose content is the answer alone (the progress as reasoning_content): the same annotations, once,
    # in a chunk of their own before the finish
    stream = list(client.chat.completions.create(model="neo-nl-agent", stream=True, extra_body={"include_reasoning": True},
                                                 messages=[{"role": "user", "content": QUESTION}]))
    content = "".join(c.choices[0].delta.content or "" for c in stream if c.choices)
    streamed = [(c.choices[0].delta.model_extra or {}).get("annotations") for c in stream if c.choices]
    assert [n for n in streamed if n] == [[a.model_dump() for a in annotations]]
    assert content == message.content
    # with the think block in the content, the spans move past it and still cut the same words
    payloads = chunks(sse_events(post(offline, {"model": "neo-nl-agent", "stream": True,
                                                "messages": [{"role": "user", "content": QUESTION}]})))
    tagged = content_of(payloads)
    (notes,) = [c["choices"][0]["delta"]["annotations"] for c in payloads
                if c["choices"] and "annotations" in c["choices"][0]["delta"]]
    assert tagged.startswith("<think>") and notes[0]["url_citation"]["start_index"] > tagged.index("</think>")
    assert [tagged[n["url_citation"]["start_index"]:n["url_citation"]["end_index"]] for n in notes] == \
        [message.content[a.url_citation.start_index:a.url_citation.end_index] for a in annotations]


def test_a_withdrawn_claim_has_no_annotation_streamed_or_not(llm_service, fake_llm: FakeLLM) -> None:
    claim = "De exploitant betaalt dan een boete van 99 miljoen euro [1]."
    script(fake_llm, answer=Reply(text=f"De vergunning van Borssele vervalt op 31 december 2033 [1]. {claim}"))
    base = llm_service()
    whole = post(base, {"model": "neo-nl-agent", "messages": [{"role": "user", "content": QUESTION}]}).json()
    message = whole["choices"][0]["message"]
    cited = [message["content"][a["url_citation"]["start_index"]:a["url_citation"]["end_index"]]
             for a in message["annotations"]]
    assert cited == ["De vergunning van Borssele vervalt op 31 december 2033"] and "99 miljoen" not in message["content"]
    payloads = chunks(sse_events(post(base, {"model": "neo-nl-agent", "stream": True, "include_reasoning": False,
                                             "messages": [{"role": "user", "content": QUESTION}]})))
    content = content_of(payloads)
    assert content.count("99 miljoen") == 2  # sent, then quoted in the correction
    (notes,) = [c["choices"][0]["delta"]["annotations"] for c in payloads
                if c["choices"] and "annotations" in c["choices"][0]["delta"]]
    assert [content[n["url_citation"]["start_index"]:n["url_citation"]["end_index"]] for n in notes] == cited


def test_no_annotations_for_a_json_answer_nor_beside_open_webui_source_events(llm_service, fake_llm: FakeLLM) -> None:
    document = json.dumps({"answer": "De vergunning vervalt op 31 december 2033 [1].", "date": "2033-12-31"})
    script(fake_llm, answer=Reply(text=document))
    base = llm_service()
    response = post(base, {"model": "neo-nl-agent", "response_format": {"type": "json_object"},
                           "messages": [{"role": "user", "content": QUESTION}]}).json()
    assert json.loads(response["choices"][0]["message"]["content"]) == json.loads(document)
    assert response["choices"][0]["message"]["annotations"] == []
    # Open WebUI makes a source of each annotation: where it gets this service's own source events, none are sent
    request = {"model": "neo-nl-agent", "stream": True, "messages": [{"role": "user", "content": QUESTION}]}
    with httpx.stream("POST", base + "/v1/chat/completions", json=request, timeout=30,
                      headers={"X-OpenWebUI-Chat-Id": "c1"}) as answer:
        lines = [line for line in answer.iter_lines() if line.startswith("data: {")]
    assert any('"type":"source"' in line for line in lines) and not any('"annotations"' in line for line in lines)
