"""Hosted demo mode (DOCCHAT_MODE=demo) through the real pages with AppTest. Each AppTest is one browser session;
st.cache_resource is shared by all AppTests in this process, exactly as one Streamlit server shares it between its
browser sessions, so two AppTests here behave like two visitors of one demo server. Real model, real embedded
Qdrant on a temp folder, the real bundled samples; Ollama is faked at the wire (tests/ollama_server.py)."""
from __future__ import annotations

import pytest
from ollama_server import OllamaServer, Reply
from ui_helpers import MODEL, button, fixture_bytes, new_app, plain, texts, wait_for_jobs
from wiki_server import WikiReplayServer

PDF = "pdf_text_multicolumn_3-pages.pdf"  # page 3: a table of EU countries and capitals
BELGIUM = "What is the capital of Belgium?"
SAMPLE_TITLES = {"DocChat demo guide", "The Zen of Python", "Python (programming language)"}
SAMPLE_LABEL = "Sample (shared, read-only)"
MAX_FILES, MAX_FILE_MB, QUESTIONS = 2, 1, 3
PY_TITLE, PY_ID, PY_REV = "Python (programming language)", 23862, 1345678901
PY_TEXT = ("Python is a high-level, general-purpose programming language. Its design philosophy emphasizes code "
           "readability.\n\n== History ==\nGuido van Rossum began working on Python in the late 1980s.")


def _page(at) -> str:
    """Every sentence on the page (markdown, captions, alerts), escapes removed."""
    return plain("\n".join(texts(at.markdown) + texts(at.caption) + texts(at.info) + texts(at.warning)
                           + texts(at.error) + texts(at.success)))


def _close_hub(state) -> None:
    """Close the demo server's runtime (hub, queue, library): the next run starts it with the current settings."""
    state.reset_runtime()


class _Demo:
    """One demo server's process-wide state, read through the app's own runtime (restarted by some tests)."""

    def __init__(self, samples: set[str], mp: pytest.MonkeyPatch, data_dir) -> None:
        self.samples, self.mp, self.data_dir = samples, mp, data_dir

    @staticmethod
    def hub():
        from ui import state

        return state.runtime().hub

    @property
    def library(self):
        from ui import state

        return state.runtime().library

    @property
    def queue(self):
        from ui import state

        return state.runtime().queue


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    """One demo server's process-wide state: a data folder, the hub with the samples loaded, the ingest queue."""
    from ui import state as ui_state

    data_dir = tmp_path_factory.mktemp("demo") / "data"
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("DOCCHAT_MODE", "demo")
        mp.setenv("DOCCHAT_DATA_DIR", str(data_dir))
        mp.setenv("OLLAMA_HOST", "http://127.0.0.1:9")  # nothing listens there: extractive mode must not call it
        mp.setenv("DOCCHAT_OLLAMA_MODEL", MODEL)
        mp.delenv("OLLAMA_API_KEY", raising=False)
        mp.setenv("DOCCHAT_DEMO_MAX_FILES", str(MAX_FILES))
        mp.setenv("DOCCHAT_DEMO_MAX_FILE_MB", str(MAX_FILE_MB))
        mp.setenv("DOCCHAT_DEMO_QUESTIONS_PER_MINUTE", str(QUESTIONS))
        hub = ui_state.runtime().hub
        assert hub is not None
        samples = {d.doc_id for d in hub.shared_documents()}
        assert {d.title for d in hub.shared_documents()} == SAMPLE_TITLES
        yield _Demo(samples, mp, data_dir)
        _close_hub(ui_state)


def _own_docs(demo, at) -> list:
    return demo.library.documents(owners=[at.session_state["session_key"]])


def _delete_keys(at) -> set[str]:
    return {b.key for b in at.button if (b.key or "").startswith("del_")}


