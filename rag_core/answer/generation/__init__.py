"""Question -> grounded Answer, from any LangChain chat model (ChatOllama by default) or quoted from the documents.

prompt: prompts, context budget, history, follow-up rewriting; chat: the chat model backend; extractive: the
answer without a model; answer: AnswerStream, start_answer, answer; outcome: how the model's stream is read, how it
ended and what of its text is kept; repetition: the loop detector. Everything public is re-exported here."""
from __future__ import annotations

from rag_core.answer.generation.answer import (
    AnswerStream,
    answer,
    start_answer,
)
from rag_core.answer.generation.extractive import (
    CLOSEST_LABEL,
    EXTRACTIVE_LABEL,
    EXTRACTIVE_MARGIN,
    EXTRACTIVE_MAX_CHARS,
    EXTRACTIVE_PASSAGES,
    EXTRACTIVE_SENTENCES,
    extractive_answer,
    quotable_spans,
    tidy_answer_text,
)
from rag_core.answer.generation.notices import (
    NOTICE_CLOSEST,
    NOTICE_EMPTY,
    NOTICE_FALLBACK,
    NOTICE_MODEL_FOUND_NONE,
    NOTICE_NO_LLM,
    NOTICE_NO_MODEL,
    NOTICE_NOT_IN_SOURCES,
    NOTICE_NOT_RELEVANT,
    NOTICE_UNEXPECTED,
)
from rag_core.answer.generation.outcome import (
    NOTICE_LEFT_OUT_MANY,
    NOTICE_LEFT_OUT_ONE,
    NOTICE_LENGTH,
    NOTICE_LOOP,
    NOTICE_STOPPED,
    NOTICE_UNBACKED_MANY,
    NOTICE_UNBACKED_ONE,
    NOTICE_UNSUPPORTED,
    NOTICE_WITHHELD,
)
from rag_core.answer.generation.prompt import (
    CHARS_PER_TOKEN,
    MESSAGE_OVERHEAD_TOKENS,
    NOT_FOUND_REPLY,
    NUM_CTX_MIN,
    REWRITE_MAX_TOKENS,
    REWRITE_SYSTEM_PROMPT,
    REWRITE_TEMPLATE,
    SOURCE_TEMPLATE,
    SOURCES_HEADER,
    SYSTEM_PROMPT,
    USER_TEMPLATE,
    Prompt,
    bound_history,
    build_prompt,
    estimate_tokens,
    heuristic_standalone,
    looks_like_follow_up,
    num_ctx_for,
    render_source,
    rewrite_question,
)
from rag_core.core.models import Answer, AnswerMode
from rag_core.core.text import is_refusal
from rag_core.llm.chat import (
    MODEL_FAILED,
    ChatBackend,
    ThinkFilter,
    backend_for,
    chat_messages,
    chat_model,
    strip_thinking,
)

__all__ = [
    "CHARS_PER_TOKEN", "CLOSEST_LABEL", "EXTRACTIVE_LABEL", "EXTRACTIVE_MARGIN", "EXTRACTIVE_MAX_CHARS", "EXTRACTIVE_PASSAGES",
    "EXTRACTIVE_SENTENCES", "MESSAGE_OVERHEAD_TOKENS", "MODEL_FAILED", "NOTICE_CLOSEST",
    "NOTICE_EMPTY", "NOTICE_FALLBACK", "NOTICE_LEFT_OUT_MANY", "NOTICE_LEFT_OUT_ONE", "NOTICE_LENGTH", "NOTICE_LOOP", "NOTICE_MODEL_FOUND_NONE", "NOTICE_NOT_IN_SOURCES", "NOTICE_NOT_RELEVANT",
    "NOTICE_NO_LLM", "NOTICE_NO_MODEL", "NOTICE_STOPPED", "NOTICE_UNBACKED_MANY", "NOTICE_UNBACKED_ONE",
    "NOTICE_UNEXPECTED", "NOTICE_UNSUPPORTED", "NOTICE_WITHHELD", "NOT_FOUND_REPLY",
    "NUM_CTX_MIN", "REWRITE_MAX_TOKENS", "REWRITE_SYSTEM_PROMPT", "REWRITE_TEMPLATE", "SOURCES_HEADER",
    "SOURCE_TEMPLATE", "SYSTEM_PROMPT", "USER_TEMPLATE", "Answer", "AnswerMode", "AnswerStream", "ChatBackend", "Prompt",
    "ThinkFilter", "answer", "backend_for", "bound_history", "build_prompt", "chat_messages", "chat_model",
    "estimate_tokens", "extractive_answer", "heuristic_standalone", "is_refusal", "looks_like_follow_up",
    "num_ctx_for", "quotable_spans", "render_source", "rewrite_question", "start_answer",
    "strip_thinking", "tidy_answer_text",
]
