"""Open WebUI background tasks (title, tags, follow-ups, queries, autocomplete, emoji).

Recognised by the plain-chat model id, the `X-OpenWebUI-Task` header or the template heuristic; answered
with one cheap upstream call, or deterministically offline. Never through the RAG pipeline.
"""

from __future__ import annotations

import json
import logging
import re

from app.settings import Settings
from graph.answer import messages
from graph.answer.ledger import SOURCE_LINE
from graph.clients.llm import LLMClient, LLMError
from graph.collections import Catalog
from graph.models import Usage
from graph.text.language import detect_language
from graph.text.routing import focus_terms, mentioned_collections
from textkit import STOPWORDS

log = logging.getLogger(__name__)

_KINDS = [  # (task, pattern in the template) — first match wins
    ("emoji_generation", re.compile(r"reflect the speaker's|single emoji", re.I)),
    ("title_generation", re.compile(r'"title"|\btitle\b', re.I)),
    ("tags_generation", re.compile(r'"tags"|\btags\b', re.I)),
    ("follow_up_generation", re.compile(r'"follow_ups"|follow-?up', re.I)),
    ("query_generation", re.compile(r'"queries"|search quer', re.I)),
    ("autocomplete_generation", re.compile(r"autocomplet|continue the text", re.I)),
]
_HISTORY = re.compile(r"<chat_history>(.*?)</chat_history>", re.S | re.I)
_USER_LINE = re.compile(r"^\s*USER:\s*(.+)$", re.M)
_ANSWER = re.compile(r"^\s*ASSISTANT:(.*?)(?=^\s*USER:|\Z)", re.M | re.S)
TITLE_CHARS = 60  # Open WebUI shows about this much of a chat title in its sidebar


def detect_task(model: str, header: str | None, last_user: str, settings: Settings) -> str | None:
    """The task name, `chat` for plain chat on the lite model, or None for a real pipeline request."""
    if header and header.strip():
        return header.strip()
    if any(re.search(p, last_user, re.M) for p in settings.task_patterns):
        return task_kind(last_user)
    if model == settings.lite_model_id:
        return "chat"
    return None


def task_kind(prompt: str) -> str:
    return next((name for name, pattern in _KINDS if pattern.search(prompt)), "chat")


def _last_question(prompt: str) -> str:
    history = _HISTORY.search(prompt)
    lines = _USER_LINE.findall(history.group(1) if history else prompt)
    return (lines[-1] if lines else prompt).strip()


def offline_title(question: str) -> str:
    """The question as the chat's title: whole when it fits TITLE_CHARS, else cut at a word boundary before a
    word that would leave the topic dangling ("… eisen voor")."""
    words = re.sub(r"[?!.\s]+$", "", question.strip()).split()
    while words and len(" ".join(words)) > TITLE_CHARS:
        words.pop()
        while len(words) > 1 and words[-1].lower() in STOPWORDS:
            words.pop()
    title = " ".join(words)
    return title[:1].upper() + title[1:]


_SOURCE_META = re.compile(r"\(([^()]*)\)(?: — \S+)?\s*$")  # "(Organisation, 2016)" at the end of a sources line


def cited_titles(answer: str, catalog: Catalog) -> list[str]:
    """Title and section of each line of the sources list the service appended to an answer ("2. Title,
    Section (Organisation, 2016) — url"), of the collections in `catalog` only: a conversation may hold an answer
    given to someone who could see more, and a suggestion must not repeat what this caller may not see."""
    titles = []
    for _, line in SOURCE_LINE.findall(answer):
        meta = _SOURCE_META.search(line)
        if meta and catalog.resolve(meta.group(1).split(",")[0]):
            titles.append(re.split(r" \(| — ", line, maxsplit=1)[0])
    return titles


def offline_follow_ups(prompt: str, question: str, catalog: Catalog, limit: int = 3) -> list[str]:
    """Follow-up questions from this turn: the topic in more detail, the first document the answer cited, and
    collections that neither the question named nor the answer cited."""
    language = detect_language(question)
    history = _HISTORY.search(prompt)
    answers = _ANSWER.findall(history.group(1) if history else "")
    answer = answers[-1] if answers else ""
    follow = []
    topic = focus_terms(question, catalog.collections)
    if topic and topic != question:
        follow.append(messages.line("follow_up_detail", language, topic=topic))
    titles = cited_titles(answer, catalog)
    if titles:
        follow.append(messages.line("follow_up_document", language, title=titles[0]))
    named = set(mentioned_collections(question, catalog.collections))
    follow += [messages.line("follow_up", language, coll=catalog.display(name)) for name in catalog.names
               if name not in named and f"({catalog.display(name)}" not in answer]
    return follow[:limit]


def offline_answer(task: str, prompt: str, catalog: Catalog) -> str:
    """Deterministic answers in the JSON shapes Open WebUI parses; the topic and the collections they name
    come from the collections file."""
    question = _last_question(prompt)
    language = detect_language(question)
    if task == "title_generation" or (task == "chat" and '"title"' in prompt):
        title = offline_title(question) or ("Nieuwe vraag" if language == "nl" else "New question")
        return json.dumps({"title": title}, ensure_ascii=False)
    if task == "tags_generation":
        named = [catalog.display(n) for n in mentioned_collections(question, catalog.collections)]
        topic = [catalog.topic[language]] if language in catalog.topic else []
        return json.dumps({"tags": topic + named}, ensure_ascii=False)
    if task == "follow_up_generation":
        return json.dumps({"follow_ups": offline_follow_ups(prompt, question, catalog)}, ensure_ascii=False)
    if task == "query_generation":
        return json.dumps({"queries": [question]}, ensure_ascii=False)
    if task == "autocomplete_generation":
        return json.dumps({"text": ""})
    if task == "emoji_generation":
        return "⚛️"
    message = (
        "Er is geen taalmodel geconfigureerd; stel uw vraag aan het model neo-nl-agent."
        if language == "nl"
        else "No language model is configured; ask the neo-nl-agent model instead."
    )
    return message


async def answer_task(
    task: str, conversation: list[dict[str, str]], llm: LLMClient | None, catalog: Catalog
) -> tuple[str, Usage]:
    prompt = conversation[-1]["content"] if conversation else ""
    if llm is not None:
        try:
            result = await llm.complete(conversation, fast=True, max_tokens=300, step="task")
            return result.text, result.usage
        except LLMError as exc:
            log.warning("task %s: upstream failed (%s); answering deterministically", task, exc)
    return offline_answer(task, prompt, catalog), Usage()