def test_two_sessions_keep_their_uploads_private_and_share_the_samples(demo):
    alice = new_app("pages/library.py")
    assert not alice.exception
    listing = _page(alice)
    for title in SAMPLE_TITLES:
        assert title in listing
    assert listing.count(SAMPLE_LABEL) == len(SAMPLE_TITLES)
    assert not _delete_keys(alice)  # samples are read-only: no Delete button anywhere yet

    alice.get("file_uploader")[0].set_value([(PDF, fixture_bytes(PDF), "application/pdf")]).run()
    wait_for_jobs(alice, demo.queue)
    assert not alice.exception
    [mine] = _own_docs(demo, alice)
    assert mine.title == "Two-Column Document with Lorem Ipsum"  # its first heading (issue 28)
    assert _delete_keys(alice) == {f"del_{mine.doc_id}"}  # only her own document can be deleted
    page = _page(alice)
    assert "pdf_text_multicolumn_3-pages" in page
    assert f"Your demo space: 1 of {MAX_FILES} documents" in page

    bob = new_app("pages/library.py")
    assert bob.session_state["session_key"] != alice.session_state["session_key"]
    page = _page(bob)
    assert "pdf_text_multicolumn_3-pages" not in page  # not in Bob's list ...
    assert all(t in page for t in SAMPLE_TITLES) and page.count(SAMPLE_LABEL) == len(SAMPLE_TITLES)
    assert not _delete_keys(bob)
    assert f"Your demo space: 0 of {MAX_FILES} documents" in page

    # ... nor among the documents he can pick in chat, nor in the sources of his answers.
    bob.switch_page("pages/chat.py").run()
    bob.sidebar.radio[0].set_value("pick").run()
    assert set(bob.sidebar.multiselect[0].options) == SAMPLE_TITLES
    bob.sidebar.radio[0].set_value("all").run()
    bob.chat_input[0].set_value(BELGIUM).run()
    assert not bob.exception
    answer = bob.session_state["chat_turns"][-1]["answer"]
    assert answer is not None
    seen = {p.chunk.doc_id for p in answer.passages} | {c.passage.chunk.doc_id for c in answer.citations}
    assert seen <= demo.samples and mine.doc_id not in seen
    assert "Brussels" not in answer.text and "pdf_text_multicolumn" not in _page(bob)

    # Alice gets her own document as the source, and its page preview (through her session's view of originals).
    alice.switch_page("pages/chat.py").run()
    alice.chat_input[0].set_value(BELGIUM).run()
    assert not alice.exception
    answer = alice.session_state["chat_turns"][-1]["answer"]
    assert answer.mode == "quotes" and "Brussels" in answer.text
    assert mine.doc_id in {c.passage.chunk.doc_id for c in answer.citations}
    cite = next(c for c in answer.citations if c.passage.chunk.doc_id == mine.doc_id)
    assert "Show on the page" in texts(alice.chat_message[1].columns[1].expander)
    turn_id = alice.session_state["chat_turns"][-1]["id"]
    alice.session_state[f"{turn_id}_page_{cite.n}"] = True  # what clicking the expander does
    alice.run()
    assert not alice.exception
    [image] = alice.chat_message[1].columns[1].image
    chunk = cite.passage.chunk
    assert image.captions in ([f"Page {n} — {shown}"] for shown in ("the passage is highlighted",
                                                                    "the cited words, enlarged")
                              for n in range(chunk.page_start, (chunk.page_end or chunk.page_start) + 1))


