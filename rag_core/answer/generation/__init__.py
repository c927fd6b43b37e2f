"""Question -> grounded Answer, written by a chat model or quoted from the documents.

run: the answer's state (the frozen AnswerRequest, the AnswerRun its steps fill); steps: the steps of a fact question;
whole: the chains of questions about whole documents or the library (reading: a document read by a model); finish:
the Answer made and checked; answer: the driver, AnswerStream, start_answer, answer. prompt: prompts, context budget,
history, follow-up rewriting; chat: the chat model backend; extractive: the answer without a model; outcome: how the
model's stream is read and how it ended; repetition: the loop detector. The entry points are exported here; import
everything else from its module."""
from __future__ import annotations

from rag_core.answer.generation.answer import AnswerStream, answer, start_answer

__all__ = ["AnswerStream", "answer", "start_answer"]
