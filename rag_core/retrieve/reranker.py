"""The reranker (DOCCHAT_RERANKER, off by default): a cross-encoder reorders the best fused passages of a question.

It is either a rerank server (rag_core/retrieve/reranker_endpoint.py: llama.cpp's `llama-server --reranking`,
Infinity, TEI, vLLM) or a local ONNX cross-encoder in a folder (rag_core/retrieve/reranker_onnx.py). Retrieval hands it
the texts of the best DOCCHAT_RERANK_TOP fused, de-duplicated passages (rag_core/retrieve/search.py) and gets back
their new order. (rag_core/retrieve/rerank.py is another thing: the lexical re-rank of the "rerank" search method.)

A question waits for it at most `budget(settings)` seconds: DOCCHAT_RERANK_TIMEOUT, and never more than a quarter of
DOCCHAT_LLM_TIMEOUT (the answer's own wait for the model), so the reply keeps its deadline. The scoring runs on a
worker thread; when it is late or fails (unreachable, an HTTP error, an answer that is not one score per passage, a
folder without a model: RerankerFailed, rag_core/core/errors.py), the passages stay in the fused order and the
reply's notice gets one sentence (the answer's steps carry it: AnswerRun.rerank_notice). The passages it ordered carry
`Match.reranked`, shown in the sources.
"""
from __future__ import annotations

import logging
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Protocol, TypeVar

from rag_core.core.config import Settings
from rag_core.core.errors import RerankerFailed
from rag_core.core.models import Passage

log = logging.getLogger(__name__)
T = TypeVar("T")

BUDGET_SHARE = 0.25  # of DOCCHAT_LLM_TIMEOUT at most (the answer's own deadline for the model's first word)
WORKERS = 4  # questions reranked at the same time (one process serves several people)
NOTICE_SLOW = "The reranker took longer than {seconds:g} seconds, so the passages are in search order."
NOTICE_FAILED = "The reranker could not be used ({why}), so the passages are in search order."


class Scorer(Protocol):
    """What reranks: one relevance score per text (higher: more relevant), before `deadline` (time.monotonic())."""

    def scores(self, query: str, texts: list[str], deadline: float) -> list[float]: ...  # pragma: no cover


@dataclass(frozen=True)
class Reordered:
    """The reranker's order of the first `len(order)` candidates (empty: left as they were) and its notice."""

    order: tuple[int, ...] = ()
    notice: str | None = None

    def apply(self, items: list[T]) -> list[T]:
        """`items` in the new order (those past the reranked ones keep theirs)."""
        if not self.order:
            return items
        return [items[i] for i in self.order] + items[len(self.order):]


UNCHANGED = Reordered()
_lock = threading.Lock()
_loading = threading.Lock()  # held while a reranker is made (a cross-encoder's model loads once, in seconds)
_scorers: dict[tuple[str, str, str | None], Scorer] = {}  # one per reranker, kept for the process (a model loads once)
_pool: list[ThreadPoolExecutor] = []


def is_on(settings: Settings) -> bool:
    """Whether a reranker is configured."""
    return bool(settings.retrieval.reranker.strip())


def budget(settings: Settings) -> float:
    """Seconds a question may wait for the reranker."""
    return min(settings.retrieval.rerank_timeout_s, settings.llm.timeout_s * BUDGET_SHARE)


def make_scorer(settings: Settings) -> Scorer:
    """The reranker the settings name: a rerank server by its http(s) address, else a cross-encoder folder (each
    imported here, when first made: with the reranker off, searching imports neither)."""
    where = settings.retrieval.reranker.strip()
    if where.startswith(("http://", "https://")):
        from rag_core.retrieve.reranker_endpoint import EndpointReranker

        return EndpointReranker(where, settings.retrieval.rerank_model, settings.retrieval.rerank_api_key)
    from rag_core.retrieve.reranker_onnx import OnnxCrossEncoder

    return OnnxCrossEncoder(Path(where).expanduser())


def _score(settings: Settings, query: str, texts: list[str], deadline: float) -> list[float]:
    """On a worker thread: the (cached) reranker's scores."""
    s = settings.retrieval
    key = (s.reranker.strip(), s.rerank_model, s.rerank_api_key)
    with _lock:
        scorer = _scorers.get(key)
    if scorer is None:
        with _loading:  # one load at a time: a question that gave up on a slow load does not start a second one
            with _lock:
                scorer = _scorers.get(key)
            if scorer is None:
                scorer = make_scorer(settings)
                with _lock:
                    _scorers[key] = scorer
    return scorer.scores(query, texts, deadline)


def _executor() -> ThreadPoolExecutor:
    with _lock:
        if not _pool:
            _pool.append(ThreadPoolExecutor(WORKERS, thread_name_prefix="docchat-rerank"))
        return _pool[0]


def reorder(settings: Settings, query: str, texts: list[str]) -> Reordered:
    """The new order of the first DOCCHAT_RERANK_TOP `texts` by the reranker; unchanged (with a notice when it was
    late or failed) otherwise. Never raises."""
    texts = texts[:settings.retrieval.rerank_top]
    if not is_on(settings) or len(texts) < 2:
        return UNCHANGED
    seconds = budget(settings)
    started = time.monotonic()
    future = _executor().submit(_score, settings, query, texts, started + seconds)
    try:
        scores = future.result(timeout=seconds)
    except FutureTimeout:
        return _fallback(NOTICE_SLOW.format(seconds=seconds), "no answer in time")
    except RerankerFailed as e:
        return _fallback(NOTICE_SLOW.format(seconds=seconds) if e.timed_out else NOTICE_FAILED.format(why=e.why), e.why)
    except Exception:  # a reranker must never stop an answer: logged with its traceback, the fused order kept
        log.exception("The reranker failed")
        return _fallback(NOTICE_FAILED.format(why="an unexpected error"), "unexpected")
    if len(scores) != len(texts):
        return _fallback(NOTICE_FAILED.format(why="it gave the wrong number of scores"), f"{len(scores)} scores")
    order = tuple(sorted(range(len(texts)), key=lambda i: (-scores[i], i)))
    log.info("Reranked %d passages in %.0f ms", len(texts), (time.monotonic() - started) * 1000)
    return Reordered(order)


def _fallback(notice: str, why: str) -> Reordered:
    log.warning("Reranking skipped (%s): the fused order is kept", why)
    return Reordered((), notice)


def marked(passages: list[Passage], count: int) -> list[Passage]:
    """The passages with the first `count` (those the reranker ordered) marked as reranked in their Match."""
    return [replace(p, match=replace(p.match, reranked=True)) if i < count and p.match is not None else p
            for i, p in enumerate(passages)]
