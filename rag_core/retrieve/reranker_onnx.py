"""A local cross-encoder on ONNX Runtime (DOCCHAT_RERANKER=/a/folder), in the usual Hugging Face layout.

The folder holds a cross-encoder such as ms-marco-MiniLM-L-6-v2: `model.onnx` or `onnx/model.onnx` (run as it is),
or a BERT's `model.safetensors` with `config.json` (BertForSequenceClassification: the graph is written by
rag_core/store/onnx_bert.py's builder with CLS pooling, then given the token types of the pair, BERT's pooler and the
classifier here), and `tokenizer.json` (else `vocab.txt`). Each (question, passage) pair is tokenized as
[CLS] question [SEP] passage [SEP] with the passage's token type 1, cut at the model's length, and scored in batches
of BATCH; the deadline is checked between batches, so a slow machine stops after one batch past it. Nothing is
downloaded. Its failures are RerankModelFailed (rag_core/core/errors.py).
"""
from __future__ import annotations

import json
import logging
import time
from pathlib import Path
from typing import Any

import numpy as np

from rag_core.core.errors import DocChatError, RerankModelFailed
from rag_core.store.onnx_bert import BertShape, build_graph, threads

log = logging.getLogger(__name__)

BATCH = 8  # pairs per run (the deadline is checked between runs)
MAX_TOKENS = 512  # at most this many word pieces a pair (less when the model says so)
GRAPHS = ("model.onnx", "onnx/model.onnx")
INPUTS = ("input_ids", "attention_mask", "token_type_ids")


def _json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as e:
        raise RerankModelFailed(f"its {path.name} is damaged") from e
    return data if isinstance(data, dict) else {}


def max_length(config: dict[str, Any], tokenizer_config: dict[str, Any]) -> int:
    """Word pieces a pair may have: MAX_TOKENS, or less when the model's configuration says so."""
    limits = [MAX_TOKENS]
    for value in (config.get("max_position_embeddings"), tokenizer_config.get("model_max_length")):
        if isinstance(value, int) and 8 <= value < 100_000:
            limits.append(value)
    return min(limits)


def load_pair_tokenizer(folder: Path, length: int, tokenizer_config: dict[str, Any]):  # a tokenizers.Tokenizer
    """The folder's tokenizer (tokenizer.json, else vocab.txt as a BERT word-piece one), cutting pairs at `length`
    (the longer side first) and padding each batch to its longest pair."""
    from tokenizers import Tokenizer
    from tokenizers.implementations import BertWordPieceTokenizer

    tokenizer: Any  # a Tokenizer, or the word-piece wrapper around one (the same methods)
    try:
        if (folder / "tokenizer.json").is_file():
            tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
        else:
            lower = bool(tokenizer_config.get("do_lower_case", True))
            tokenizer = BertWordPieceTokenizer(str(folder / "vocab.txt"), lowercase=lower)
    except Exception as e:  # tokenizers raises a bare Exception for a missing or malformed file
        raise RerankModelFailed("its tokenizer (tokenizer.json or vocab.txt) is missing or damaged") from e
    tokenizer.enable_truncation(max_length=length, strategy="longest_first")
    pad = tokenizer.token_to_id("[PAD]")
    tokenizer.enable_padding(pad_id=0 if pad is None else pad, pad_token="[PAD]")
    return tokenizer


def _weight(weights: dict[str, np.ndarray], name: str) -> np.ndarray:
    for key in (name, "bert." + name):
        if key in weights:
            return np.ascontiguousarray(weights[key].astype(np.float32))
    raise RerankModelFailed(f"its weights lack “{name}” (not a BERT cross-encoder)")


