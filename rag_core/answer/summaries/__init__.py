"""Questions about whole documents ("summarize this", "the key points of …", "its outline", "compare A and B"):
reading a stored document whole, without a model. document: its chunks, sections and parts; digest: the summary
quoted from it; compare: the topics two documents share, and outlines; prompts and text: what a model is sent to read
it part by part and what the answer says. The run inside an answer (with or without a model) is
rag_core.answer.generation.whole, the model's reading rag_core.answer.generation.reading; start: `docchat summarize`
and the MCP tool."""
from __future__ import annotations

from enum import StrEnum


class Shape(StrEnum):
    """What is asked about the whole document(s)."""

    SUMMARY = "summary"
    KEY_POINTS = "key_points"
    OUTLINE = "outline"
    COMPARE = "compare"


__all__ = ["Shape"]
