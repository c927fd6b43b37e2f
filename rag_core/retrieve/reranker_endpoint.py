"""A rerank server's scores for a question's passages: the standard rerank endpoint (DOCCHAT_RERANKER=http://host:port).

Two wire shapes are spoken:
  - `POST /v1/rerank` {"model", "query", "documents": [...], "top_n"} -> {"results": [{"index", "relevance_score"}]}
    (llama.cpp's `llama-server --reranking`, Infinity, vLLM; also served at `/rerank` by Infinity and vLLM);
  - `POST /rerank` {"query", "texts": [...]} -> [{"index", "score"}] (Hugging Face's text-embeddings-inference).
An address that ends in a path is used as given; otherwise `/v1/rerank` is asked first, and a 404, 405 or 422 (the
route or the body shape is not that server's) moves on to `/rerank` with the other body. The shape that worked is
remembered per address. Every answer is read defensively: a score per passage, each index once, or
`RerankServerFailed` (rag_core/core/errors.py).
"""
from __future__ import annotations

import logging
import math
import threading
import time
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

import httpx

from rag_core.core.errors import RerankServerFailed

log = logging.getLogger(__name__)

CONNECT_TIMEOUT_S = 2.0  # at most this long to open the connection (a closed port answers at once)
MOVE_ON = (404, 405, 422)  # the route or the body shape is not this server's: try the next shape


class Body(StrEnum):
    """The field the passages go in: the standard body's "documents" or TEI's "texts"."""

    DOCUMENTS = "documents"
    TEXTS = "texts"


@dataclass(frozen=True)
class WireShape:
    """One way to ask: the URL and the body's shape."""

    url: str
    body: Body


def shapes(address: str) -> list[WireShape]:
    """The ways to ask a server at `address`, in order."""
    base = address.rstrip("/")
    if base.endswith("/rerank"):  # a full endpoint given: its route is fixed, only the body shape may differ
        return [WireShape(base, Body.DOCUMENTS), WireShape(base, Body.TEXTS)]
    if base.endswith("/v1"):
        base = base[: -len("/v1")]
    return [WireShape(base + "/v1/rerank", Body.DOCUMENTS), WireShape(base + "/rerank", Body.TEXTS),
            WireShape(base + "/rerank", Body.DOCUMENTS)]


def _body(shape: WireShape, model: str, query: str, texts: list[str]) -> dict[str, Any]:
    if shape.body is Body.TEXTS:
        return {"query": query, "texts": texts, "truncate": True}
    body: dict[str, Any] = {"query": query, "documents": texts, "top_n": len(texts)}
    if model:
        body["model"] = model
    return body


def read_scores(data: Any, n: int) -> list[float]:
    """One score per passage from a rerank answer of either shape; ValueError when it is not one."""
    items = data.get("results", data.get("data")) if isinstance(data, dict) else data
    if not isinstance(items, list):
        raise ValueError("no list of results")
    scores: list[float | None] = [None] * n
    for item in items:
        if not isinstance(item, dict):
            raise ValueError("a result is not an object")
        index, score = item.get("index"), item.get("relevance_score", item.get("score"))
        if not isinstance(index, int) or isinstance(index, bool) or not 0 <= index < n or scores[index] is not None:
            raise ValueError(f"a result has a bad index {index!r}")
        if not isinstance(score, int | float) or isinstance(score, bool) or not math.isfinite(score):
            raise ValueError(f"a result has a bad score {score!r}")
        scores[index] = float(score)
    if any(s is None for s in scores):
        raise ValueError(f"{sum(s is None for s in scores)} of {n} passages have no score")
    return [float(s) for s in scores if s is not None]


class EndpointReranker:
    """Scores from the rerank server at `address` (`model`: the name sent; `api_key`: a bearer token)."""

    def __init__(self, address: str, model: str = "", api_key: str | None = None) -> None:
        self.address = address
        self.model = model
        self._headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._known: WireShape | None = None  # the shape this server answered last
        self._lock = threading.Lock()
        # One client (thread-safe) for the process: its connections are kept, and making one costs tens of ms.
        self._client = httpx.Client(timeout=httpx.Timeout(60.0, connect=CONNECT_TIMEOUT_S))

    def scores(self, query: str, texts: list[str], deadline: float) -> list[float]:
        """One relevance score per text (higher: more relevant), before `deadline` (time.monotonic())."""
        with self._lock:
            known = self._known
        tried = [known] if known else shapes(self.address)
        for i, shape in enumerate(tried):
            response = self._post(shape, query, texts, deadline)
            if response.status_code in MOVE_ON and i + 1 < len(tried):
                log.debug("The rerank server answered %s at %s; trying the next shape", response.status_code, shape.url)
                continue
            if response.status_code != 200:
                raise RerankServerFailed(f"its server answered HTTP {response.status_code}")
            try:
                scores = read_scores(response.json(), len(texts))
            except ValueError as e:  # json.JSONDecodeError is a ValueError too
                raise RerankServerFailed("its answer was not a list of scores") from e
            with self._lock:
                self._known = shape
            return scores
        raise RerankServerFailed("its server has no rerank endpoint")  # pragma: no cover - the loop returns or raises

    def _post(self, shape: WireShape, query: str, texts: list[str], deadline: float) -> httpx.Response:
        left = deadline - time.monotonic()
        if left <= 0:
            raise RerankServerFailed("it took too long", timed_out=True)
        timeout = httpx.Timeout(left, connect=min(CONNECT_TIMEOUT_S, left))
        try:
            return self._client.post(shape.url, json=_body(shape, self.model, query, texts), headers=self._headers,
                                     timeout=timeout)
        except httpx.TimeoutException as e:
            raise RerankServerFailed("it took too long", timed_out=True) from e
        except (httpx.HTTPError, OSError) as e:
            raise RerankServerFailed(f"its server at {self.address} could not be reached") from e