def cross_encoder_graph(folder: Path, config: dict[str, Any]) -> bytes:
    """The serialized ONNX cross-encoder of a BERT folder: onnx_bert's encoder with CLS pooling, then the token
    types of the pair (the encoder adds type 0 everywhere), BERT's pooler (dense + tanh) and the classifier."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    from safetensors.numpy import load_file

    if config.get("model_type") != "bert":
        raise RerankModelFailed(f"it is not a BERT (model type {config.get('model_type')!r}): give a folder with "
                         f"onnx/model.onnx")
    try:
        shape = BertShape(layers=int(config["num_hidden_layers"]), hidden=int(config["hidden_size"]),
                          heads=int(config["num_attention_heads"]), eps=float(config.get("layer_norm_eps", 1e-12)),
                          pooling="cls", normalize=False, max_seq_length=int(config["max_position_embeddings"]))
        graph = onnx.load_from_string(build_graph(folder, shape))
        weights = load_file(str(folder / "model.safetensors"))
    except (KeyError, TypeError, ValueError, OSError, DocChatError) as e:
        raise RerankModelFailed("its config.json or model.safetensors is incomplete or damaged") from e
    g = graph.graph
    named = {n.name: n for n in g.node}
    if "embedded" not in named or "output" not in named:
        raise RerankModelFailed("the BERT graph builder wrote a graph of another shape")  # pragma: no cover
    named["embedded"].input[1] = "token_types"  # words + positions + the pair's token types
    pooled = named["output"].input[0]  # the CLS row of the last layer
    inits = [numpy_helper.from_array(_weight(weights, n), n) for n in (
        "embeddings.token_type_embeddings.weight", "pooler.dense.weight", "pooler.dense.bias")]
    inits += [numpy_helper.from_array(_weight(weights, n), n) for n in ("classifier.weight", "classifier.bias")]
    labels = int(inits[-1].dims[0])
    nodes = [helper.make_node("Gather", ["embeddings.token_type_embeddings.weight", "token_type_ids"], ["token_types"],
                              name="token_types")]
    nodes += [n for n in g.node if n.name != "output"]
    # Flatten: the builder's CLS row comes out as [batch, 1, hidden] (its index is a 1-element array, not a scalar).
    nodes += [helper.make_node("Flatten", [pooled], ["cls"], name="cls", axis=1),
              helper.make_node("Gemm", ["cls", "pooler.dense.weight", "pooler.dense.bias"], ["pooler.dense"],
                               name="pooler.dense", transB=1),
              helper.make_node("Tanh", ["pooler.dense"], ["pooler"], name="pooler"),
              helper.make_node("Gemm", ["pooler", "classifier.weight", "classifier.bias"], ["logits"], name="logits",
                               transB=1)]
    del g.node[:]
    g.node.extend(nodes)
    kept = [i for i in g.initializer if i.name != "token_type_0"]
    del g.initializer[:]
    g.initializer.extend(kept + inits)
    g.input.append(helper.make_tensor_value_info("token_type_ids", TensorProto.INT64, ["batch", "sequence"]))
    del g.output[:]
    g.output.append(helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", labels]))
    return bytes(graph.SerializeToString())


def relevance(logits: np.ndarray) -> np.ndarray:
    """One score per pair from the model's output: its one logit, or relevant minus not for two labels."""
    out = np.asarray(logits, dtype=np.float32)
    if out.ndim == 1:
        return out
    if out.ndim == 2 and out.shape[1] == 1:
        return out[:, 0]
    if out.ndim == 2 and out.shape[1] == 2:
        return out[:, 1] - out[:, 0]
    raise RerankModelFailed(f"its model gives an output of shape {out.shape}, not one score a pair")


class OnnxCrossEncoder:
    """A loaded cross-encoder: `scores(query, texts, deadline)` → one float per text, higher is more relevant."""

    def __init__(self, folder: Path) -> None:
        import onnxruntime as ort

        if not folder.is_dir():
            raise RerankModelFailed(f"its folder {folder} does not exist")
        config = _json(folder / "config.json")
        tokenizer_config = _json(folder / "tokenizer_config.json")
        self.folder = folder
        self.tokenizer = load_pair_tokenizer(folder, max_length(config, tokenizer_config), tokenizer_config)
        graph_file = next((folder / g for g in GRAPHS if (folder / g).is_file()), None)
        if graph_file is not None:
            model: bytes | str = str(graph_file)
        elif (folder / "model.safetensors").is_file():
            model = cross_encoder_graph(folder, config)
        else:
            raise RerankModelFailed(f"its folder {folder} holds no model.onnx, onnx/model.onnx or model.safetensors")
        options = ort.SessionOptions()
        options.intra_op_num_threads = threads()
        options.inter_op_num_threads = 1
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")  # as rag_core/store/onnx_bert.py
        options.log_severity_level = 3
        try:
            self.session = ort.InferenceSession(model, options, providers=["CPUExecutionProvider"])
        except Exception as e:  # onnxruntime raises its own Fail/InvalidGraph types, not one base class
            raise RerankModelFailed("its model could not be loaded by ONNX Runtime") from e
        self.inputs = {i.name: (np.int32 if i.type == "tensor(int32)" else np.int64) for i in self.session.get_inputs()}
        unknown = set(self.inputs) - set(INPUTS)
        if unknown:
            raise RerankModelFailed(f"its model asks for inputs DocChat does not give ({', '.join(sorted(unknown))})")
        self.output = self.session.get_outputs()[0].name

    def scores(self, query: str, texts: list[str], deadline: float) -> list[float]:
        """One relevance score per text, in BATCH runs; RerankModelFailed (timed out) when `deadline` passes between runs."""
        out: list[float] = []
        for start in range(0, len(texts), BATCH):
            if time.monotonic() > deadline:
                raise RerankModelFailed("it took too long", timed_out=True)
            encoded = self.tokenizer.encode_batch([(query, t) for t in texts[start:start + BATCH]])
            columns = {"input_ids": [e.ids for e in encoded], "attention_mask": [e.attention_mask for e in encoded],
                       "token_type_ids": [e.type_ids for e in encoded]}
            feed = {name: np.asarray(columns[name], dtype=dtype) for name, dtype in self.inputs.items()}
            try:
                logits = self.session.run([self.output], feed)[0]
            except Exception as e:  # onnxruntime's own error types
                raise RerankModelFailed("its model failed to run") from e
            out.extend(float(s) for s in relevance(logits))
        return out
