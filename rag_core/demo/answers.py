"""What a visitor of the hosted demo is told: the banner, the answer mode, and answers with server advice replaced.

Kept apart from rag_core.demo.hub (the demo's rules) so that both stay small; nothing here touches the library.
"""
from __future__ import annotations

import logging
import math
from collections.abc import Callable, Iterator
from dataclasses import replace

from rag_core.answer.generation import AnswerStream
from rag_core.core.config import Provider, Settings
from rag_core.core.errors import DemoTrouble, DocChatError
from rag_core.core.models import Answer, AnswerMode, Passage, StageEvent
from rag_core.core.text import plural
from rag_core.demo.quotas import MB, Usage

log = logging.getLogger(__name__)

# Notices from generation.py that name server settings (OLLAMA_HOST, DOCCHAT_*, `ollama serve`, the host URL) are
# advice for whoever runs DocChat, not for a demo visitor: they are replaced by these.
DEMO_NOTICE_LLM_DOWN = ("The demo's AI model is not available right now, so these are the most relevant sentences "
                        "quoted from the documents. Try again later for a written answer.")
DEMO_NOTICE_LLM_STOPPED = ("The demo's AI model stopped before the answer was finished, so the answer below is "
                           "incomplete. Ask again to retry.")
DEMO_NOTICE_LENGTH = "The answer reached the demo's length limit and was cut off."
# Offered as buttons on an empty chat; each is about the shared samples (samples/) and tests/integration/
# test_answers.py checks that each is answered correctly without a model.
SAMPLE_QUESTIONS = (
    "What does the Zen of Python say about errors?",
    "When was Python first released?",
    "How many files can I add in the demo?",
    "When is my library deleted?",
)
_SERVER_HINTS = ("OLLAMA", "OPENAI_", "DOCCHAT_", "ollama serve", "ollama pull", "://", "Settings")


def llm_mode(settings: Settings) -> str:
    """"remote" when the demo has a model server with an API key (Ollama, or an OpenAI-compatible one through
    DOCCHAT_CHAT_MODEL=openai:…), else "extractive" (answers quote the documents)."""
    key = settings.llm.openai_api_key if settings.chat_provider == Provider.OPENAI else settings.llm.ollama_api_key
    return "remote" if key and settings.chat_host and settings.chat_model_name else "extractive"


def demo_banner(settings: Settings) -> str:
    """One plain sentence or two for the demo banner: privacy, retention and which answer mode is active."""
    privacy = (f"Public demo: the files you add are private to this browser tab. Closing or reloading the tab starts "
               f"over, and your files are deleted after {plural(settings.demo.session_idle_minutes, 'minute')} "
               "without activity. Please don't upload confidential documents.")
    if llm_mode(settings) == "remote":
        return f"{privacy} Answers are written by the AI model {settings.chat_model_name} on the demo's server."
    return (f"{privacy} No AI model is connected to this demo, so answers quote the most relevant sentences from "
            "the documents (quotes only).")


def _size(n: int) -> str:
    return f"{n / MB:.1f} MB" if n >= MB or n == 0 else f"{max(1, round(n / 1024))} KB"


def usage_line(u: Usage, per_file_mb: int) -> str:
    """One sentence for the Library page: this visitor's use of their quota, their network's when other sessions
    from the same address hold documents too (and when those are deleted), and whether the whole demo is full."""
    network = others = ""
    if u.client_files > u.files:
        network = (f"; your network: {u.client_files} of {plural(u.max_client_files, 'document')}, "
                   f"{_size(u.client_bytes)} of {u.max_client_bytes // MB} MB")
        others = _others_note(u.client_files - u.files, u.others_freed_in_s, u.idle_minutes)
    full = "; the demo is full right now, so new documents must wait" if u.demo_full else ""
    return (f"Your demo space: {u.files} of {plural(u.max_files, 'document')}, {_size(u.bytes)} of "
            f"{u.max_bytes // MB} MB used{network}; files up to {per_file_mb} MB each; "
            f"{plural(u.max_questions_per_minute, 'question')} a minute{full}.{others}")


def _others_note(n: int, freed_in_s: float | None, idle_minutes: int) -> str:
    """Why the network's count is higher than this tab's, and when those documents stop counting."""
    if freed_in_s is None:
        return ""
    soon = plural(max(1, math.ceil(freed_in_s / 60)), "minute")
    if n == 1:
        return (" Your network's count includes 1 document added in another browser tab (perhaps one closed or "
                f"reloaded since); it is deleted {plural(idle_minutes, 'minute')} after that tab was last used: in "
                f"about {soon} if it stays unused.")
    return (f" Your network's count includes {n} documents added in other browser tabs (perhaps ones closed or "
            f"reloaded since); each is deleted {plural(idle_minutes, 'minute')} after its tab was last used: the "
            f"first in about {soon} if they stay unused.")


def public_answer(answer: Answer) -> Answer:
    """The answer with any server-side advice in its notice (or its details) replaced by a sentence meant for a demo
    visitor; the details themselves are dropped."""
    notice, details = answer.notice, str(answer.extra.get("details") or "")
    if "details" in answer.extra:  # the technical part of a notice is for whoever runs the server
        answer = replace(answer, extra={k: v for k, v in answer.extra.items() if k != "details"})
    if not notice or not any(h in notice + details for h in _SERVER_HINTS):
        return answer
    if answer.mode == AnswerMode.QUOTES:
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
        except Exception as e:  # the visitor gets a sentence, the log gets the traceback
            log.exception("Answering failed in a demo session")
            raise DemoTrouble("answering your question") from e

    @property
    def answer(self) -> Answer | None:
        """The finished answer (None until iteration ends)."""
        a = self._inner.answer
        return None if a is None else public_answer(a)

    def listen(self, listener: Callable[[StageEvent], None]) -> None:
        """Call `listener` with every step of the answer (see AnswerStream.listen)."""
        self._inner.listen(listener)

    @property
    def passages(self) -> list[Passage]:
        """The retrieved passages (own and shared documents only)."""
        return self._inner.passages

    def close(self) -> None:
        """Stop early; `answer` keeps the partial text."""
        self._inner.close()
