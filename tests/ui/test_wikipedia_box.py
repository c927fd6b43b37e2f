"""The "From Wikipedia" box of the Library page and Wikipedia citations in chat, against the replay server
(tests/wiki_server.py) serving real recorded MediaWiki responses."""
from __future__ import annotations

import json

import pytest
from ollama_server import Reply
from ui_helpers import button, new_app, plain, texts, wait_for_jobs
from wiki_server import FIXTURES, WikiReplayServer

PY_TITLE = "Python (programming language)"
PY_ID = 23862
PY_REV = 1345678901  # ADDED: the recorded extract has no revision id (its request did not ask for prop=info)
PY_URL = "https://en.wikipedia.org/wiki/Python_(programming_language)"  # ADDED, as MediaWiki builds it


def _python_article() -> dict:
    body = json.loads((FIXTURES / "extracts_plaintext-with-sections_python-programming-language.json").read_text())
    body["query"]["pages"][str(PY_ID)].update({"lastrevid": PY_REV, "canonicalurl": PY_URL, "fullurl": PY_URL})
    return body


@pytest.fixture
def wiki(app, monkeypatch):
    with WikiReplayServer() as server:
        monkeypatch.setenv("DOCCHAT_WIKIPEDIA_API", server.url_template)
        monkeypatch.setenv("DOCCHAT_WIKIPEDIA_BACKOFF", "0.01")
        yield server


@pytest.mark.slow
def test_search_pick_import_then_cite_with_link_and_license(app, wiki):
    wiki.respond({"titles": PY_TITLE}, _python_article(), times=None)
    at = new_app("pages/library.py")
    at.text_input(key="wiki_words").set_value("Python programming")
    button(at, "Search").click().run()
    assert not at.exception
    labels = [plain(c.label) for c in at.checkbox]
    assert labels[0] == f"**{PY_TITLE}**" and len(labels) == 8  # the box shows the first 8
    at.checkbox(key="wiki_hit_0").check()
    button(at, "Add the chosen articles").click().run()
    wait_for_jobs(at, app.queue)
    assert not at.exception
    done = [s for s in at.status if s.label.startswith("Added")]
    assert len(done) == 1 and "from Wikipedia" in done[0].label and done[0].state == "complete"
    [doc] = app.library.documents()
    assert doc.kind == "wikipedia" and doc.revision_id == PY_REV
    listing = " ".join(texts(at.markdown) + texts(at.caption))
    assert f"(<{PY_URL}>)" in listing  # the list links to the article
    assert "CC BY\\-SA 4\\.0" in listing

    # In chat, a Wikipedia source links to its section and carries the license line.
    app.server.script(Reply("Python was created by Guido van Rossum [1]."))
    at.switch_page("pages/chat.py").run()
    at.chat_input[0].set_value("Who created Python?").run()
    assert not at.exception
    answer = at.session_state["chat_turns"][-1]["answer"]
    cite = answer.citations[0]
    assert cite.passage.chunk.source.kind == "wikipedia"
    side = " ".join(texts(at.chat_message[1].columns[1].markdown) + texts(at.chat_message[1].columns[1].caption))
    anchor = f"#{cite.passage.chunk.anchor}" if cite.passage.chunk.anchor else ""
    assert f"(<{PY_URL}{anchor}>)" in side
    assert "CC BY-SA 4.0" in side and f"Revision {PY_REV}" in side


def test_search_failure_is_a_sentence(app, wiki):
    wiki.fault("5xx", times=None)
    at = new_app("pages/library.py")
    at.text_input(key="wiki_words").set_value("Python programming")
    button(at, "Search").click().run()
    assert not at.exception
    assert any("Wikipedia's servers are having trouble" in plain(e) for e in texts(at.error))


@pytest.mark.slow
def test_check_for_updates_shows_the_buckets(app, wiki):
    from rag_core.service import wiki_sync

    wiki.respond({"titles": PY_TITLE}, _python_article(), times=None)
    settings = app.settings.with_overrides(wikipedia_api=wiki.url_template, wikipedia_backoff_s=0.01)
    assert wiki_sync.import_article(app.library, settings, PY_TITLE).status == "added"
    newer = {"batchcomplete": "", "query": {"pages": {str(PY_ID): {"pageid": PY_ID, "ns": 0, "title": PY_TITLE,
                                                                   "lastrevid": PY_REV}}}}
    wiki.respond({"pageids": str(PY_ID)}, newer, times=None)
    at = new_app("pages/library.py")
    button(at, "Check for updates").click().run()
    wait_for_jobs(at, app.queue)
    assert not at.exception
    [report] = [s for s in at.status if s.label.startswith("Checked")]
    assert report.label == "Checked 1 Wikipedia article for updates"
    assert "**Up to date:** 1" in " ".join(texts(report.markdown))


def _search(words: str = "Python programming"):
    at = new_app("pages/library.py")
    at.text_input(key="wiki_words").set_value(words)
    button(at, "Search").click().run()
    return at


def _page_text(at) -> str:
    return " ".join(plain(t) for t in texts(at.markdown) + texts(at.error) + texts(at.caption) + texts(at.exception))


def test_deeply_nested_json_is_one_sentence_in_the_box(app, wiki):
    """Hostile JSON (100,000 levels deep) used to raise a RecursionError traceback onto the page."""
    wiki.respond({"list": "search"}, b"[" * 100_000 + b"]" * 100_000, times=None)
    at = _search()
    assert not at.exception
    [error] = [plain(e) for e in texts(at.error)]
    assert error == ("Wikipedia sent an answer DocChat could not read (it is nested more than 64 levels deep). "
                     "Try again; nothing was changed.")
    assert "Traceback" not in _page_text(at) and "wiki_hits" not in at.session_state


def test_an_unexpected_failure_is_one_generic_sentence_and_logged(app, wiki, monkeypatch, caplog):
    """Every Wikipedia failure is translated in rag_core, so the box's last line of defence has no real trigger
    left: a RecursionError is injected where the workspace calls the search."""
    from rag_core.sources import wikipedia
    from ui.wikipedia import UNEXPECTED

    def overflow(*args, **kwargs):
        raise RecursionError("maximum recursion depth exceeded while decoding a JSON array from a unicode string")

    monkeypatch.setattr(wikipedia, "search", overflow)
    at = _search()
    assert not at.exception
    assert [plain(e) for e in texts(at.error)] == [UNEXPECTED]
    assert "RecursionError" not in _page_text(at)
    assert "RecursionError: maximum recursion depth" in caplog.text  # the traceback went to the log


def test_search_result_tooltips_show_text_not_markdown(app, wiki):
    """A search snippet comes from the web: its tooltip shows it as text (no image loaded, no :red[...] styling)."""
    snippet = "![x](http://127.0.0.1:9/s.png?d=secret) :red[boo] **loud**"
    wiki.respond({"list": "search"}, {"query": {"search": [{"title": "Hostile", "snippet": snippet, "pageid": 1}]}})
    at = new_app("pages/library.py")
    at.text_input(key="wiki_words").set_value("hostile")
    button(at, "Search").click().run()
    assert not at.exception
    tip = at.checkbox(key="wiki_hit_0").help
    assert plain(tip) == snippet and "![" not in tip and ":red[" not in tip and "**" not in tip
