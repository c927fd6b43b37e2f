"""The "From Wikipedia" box of the Library page: search, pick, import (in the background queue), check for updates.

Nothing here shows a traceback: a DocChatError is shown as its sentence, anything else as UNEXPECTED (and logged).
"""
from __future__ import annotations

import logging

import streamlit as st

from rag_core.core.errors import DocChatError
from rag_core.service import render
from rag_core.service.workspace import JobView, RefreshReport, WikiImportResult, Workspace
from ui import state
from ui.safe import label
from ui.sources import show_details, show_message

LANGUAGES = {"en": "English", "de": "Deutsch", "fr": "Français", "es": "Español", "it": "Italiano",
             "nl": "Nederlands", "pt": "Português", "pl": "Polski", "sv": "Svenska", "simple": "Simple English"}
HITS_KEY = "wiki_hits"  # (lang, [WikiHit]) of the last search in this session
UNEXPECTED = "Something unexpected went wrong while talking to Wikipedia; nothing was changed. Please try again."

log = logging.getLogger(__name__)


def submit_import(ws: Workspace, title: str, lang: str) -> bool:
    """Queue one article import (it runs in the background like a file upload). False (and a notice kept for the
    next run) when it could not be queued, e.g. there is no room for it."""
    try:
        state.remember_job(ws.import_wikipedia(title, lang))
    except DocChatError as e:  # LimitReached above all
        state.add_notice(str(e))  # shown on the next run: the box reruns the page right after queuing
        return False
    except Exception:  # the visitor gets a sentence, the log the traceback
        log.exception("Unexpected failure while queuing the Wikipedia import of %r", title)
        state.add_notice(UNEXPECTED)
        return False
    return True


def _search(ws: Workspace, words: str, lang: str) -> None:
    """Run a search and keep its hits for the next runs; any failure is shown as one sentence."""
    try:
        with st.spinner("Searching Wikipedia…"):
            st.session_state[HITS_KEY] = (lang, ws.search_wikipedia(words, lang=lang, limit=8))
    except DocChatError as e:
        st.session_state.pop(HITS_KEY, None)
        show_message(str(e), "error")
        if e.details:
            show_details(e.details)
    except Exception:  # never a traceback on the page; the log keeps it
        log.exception("Unexpected failure while searching Wikipedia for %r", words)
        st.session_state.pop(HITS_KEY, None)
        show_message(UNEXPECTED, "error")


def _check_for_updates(ws: Workspace) -> None:
    """Queue the update check and rerun; a failure to queue it is shown as one sentence."""
    try:
        state.remember_job(ws.refresh_wikipedia())
    except DocChatError as e:
        show_message(str(e), "error")
        if e.details:
            show_details(e.details)
        return
    except Exception:  # never a traceback on the page; the log keeps it
        log.exception("Unexpected failure while queuing the Wikipedia update check")
        show_message(UNEXPECTED, "error")
        return
    st.rerun()


def wikipedia_box(ws: Workspace, has_articles: bool) -> None:
    """Search Wikipedia, pick results, import them; check imported articles for updates."""
    with st.expander("From Wikipedia", icon=":material/public:", expanded=bool(st.session_state.get(HITS_KEY))):
        st.caption("Search Wikipedia and add articles to your library. Their text is licensed CC BY-SA 4.0; "
                   "DocChat keeps the link and revision of every article it imports.")
        with st.form("wiki_search", border=False):
            words_col, lang_col, go_col = st.columns([6, 2, 2], vertical_alignment="bottom")
            words = words_col.text_input("Search Wikipedia", placeholder="e.g. Python programming language",
                                         key="wiki_words")
            lang = lang_col.selectbox("Language", list(LANGUAGES), format_func=LANGUAGES.get, key="wiki_lang")
            searched = go_col.form_submit_button("Search", icon=":material/search:", width="stretch")
        if searched and words.strip():
            _search(ws, words, lang)
        lang_hits = st.session_state.get(HITS_KEY)
        if lang_hits:
            hit_lang, hits = lang_hits
            if not hits:
                st.info("Wikipedia found no article for these words. Try other words or another language.",
                        icon=":material/search_off:")
            else:
                with st.form("wiki_pick", border=False):
                    picked = []
                    for i, hit in enumerate(hits):
                        if st.checkbox(f"**{render.escape_markdown(hit.title)}**", key=f"wiki_hit_{i}",
                                       help=label(hit.snippet[:300], "") or None):
                            picked.append(hit.title)
                        if hit.snippet:
                            st.caption(render.escape_markdown(hit.snippet[:220]))
                    add = st.form_submit_button("Add the chosen articles", icon=":material/add:", type="primary")
                if add:
                    if not picked:
                        st.warning("Tick at least one article first.", icon=":material/check_box:")
                    state.clear_notices()
                    for title in picked:
                        if not submit_import(ws, title, hit_lang):
                            break  # full: the rest would not fit either
                    if picked:
                        st.session_state.pop(HITS_KEY, None)
                        st.rerun()
        if has_articles:
            st.divider()
            st.caption("Articles change on Wikipedia. Check whether yours are still current:")
            if st.button("Check for updates", icon=":material/update:", key="wiki_refresh"):
                _check_for_updates(ws)


