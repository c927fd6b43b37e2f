"""Streamlit log lines that look like trouble in the terminal when nothing is wrong, left out (issue 28)."""
from __future__ import annotations

import logging

APP_SESSION_LOGGER = "streamlit.runtime.app_session"
_GONE_FRAGMENT = "The fragment with id %s does not exist anymore"  # the start of Streamlit's own format string


class RemovedFragmentFilter(logging.Filter):
    """Drops Streamlit's "The fragment with id … does not exist anymore - it might have been removed during a preceding
    full-app rerun". The pages poll with `st.fragment(run_every=…)` while files are added or a reply is checked, and
    call `st.rerun()` once that is done; the rerun no longer draws the fragment, but the browser's timer for it may
    already have fired (or fire before the new page arrives), and Streamlit then ignores that run and says so. Nothing
    is lost: the full rerun drew the page. The race is in Streamlit's timer itself (a page change does the same), so
    the line is filtered rather than the polling given up; every other line of that logger still shows."""

    def filter(self, record: logging.LogRecord) -> bool:
        """False for the removed-fragment line only."""
        return not (isinstance(record.msg, str) and record.msg.startswith(_GONE_FRAGMENT))


def quiet_streamlit_logs() -> None:
    """Install the filters on Streamlit's loggers (once per process; called on every script run)."""
    logger = logging.getLogger(APP_SESSION_LOGGER)
    if not any(isinstance(f, RemovedFragmentFilter) for f in logger.filters):
        logger.addFilter(RemovedFragmentFilter())
