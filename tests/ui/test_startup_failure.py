"""A library that cannot be opened (another DocChat holds it, or anything unexpected) stops each page with one
sentence saying what to do: no traceback, no server path; the technical part only under "Details"."""
from __future__ import annotations

import logging

import pytest
from ui_helpers import new_app, plain, texts

from rag_core.core.errors import LibraryBusy
from ui import state

SECRET = "/srv/docchat/secret-data/edge"  # a server path: never on the page


@pytest.fixture
def broken_runtime(tmp_path, monkeypatch):
    """Make opening the runtime fail with the exception a test sets (rag_core.adapters.runtime.Runtime raises it)."""
    import rag_core.adapters.runtime

    monkeypatch.setenv("DOCCHAT_DATA_DIR", str(tmp_path / "data"))
    failure: dict[str, BaseException] = {}

    def fail(*args, **kwargs):
        raise failure["error"]

    monkeypatch.setattr(rag_core.adapters.runtime, "Runtime", fail)
    state.reset_runtime()
    yield failure
    state.reset_runtime()


def _page(at) -> str:
    return plain("\n".join(texts(at.markdown) + texts(at.caption) + texts(at.error) + texts(at.warning)))


@pytest.mark.parametrize("page", [None, "pages/library.py", "pages/settings.py"])
def test_a_busy_library_is_one_sentence_with_the_details_folded_away(broken_runtime, page):
    broken_runtime["error"] = LibraryBusy(SECRET)
    at = new_app(page)
    assert not at.exception
    assert [plain(e) for e in texts(at.error)] == [str(LibraryBusy(SECRET))]
    assert "close that one, then try again" in plain(at.error[0].value)
    assert [e.label for e in at.expander] == ["Details"]
    assert "--data-dir" in _page(at) and "QDRANT_URL" not in plain(at.error[0].value)
    assert SECRET not in _page(at) and "Traceback" not in _page(at)
    assert not at.chat_input  # nothing half-drawn below the sentence


def test_an_unexpected_failure_to_open_the_library_is_one_sentence_and_logged(broken_runtime, caplog):
    broken_runtime["error"] = RuntimeError(f"shard manifest unreadable at {SECRET}")
    with caplog.at_level(logging.ERROR, logger="ui.state"):
        at = new_app()
    assert not at.exception
    assert [plain(e) for e in texts(at.error)] == [state.STARTUP_FAILED]
    assert SECRET not in _page(at) and "Traceback" not in _page(at)
    assert any(r.exc_info and SECRET in str(r.exc_info[1]) for r in caplog.records), "the reason goes to the log"
