"""A BERT sentence encoder on ONNX Runtime, built from a sentence-transformers folder's own safetensors weights.

No torch and nothing downloaded: the graph (embeddings, N encoder layers with ONNX Runtime's fused `Attention`
operator, mean or CLS pooling, L2 normalisation) is written here with `onnx.helper` around the weights read from
`model.safetensors`, then run by ONNX Runtime on the CPU. The vectors equal sentence-transformers' (cosine ≥ 0.9999 on
200 sentences: tests/integration/test_embedding_runtime.py). The tokenizer is the folder's `tokenizer.json`, run by
Hugging Face's Rust `tokenizers`.
"""
from __future__ import annotations

import json
import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from rag_core.core.errors import DocChatError

log = logging.getLogger(__name__)

# ONNX Runtime's Linux wheels carry Microsoft's 1DS telemetry client: with this unset, a process that runs sessions
# resolves mobile.events.data.microsoft.com (DNS from native code, seen with strace in
# tests/integration/test_offline_syscalls.py). Offline means zero packets, so it is switched off before onnxruntime is
# imported; `onnxruntime.disable_telemetry_events()` after the import does not stop it (measured).
os.environ["ORT_DISABLE_TELEMETRY"] = "1"

OPSET = 18
SUPPORTED_TYPES = ("bert",)


@dataclass(frozen=True)
class BertShape:
    """What the graph needs from `config.json` and the pooling config."""

    layers: int
    hidden: int
    heads: int
    eps: float
    pooling: str  # "mean" or "cls"
    normalize: bool
    max_seq_length: int


def _fix_hint(path: Path) -> str:
    return (f"Reinstall DocChat (`make run`), or set DOCCHAT_EMBEDDING_MODEL to a complete sentence-transformers folder "
            f"(now {path}).")


