"""Nothing in the terminal looks like an error when nothing is wrong (issue 28): Streamlit's "The fragment with id …
does not exist anymore" line, written when a polling fragment's timer fires after a full rerun removed it, is left
out by the app; the logger's other lines still show."""
from __future__ import annotations

import logging
from types import SimpleNamespace

from streamlit.proto.ClientState_pb2 import ClientState
from streamlit.runtime.app_session import AppSession, AppSessionState
from ui_helpers import new_app


class Collect(logging.Handler):
    """Keeps every record it is handed."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


def test_a_removed_fragments_timer_leaves_no_line_in_the_terminal(app, monkeypatch):
    logger = logging.getLogger("streamlit.runtime.app_session")
    monkeypatch.setattr(logger, "filters", [])  # whatever an earlier test's run installed: this run's app installs it
    monkeypatch.setattr(logger, "level", logging.INFO)  # Streamlit's default logger.level, as under `make run`
    collect = Collect()
    logger.addHandler(collect)
    try:
        at = new_app()
        assert not at.exception
        # What Streamlit does when the browser's run_every timer asks for a fragment a full rerun removed: the real
        # AppSession.request_rerun, on a session that no longer has that fragment.
        session = SimpleNamespace(_state=AppSessionState.APP_IS_RUNNING, has_fragment=lambda fragment_id: False)
        gone = ClientState()
        gone.fragment_id = "4f2a9c"
        AppSession.request_rerun(session, gone)  # type: ignore[arg-type]
        logger.info("Another Streamlit line")
    finally:
        logger.removeHandler(collect)
    lines = [r.getMessage() for r in collect.records]
    assert not [line for line in lines if "does not exist anymore" in line], lines
    assert "Another Streamlit line" in lines
