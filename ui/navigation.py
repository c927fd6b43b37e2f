"""The app's pages, and the guard that routes a page opened on its own back through app.py.

Streamlit treats a folder named pages/ beside the entry script as an old-style multipage app until the first
`st.navigation` call in the process. If the very first visitor opens e.g. /library, that page script runs on its own,
without app.py (no page config, old-style navigation). Each page calls `require_app_entry()`: when app.py did not run
first, it calls the public `st.navigation` (which ends the old mode for the process) and reruns through app.py.
"""
from __future__ import annotations

import logging
import threading

import streamlit as st

log = logging.getLogger(__name__)
_entry = threading.local()
_ENTERED = "entered_via_app"
_RUNS = "page_runs"  # how many page runs this session has had (a page tells a new visit from a rerun of itself)


def app_pages() -> list:
    """The app's pages, in menu order (Chat first)."""
    return [
        st.Page("pages/chat.py", title="Chat", icon=":material/chat:", default=True),
        st.Page("pages/library.py", title="Library", icon=":material/library_books:"),
        st.Page("pages/settings.py", title="Settings", icon=":material/settings:"),
    ]


def mark_app_entry() -> None:
    """Called by app.py at the start of every run."""
    _entry.via_app = True


def page_run() -> int:
    """The number of this session's current page run (each page's run counts, whichever the page)."""
    return int(st.session_state.get(_RUNS, 0))


def require_app_entry() -> None:
    """Called at the top of each page script: rerun through app.py if the page was started on its own.

    Only a session's first run is redirected (it has no widget events to lose); a real server never starts a later
    run without app.py, since Streamlit leaves the pages/ folder mode for good after the first `st.navigation`.
    """
    st.session_state[_RUNS] = page_run() + 1
    if getattr(_entry, "via_app", False):
        _entry.via_app = False
        st.session_state[_ENTERED] = True
        return
    if st.session_state.get(_ENTERED):
        return
    log.info("A page was started without app.py (Streamlit's pages/ folder mode); rerunning through app.py")
    st.navigation(app_pages(), position="hidden")
    st.rerun()