def test_a_limit_hit_is_a_friendly_warning(demo):
    carol = new_app("pages/library.py")
    notes = [(f"note{i}.txt", f"Carol's note number {i} about the harbour of Antwerp.".encode(), "text/plain")
             for i in range(3)]
    carol.get("file_uploader")[0].set_value(notes).run()
    assert not carol.exception
    warnings = [plain(w) for w in texts(carol.warning)]
    assert any(w.startswith("“note2.txt” was not added.") and f"already holds {MAX_FILES} files" in w
               and "Remove one on the Library page" in w for w in warnings)
    assert not carol.error
    wait_for_jobs(carol, demo.queue)
    assert len(_own_docs(demo, carol)) == MAX_FILES
    assert f"Your demo space: {MAX_FILES} of {MAX_FILES} documents" in _page(carol)
    assert any(f"already holds {MAX_FILES} files" in plain(w) for w in texts(carol.warning))  # stays until ...
    button(carol, "Dismiss").click().run()
    assert not carol.warning  # ... dismissed

    # Too big a file: refused at once, with the limit in the sentence, and nothing is queued.
    big = b"Big file. " * (MAX_FILE_MB * 1024 * 1024 // 10 + 5000)
    jobs_before = list(carol.session_state["upload_jobs"])
    carol.get("file_uploader")[0].set_value([("big.txt", big, "text/plain")]).run()
    [warning] = [plain(w) for w in texts(carol.warning)]
    assert f"“big.txt” is 1.0 MB; the demo accepts files up to {MAX_FILE_MB} MB each" in warning
    assert carol.session_state["upload_jobs"] == jobs_before

    # Too many questions in a minute: the chat answers with a warning that says how long to wait.
    carol.switch_page("pages/chat.py").run()
    for i in range(QUESTIONS):
        carol.chat_input[0].set_value(f"What do the notes say about Antwerp ({i})?").run()
        assert carol.session_state["chat_turns"][-1]["answer"] is not None
    carol.chat_input[0].set_value("One more question about Antwerp?").run()
    assert not carol.exception
    last = carol.session_state["chat_turns"][-1]
    assert last["answer"] is None and last["error_kind"] == "warning"
    warning = plain(" ".join(texts(carol.chat_message[-1].warning)))
    assert f"You have asked {QUESTIONS} questions in the last minute" in warning and "seconds" in warning
    assert not carol.error
    carol.run()  # replayed as a warning, not an error
    assert not carol.error and any("questions in the last minute" in plain(w) for w in texts(carol.warning))


def test_banner_says_extractive_and_settings_hide_the_server(demo):
    dave = new_app()
    assert not dave.exception
    banner = " ".join(plain(i) for i in texts(dave.info))
    assert "private to this browser tab. Closing or reloading the tab starts over" in banner
    assert "(quotes only)" in banner
    assert "Ollama" not in _page(dave)  # no local-mode status line about Ollama
    dave.switch_page("pages/settings.py").run()
    assert not dave.exception
    banner = " ".join(plain(i) for i in texts(dave.info))
    assert "(quotes only)" in banner
    # One wording everywhere: what a visitor sees is a browser tab (never "session").
    assert "Changes here last until you close or reload this browser tab." in _page(dave)
    labels = [w.label for w in dave.text_input] + [b.label for b in dave.button] + [s.label for s in dave.selectbox]
    assert "Ollama address" not in labels and "Download" not in labels and "Model" not in labels
    assert "Check again" not in labels
    assert "127.0.0.1:9" not in _page(dave)  # the server's host is never shown
    assert [t.label for t in dave.toggle] == []  # nothing to switch: no model in this demo
    assert dave.slider(key="set_k").value == 5  # the answer options stay
    dave.switch_page("pages/library.py").run()
    assert "this browser tab" in _page(dave) and "session" not in _page(dave)


def test_suggested_questions_are_buttons_that_ask_and_are_answered_from_the_samples(demo):
    from rag_core.demo.answers import SAMPLE_QUESTIONS

    fay = new_app()
    assert [b.label for b in fay.button if (b.key or "").startswith("suggestion-")] == list(SAMPLE_QUESTIONS)
    button(fay, SAMPLE_QUESTIONS[0]).click().run()
    assert not fay.exception
    asked, turn = fay.session_state["chat_turns"][-2:]
    assert asked["role"] == "user" and asked["text"] == SAMPLE_QUESTIONS[0]
    answer = turn["answer"]
    assert answer.mode == "quotes" and "errors should never pass silently" in answer.text.splitlines()[0].lower()
    assert {c.passage.chunk.doc_id for c in answer.citations} <= demo.samples
    assert not [b for b in fay.button if (b.key or "").startswith("suggestion-")]  # offered on an empty chat only


def test_remote_model_uses_the_servers_host_and_key_never_the_visitors(demo):
    from ui import state as ui_state

    with OllamaServer(models=[MODEL], token="demo-secret") as server, OllamaServer(models=[MODEL]) as visitor:
        _close_hub(ui_state)
        demo.mp.setenv("OLLAMA_HOST", server.url)
        demo.mp.setenv("OLLAMA_API_KEY", "demo-secret")
        try:
            server.script(Reply("Errors should never pass silently [1]."))
            erin = new_app()
            # A visitor who managed to set a host and a model (e.g. an old session) is ignored.
            erin.session_state["settings_overrides"] = {"ollama_host": visitor.url, "ollama_model": "evil:1b"}
            erin.run()
            banner = " ".join(plain(i) for i in texts(erin.info))
            assert f"written by the AI model {MODEL}" in banner
            assert server.url not in _page(erin)
            erin.chat_input[0].set_value("What does the Zen of Python say about errors?").run()
            assert not erin.exception
            answer = erin.session_state["chat_turns"][-1]["answer"]
            assert answer.mode == "model" and answer.text.startswith("Errors should never pass silently")
            [chat] = [r for r in server.requests if r.path == "/api/chat"]
            assert chat.headers["authorization"] == "Bearer demo-secret" and chat.body["model"] == MODEL
            assert visitor.requests == []
            assert {c.passage.chunk.doc_id for c in answer.citations} <= demo.samples

            # The visitor may still switch the model off for their own answers.
            erin.switch_page("pages/settings.py").run()
            [toggle] = erin.toggle
            toggle.set_value(False).run()
            erin.switch_page("pages/chat.py").run()
            erin.chat_input[0].set_value("What does the Zen of Python say about errors?").run()
            assert erin.session_state["chat_turns"][-1]["answer"].mode == "quotes"
            assert len(server.chat_requests) == 1
        finally:
            _close_hub(ui_state)
            demo.mp.setenv("OLLAMA_HOST", "http://127.0.0.1:9")
            demo.mp.delenv("OLLAMA_API_KEY", raising=False)


def test_delete_own_document_and_a_vanished_one(demo):
    frank = new_app("pages/library.py")
    frank.get("file_uploader")[0].set_value([("plan.md", b"# Plan\n\nFrank's plan: paint the fence green.",
                                              "text/markdown")]).run()
    wait_for_jobs(frank, demo.queue)
    [doc] = _own_docs(demo, frank)
    frank.button(key=f"del_{doc.doc_id}").click().run()
    button(frank, "Yes, delete it").click().run()
    assert not frank.exception and _own_docs(demo, frank) == []
    assert all(t in _page(frank) for t in SAMPLE_TITLES)  # the samples stay

    # Gone in the meantime (another tab, or the idle cleanup): a calm sentence, no error.
    frank.get("file_uploader")[0].set_value([("plan.md", b"# Plan\n\nFrank's plan: paint the fence blue.",
                                              "text/markdown")]).run()
    wait_for_jobs(frank, demo.queue)
    [doc] = _own_docs(demo, frank)
    frank.button(key=f"del_{doc.doc_id}").click().run()
    demo.hub().session(frank.session_state["session_key"]).delete(doc.doc_id)
    button(frank, "Yes, delete it").click().run()
    assert not frank.exception and not frank.error
    assert any("is no longer in your library" in plain(i) for i in texts(frank.info))

def _article(extract: bool = True) -> dict:
    """A MediaWiki answer for the Python article (a short extract, as prop=extracts|info returns it)."""
    page = {"pageid": PY_ID, "ns": 0, "title": PY_TITLE, "lastrevid": PY_REV,
            "canonicalurl": "https://en.wikipedia.org/wiki/Python_(programming_language)",
            "fullurl": "https://en.wikipedia.org/wiki/Python_(programming_language)"}
    if extract:
        page["extract"] = PY_TEXT
    return {"batchcomplete": "", "query": {"pages": {str(PY_ID): page}}}


def _search_and_add(at) -> None:
    at.text_input(key="wiki_words").set_value("Python programming")
    button(at, "Search").click().run()
    at.checkbox(key="wiki_hit_0").check()
    button(at, "Add the chosen articles").click().run()


def test_wikipedia_in_the_demo_is_private_counted_and_refreshes_only_own_articles(demo):
    from ui import state as ui_state

    with WikiReplayServer() as wiki:
        demo.mp.setenv("DOCCHAT_WIKIPEDIA_API", wiki.url_template)
        demo.mp.setenv("DOCCHAT_WIKIPEDIA_BACKOFF", "0.01")
        _close_hub(ui_state)  # the hub keeps the server's settings from its start: restart it with these
        try:
            wiki.respond({"titles": PY_TITLE}, _article(), times=None)
            wiki.respond({"pageids": str(PY_ID)}, _article(extract=False), times=None)
            gina = new_app("pages/library.py")
            # The shared sample is a Wikipedia article, but it is not hers to refresh.
            assert "Check for updates" not in [b.label for b in gina.button]
            _search_and_add(gina)
            wait_for_jobs(gina, demo.queue)
            assert not gina.exception
            [added] = [s for s in gina.status if s.label.startswith("Added")]
            assert "from Wikipedia" in added.label and added.state == "complete"
            [mine] = _own_docs(demo, gina)
            assert mine.kind == "wikipedia" and mine.doc_id not in demo.samples  # her own copy, not the sample
            # "Check for updates" covers her article only (the sample is never touched).
            button(gina, "Check for updates").click().run()
            wait_for_jobs(gina, demo.queue)
            [report] = [s for s in gina.status if s.label.startswith("Checked")]
            assert report.label == "Checked 1 Wikipedia article for updates"

            # The article counts against her limit: with the library full, the box says so and queues nothing.
            gina.get("file_uploader")[0].set_value([("n.txt", b"Gina's note about tulips.", "text/plain")]).run()
            wait_for_jobs(gina, demo.queue)
            assert len(_own_docs(demo, gina)) == MAX_FILES
            jobs = list(gina.session_state["upload_jobs"])
            _search_and_add(gina)
            assert not gina.exception
            assert gina.session_state["upload_jobs"] == jobs
            assert any(f"already holds {MAX_FILES} files" in plain(w) for w in texts(gina.warning))

            # Another visitor sees neither her article nor her note.
            hal = new_app("pages/library.py")
            assert {d.doc_id for d in demo.hub().session(hal.session_state["session_key"]).documents()} \
                == demo.samples
            assert _page(hal).count(PY_TITLE) == 1  # the sample only
        finally:
            _close_hub(ui_state)
            demo.mp.delenv("DOCCHAT_WIKIPEDIA_API", raising=False)
            demo.mp.delenv("DOCCHAT_WIKIPEDIA_BACKOFF", raising=False)


class _Headers:
    def __init__(self, values: list[str]) -> None:
        self.values = values

    def get_all(self, key: str) -> list[str]:
        return list(self.values) if key.lower() == "x-forwarded-for" else []


class _Context:
    """What ui.state reads of st.context: the connection's address and the request headers."""

    def __init__(self, ip, forwarded: list[str]) -> None:
        self.ip_address, self.headers = ip, _Headers(forwarded)


def test_visitor_address_trusts_the_proxy_only_when_told():
    from rag_core.core.config import Settings
    from ui import state

    direct, proxied = Settings(mode="demo"), Settings(mode="demo", demo_trust_proxy=True)
    assert state.visitor_address(direct, _Context("203.0.113.7", ["6.6.6.6"])) == "203.0.113.7"
    assert state.visitor_address(direct, _Context(None, ["198.51.100.2"])) is None  # a local proxy, not trusted
    assert state.visitor_address(proxied, _Context(None, ["6.6.6.6, 198.51.100.2"])) == "198.51.100.2"
    assert state.visitor_address(proxied, _Context(None, ["6.6.6.6", "198.51.100.2"])) == "198.51.100.2"
    assert state.visitor_address(proxied, _Context("2001:db8::5", [])) == "2001:db8::/64"


def test_new_sessions_share_their_networks_document_limit(demo):
    """Each AppTest is a new browser session from the same (here: unknown) address: a new session gets no new room."""
    from ui import state as ui_state

    _close_hub(ui_state)  # restart the demo server with a per-address limit of one document
    demo.mp.setenv("DOCCHAT_DEMO_MAX_FILES_PER_CLIENT", "1")
    try:
        ivy = new_app("pages/library.py")
        ivy.get("file_uploader")[0].set_value([("ivy.txt", b"Ivy's note about tulips in Leiden.", "text/plain")]).run()
        wait_for_jobs(ivy, demo.queue)
        assert len(_own_docs(demo, ivy)) == 1
        jack = new_app("pages/library.py")
        jobs = list(jack.session_state.get("upload_jobs", []))
        jack.get("file_uploader")[0].set_value([("jack.txt", b"Jack's note about ferries.", "text/plain")]).run()
        assert not jack.exception and not jack.error
        assert any("from your network, the most it allows for one network; delete a document or try again later"
                   in plain(w) for w in texts(jack.warning))
        assert list(jack.session_state.get("upload_jobs", [])) == jobs and _own_docs(demo, jack) == []
        assert "Your demo space: 0 of 2 documents, 0.0 MB of 50 MB used; your network: 1 of 1 document" in _page(jack)
    finally:
        _close_hub(ui_state)
        demo.mp.delenv("DOCCHAT_DEMO_MAX_FILES_PER_CLIENT", raising=False)
