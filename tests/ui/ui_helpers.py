"""Helpers for the AppTest page tests."""
from __future__ import annotations

import re
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "tests" / "fixtures" / "documents"
MODEL = "llama3.2:3b"


def new_app(page: str | None = None, timeout: float = 60):
    """A fresh AppTest session of app.py, run once (optionally switched to a page)."""
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=timeout)
    at.run()
    if page:
        at.switch_page(page).run()
    return at


def fixture_bytes(name: str) -> bytes:
    """Bytes of a file in tests/fixtures/documents."""
    return (DOCS / name).read_bytes()


def wait_for_jobs(at, queue, timeout: float = 120) -> None:
    """Wait for this session's uploads to finish in the background queue, then rerun the page."""
    ids = at.session_state["upload_jobs"]
    assert queue.wait(ids, timeout), "ingest did not finish in time"
    time.sleep(0.05)
    at.run()


def texts(elements) -> list[str]:
    """The .value (or label) of each element, as strings."""
    return [str(getattr(e, "value", None) or getattr(e, "label", "")) for e in elements]


def plain(markdown: str) -> str:
    """Markdown with backslash escapes and invisible word joiners removed: the text a person sees."""
    return re.sub(r"\\(.)", r"\1", markdown).replace("\u2060", "")


def button(at, label: str):
    """The first button (or form submit button) with this label."""
    for b in at.button:
        if b.label == label:
            return b
    raise AssertionError(f"no button {label!r}; have {[b.label for b in at.button]}")
