"""A summary asked for by name rather than in words: `docchat summarize DOC_ID`, the MCP tool `summarize`. The same
AnswerStream as any question, its intent given instead of read from the question."""
from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from rag_core.answer.doc_names import Reference
from rag_core.answer.generation.answer import AnswerStream
from rag_core.answer.intent import Intent, IntentKind
from rag_core.answer.summaries import Shape
from rag_core.core.config import Settings
from rag_core.core.errors import DocumentNotFound

if TYPE_CHECKING:  # pragma: no cover
    from langchain_core.language_models import BaseChatModel

    from rag_core.store.view import LibraryView

QUESTIONS = {Shape.SUMMARY: "Summarize “{title}”", Shape.KEY_POINTS: "What are the key points of “{title}”?",
             Shape.OUTLINE: "What is the outline of “{title}”?", Shape.COMPARE: "Compare {titles}"}


def start_summary(library: LibraryView, doc_ids: Sequence[str], settings: Settings, shape: Shape = Shape.SUMMARY,
                  use_llm: bool = True, owners: list[str | None] | None = None,
                  chat_model: BaseChatModel | None = None) -> AnswerStream:
    """The answer stream of a summary (key points, outline; a comparison of two or more) of these documents
    (DocumentNotFound for an id this person cannot see); iterate it as any AnswerStream."""
    infos = []
    for doc_id in doc_ids:
        info = library.store.get(doc_id, owners)
        if info is None:
            raise DocumentNotFound(doc_id)
        infos.append(info)
    titles = [i.title or i.file_name for i in infos]
    question = QUESTIONS[shape].format(title=titles[0], titles=" and ".join(f"“{t}”" for t in titles))
    return AnswerStream(library, question, settings, doc_ids=list(doc_ids), owners=owners, use_llm=use_llm,
                        chat_model=chat_model,
                        intent=Intent(IntentKind(shape.value), tuple(doc_ids), reference=Reference.NAMED))