def read_shape(path: Path) -> BertShape:
    """The model's shape from its config files; DocChatError (one sentence) when they are missing or not a BERT."""
    try:
        config = json.loads((path / "config.json").read_text(encoding="utf-8"))
        pooling = json.loads((path / "1_Pooling" / "config.json").read_text(encoding="utf-8"))
        st = json.loads((path / "sentence_bert_config.json").read_text(encoding="utf-8"))
        modules = json.loads((path / "modules.json").read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise DocChatError(f"The embedding model's configuration is missing or damaged. {_fix_hint(path)}") from e
    if not isinstance(config, dict) or config.get("model_type") not in SUPPORTED_TYPES:
        raise UnsupportedModel(f"model type {config.get('model_type') if isinstance(config, dict) else '?'}")
    if pooling.get("pooling_mode_cls_token"):
        mode = "cls"
    elif pooling.get("pooling_mode_mean_tokens"):
        mode = "mean"
    else:
        raise UnsupportedModel("pooling other than mean or CLS")
    normalize = any(str(m.get("type", "")).endswith("Normalize") for m in modules if isinstance(m, dict))
    try:
        return BertShape(layers=int(config["num_hidden_layers"]), hidden=int(config["hidden_size"]),
                         heads=int(config["num_attention_heads"]), eps=float(config.get("layer_norm_eps", 1e-12)),
                         pooling=mode, normalize=normalize,
                         max_seq_length=min(int(st["max_seq_length"]), int(config["max_position_embeddings"])))
    except (KeyError, TypeError, ValueError) as e:
        raise DocChatError(f"The embedding model's configuration is incomplete. {_fix_hint(path)}") from e


class UnsupportedModel(Exception):
    """The folder holds a model this runtime does not build (the optional torch runtime may run it)."""


def _weights(path: Path) -> dict[str, np.ndarray]:
    from safetensors import SafetensorError
    from safetensors.numpy import load_file

    try:
        weights = load_file(str(path / "model.safetensors"))
    except (OSError, SafetensorError, ValueError) as e:
        raise DocChatError(f"The embedding model's weights (model.safetensors) are missing or damaged. "
                           f"{_fix_hint(path)}") from e
    prefixes = {k.split(".", 1)[0] for k in weights if k.endswith("word_embeddings.weight")}
    prefix = "" if "embeddings" in prefixes else next(iter(prefixes), "") + "."
    return {k[len(prefix):]: v for k, v in weights.items() if k.startswith(prefix)}


def build_graph(path: Path, shape: BertShape) -> bytes:
    """The serialized ONNX model (weights inside) for the folder at `path`."""
    graph = _Graph(path, shape)
    x = graph.embeddings()
    mask32 = graph.node("Cast", ["attention_mask"], "mask_i32", to=graph.tensor.INT32)
    for i in range(shape.layers):
        x = graph.encoder_layer(i, x, mask32)
    return graph.serialized(graph.pooled(x))


class _Graph:
    """The nodes and initializers (weights) of a sentence encoder's graph, added in order, step by step."""

    def __init__(self, path: Path, shape: BertShape) -> None:
        from onnx import TensorProto, helper, numpy_helper

        self.tensor, self.helper, self.numpy_helper = TensorProto, helper, numpy_helper
        self.path, self.shape = path, shape
        self.weights = _weights(path)
        self.inits: list = []
        self.nodes: list = []

    def init(self, name: str, array: np.ndarray) -> str:
        self.inits.append(self.numpy_helper.from_array(np.ascontiguousarray(array), name))
        return name

    def node(self, op: str, inputs: list[str], out: str, domain: str = "", **attrs: Any) -> str:
        self.nodes.append(self.helper.make_node(op, inputs, [out], name=out, domain=domain, **attrs))
        return out

    def get(self, name: str) -> np.ndarray:
        try:
            return self.weights[name].astype(np.float32)
        except KeyError as e:
            raise DocChatError(f"The embedding model's weights lack “{name}”. {_fix_hint(self.path)}") from e

    def layer_norm(self, x: str, prefix: str, out: str) -> str:
        return self.node("LayerNormalization", [x, self.init(prefix + ".weight", self.get(prefix + ".weight")),
                                                self.init(prefix + ".bias", self.get(prefix + ".bias"))], out,
                         axis=-1, epsilon=self.shape.eps)

    def linear(self, x: str, prefix: str, out: str) -> str:
        weight = self.init(prefix + ".weight", self.get(prefix + ".weight").T)
        return self.node("Add", [self.node("MatMul", [x, weight], out + ".mm"),
                                 self.init(prefix + ".bias", self.get(prefix + ".bias"))], out)

    def embeddings(self) -> str:
        """Word + position + token type 0, then LayerNorm.

        The word table (30k rows) is kept in float16 and each looked-up row cast back: half its memory (~23 MB for
        MiniLM), vectors unchanged to cosine 0.99999 (tests/integration/test_embedding_runtime.py)."""
        node, init, get = self.node, self.init, self.get
        table = init("word_embeddings", get("embeddings.word_embeddings.weight").astype(np.float16))
        words = node("Cast", [node("Gather", [table, "input_ids"], "words_f16")], "words", to=self.tensor.FLOAT)
        length = node("Shape", ["input_ids"], "length", start=1, end=2)  # [S], 1-D
        pos = node("Slice", [init("position_embeddings", get("embeddings.position_embeddings.weight")),
                             init("zero_1d", np.array([0], np.int64)), length, init("axis_0", np.array([0], np.int64))],
                   "pos")
        typed = get("embeddings.token_type_embeddings.weight")[0]
        summed = node("Add", [node("Add", [words, pos], "words_pos"), init("token_type_0", typed)], "embedded")
        return self.layer_norm(summed, "embeddings.LayerNorm", "hidden_0")

    def encoder_layer(self, i: int, x: str, mask32: str) -> str:
        """One transformer layer: attention, residual + LayerNorm, feed-forward with GELU, residual + LayerNorm."""
        node, init, get, linear, layer_norm = self.node, self.init, self.get, self.linear, self.layer_norm
        p = f"encoder.layer.{i}"
        qkv_w = np.concatenate([get(f"{p}.attention.self.{n}.weight").T for n in ("query", "key", "value")], axis=1)
        qkv_b = np.concatenate([get(f"{p}.attention.self.{n}.bias") for n in ("query", "key", "value")])
        attn = node("Attention", [x, init(f"{p}.qkv.weight", qkv_w), init(f"{p}.qkv.bias", qkv_b), mask32],
                    f"{p}.attention", domain="com.microsoft", num_heads=self.shape.heads)
        dense = linear(attn, f"{p}.attention.output.dense", f"{p}.attention.dense")
        x = layer_norm(node("Add", [dense, x], f"{p}.attention.residual"), f"{p}.attention.output.LayerNorm",
                       f"{p}.attention.normed")
        inter = linear(x, f"{p}.intermediate.dense", f"{p}.intermediate")
        # Exact GELU (erf), as BERT's "gelu": ONNX Runtime fuses this pattern into one Gelu kernel.
        scaled = node("Div", [inter, init(f"{p}.sqrt2", np.array(np.sqrt(2.0), np.float32))], f"{p}.gelu.div")
        erf1 = node("Add", [node("Erf", [scaled], f"{p}.gelu.erf"), init(f"{p}.one_f", np.array(1.0, np.float32))],
                    f"{p}.gelu.add")
        gelu = node("Mul", [node("Mul", [inter, erf1], f"{p}.gelu.mul"),
                            init(f"{p}.half", np.array(0.5, np.float32))], f"{p}.gelu")
        out = linear(gelu, f"{p}.output.dense", f"{p}.output")
        return layer_norm(node("Add", [out, x], f"{p}.output.residual"), f"{p}.output.LayerNorm", f"hidden_{i + 1}")

    def pooled(self, x: str) -> str:
        """The sentence vector: the first token's (cls) or the mean over the real tokens, normalized if asked."""
        node, init = self.node, self.init
        if self.shape.pooling == "cls":
            pooled = node("Gather", [x, init("zero_axis", np.array(0, np.int64))], "pooled", axis=1)
        else:
            maskf = node("Unsqueeze", [node("Cast", ["attention_mask"], "mask_f", to=self.tensor.FLOAT),
                                       init("last_axis", np.array([-1], np.int64))], "mask_3d")
            total = node("ReduceSum", [node("Mul", [x, maskf], "masked"), "one_axis"], "total", keepdims=0)
            self.inits.append(self.numpy_helper.from_array(np.array([1], np.int64), "one_axis"))
            count = node("Max", [node("ReduceSum", [maskf, "one_axis"], "count_raw", keepdims=0),
                                 init("tiny", np.array(1e-9, np.float32))], "count")
            pooled = node("Div", [total, count], "pooled")
        if self.shape.normalize:
            norm = node("Max", [node("ReduceL2", [pooled, init("vec_axis", np.array([-1], np.int64))], "norm_raw",
                                     keepdims=1), init("tiny_norm", np.array(1e-12, np.float32))], "norm")
            pooled = node("Div", [pooled, norm], "normalized")
        return pooled

    def serialized(self, pooled: str) -> bytes:
        return bytes(sentence_model(self.nodes, self.inits, pooled, self.shape.hidden).SerializeToString())

def threads() -> int:
    """Intra-op threads: the cores this process may use, at most 4 (more only contend on a shared laptop)."""
    try:
        cores = len(os.sched_getaffinity(0))  # type: ignore[attr-defined,unused-ignore]
    except AttributeError:  # macOS and Windows have no sched_getaffinity
        cores = os.cpu_count() or 1
    return max(1, min(4, cores))


class OnnxBert:
    """A loaded encoder: `run(ids, mask)` → normalised float32 vectors."""

    def __init__(self, path: Path, shape: BertShape) -> None:
        import onnxruntime as ort

        options = ort.SessionOptions()
        options.intra_op_num_threads = threads()
        options.inter_op_num_threads = 1
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        # Waiting threads sleep instead of spinning: on a busy 2-core machine a spinning thread holds the core its
        # partner needs (the same reason as OMP_WAIT_POLICY=PASSIVE for torch, issue 24).
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        options.log_severity_level = 3
        graph = build_graph(path, shape)
        try:
            self._session = ort.InferenceSession(graph, options, providers=["CPUExecutionProvider"])
        except Exception as e:  # onnxruntime raises its own Fail/InvalidGraph types, not one base class
            raise DocChatError(f"The embedding model could not be prepared. {_fix_hint(path)}") from e
        self.shape = shape
        # The memory arena keeps the largest batch's activations (32 long passages: ~300 MB) for the life of the
        # process; shrunk after the last batch of each call, they go back at once (without an arena at all, encoding
        # took 1.3x as long; benchmarks/embedding_runtime.py, benchmarks/memory.py).
        self._shrink = ort.RunOptions()
        self._shrink.add_run_config_entry("memory.enable_memory_arena_shrinkage", "cpu:0")

    def run(self, ids: np.ndarray, mask: np.ndarray, last: bool = True) -> np.ndarray:
        """Vectors for one padded batch of word-piece ids and their attention mask (`last`: then free the arena)."""
        out = self._session.run(["sentence_embedding"], {"input_ids": ids, "attention_mask": mask},
                                self._shrink if last else None)[0]
        return np.asarray(out, dtype=np.float32)


def load_tokenizer(path: Path, max_length: int | None = None):  # a tokenizers.Tokenizer
    """The folder's fast tokenizer (tokenizer.json): for the model (`max_length`: cut there, padded to the longest in
    a batch) or, without it, for counting (no cut, no padding). Configured once here, never again: so it can be
    shared by threads (transformers' wrapper reconfigured it per call and broke concurrent calls)."""
    from tokenizers import Tokenizer

    try:
        tokenizer = Tokenizer.from_file(str(path / "tokenizer.json"))
    except Exception as e:  # tokenizers raises a bare Exception for a missing or malformed file
        raise DocChatError(f"The embedding model's tokenizer (tokenizer.json) is missing or damaged. "
                           f"{_fix_hint(path)}") from e
    tokenizer.no_truncation()
    tokenizer.no_padding()
    if max_length is not None:
        tokenizer.enable_truncation(max_length=max_length)
        pad = tokenizer.token_to_id("[PAD]")
        tokenizer.enable_padding(pad_id=0 if pad is None else pad, pad_token="[PAD]")
    return tokenizer


def sentence_model(nodes: list, inits: list, pooled: str, hidden: int, name: str = "sentence_encoder") -> Any:
    """The ONNX model of a sentence encoder's graph: inputs input_ids and attention_mask (int64, batch x sequence),
    output sentence_embedding (float, batch x hidden) named after the node `pooled`; shared by MiniLM and e5."""
    from onnx import TensorProto, helper

    nodes.append(helper.make_node("Identity", [pooled], ["sentence_embedding"], name="output"))
    graph = helper.make_graph(
        nodes, name,
        [helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch", "sequence"]),
         helper.make_tensor_value_info("attention_mask", TensorProto.INT64, ["batch", "sequence"])],
        [helper.make_tensor_value_info("sentence_embedding", TensorProto.FLOAT, ["batch", hidden])],
        initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET),
                                                    helper.make_opsetid("com.microsoft", 1)])
    model.ir_version = 8
    return model
