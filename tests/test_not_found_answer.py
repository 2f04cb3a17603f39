"""The not-found answer reaches the user whole, streamed and not (issue 58): an unanswerable question asked
offline (no LLM) of the real service over HTTP, with the official SDK.

The address filter holds back the word being written until the next piece shows where it ends; the branch that
writes the not-found sentence never called the model, nothing closed the filters and the sentence lost its last
word ("…geen passages gevonden die deze vraag ")."""

from __future__ import annotations

import openai
import pytest

from graph.answer import messages

UNANSWERABLE = {
    "nl": "Wat is de actuele spotprijs van uranium per pond?",
    "en": "What is the current spot price of uranium per pound?",
}


def not_found_sentence(language: str) -> tuple[str, str]:
    """The not-found template's text before and after the collection names it lists."""
    start, end = messages.line("nothing", language, names="\0").split("\0")  # type: ignore[arg-type]
    return start, end


def assert_whole(answer: str, language: str) -> None:
    start, end = not_found_sentence(language)
    assert answer.strip().startswith(start), answer
    names = answer.strip()[len(start):].split(end, 1)[0]
    assert names and answer.strip().startswith(f"{start}{names}{end}"), answer  # up to its last word and full stop


@pytest.mark.parametrize("language", ["nl", "en"])
def test_the_not_found_answer_keeps_its_last_word_streamed(offline: str, language: str) -> None:
    client = openai.OpenAI(base_url=offline + "/v1", api_key="none", max_retries=0)
    stream = client.chat.completions.create(
        model="neo-nl-agent", messages=[{"role": "user", "content": UNANSWERABLE[language]}], stream=True)
    text = "".join(c.choices[0].delta.content or "" for c in stream if c.choices)
    assert_whole(text.split("</think>", 1)[1], language)


@pytest.mark.parametrize("language", ["nl", "en"])
def test_the_not_found_answer_keeps_its_last_word_whole(offline: str, language: str) -> None:
    client = openai.OpenAI(base_url=offline + "/v1", api_key="none", max_retries=0)
    completion = client.chat.completions.create(
        model="neo-nl-agent", messages=[{"role": "user", "content": UNANSWERABLE[language]}])
    assert_whole(completion.choices[0].message.content or "", language)
