"""The last step of every chain: the run's text becomes its Answer, every citation checked against its passage
(rag_core.answer.grounding.evidence), a cited passage with instructions addressed to an AI marked, and the language
notice added (then the reranker's, when it was late or failed)."""
from __future__ import annotations

import time
from dataclasses import replace
from typing import TYPE_CHECKING, Any, cast

from rag_core.answer.generation.extractive import tidy_answer_text
from rag_core.answer.generation.outcome import MemoEncoder, evidence_notice
from rag_core.answer.generation.run import AnswerRun
from rag_core.answer.grounding.evidence import verify_answer
from rag_core.answer.language import with_language_notice
from rag_core.core.models import Answer, AnswerMode, Citation, Step
from rag_core.injection.detect import mark_answer

if TYPE_CHECKING:  # pragma: no cover
    from rag_core.store.embeddings import Embedder


def finish(run: AnswerRun, text: str, mode: AnswerMode, *, embedder: Embedder | MemoEncoder | None = None,
           citations: tuple[Citation, ...] = (), relevance: float | None = None, incomplete: bool = False,
           notice: str | None = None, context_passages: int = 0, invalid_markers: int = 0,
           extra: dict[str, Any] | None = None) -> Answer:
    """The run's Answer from `text` (also kept as `run.answer`): checked unless it is a not-found reply or empty."""
    ask = run.ask
    run.timings.setdefault("total", round((time.perf_counter() - run.started) * 1000, 2))
    meta: dict[str, Any] = {"timings": dict(run.timings)}
    if run.prompt is not None:
        meta.update(num_ctx=run.prompt.num_ctx, prompt_tokens=run.prompt.tokens, dropped=run.prompt.dropped)
    meta.update(extra or {})
    if run.checked:
        meta.setdefault("answerability", dict(run.checked))
    tidy = tidy_answer_text(text, mode)  # before verification: its offsets must index the final text
    if tidy != text:
        meta.setdefault("raw_text", text)
    answer = Answer(text=tidy, mode=mode, citations=citations, passages=tuple(run.passages),
                    incomplete=incomplete, notice=notice, invalid_markers=invalid_markers, question=ask.text,
                    standalone_question=run.standalone, extra=meta, relevance=relevance,
                    context_passages=context_passages)
    if mode != AnswerMode.NOT_FOUND and tidy.strip() and answer.passages:
        run.enter(Step.CHECKING)
        # Check every [n] against its passage; uncited sentences get a matched source when one backs them.
        t = time.perf_counter()
        answer = verify_answer(answer, cast("Embedder", embedder or ask.library.embedder))
        run.timings["verify"] = round((time.perf_counter() - t) * 1000, 2)
        if mode == AnswerMode.MODEL and not answer.incomplete:
            answer = replace(answer, notice=answer.notice or evidence_notice(answer))
        answer = mark_answer(answer)  # a cited passage with instructions addressed to an AI: say so
    answer = replace(answer, notice=with_language_notice(  # another language than its passages' or documents'
        answer.notice, ask.text, answer.passages, ask.library.store, ask.seen_by, ask.scope))
    if run.rerank_notice:  # the reranker was late or failed (rag_core/retrieve/reranker.py): said last
        answer = replace(answer, notice=" ".join(n for n in (answer.notice, run.rerank_notice) if n))
    run.answer = answer
    return answer
