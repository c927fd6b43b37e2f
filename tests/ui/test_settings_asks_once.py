"""The Settings page asks the model server once per visit, not on every rerun, through AppTest with the scripted
Ollama server (tests/ollama_server.py), counting the requests it receives: its status (/api/tags) and its embedding
models (/api/tags, then /api/show per model) are asked when the page opens, kept while the person clicks on the page,
and asked again on "Check again", on a new visit, and for a new address."""
from __future__ import annotations

import pytest
from ui_helpers import MODEL, button, new_app, plain, texts

EMBED = "fake-embed"


@pytest.fixture
def server(app):
    """The session's Ollama with one chat model and one embedding model, as they were once the test ends."""
    models, embed = list(app.server.models), dict(app.server.embed_models)
    app.server.models[:] = [MODEL]
    app.server.embed_models = {EMBED: 24}
    yield app.server
    app.server.models[:] = models
    app.server.embed_models = embed


def _asked(server) -> tuple[int, int]:
    """(/api/tags requests, /api/show requests) the server has received so far."""
    paths = [r.path for r in list(server.requests)]
    return paths.count("/api/tags"), paths.count("/api/show")


def _more(server, since: tuple[int, int]) -> tuple[int, int]:
    now = _asked(server)
    return now[0] - since[0], now[1] - since[1]


def test_reruns_reuse_the_answer_and_check_again_asks_again(app, server):
    at = new_app()  # the Chat page asks for its own model line
    start = _asked(server)
    at.switch_page("pages/settings.py").run()
    assert not at.exception
    # the status (/api/tags) and the embedding models (/api/tags, then /api/show for each of the two models)
    assert _more(server, start) == (2, 2)
    assert "Ollama is running, with 2 models installed." in [plain(s) for s in texts(at.success)]
    assert "fake-embed (Ollama)" in at.selectbox(key="set_embedding_model").options

    opened = _asked(server)
    at.toggle(key="set_use_llm").set_value(False).run()  # two reruns of the page: a click, then a plain rerun
    at.run()
    assert not at.exception and _more(server, opened) == (0, 0)
    assert "Ollama is running, with 2 models installed." in [plain(s) for s in texts(at.success)]
    assert "fake-embed (Ollama)" in at.selectbox(key="set_embedding_model").options
    assert at.session_state["prefs"]["use_llm"] is False  # the click itself did what it does

    server.models.append("qwen2.5:1.5b")  # a model installed meanwhile shows after "Check again"
    checked = _asked(server)
    button(at, "Check again").click().run()
    assert not at.exception and _more(server, checked) == (2, 3)
    assert "Ollama is running, with 3 models installed." in [plain(s) for s in texts(at.success)]
    checked = _asked(server)
    at.run()
    assert _more(server, checked) == (0, 0)


def test_a_new_visit_and_a_new_address_ask_again(app, server):
    at = new_app("pages/settings.py")
    at.switch_page("pages/library.py").run()
    left = _asked(server)
    at.switch_page("pages/settings.py").run()  # back on the page: a new visit
    assert not at.exception and _more(server, left) == (2, 2)

    host = app.settings.llm.ollama_host
    changed = _asked(server)
    at.text_input(key="set_host").set_value(host.replace("127.0.0.1", "localhost")).run()
    # the status is asked at the new address; the embedding models are the library's, from its own address
    assert not at.exception and _more(server, changed) == (1, 0)
    assert "Ollama is running, with 2 models installed." in [plain(s) for s in texts(at.success)]
    again = _asked(server)
    at.run()
    assert _more(server, again) == (0, 0)
