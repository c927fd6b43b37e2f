"""A linear classifier on the embedding model's chunk vector that flags instructions addressed to an AI by meaning,
beside the rules of rag_core.injection.detect (a passage is flagged when either fires).

Weights, bias and threshold live in `weights.json`, written by `benchmarks/injection_train.py` from the tune
half of benchmarks/data/injection.jsonl (plus benchmarks/data/injection_extra.jsonl); they fit only the bundled
all-MiniLM-L6-v2, so a library using another embedding model gets the rules alone. The vectors are the ones ingest
computes anyway: the check costs one dot product per chunk.
"""
from __future__ import annotations

import functools
import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from rag_core.core.config import DEFAULT_EMBEDDING_MODEL
from rag_core.core.models import Chunk

log = logging.getLogger(__name__)

WEIGHTS = Path(__file__).with_name("weights.json")
MODEL_NAMES = (DEFAULT_EMBEDDING_MODEL, "all-MiniLM-L6-v2", "sentence-transformers/all-MiniLM-L6-v2")


@dataclass(frozen=True)
class Classifier:
    """Logistic regression on a normalised chunk vector: flagged when `vector @ weights + bias >= threshold`."""

    weights: np.ndarray
    bias: float
    threshold: float
    model: str

    def scores(self, vectors: np.ndarray) -> np.ndarray:
        """The decision value of each row of `vectors` (log-odds of holding instructions addressed to an AI)."""
        return np.asarray(vectors, dtype=np.float32) @ self.weights + self.bias

    def flags(self, vectors: np.ndarray) -> np.ndarray:
        """True for each row of `vectors` the classifier flags."""
        return self.scores(vectors) >= self.threshold


@functools.lru_cache(maxsize=1)
def load(path: Path = WEIGHTS) -> Classifier | None:
    """The bundled classifier, or None when its file is missing or unreadable (the rules still run)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        weights = np.asarray(data["weights"], dtype=np.float32)
        return Classifier(weights, float(data["bias"]), float(data["threshold"]), str(data["model"]))
    except (OSError, ValueError, KeyError, TypeError):
        log.warning("The instruction classifier %s could not be read; only the rules flag passages", path)
        return None


def fits(model_name: str, dim: int) -> bool:
    """The bundled weights were trained on vectors of this embedding model (and size)."""
    clf = load()
    return clf is not None and model_name in MODEL_NAMES and clf.weights.shape == (dim,)


def flag_vectors(chunks: Sequence[Chunk], vectors: np.ndarray, model_name: str) -> list[Chunk]:
    """The chunks with `instructions` also set where the classifier flags their vector (`vectors`: one row per
    chunk, from the embedding model `model_name`; other models: the chunks unchanged)."""
    vectors = np.asarray(vectors)
    if not chunks or vectors.ndim != 2 or not fits(model_name, vectors.shape[1]):
        return list(chunks)
    clf = load()
    assert clf is not None  # fits() checked it
    flagged = clf.flags(vectors)
    out = [replace(c, instructions=True) if f and not c.instructions else c for c, f in zip(chunks, flagged, strict=True)]
    added = sum(1 for a, b in zip(chunks, out, strict=True) if a is not b)
    if added:
        log.info("%s: the classifier flagged %d more passage(s) as addressing an AI", chunks[0].doc_id, added)
    return out


__all__ = ["Classifier", "MODEL_NAMES", "WEIGHTS", "fits", "flag_vectors", "load"]
