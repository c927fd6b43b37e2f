"""The notices of an answer: rag_core.answer.notices, re-exported where the generation package reads them."""
from __future__ import annotations

from rag_core.answer.notices import (
    DETAILS_EMPTY,
    DETAILS_NO_MODEL,
    NOTICE_CLOSEST,
    NOTICE_EMPTY,
    NOTICE_FALLBACK,
    NOTICE_MODEL_FOUND_NONE,
    NOTICE_NO_LLM,
    NOTICE_NO_MODEL,
    NOTICE_NOT_IN_SOURCES,
    NOTICE_NOT_RELEVANT,
    NOTICE_UNEXPECTED,
    details_extra,
    fallback_notice,
    fault_sentence,
)

__all__ = ["DETAILS_EMPTY", "DETAILS_NO_MODEL", "NOTICE_CLOSEST", "NOTICE_EMPTY", "NOTICE_FALLBACK", "NOTICE_MODEL_FOUND_NONE", "NOTICE_NOT_IN_SOURCES", "NOTICE_NOT_RELEVANT", "NOTICE_NO_LLM", "NOTICE_NO_MODEL", "NOTICE_UNEXPECTED", "details_extra",
           "fallback_notice", "fault_sentence"]
