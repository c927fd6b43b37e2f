"""The local cross-encoder reranker (rag_core/retrieve/reranker_onnx.py, through rag_core/retrieve/reranker.py).

No cross-encoder's weights ship in any package this project can install (searched in the env package lists,
`grep -i rerank /work/.library/env/packages/pypi.tsv`, for a reranker GGUF or an ONNX / safetensors cross-encoder:
flashrank downloads its ONNX files from a hub at run time, small-hybrid-reranker bundles a LightGBM model over
static embeddings, the rest are API clients or code that downloads weights), so the test builds a tiny BERT
cross-encoder itself: random weights (2 layers, hidden 32) in the Hugging Face folder layout, a tokenizer.json made
with `tokenizers`, and checks the ONNX graph against a plain numpy BERT, the model.onnx path, and the reorder.
"""
from __future__ import annotations

import json
import math
import time
from pathlib import Path

import numpy as np
import pytest
from safetensors.numpy import save_file

from rag_core.core.config import Settings
from rag_core.core.errors import RerankModelFailed
from rag_core.retrieve import reranker
from rag_core.retrieve.reranker_onnx import OnnxCrossEncoder, cross_encoder_graph

WORDS = ("when was the harbour bridge opened in 1932 bees make honey from nectar a volcano erupts lava and ash pump "
         "seal replaced every hours tea grows on hills keeper lit lamp storm")
VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *dict.fromkeys(WORDS.split())]
HIDDEN, LAYERS, HEADS, INTER, POSITIONS = 32, 2, 2, 64, 64
QUESTION = "When was the harbour bridge opened?"
TEXTS = ["The harbour bridge opened in 1932.", "Bees make honey from nectar.", "A volcano erupts lava and ash.",
         "The pump seal is replaced every 2000 hours.", "Tea grows on hills.", "The keeper lit the lamp in the storm."]


def _config() -> dict:
    return {"model_type": "bert", "architectures": ["BertForSequenceClassification"], "hidden_size": HIDDEN,
            "num_hidden_layers": LAYERS, "num_attention_heads": HEADS, "intermediate_size": INTER,
            "max_position_embeddings": POSITIONS, "type_vocab_size": 2, "vocab_size": len(VOCAB),
            "layer_norm_eps": 1e-12, "hidden_act": "gelu", "id2label": {"0": "LABEL_0"}}


def _weights(seed: int = 46) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)

    def r(*shape: int) -> np.ndarray:
        return (rng.normal(size=shape) * 0.3).astype(np.float32)

    w = {"bert.embeddings.word_embeddings.weight": r(len(VOCAB), HIDDEN),
         "bert.embeddings.position_embeddings.weight": r(POSITIONS, HIDDEN),
         "bert.embeddings.token_type_embeddings.weight": r(2, HIDDEN),
         "bert.embeddings.LayerNorm.weight": 1 + r(HIDDEN), "bert.embeddings.LayerNorm.bias": r(HIDDEN),
         "bert.pooler.dense.weight": r(HIDDEN, HIDDEN), "bert.pooler.dense.bias": r(HIDDEN),
         "classifier.weight": r(1, HIDDEN), "classifier.bias": r(1)}
    for i in range(LAYERS):
        p = f"bert.encoder.layer.{i}"
        for name in ("attention.self.query", "attention.self.key", "attention.self.value", "attention.output.dense"):
            w[f"{p}.{name}.weight"], w[f"{p}.{name}.bias"] = r(HIDDEN, HIDDEN), r(HIDDEN)
        w[f"{p}.intermediate.dense.weight"], w[f"{p}.intermediate.dense.bias"] = r(INTER, HIDDEN), r(INTER)
        w[f"{p}.output.dense.weight"], w[f"{p}.output.dense.bias"] = r(HIDDEN, INTER), r(HIDDEN)
        for norm in ("attention.output.LayerNorm", "output.LayerNorm"):
            w[f"{p}.{norm}.weight"], w[f"{p}.{norm}.bias"] = 1 + r(HIDDEN), r(HIDDEN)
    return w


