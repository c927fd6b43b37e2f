"""No traceback in the browser: a part of a page that fails to draw shows one sentence instead, and the rest of the
page (the chat input, the other turns, the other sections) is still drawn. And no Markdown from people or documents
in a widget label: `label` escapes it."""
from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager

import streamlit as st

from rag_core.core.errors import DocChatError, LimitReached
from rag_core.service import render

log = logging.getLogger(__name__)

DRAW_FAILED = ("Something went wrong while showing this part of the page. Reload the page to try again; if it keeps "
               "happening, restart DocChat.")
_BOXES = {"error": (st.error, ":material/error:"), "warning": (st.warning, ":material/warning:"),
          "info": (st.info, ":material/info:")}


def label(text: str, fallback: str = "Untitled") -> str:
    """Text from a person, a document or a web page as a widget label (a button, checkbox, expander, status or
    tooltip): Streamlit renders labels as Markdown, so it is escaped to show as exactly that text (no image that loads,
    no link, no :red[...] styling)."""
    return render.escape_markdown(text) or fallback


def show_message(text: str, kind: str = "error") -> None:
    """One of DocChat's own sentences (which may contain a file name) as an error/warning/info box."""
    box, icon = _BOXES[kind]
    box(render.message_markdown(text), icon=icon)


@contextmanager
def guarded(what: str, sentence: str = DRAW_FAILED) -> Iterator[None]:
    """Draw a part of a page; if it fails, show one sentence in its place and carry on with the page.

    DocChat's own errors show their message (a limit as a warning); anything else is logged with its traceback
    (naming `what`) and shows `sentence`. Streamlit's st.stop() and st.rerun() pass through untouched: they raise
    BaseException subclasses, and only Exception is caught here.
    """
    try:
        yield
    except LimitReached as e:
        show_message(str(e), "warning")
    except DocChatError as e:
        show_message(str(e), "error")
    except Exception:  # logged with its traceback; the page shows one sentence
        log.exception("Could not draw %s", what)
        show_message(sentence, "error")
