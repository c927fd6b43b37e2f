"""What an answer says about itself: the notices (one friendly sentence) and their technical details. Shared by the
answer paths (rag_core.answer.generation re-exports them; rag_core.answer.library_answers reads them here, outside the
generation package, which routes to it)."""
from __future__ import annotations

from typing import Any

from rag_core.core.errors import OllamaUnavailable, WrongServer

NOTICE_NO_LLM = ("Quoted answer: these are the most relevant sentences quoted from your documents; "
                 "no AI model wrote this answer.")
NOTICE_NO_MODEL = ("Quoted answer: no AI model is chosen, so these are the most relevant sentences quoted "
                   "from your documents. Pick a model in Settings to get written answers.")
NOTICE_FALLBACK = "{error} Meanwhile, here are the most relevant sentences quoted from your documents."
NOTICE_NOT_RELEVANT = ("None of your documents seems to cover this question, so no answer was made up. "
                       "Try rephrasing it, widen the document scope, or add a document that covers it.")
NOTICE_EMPTY = "There are no documents to search yet. Add files on the Library page, then ask again."
NOTICE_NOT_IN_SOURCES = ("The model found no answer in the retrieved passages, so it did not make one up. "
                         "Try rephrasing the question, or add a document that covers it.")
NOTICE_MODEL_FOUND_NONE = ("Quoted answer: the model said the retrieved passages do not answer this, but a sentence "
                           "of your documents seems to, so here it is, quoted. Check that it says what you asked.")
NOTICE_UNEXPECTED = ("Something unexpected went wrong while answering; nothing was changed in your library. "
                     "Try again, and if it keeps happening, restart DocChat.")

# The technical part of a notice (variable names, commands), kept apart in Answer.extra["details"]: the pages show it
# in an expandable "Details", the CLI after the sentence.
DETAILS_NO_MODEL = ("Set DOCCHAT_CHAT_MODEL (for example ollama:llama3.2:3b, or openai:<model> for an OpenAI-compatible "
                    "server) to choose the model that writes answers.")
DETAILS_EMPTY = "From a terminal: `docchat ingest FILE…` adds files to the library."

NOTICE_CLOSEST = ("Closest passages — not a direct answer: no sentence of your documents clearly answers this, so "
                  "these are the passages nearest to your question. Check whether they say what you asked.")


def fault_sentence(fault: Exception) -> str:
    """Why the model wrote nothing, for a reply: a server that cannot be reached is said in one short sentence (the
    chat's model line explains it once, with what to do; the commands are in the reply's details)."""
    if isinstance(fault, OllamaUnavailable) and type(fault) in (OllamaUnavailable, WrongServer):
        return OllamaUnavailable.short
    return str(fault)


def fallback_notice(fault: Exception) -> str:
    """The notice of a reply quoted because the model failed."""
    return NOTICE_FALLBACK.format(error=fault_sentence(fault))


def details_extra(text: str | None) -> dict[str, Any]:
    """The `extra` entry for a notice's technical part (nothing when there is none)."""
    return {"details": text} if text else {}