def _tokenizer_json(folder: Path) -> None:
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, processors

    tok = Tokenizer(models.WordPiece({w: i for i, w in enumerate(VOCAB)}, unk_token="[UNK]"))
    tok.normalizer = normalizers.BertNormalizer(lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1", special_tokens=[("[CLS]", 2), ("[SEP]", 3)])
    tok.save(str(folder / "tokenizer.json"))


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> Path:
    """A tiny BERT cross-encoder in the Hugging Face layout: config.json, model.safetensors, tokenizer.json."""
    path = tmp_path_factory.mktemp("tiny-cross-encoder")
    (path / "config.json").write_text(json.dumps(_config()), encoding="utf-8")
    save_file(_weights(), str(path / "model.safetensors"))
    _tokenizer_json(path)
    return path


def _layer_norm(x: np.ndarray, w: dict, name: str) -> np.ndarray:
    mean, var = x.mean(-1, keepdims=True), x.var(-1, keepdims=True)
    return (x - mean) / np.sqrt(var + 1e-12) * w[name + ".weight"] + w[name + ".bias"]


def _linear(x: np.ndarray, w: dict, name: str) -> np.ndarray:
    return x @ w[name + ".weight"].T + w[name + ".bias"]


def reference_scores(question: str, texts: list[str], folder: Path) -> list[float]:
    """The cross-encoder in plain numpy (BertForSequenceClassification), one pair at a time (no padding)."""
    from tokenizers import Tokenizer

    w = {k.removeprefix("bert."): v.astype(np.float64) for k, v in _weights().items()}
    words = w["embeddings.word_embeddings.weight"]  # the graph keeps the word table in float16 (onnx_bert.py)
    w["embeddings.word_embeddings.weight"] = words.astype(np.float16).astype(np.float64)
    tok = Tokenizer.from_file(str(folder / "tokenizer.json"))
    erf = np.vectorize(math.erf)
    out = []
    for text in texts:
        enc = tok.encode(question, text)
        ids, types = np.array(enc.ids), np.array(enc.type_ids)
        x = (w["embeddings.word_embeddings.weight"][ids] + w["embeddings.position_embeddings.weight"][:len(ids)]
             + w["embeddings.token_type_embeddings.weight"][types])
        x = _layer_norm(x, w, "embeddings.LayerNorm")
        d = HIDDEN // HEADS
        for i in range(LAYERS):
            p = f"encoder.layer.{i}"
            q, k, v = (_linear(x, w, f"{p}.attention.self.{n}").reshape(len(ids), HEADS, d).transpose(1, 0, 2)
                       for n in ("query", "key", "value"))
            a = q @ k.transpose(0, 2, 1) / math.sqrt(d)
            a = np.exp(a - a.max(-1, keepdims=True))
            ctx = ((a / a.sum(-1, keepdims=True)) @ v).transpose(1, 0, 2).reshape(len(ids), HIDDEN)
            x = _layer_norm(_linear(ctx, w, f"{p}.attention.output.dense") + x, w, f"{p}.attention.output.LayerNorm")
            h = _linear(x, w, f"{p}.intermediate.dense")
            h = 0.5 * h * (1 + erf(h / math.sqrt(2)))
            x = _layer_norm(_linear(h, w, f"{p}.output.dense") + x, w, f"{p}.output.LayerNorm")
        pooled = np.tanh(_linear(x[0], w, "pooler.dense"))
        out.append(float(_linear(pooled, w, "classifier")[0]))
    return out


def test_the_built_graph_scores_pairs_as_bert_does(folder):
    encoder = OnnxCrossEncoder(folder)
    got = encoder.scores(QUESTION, TEXTS, time.monotonic() + 60)
    np.testing.assert_allclose(got, reference_scores(QUESTION, TEXTS, folder), atol=5e-5)
    assert encoder.scores(QUESTION, TEXTS, time.monotonic() + 60) == got  # deterministic
    assert len(set(np.round(got, 4))) == len(TEXTS)  # the passages are told apart (token types matter too)


def test_a_folder_with_model_onnx_runs_as_given(folder, tmp_path):
    (tmp_path / "onnx").mkdir()
    (tmp_path / "onnx" / "model.onnx").write_bytes(cross_encoder_graph(folder, _config()))
    (tmp_path / "tokenizer.json").write_bytes((folder / "tokenizer.json").read_bytes())  # no weights, no config
    got = OnnxCrossEncoder(tmp_path).scores(QUESTION, TEXTS, time.monotonic() + 60)
    np.testing.assert_allclose(got, OnnxCrossEncoder(folder).scores(QUESTION, TEXTS, time.monotonic() + 60),
                               atol=1e-5)


def test_a_folder_with_vocab_txt_only_tokenizes_alike(folder, tmp_path):
    for name in ("config.json", "model.safetensors"):
        (tmp_path / name).write_bytes((folder / name).read_bytes())
    (tmp_path / "vocab.txt").write_text("\n".join(VOCAB) + "\n", encoding="utf-8")  # no tokenizer.json
    got = OnnxCrossEncoder(tmp_path).scores(QUESTION, TEXTS, time.monotonic() + 60)
    np.testing.assert_allclose(got, reference_scores(QUESTION, TEXTS, folder), atol=5e-5)


def test_the_reranker_reorders_by_the_model_s_scores(folder):
    settings = Settings(reranker=str(folder), rerank_timeout_s=60, llm_timeout_s=600)
    expected = reference_scores(QUESTION, TEXTS, folder)
    first = reranker.reorder(settings, QUESTION, TEXTS)
    assert first.notice is None
    assert list(first.order) == sorted(range(len(TEXTS)), key=lambda i: -expected[i])
    assert reranker.reorder(settings, QUESTION, TEXTS) == first  # the same order every time
    assert first.apply(TEXTS) == [TEXTS[i] for i in first.order]


def test_only_the_top_candidates_are_reranked(folder):
    settings = Settings(reranker=str(folder), rerank_top=5, rerank_timeout_s=60, llm_timeout_s=600)
    out = reranker.reorder(settings, QUESTION, TEXTS * 2)
    assert sorted(out.order) == [0, 1, 2, 3, 4]
    assert out.apply(TEXTS * 2)[5:] == (TEXTS * 2)[5:]  # the rest keeps the fused order


def test_a_folder_without_a_model_falls_back_with_one_sentence(tmp_path):
    _tokenizer_json(tmp_path)
    with pytest.raises(RerankModelFailed, match="holds no model.onnx"):
        OnnxCrossEncoder(tmp_path)
    out = reranker.reorder(Settings(reranker=str(tmp_path)), QUESTION, TEXTS)
    assert out.order == () and out.notice is not None
    assert out.notice.startswith("The reranker could not be used (its folder ") and out.notice.count(". ") == 0
    missing = reranker.reorder(Settings(reranker=str(tmp_path / "nowhere")), QUESTION, TEXTS)
    assert missing.order == () and "does not exist" in (missing.notice or "")


def test_a_late_cross_encoder_stops_between_batches(folder):
    with pytest.raises(RerankModelFailed) as e:
        OnnxCrossEncoder(folder).scores(QUESTION, TEXTS, time.monotonic() - 1)
    assert e.value.timed_out


def test_the_budget_follows_the_answer_s_deadline():
    assert reranker.budget(Settings()) == 5.0
    assert reranker.budget(Settings(llm_timeout_s=8)) == 2.0  # a quarter of the wait for the model
    assert not reranker.is_on(Settings())  # off by default