def wiki_job_result(job: JobView, ws: Workspace) -> None:
    """Show a finished Wikipedia import or update check."""
    r = job.result
    if not isinstance(r, (WikiImportResult, RefreshReport)):
        # The work raised a DocChatError (e.g. a demo limit reached while it waited in the queue): the queue made it
        # a plain failed result, which carries only the sentence.
        what = ("check the Wikipedia articles" if job.kind == "refresh"
                else f"import **{render.escape_markdown(job.label)}**")
        with st.status(f"Could not {what}", state="error", expanded=True):
            show_message(getattr(r, "error", None) or "Something went wrong; please try again.", "error")
            if getattr(r, "details", None):
                show_details(r.details)
        return
    if job.kind == "refresh":
        _refresh_result(r)
        return
    title = render.escape_markdown(r.title)
    moved = (f" (“{render.escape_markdown(r.redirected_from)}” redirects here)" if r.redirected_from else "")
    if r.status == "added":
        with st.status(f"Added **{title}** from Wikipedia — {r.chunks} passage{'' if r.chunks == 1 else 's'}"
                       f"{moved}", state="complete"):
            url = render.safe_wikipedia_url(r.url)
            if url:
                st.markdown(render.link_markdown("Open the article on Wikipedia", url))
            st.caption(f"Revision {r.revision_id}. Text licensed CC BY-SA 4.0.")
    elif r.status == "unchanged":
        with st.status(f"**{title}** is already in your library{moved}", state="complete"):
            st.write("That revision of the article is already there; nothing was changed.")
    elif r.status == "disambiguation":
        with st.status(f"“{title}” can mean several things — pick one", state="error", expanded=True):
            st.write("Wikipedia lists these articles for it. Choose the one you mean:")
            for i, cand in enumerate(r.candidates[:12]):
                if st.button(label(cand), key=f"disamb_{job.id}_{i}", type="tertiary", icon=":material/add:"):
                    submit_import(ws, cand, r.lang)
                    ws.forget_jobs([job.id])
                    st.rerun()
    else:
        with st.status(f"Could not import **{title}** from Wikipedia", state="error", expanded=True):
            show_message(r.error or "The article could not be imported.", "error")


def _names(items) -> str:
    return ", ".join(f"“{i.title}”" for i in items[:8]) + (f" and {len(items) - 8} more" if len(items) > 8 else "")


def _refresh_result(report) -> None:
    if report.total == 0:
        with st.status("No Wikipedia articles to check", state="complete"):
            st.write("Import an article first.")
        return
    state = "error" if report.failed else "complete"
    with st.status(f"Checked {report.total} Wikipedia article{'' if report.total == 1 else 's'} for updates",
                   state=state, expanded=True):
        if report.unchanged:
            st.markdown(f":material/check: **Up to date:** {len(report.unchanged)}")
        if report.changed:
            st.markdown(":material/sync: **Updated to the latest revision:** "
                        + render.escape_markdown(_names(report.changed)))
        if report.removed_upstream:
            st.markdown(":material/warning: **No longer on Wikipedia (kept in your library):** "
                        + render.escape_markdown(_names(report.removed_upstream)))
        for item in report.failed:
            show_message(f"“{item.title}” could not be checked: {item.message} It was left as it was.", "warning")
