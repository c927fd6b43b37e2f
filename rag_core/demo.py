"""What a visitor of the hosted demo is told: the banner, the answer mode, and answers with server advice replaced.

Kept apart from rag_core.sessions (the demo's rules) so that both stay small; nothing here touches the library.
"""
from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import replace

from .config import Settings
from .errors import DemoTrouble, DocChatError
from .generation import AnswerStream
from .models import Answer, Passage

log = logging.getLogger(__name__)

# Notices from generation.py that name server settings (OLLAMA_HOST, DOCCHAT_*, `ollama serve`, the host URL) are
# advice for whoever runs DocChat, not for a demo visitor: they are replaced by these.
DEMO_NOTICE_LLM_DOWN = ("The demo's AI model is not available right now, so these are the most relevant sentences "
                        "quoted from the documents (extractive answer). Try again later for a written answer.")
DEMO_NOTICE_LLM_STOPPED = ("The demo's AI model stopped before the answer was finished, so the answer below is "
                           "incomplete. Ask again to retry.")
DEMO_NOTICE_LENGTH = "The answer reached the demo's length limit and was cut off."
_SERVER_HINTS = ("OLLAMA", "DOCCHAT_", "ollama serve", "ollama pull", "://", "Settings")


def llm_mode(settings: Settings) -> str:
    """"remote" when the demo has an Ollama host with an API key, else "extractive" (answers quote the documents)."""
    return "remote" if settings.ollama_api_key and settings.ollama_host and settings.ollama_model else "extractive"


def demo_banner(settings: Settings) -> str:
    """One plain sentence or two for the demo banner: privacy, retention and which answer mode is active."""
    privacy = (f"Public demo: the files you add are private to this browser session and are deleted after "
               f"{settings.demo_session_idle_minutes} minutes without activity. Please don't upload confidential "
               "documents.")
    if llm_mode(settings) == "remote":
        return f"{privacy} Answers are written by the AI model {settings.ollama_model} on the demo's server."
    return (f"{privacy} No AI model is connected to this demo, so answers quote the most relevant sentences from "
            "the documents (extractive mode).")


def public_answer(answer: Answer) -> Answer:
    """The answer with any server-side advice in its notice replaced by a sentence meant for a demo visitor."""
    notice = answer.notice
    if not notice or not any(h in notice for h in _SERVER_HINTS):
        return answer
    if answer.mode == "extractive":
        notice = DEMO_NOTICE_LLM_DOWN
    elif answer.incomplete and "length limit" in notice:
        notice = DEMO_NOTICE_LENGTH
    elif answer.incomplete:
        notice = DEMO_NOTICE_LLM_STOPPED
    else:
        notice = DEMO_NOTICE_LLM_DOWN
    return replace(answer, notice=notice)


class DemoAnswerStream:
    """An AnswerStream for a demo session: same iteration, but no server details or tracebacks ever leak."""

    def __init__(self, inner: AnswerStream) -> None:
        self._inner = inner

    def __iter__(self) -> Iterator[str]:
        try:
            yield from self._inner
        except DocChatError:
            raise
        except Exception as e:  # noqa: BLE001 - the visitor gets a sentence, the log gets the traceback
            log.exception("Answering failed in a demo session")
            raise DemoTrouble("answering your question") from e

    @property
    def answer(self) -> Answer | None:
        """The finished answer (None until iteration ends)."""
        a = self._inner.answer
        return None if a is None else public_answer(a)

    @property
    def passages(self) -> list[Passage]:
        """The retrieved passages (own and shared documents only)."""
        return self._inner.passages

    def close(self) -> None:
        """Stop early; `answer` keeps the partial text."""
        self._inner.close()
