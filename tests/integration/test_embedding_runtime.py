"""The embedding runtime without torch: ONNX Runtime gives the same all-MiniLM-L6-v2 vectors sentence-transformers
gave, so libraries made before keep working without re-embedding; a missing or damaged model file is one sentence."""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from rag_core.core.errors import DocChatError
from rag_core.store.embeddings import Embedder

FIXTURE = Path(__file__).parents[1] / "fixtures" / "embeddings"


def test_vectors_match_the_torch_runtime_on_200_sentences(embedder):
    """The vectors of sentence-transformers 6.2.0 on torch 2.13.0 (tests/fixtures/embeddings/README.md), stored:
    short and long texts, past the 256-piece cut, empty, non-Latin."""
    texts = json.loads((FIXTURE / "minilm_torch_200.texts.json").read_text(encoding="utf-8"))
    before = np.load(FIXTURE / "minilm_torch_200.vectors.npy")
    assert len(texts) == 200 and before.shape == (200, 384)
    now = embedder.encode(texts)
    cosine = (now * before).sum(axis=1)
    assert cosine.min() >= 0.999, (cosine.min(), texts[int(cosine.argmin())][:80])
    # The order of a batch changes nothing: one at a time gives the same vectors.
    alone = np.vstack([embedder.encode([t]) for t in texts[:8]])
    assert np.allclose(alone, now[:8], atol=1e-5)


def test_nothing_imports_torch():
    code = ("import sys; from rag_core.store.embeddings import Embedder; e = Embedder(); e.encode(['a question']); "
            "print(sorted(m for m in ('torch', 'transformers', 'sentence_transformers') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert out.stdout.strip() == "[]", out.stderr[-2000:]


def _copy_model(embedder, tmp_path: Path) -> Path:
    folder = tmp_path / "model"
    shutil.copytree(embedder.path, folder)
    return folder


@pytest.mark.parametrize("damage", ["weights missing", "weights truncated", "weights garbage", "tokenizer missing",
                                    "tokenizer garbage", "config garbage", "config missing"])
def test_a_missing_or_damaged_model_file_is_one_sentence_with_the_fix(embedder, tmp_path, damage):
    folder = _copy_model(embedder, tmp_path)
    weights, tokenizer, config = folder / "model.safetensors", folder / "tokenizer.json", folder / "config.json"
    if damage == "weights missing":
        weights.unlink()
    elif damage == "weights truncated":
        weights.write_bytes(weights.read_bytes()[: 1 << 20])
    elif damage == "weights garbage":
        weights.write_bytes(b"\xff" * 4096)
    elif damage == "tokenizer missing":
        tokenizer.unlink()
    elif damage == "tokenizer garbage":
        tokenizer.write_text("{not json", encoding="utf-8")
    elif damage == "config garbage":
        config.write_text("[1, 2", encoding="utf-8")
    else:
        config.unlink()
    broken = Embedder(str(folder), lazy=True)
    with pytest.raises(DocChatError) as caught:
        broken.encode(["anything"])
    message = str(caught.value)
    assert "\n" not in message and "Traceback" not in message
    assert "make run" in message or "DOCCHAT_EMBEDDING_MODEL" in message, message


def test_a_model_that_is_not_a_bert_without_torch_says_how_to_get_it(embedder, tmp_path, monkeypatch):
    folder = _copy_model(embedder, tmp_path)
    config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    (folder / "config.json").write_text(json.dumps({**config, "model_type": "xlm-roberta"}), encoding="utf-8")
    monkeypatch.setitem(sys.modules, "sentence_transformers", None)  # as when the torch extra is not installed
    with pytest.raises(DocChatError, match=r"docchat\[torch\]"):
        Embedder(str(folder), lazy=True).encode(["anything"])
